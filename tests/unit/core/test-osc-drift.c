/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "core/containerd-config.h"
#include "core/osc-drift.h"
#include "tests.h"

/* The node as a table: place, name, content (NULL: unreadable), mode. Anything else is absent. */
typedef struct Entry {
        OscDriftPlace place;
        const char *name;
        const char *content;
        bool only_in_os_dir; /* a unit file found only in /usr/lib/systemd/system */
        uint32_t mode;       /* 0: 0600 */
        bool masked;
        bool huge; /* larger than OSC_DRIFT_READ_MAX */
} Entry;

#define E(p, n, c, ...) \
        { .place = p, .name = n, .content = c, __VA_ARGS__ }
static const Entry *node;
static size_t n_node;

static int fake_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                     uint32_t *ret_mode, void *userdata) {
        for (size_t i = 0; i < n_node; i++) {
                if (node[i].place != place || !streq(node[i].name, name) ||
                    (node[i].only_in_os_dir && !fallback))
                        continue;
                if (node[i].masked)
                        return OSC_DRIFT_MASKED;
                if (node[i].huge && ret)
                        return -EFBIG;
                if (!node[i].content)
                        return -EACCES;
                if (ret) {
                        *ret = strdup(node[i].content);
                        assert_non_null(*ret);
                        *ret_size = strlen(node[i].content);
                }
                if (ret_mode)
                        *ret_mode = node[i].mode ?: 0600;
                return 0;
        }
        return -ENOENT;
}

static const char OSC[] =
        "spec:\n"
        "  files:\n"
        "  - path: /etc/ok\n    content:\n      inline:\n        data: same\n"
        "  - path: /etc/changed\n    content:\n      inline:\n        data: hello\n"
        "  - path: /etc/gone\n    content:\n      inline:\n        encoding: b64\n        data: aGk=\n"
        "  - path: /etc/locked\n    content:\n      inline:\n        data: x\n"
        "  - path: /etc/empty\n    content:\n      inline:\n        data: ''\n"
        "  - path: /etc/mode\n    permissions: 420\n    content:\n      inline:\n        data: m\n"
        "  - path: /etc/token\n    content:\n      secretRef:\n        name: s\n        dataKey: k\n"
        "  - path: /opt/bin/tool\n    content:\n      imageRef:\n        image: r/t:1\n        filePathInImage: /t\n"
        "  - path: /opt/bin/kubelet\n    content:\n      imageRef:\n        image: r/k:1\n        filePathInImage: /k\n"
        "  units:\n"
        "  - name: a.service\n    content: A\n"
        "    dropIns:\n    - name: 10-x.conf\n      content: X\n    - name: 20-y.conf\n      content: Y\n"
        "    filePaths:\n    - /opt/bin/tool\n    - /etc/ok\n    - /opt/bin/kubelet\n"
        "  - name: b.service\n    content: B\n    filePaths:\n    - /nowhere\n"
        "  - name: os.service\n    dropIns:\n    - name: 50-z.conf\n      content: Z\n"
        "  - name: gone-os.service\n    dropIns:\n    - name: 50-z.conf\n      content: Z\n"
        "  - name: masked.service\n    content: M\n"
        "  - name: gardener-node-agent.service\n    content: G\n    filePaths:\n    - /opt/bin/gna\n";

/* Every place of OSC as the applier leaves it. */
static const Entry healthy[] = {
        E(OSC_DRIFT_NODE_FILE, "/etc/ok", "same"),
        E(OSC_DRIFT_NODE_FILE, "/etc/changed", "hello"),
        E(OSC_DRIFT_NODE_FILE, "/etc/gone", "hi"),
        E(OSC_DRIFT_NODE_FILE, "/etc/locked", "x"),
        E(OSC_DRIFT_NODE_FILE, "/etc/empty", ""),
        E(OSC_DRIFT_NODE_FILE, "/etc/mode", "m", .mode = 0644),
        E(OSC_DRIFT_NODE_FILE, "/etc/token", "secret"),
        E(OSC_DRIFT_NODE_FILE, "/opt/bin/tool", ""),
        E(OSC_DRIFT_NODE_FILE, "/nowhere", ""),
        E(OSC_DRIFT_UNIT_FILE, "a.service", "A"),
        E(OSC_DRIFT_DROP_IN, "a.service.d/10-x.conf", "X"),
        E(OSC_DRIFT_DROP_IN, "a.service.d/20-y.conf", "Y"),
        E(OSC_DRIFT_UNIT_FILE, "b.service", "B"),
        E(OSC_DRIFT_UNIT_FILE, "os.service", "[Unit]\n", .only_in_os_dir = true),
        E(OSC_DRIFT_DROP_IN, "os.service.d/50-z.conf", "Z"),
        E(OSC_DRIFT_UNIT_FILE, "gone-os.service", "[Unit]\n", .only_in_os_dir = true),
        E(OSC_DRIFT_DROP_IN, "gone-os.service.d/50-z.conf", "Z"),
        E(OSC_DRIFT_UNIT_FILE, "masked.service", NULL, .masked = true),
};

