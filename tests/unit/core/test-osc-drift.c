/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "core/osc-drift.h"
#include "tests.h"

/* The node as a table: place, name, content (NULL: unreadable). Anything else is absent. */
typedef struct Entry {
        OscDriftPlace place;
        const char *name;
        const char *content;
        bool only_in_os_dir;    /* a unit file found only in /usr/lib/systemd/system */
} Entry;

static const Entry *node;
static size_t n_node;

static int fake_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                     void *userdata) {
        for (size_t i = 0; i < n_node; i++) {
                if (node[i].place != place || !streq(node[i].name, name) || (node[i].only_in_os_dir && !fallback))
                        continue;
                if (!node[i].content)
                        return -EACCES;
                if (ret) {
                        *ret = strdup(node[i].content);
                        assert_non_null(*ret);
                        *ret_size = strlen(node[i].content);
                }
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
        "  - path: /opt/bin/tool\n    content:\n      imageRef:\n        image: r/t:1\n        filePathInImage: /t\n"
        "  units:\n"
        "  - name: a.service\n    content: A\n"
        "    dropIns:\n    - name: 10-x.conf\n      content: X\n    - name: 20-y.conf\n      content: Y\n"
        "    filePaths:\n    - /opt/bin/tool\n    - /etc/ok\n"
        "  - name: b.service\n    content: B\n    filePaths:\n    - /nowhere\n"
        "  - name: os.service\n    dropIns:\n    - name: 50-z.conf\n      content: Z\n"
        "  - name: gardener-node-agent.service\n    content: G\n    filePaths:\n    - /opt/bin/gna\n";

static void check(const Entry *e, size_t n, const char *const *want) {
        char *skip[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ char *err = NULL;
        OscDriftFinding *f = NULL;
        size_t nf = 0, nwant = 0;

        node = e;
        n_node = n;
        if (osc_model_decode_yaml(OSC, sizeof(OSC) - 1, NULL, &m, &err) < 0)
                fail_msg("%s", strempty(err));
        assert_int_equal(osc_drift_check(m, skip, fake_read, NULL, &f, &nf), 0);
        while (want[nwant])
                nwant++;
        for (size_t i = 0; i < nf; i++)
                print_message("%s: %s\n", f[i].reason, f[i].message);
        assert_int_equal(nf, nwant);
        for (size_t i = 0; i < nf; i++) {
                _cleanup_free_ char *line = NULL;

                assert_true(asprintf(&line, "%s: %s", f[i].reason, f[i].message) > 0);
                assert_string_equal(line, want[i]);
        }
        osc_drift_findings_free(f, nf);
}

static void test_nothing_drifted(void **state) {
        static const Entry e[] = {
                { OSC_DRIFT_NODE_FILE, "/etc/ok", "same", false },
                { OSC_DRIFT_NODE_FILE, "/etc/changed", "hello", false },
                { OSC_DRIFT_NODE_FILE, "/etc/gone", "hi", false },
                { OSC_DRIFT_NODE_FILE, "/etc/locked", "x", false },
                { OSC_DRIFT_NODE_FILE, "/opt/bin/tool", "", false },
                { OSC_DRIFT_NODE_FILE, "/nowhere", "", false },
                { OSC_DRIFT_UNIT_FILE, "a.service", "A", false },
                { OSC_DRIFT_DROP_IN, "a.service.d/10-x.conf", "X", false },
                { OSC_DRIFT_DROP_IN, "a.service.d/20-y.conf", "Y", false },
                { OSC_DRIFT_UNIT_FILE, "b.service", "B", false },
                { OSC_DRIFT_UNIT_FILE, "os.service", "[Unit]\n", true },
                { OSC_DRIFT_DROP_IN, "os.service.d/50-z.conf", "Z", false },
        };
        static const char *const want[] = { NULL };

        check(e, ELEMENTSOF(e), want);
}

static void test_everything_drifted(void **state) {
        static const Entry e[] = {
                { OSC_DRIFT_NODE_FILE, "/etc/ok", "same", false },
                { OSC_DRIFT_NODE_FILE, "/etc/changed", "hello!", false },
                { OSC_DRIFT_NODE_FILE, "/etc/locked", NULL, false },
                { OSC_DRIFT_UNIT_FILE, "a.service", "A2", false },
                { OSC_DRIFT_DROP_IN, "a.service.d/20-y.conf", "Y2", false },
                { OSC_DRIFT_UNIT_FILE, "os.service", "[Unit]\n", true },
        };
        static const char *const want[] = {
                "FileMismatch: File /etc/changed mismatch: expected "
                "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824, actual "
                "ce06092fb948d9ffac7d1a376e404b26b7575bcc11ee05a4615fef4fec3a308b",
                "FileMissing: File /etc/gone is missing",
                "FileReadError: Failed to read file /etc/locked",
                "UnitMismatch: Unit a.service content mismatch",
                "DropInMissing: Drop-in 10-x.conf for unit a.service is missing",
                "DropInMismatch: Drop-in 20-y.conf for unit a.service mismatch",
                "DependencyMissing: Dependency file /opt/bin/tool for unit a.service is missing",
                "UnitFileMissing: Unit file b.service is missing",      /* its dependency is not looked at */
                "DropInMissing: Drop-in 50-z.conf for unit os.service is missing",
                NULL,
        };

        check(e, ELEMENTSOF(e), want);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_nothing_drifted),
                cmocka_unit_test(test_everything_drifted),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
