/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/containerd-config.h"
#include "core/osc-drift-plan.h"
#include "tests.h"
#include "util/strv.h"
#include "util/time-util.h"

static const char OSC[] =
        "spec:\n"
        "  files:\n"
        "  - path: /etc/app.conf\n    permissions: 420\n    content:\n      inline:\n        data: v1\n"
        "  - path: /etc/other.conf\n    content:\n      inline:\n        data: o\n"
        "  - path: /etc/token\n    content:\n      secretRef:\n        name: s\n        dataKey: k\n"
        "  - path: /opt/bin/tool\n    content:\n      imageRef:\n        image: r/t:1\n        filePathInImage: /t\n"
        "  - path: /var/lib/inplace-agent/state.json\n    content:\n      inline:\n        data: x\n"
        "  units:\n"
        "  - name: app.service\n    content: A\n    filePaths:\n    - /etc/app.conf\n    - /opt/bin/tool\n"
        "  - name: other.service\n    content: O\n"
        "  - name: off.service\n    enable: false\n    content: F\n"
        "  - name: kubelet.service\n    content: K\n    filePaths:\n    - /etc/token\n"
        "  - name: containerd.service\n    dropIns:\n    - name: 10-x.conf\n      content: X\n"
        "  - name: inplace-agent.service\n    dropIns:\n    - name: 10-x.conf\n      content: X\n"
        "  criConfig:\n    name: containerd\n    containerd:\n      sandboxImage: p\n"
        "      registries:\n      - upstream: quay.io\n";

static OscModel *model;
static OscProtected own;

static int setup(void **state) {
        _cleanup_free_ char *err = NULL;

        if (osc_model_decode_yaml(OSC, sizeof(OSC) - 1, NULL, &model, &err) < 0)
                fail_msg("%s", strempty(err));
        assert_int_equal(osc_protected_add(&own, "/var/lib/inplace-agent", "state directory"), 0);
        return 0;
}

static int teardown(void **state) {
        model = osc_model_free(model);
        osc_protected_done(&own);
        return 0;
}