static OscModel *decode(const char *yaml) {
        _cleanup_free_ char *err = NULL;
        OscModel *m = NULL;

        if (osc_model_decode_yaml(yaml, strlen(yaml), NULL, &m, &err) < 0)
                fail_msg("%s", strempty(err));
        return m;
}

static void expect(const OscDrift *d, const char *const *want) {
        size_t nwant = 0;

        while (want[nwant])
                nwant++;
        for (size_t i = 0; i < d->n_items; i++)
                print_message("%s: %s [%d %s]\n", d->items[i].reason, d->items[i].message, d->items[i].kind,
                              d->items[i].subject);
        assert_int_equal(d->n_items, nwant);
        for (size_t i = 0; i < d->n_items; i++) {
                _cleanup_free_ char *line = NULL;

                assert_true(asprintf(&line, "%s: %s [%d %s]", d->items[i].reason, d->items[i].message,
                                     d->items[i].kind, d->items[i].subject) > 0);
                assert_string_equal(line, want[i]);
        }
}

static void check(const Entry *e, size_t n, const char *const *want) {
        char *skip[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = decode(OSC);
        OscDriftParams p = { .model = m, .skip_units = skip, .skip_file = "/opt/bin/kubelet" };
        OscDrift d = {};

        node = e;
        n_node = n;
        assert_int_equal(osc_drift_check_disk(&p, fake_read, NULL, &d), 0);
        expect(&d, want);
        osc_drift_done(&d);
}

static void test_nothing_drifted(void **state) {
        static const char *const want[] = { NULL };

        check(healthy, ELEMENTSOF(healthy), want);
}

static void test_everything_drifted(void **state) {
        static const Entry e[] = {
                E(OSC_DRIFT_NODE_FILE, "/etc/ok", "same"),
                E(OSC_DRIFT_NODE_FILE, "/etc/changed", "hello!"),
                E(OSC_DRIFT_NODE_FILE, "/etc/locked", NULL),
                E(OSC_DRIFT_NODE_FILE, "/etc/mode", "m", .mode = 0600),
                E(OSC_DRIFT_NODE_FILE, "/etc/token", "other secret", .mode = 0644),
                E(OSC_DRIFT_UNIT_FILE, "a.service", "A2"),
                E(OSC_DRIFT_DROP_IN, "a.service.d/20-y.conf", "Y2"),
                E(OSC_DRIFT_UNIT_FILE, "os.service", "[Unit]\n", .only_in_os_dir = true),
                E(OSC_DRIFT_DROP_IN, "os.service.d/50-z.conf", NULL, .masked = true),
                E(OSC_DRIFT_UNIT_FILE, "masked.service", NULL, .masked = true),
        };
        static const char *const want[] = {
                "FileMismatch: File /etc/changed mismatch: expected "
                "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824, actual "
                "ce06092fb948d9ffac7d1a376e404b26b7575bcc11ee05a4615fef4fec3a308b [0 /etc/changed]",
                "FileMissing: File /etc/gone is missing [0 /etc/gone]",
                "FileReadError: Failed to read file /etc/locked [6 /etc/locked]",
                "FileMissing: File /etc/empty is missing [0 /etc/empty]",
                "FileModeMismatch: File /etc/mode mode mismatch: expected 0644, actual 0600 [0 /etc/mode]",
                /* A secretRef file: presence and mode, its content is not at hand. */
                "FileModeMismatch: File /etc/token mode mismatch: expected 0600, actual 0644 [0 /etc/token]",
                "FileMissing: File /opt/bin/tool is missing [0 /opt/bin/tool]",
                "UnitMismatch: Unit a.service content mismatch [3 a.service]",
                "DropInMissing: Drop-in 10-x.conf for unit a.service is missing [3 a.service]",
                "DropInMismatch: Drop-in 20-y.conf for unit a.service mismatch [3 a.service]",
                /* An OSC file restores as a file; the kubelet binary is the kubelet store's. */
                "DependencyMissing: Dependency file /opt/bin/tool for unit a.service is missing [0 /opt/bin/tool]",
                /* Its dependency is not looked at. */
                "UnitFileMissing: Unit file b.service is missing [3 b.service]",
                /* The OS unit is gone: nothing of it is the agent's to write. */
                "UnitFileMissing: Unit file gone-os.service is missing [6 gone-os.service]",
                NULL,
        };

        check(e, ELEMENTSOF(e), want);
}

/* A log appended to a configuration file until it is larger than any OSC content: other content. */
static void test_huge_file(void **state) {
        Entry e[ELEMENTSOF(healthy)];
        static const char *const want[] = {
                "FileMismatch: File /etc/changed mismatch: expected "
                "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824, actual larger than 4194304 "
                "bytes [0 /etc/changed]",
                NULL,
        };

        memcpy(e, healthy, sizeof(e));
        e[1].huge = true;
        assert_string_equal(e[1].name, "/etc/changed");
        check(e, ELEMENTSOF(e), want);
}

static void test_dependency_not_an_osc_file(void **state) {
        Entry e[ELEMENTSOF(healthy)];
        size_t n = 0;
        static const char *const want[] = {
                "DependencyMissing: Dependency file /nowhere for unit b.service is missing [6 /nowhere]",
                NULL,
        };

        for (size_t i = 0; i < ELEMENTSOF(healthy); i++)
                if (!streq(healthy[i].name, "/nowhere"))
                        e[n++] = healthy[i];
        check(e, n, want);
}

static void test_containerd(void **state) {
        static const char yaml[] =
                "spec:\n  criConfig:\n    name: containerd\n    containerd:\n      sandboxImage: p\n"
                "      registries:\n      - upstream: docker.io\n        server: https://registry-1.docker.io\n"
                "      - upstream: quay.io\n";
        _cleanup_(osc_model_freep) OscModel *m = decode(yaml);
        _cleanup_free_ char *toml = NULL, *hosts = NULL;
        OscDriftParams p = { .model = m };
        OscDrift d = {};
        static const char *const want[] = {
                "FileModeMismatch: File /etc/containerd/config.toml mode mismatch: expected 0644, actual 0600 "
                "[1 /etc/containerd/config.toml]",
                "FileMissing: File /etc/containerd/certs.d/quay.io/hosts.toml is missing [2 quay.io]",
                NULL,
        };

        assert_int_equal(containerd_config_render(m->containerd_config, &toml, NULL), 0);
        assert_int_equal(osc_registry_hosts_toml(&m->registries[0], &hosts), 0);
        const Entry e[] = {
                E(OSC_DRIFT_NODE_FILE, CONTAINERD_CONFIG_FILE, toml, .mode = 0600),
                E(OSC_DRIFT_NODE_FILE, "/etc/containerd/certs.d/docker.io/hosts.toml", hosts, .mode = 0644),
        };
        node = e;
        n_node = ELEMENTSOF(e);
        assert_int_equal(osc_drift_check_disk(&p, fake_read, NULL, &d), 0);
        expect(&d, want);
        osc_drift_done(&d);
}

static void test_units(void **state) {
        static const char yaml[] = "spec:\n  units:\n"
                                   "  - name: on.service\n    content: x\n"
                                   "  - name: off.service\n    enable: false\n    content: x\n"
                                   "  - name: stopped.service\n    command: stop\n    content: x\n"
                                   "  - name: oneshot.service\n    content: x\n"
                                   "  - name: timer.service\n    content: x\n"
                                   "  - name: static.service\n    content: x\n"
                                   "  - name: gone.service\n    content: x\n"
                                   "  - name: masked.service\n    content: x\n"
                                   "  - name: failed.service\n    content: x\n"
                                   "  - name: gardener-node-agent.service\n    content: x\n";
        char *skip[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = decode(yaml);
        OscDriftParams p = { .model = m, .skip_units = skip };
        const UnitHealthState states[] = {
                { .name = "on.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .service_type = "simple",
                  .unit_file_state = "disabled" },
                { .name = "off.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .unit_file_state = "enabled" },
                { .name = "stopped.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .unit_file_state = "enabled" },
                { .name = "oneshot.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .service_type = "oneshot",
                  .unit_file_state = "enabled" },
                { .name = "timer.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .triggered = true,
                  .unit_file_state = "static" },
                { .name = "static.service",
                  .load_state = "loaded",
                  .active_state = "active",
                  .sub_state = "running",
                  .unit_file_state = "static" },
                { .name = "gone.service", .load_state = "not-found", .active_state = "inactive" },
                { .name = "masked.service",
                  .load_state = "masked",
                  .active_state = "inactive",
                  .unit_file_state = "masked" },
                { .name = "failed.service",
                  .load_state = "loaded",
                  .active_state = "failed",
                  .unit_file_state = "enabled" },
                { .name = "gardener-node-agent.service",
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .unit_file_state = "disabled" },
                { .name = "not-in-the-osc.service", .load_state = "loaded", .active_state = "inactive" },
        };
        static const char *const want[] = {
                "UnitEnableMismatch: Unit on.service enable state mismatch: expected true, actual false "
                "[4 on.service]",
                "UnitInactive: Unit on.service is inactive but should be active [5 on.service]",
                "UnitEnableMismatch: Unit off.service enable state mismatch: expected false, actual true "
                "[4 off.service]",
                NULL,
        };
        OscDrift d = {};

        assert_int_equal(osc_drift_check_units(&p, states, ELEMENTSOF(states), &d), 0);
        expect(&d, want);
        osc_drift_done(&d);
        assert_true(osc_drift_skips_unit(&p, "gardener-node-agent.service"));
        assert_false(osc_drift_skips_unit(&p, "on.service"));
}

/* gardener-node-agent's unit, binary (imageRef) and config are the replaced unit's alone: on a node
 * that never ran it (or after the agent took over) they are absent, and that is no drift. A file
 * another unit lists too is checked as before. */
static void test_replaced_unit_files(void **state) {
        static const char yaml[] =
                "spec:\n"
                "  files:\n"
                "  - path: /opt/bin/gardener-node-agent\n    content:\n      imageRef:\n        image: r/gna:1\n"
                "        filePathInImage: /gardener-node-agent\n"
                "  - path: /var/lib/gardener-node-agent/config.yaml\n    content:\n      inline:\n        data: c\n"
                "  - path: /etc/shared\n    content:\n      inline:\n        data: s\n"
                "  units:\n"
                "  - name: gardener-node-agent.service\n    content: G\n    filePaths:\n"
                "    - /opt/bin/gardener-node-agent\n    - /var/lib/gardener-node-agent/config.yaml\n    - /etc/shared\n"
                "  - name: app.service\n    content: A\n    filePaths:\n    - /etc/shared\n";
        static const Entry e[] = { E(OSC_DRIFT_UNIT_FILE, "app.service", "A") };
        static const char *const want[] = {
                "FileMissing: File /etc/shared is missing [0 /etc/shared]",
                "DependencyMissing: Dependency file /etc/shared for unit app.service is missing [0 /etc/shared]",
                NULL,
        };
        char *skip[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = decode(yaml);
        OscDriftParams p = { .model = m, .skip_units = skip, .skip_file = "/opt/bin/kubelet" };
        OscDrift d = {};

        node = e;
        n_node = ELEMENTSOF(e);
        assert_int_equal(osc_drift_check_disk(&p, fake_read, NULL, &d), 0);
        expect(&d, want);
        osc_drift_done(&d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nothing_drifted),
                cmocka_unit_test(test_everything_drifted),
                cmocka_unit_test(test_huge_file),
                cmocka_unit_test(test_dependency_not_an_osc_file),
                cmocka_unit_test(test_containerd),
                cmocka_unit_test(test_units),
                cmocka_unit_test(test_replaced_unit_files),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
