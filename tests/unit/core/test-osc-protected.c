/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/osc-protected.h"
#include "tests.h"

static void test_add_find(void **state) {
        _cleanup_(osc_protected_done) OscProtected p = {};

        assert_int_equal(osc_protected_add(&p, "/var/lib/inplace-agent/", "state directory"), 0);
        assert_int_equal(osc_protected_add(&p, "/var/lib/inplace-agent", "state directory"), 0);
        assert_int_equal(osc_protected_add(&p, "/usr/bin/inplace-agent", "binary"), 0);
        assert_int_equal(osc_protected_add(&p, "/", "everything"), -EINVAL);
        assert_int_equal(osc_protected_add(&p, "relative", "nothing"), -EINVAL);
        assert_int_equal(p.n_items, 2);
        assert_string_equal(p.items[0].path, "/var/lib/inplace-agent");

        assert_string_equal(osc_protected_find(&p, "/var/lib/inplace-agent")->what, "state directory");
        assert_string_equal(osc_protected_find(&p, "/var/lib/inplace-agent/kubelet/1.31.4/kubelet")->what,
                            "state directory");
        assert_string_equal(osc_protected_find(&p, "/usr/bin/inplace-agent")->what, "binary");
        assert_null(osc_protected_find(&p, "/var/lib/inplace-agent-other/x"));
        assert_null(osc_protected_find(&p, "/usr/bin/inplace-agent.bak"));
        assert_null(osc_protected_find(&p, "/var/lib"));
        assert_null(osc_protected_find(NULL, "/var/lib"));
}

/* Below a scratch root, as the appliers see it; "/broken/..." cannot be resolved. */
static int fake_canonical(const char *path, char **ret, void *userdata) {
        if (strncmp(path, "/broken/", 8) == 0)
                return -ENOTDIR;
        return asprintf(ret, "%s%s", (const char *) userdata, path) < 0 ? -ENOMEM : 0;
}

static void test_check_changes(void **state) {
        _cleanup_(osc_protected_done) OscProtected p = {};
        OscWork items[] = {
                { .kind = OSC_WORK_WRITE_FILE, .file.path = (char *) "/etc/fine" },
                { .kind = OSC_WORK_WRITE_UNIT, .unit.name = (char *) "inplace-agent.service" },
                { .kind = OSC_WORK_DELETE_FILE, .file.path = (char *) "/etc/inplace-agent/config.yaml" },
                { .kind = OSC_WORK_PULL_FILE, .file.path = (char *) "/broken/etc/inplace-agent/x" },
        };
        OscChanges c = { .items = items, .n_items = ELEMENTSOF(items) };
        _cleanup_free_ char *err = NULL;

        /* Issue 32: a write into a directory that cannot be resolved fails before the first item;
         * a removal there has nothing to remove. */
        assert_int_equal(osc_changes_check_protected(&c, &p, fake_canonical, (void *) "/root", &err),
                         -ENOTDIR);
        assert_string_equal(err,
                            "/broken/etc/inplace-agent/x: its directory cannot be resolved below "
                            "osc.rootDirectory (Not a directory): a symlink whose target is missing, or no "
                            "directory");
        err = mfree(err);
        items[3].kind = OSC_WORK_DELETE_FILE;
        assert_int_equal(osc_changes_check_protected(&c, &p, fake_canonical, (void *) "/root", &err), 0);
        assert_int_equal(osc_protected_add(&p, "/root/etc/inplace-agent", "configuration directory"), 0);
        assert_int_equal(osc_changes_check_protected(&c, &p, fake_canonical, (void *) "/root", &err),
                         -EPERM);
        assert_string_equal(err,
                            "/etc/inplace-agent/config.yaml: inside the agent's configuration directory "
                            "/root/etc/inplace-agent: an OSC never writes or removes the agent's own files");
        /* done (by an older agent): not refused now; outside the root: not this root's business */
        items[2].done = true;
        assert_int_equal(osc_changes_check_protected(&c, &p, fake_canonical, (void *) "/root", NULL), 0);
        items[2].done = false;
        assert_int_equal(osc_changes_check_protected(&c, &p, fake_canonical, (void *) "/elsewhere", NULL),
                         0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_find),
                cmocka_unit_test(test_check_changes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