/* The sandbox's root is "/": a path is its own canonical form. */
static int canonical(const char *path, char **ret, void *userdata) {
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

static void finding(OscDrift *d, OscDriftKind kind, const char *reason, const char *subject) {
        OscDriftFinding *l = d->items;

        /* Grown in powers of two: the large wipe adds 21,000, and a list grown by one each time is
         * copied quadratically (under ASan each copy is a fresh mapping: past the test's timeout). */
        if ((d->n_items & (d->n_items - 1)) == 0) {
                l = reallocarray(d->items, d->n_items ? 2 * d->n_items : 1, sizeof(*l));
                assert_non_null(l);
                d->items = l;
        }
        l[d->n_items++] = (OscDriftFinding) {
                .reason = reason, .message = strdup(subject), .kind = kind, .subject = strdup(subject)
        };
}

/* The plan as lines "<kind> <target>" (commands: "<command> <unit>"), and the skipped list. */
static void plan_with(const OscDriftPlanParams *p, const OscDrift *d, const char *const *want,
                      const char *const *want_skipped, OscChanges **ret) {
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_strv_free_ char **skipped = NULL;
        size_t n = 0;

        assert_int_equal(osc_drift_plan(p, d, &c, &skipped), 0);
        for (size_t i = 0; c && i < c->n_items; i++) {
                const OscWork *w = &c->items[i];
                _cleanup_free_ char *line = NULL;

                assert_true(asprintf(&line, "%s %s",
                                     w->kind == OSC_WORK_UNIT_COMMAND ?
                                             osc_unit_command_to_string(w->command) :
                                             osc_work_kind_to_string(w->kind),
                                     strempty(osc_work_target(w))) > 0);
                print_message("%s\n", line);
                assert_non_null(want[n]);
                assert_string_equal(line, want[n]);
                n++;
        }
        assert_null(want[n]);
        assert_int_equal(strv_length(skipped), strv_length((char *const *) want_skipped));
        for (size_t i = 0; want_skipped && want_skipped[i]; i++)
                assert_string_equal(skipped[i], want_skipped[i]);
        if (ret)
                *ret = TAKE_PTR(c);
}

static void plan(const OscDrift *d, const char *const *want, const char *const *want_skipped,
                 OscChanges **ret) {
        OscDriftPlanParams p = { .model = model,
                                 .self_unit = "inplace-agent.service",
                                 .protected = &own,
                                 .canonicalize = canonical };

        plan_with(&p, d, want, want_skipped, ret);
}

/* The acceptance case: a file and a unit file deleted by hand; each unit restarted once. */
static void test_file_and_unit_file(void **state) {
        OscDrift d = {};
        static const char *const want[] = {
                "write-file /etc/app.conf", "write-unit other.service",
                "daemon-reload ",           "restart app.service", /* lists /etc/app.conf */
                "restart other.service",    NULL,
        };

        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/etc/app.conf");
        finding(&d, OSC_DRIFT_FILE, "FileModeMismatch", "/etc/app.conf");
        finding(&d, OSC_DRIFT_UNIT_FILES, "UnitFileMissing", "other.service");
        finding(&d, OSC_DRIFT_UNIT_INACTIVE, "UnitInactive", "other.service");
        plan(&d, want, NULL, NULL);
        osc_drift_done(&d);
}

static void test_enablement_and_inactive(void **state) {
        OscDrift d = {};
        static const char *const want[] = {
                "write-unit off.service", /* disabled again, not restarted (it is stopped) */
                "daemon-reload ",
                "restart app.service",
                NULL,
        };

        finding(&d, OSC_DRIFT_UNIT_ENABLEMENT, "UnitEnableMismatch", "off.service");
        finding(&d, OSC_DRIFT_UNIT_INACTIVE, "UnitInactive", "app.service");
        plan(&d, want, NULL, NULL);
        osc_drift_done(&d);
}

static void test_kubelet_secret_and_image(void **state) {
        OscDrift d = {};
        static const char *const want[] = {
                "write-file /etc/token", /* the secretRef file: fetched when applied */
                "pull-file /opt/bin/tool",
                "restart app.service",
                "restart kubelet.service",
                "kubelet-health ",
                NULL,
        };

        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/opt/bin/tool");
        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/etc/token");
        plan(&d, want, NULL, NULL);
        osc_drift_done(&d);
}

static void test_containerd(void **state) {
        OscDrift d = {};
        static const char *const want[] = {
                "containerd-config /etc/containerd/config.toml",
                "registry quay.io",
                "write-unit containerd.service",
                "daemon-reload ",
                "restart containerd.service", /* once, for the drop-in and config.toml */
                NULL,
        };

        finding(&d, OSC_DRIFT_CONTAINERD_CONFIG, "FileMissing", CONTAINERD_CONFIG_FILE);
        finding(&d, OSC_DRIFT_REGISTRY, "FileMissing", "quay.io");
        finding(&d, OSC_DRIFT_UNIT_FILES, "DropInMissing", "containerd.service");
        plan(&d, want, NULL, NULL);
        osc_drift_done(&d);
}

static void test_never_touched(void **state) {
        OscDrift d = {};
        static const char *const want[] = { NULL };
        static const char *const skipped[] = {
                "/var/lib/inplace-agent/state.json (the agent's own file)",
                "inplace-agent.service (the agent's own unit)",
                NULL,
        };

        finding(&d, OSC_DRIFT_FILE, "FileMismatch", "/var/lib/inplace-agent/state.json");
        finding(&d, OSC_DRIFT_UNIT_FILES, "DropInMissing", "inplace-agent.service");
        finding(&d, OSC_DRIFT_UNIT_INACTIVE, "UnitInactive", "inplace-agent.service");
        finding(&d, OSC_DRIFT_REPORT_ONLY, "FileReadError", "/etc/other.conf");
        plan(&d, want, skipped, NULL);
        osc_drift_done(&d);
}

static void test_summary(void **state) {
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_free_ char *repaired = NULL, *failed = NULL, *partial = NULL, *warned = NULL, *none = NULL;
        char *skipped[] = { (char *) "inplace-agent.service (the agent's own unit)", NULL };
        OscDrift d = {};
        static const char *const want[] = {
                "write-file /etc/app.conf", "write-unit other.service", "daemon-reload ",
                "restart app.service",      "restart other.service",    NULL,
        };

        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/etc/app.conf");
        finding(&d, OSC_DRIFT_UNIT_FILES, "UnitFileMissing", "other.service");
        finding(&d, OSC_DRIFT_UNIT_FILES, "UnitFileMissing", "other.service"); /* named once */
        plan(&d, want, NULL, &c);
        for (size_t i = 0; i < c->n_items; i++)
                osc_changes_mark_done(c, i);
        assert_int_equal(osc_drift_summary(&d, c, NULL, OSC_DRIFT_REPAIRED, NULL, &repaired), 0);
        assert_string_equal(
                repaired,
                "Drift from the last-applied OSC: FileMissing /etc/app.conf, UnitFileMissing other.service. "
                "Repaired: write file /etc/app.conf (0644), write unit other.service (with unit file, 0 "
                "drop-ins), reload systemd, restart unit app.service, restart unit other.service.");
        assert_string_equal(osc_drift_outcome_reason(OSC_DRIFT_REPAIRED), "OSCDriftRepaired");

        c->items[3].done = c->items[4].done = false;
        assert_int_equal(osc_drift_summary(&d, c, skipped, OSC_DRIFT_REPAIR_FAILED,
                                           "restart app.service: job result: failed", &failed),
                         0);
        assert_string_equal(
                failed,
                "Drift from the last-applied OSC: FileMissing /etc/app.conf, UnitFileMissing other.service. "
                "Repair failed: restart app.service: job result: failed; done before: write file "
                "/etc/app.conf (0644), write unit other.service (with unit file, 0 drop-ins), reload "
                "systemd. Not repaired: inplace-agent.service (the agent's own unit).");
        assert_string_equal(osc_drift_outcome_reason(OSC_DRIFT_REPAIR_FAILED), "OSCDriftRepairFailed");

        /* The unit guard refused other.service: the rest was repaired, the refused unit named. */
        for (size_t i = 0; i < c->n_items; i++)
                osc_changes_mark_done(c, i);
        assert_int_equal(osc_changes_refuse_unit(c, "other.service"), 0); /* all done already */
        c->items[1].done = c->items[4].done = false;
        assert_int_equal(osc_changes_refuse_unit(c, "other.service"), 2);
        assert_int_equal(osc_drift_summary(&d, c, NULL, OSC_DRIFT_REPAIRED,
                                           "other.service (it stops the agent)", &partial),
                         0);
        assert_string_equal(
                partial,
                "Drift from the last-applied OSC: FileMissing /etc/app.conf, UnitFileMissing other.service. "
                "Repaired 3 of 5: write file /etc/app.conf (0644), reload systemd, restart unit "
                "app.service; refused: other.service (it stops the agent).");

        assert_int_equal(osc_drift_summary(&d, NULL, NULL, OSC_DRIFT_WARNED, NULL, &warned), 0);
        assert_string_equal(warned,
                            "Drift from the last-applied OSC: FileMissing /etc/app.conf, UnitFileMissing "
                            "other.service. Nothing was touched (osc.driftRepair: warn).");
        assert_string_equal(osc_drift_outcome_reason(OSC_DRIFT_WARNED), "OSCDriftDetected");
        assert_int_equal(osc_drift_summary(&d, NULL, NULL, OSC_DRIFT_NOTHING_TO_REPAIR, NULL, &none), 0);
        assert_non_null(strstr(none, "Nothing was touched"));
        osc_drift_done(&d);
}

/* A wiped /etc: thousands of findings, one long path; the Event stays within its budget. */
static void test_summary_bounded(void **state) {
        _cleanup_(osc_changes_freep) OscChanges *c = calloc(1, sizeof(OscChanges));
        _cleanup_free_ char *s = NULL, *longpath = malloc(3000), *detail = malloc(3000);
        OscDrift d = {};

        assert_non_null(c);
        memset(longpath, 'a', 2999);
        longpath[0] = '/';
        longpath[2999] = 0;
        memset(detail, 'e', 2999);
        detail[2999] = 0;
        finding(&d, OSC_DRIFT_FILE, "FileMissing", longpath);
        for (int i = 0; i < 5000; i++) {
                char path[64];
                OscWork *w = osc_changes_add_item(c, OSC_WORK_DELETE_FILE);

                snprintf(path, sizeof(path), "/etc/wiped/file-%d.conf", i);
                finding(&d, OSC_DRIFT_FILE, "FileMissing", path);
                assert_non_null(w);
                w->file.path = strdup(path);
                w->done = true;
        }
        assert_int_equal(osc_drift_summary(&d, c, NULL, OSC_DRIFT_REPAIRED, NULL, &s), 0);
        print_message("%zu: %s\n", strlen(s), s);
        assert_true(strlen(s) <= OSC_DRIFT_SUMMARY_MAX);
        assert_non_null(strstr(s, "(+5000 more). Repaired: remove file /etc/wiped/file-0.conf, "));
        assert_non_null(strstr(s, " more)."));
        s = mfree(s);
        assert_int_equal(osc_drift_summary(&d, c, NULL, OSC_DRIFT_REPAIR_FAILED, detail, &s), 0);
        assert_true(strlen(s) <= OSC_DRIFT_SUMMARY_MAX);
        osc_drift_done(&d);
}

/* /etc wiped under a large OSC: 10,000 files and 1,000 units, each listing ten of them, all gone. The
 * plan writes each file once and restarts each unit once, and takes no quadratic time about it. */
static void test_large_wipe(void **state) {
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_strv_free_ char **skipped = NULL;
        _cleanup_(osc_model_freep) OscModel *m = calloc(1, sizeof(OscModel));
        _cleanup_free_ char *s = NULL;
        size_t files = 0, units = 0, commands = 0;
        OscDrift d = {};
        uint64_t t0;

        /* Built directly: decoding 10,000 files from YAML would be most of the test's time. */
        assert_non_null(m);
        m->files = calloc(10000, sizeof(OscFile));
        m->units = calloc(1000, sizeof(OscUnit));
        assert_true(m->files && m->units);
        for (int i = 0; i < 10000; i++) {
                m->files[i] = (OscFile) { .source = OSC_FILE_INLINE,
                                          .data = strdup("x"),
                                          .transmit_unencoded = -1 };
                assert_true(asprintf(&m->files[i].path, "/etc/wiped/f%d", i) > 0);
                m->n_files++;
        }
        for (int i = 0; i < 1000; i++) {
                OscUnit *u = &m->units[i];

                *u = (OscUnit) { .command = _OSC_UNIT_COMMAND_INVALID,
                                 .enable = -1,
                                 .content = strdup("U"),
                                 .file_paths = calloc(10, sizeof(char *)) };
                assert_true(asprintf(&u->name, "u%d.service", i) > 0 && u->file_paths);
                for (int k = 0; k < 10; k++)
                        u->file_paths[u->n_file_paths++] = strdup(m->files[i * 10 + k].path);
                m->n_units++;
        }
        for (size_t i = 0; i < m->n_files; i++)
                finding(&d, OSC_DRIFT_FILE, "FileMissing", m->files[i].path);
        for (size_t i = 0; i < m->n_units; i++) {
                finding(&d, OSC_DRIFT_UNIT_FILES, "UnitFileMissing", m->units[i].name);
                for (size_t k = 0; k < m->units[i].n_file_paths; k++)
                        finding(&d, OSC_DRIFT_FILE, "DependencyMissing", m->units[i].file_paths[k]);
        }
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        assert_int_equal(osc_drift_plan(&(OscDriftPlanParams) { .model = m }, &d, &c, &skipped), 0);
        for (size_t i = 0; i < c->n_items; i++) {
                files += c->items[i].kind == OSC_WORK_WRITE_FILE;
                units += c->items[i].kind == OSC_WORK_WRITE_UNIT;
                commands += c->items[i].kind == OSC_WORK_UNIT_COMMAND;
                osc_changes_mark_done(c, i);
        }
        assert_int_equal(osc_drift_summary(&d, c, NULL, OSC_DRIFT_REPAIRED, NULL, &s), 0);
        print_message("%zu findings planned and summarized in %" PRIu64 " ms\n", d.n_items,
                      (clock_now_usec(CLOCK_MONOTONIC) - t0) / USEC_PER_MSEC);
        assert_int_equal(files, 10000);
        assert_int_equal(units, 1000);
        assert_int_equal(commands, 1000);
        print_message("%s\n", s);
        assert_true(strlen(s) <= OSC_DRIFT_SUMMARY_MAX);
        /* 21,000 distinct findings, 12,001 items done: counted, not listed. */
        assert_non_null(strstr(s, "FileMissing /etc/wiped/f0, FileMissing /etc/wiped/f1, "));
        assert_non_null(strstr(s, " more). Repaired: write file /etc/wiped/f0 (0600), "));
        osc_drift_done(&d);
}

/* A finding about a file only gardener-node-agent.service lists (an older round, a model from before)
 * is no repair: the replaced unit's binary is never pulled, its config never written, and it is
 * never restarted for a file it shares with another unit; that other unit is. */
static void test_replaced_unit_never_restored(void **state) {
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
        static const char *const want[] = {
                "write-file /etc/shared",
                "restart app.service",
                NULL,
        };
        char *replaced[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ char *err = NULL;
        OscDrift d = {};

        if (osc_model_decode_yaml(yaml, sizeof(yaml) - 1, NULL, &m, &err) < 0)
                fail_msg("%s", strempty(err));
        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/opt/bin/gardener-node-agent");
        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/var/lib/gardener-node-agent/config.yaml");
        finding(&d, OSC_DRIFT_FILE, "FileMissing", "/etc/shared");
        finding(&d, OSC_DRIFT_UNIT_FILES, "UnitFileMissing", "gardener-node-agent.service");
        finding(&d, OSC_DRIFT_UNIT_INACTIVE, "UnitInactive", "gardener-node-agent.service");
        plan_with(&(OscDriftPlanParams) { .model = m, .replaced_units = replaced }, &d, want, NULL, NULL);
        osc_drift_done(&d);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_file_and_unit_file),
                cmocka_unit_test(test_enablement_and_inactive),
                cmocka_unit_test(test_kubelet_secret_and_image),
                cmocka_unit_test(test_containerd),
                cmocka_unit_test(test_never_touched),
                cmocka_unit_test(test_summary),
                cmocka_unit_test(test_summary_bounded),
                cmocka_unit_test(test_large_wipe),
                cmocka_unit_test(test_replaced_unit_never_restored),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
