/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "tests.h"
#include "util/fileio.h"

static char dir[] = "/tmp/test-osc-state-XXXXXX";
static char *state, *root;

static const char osc1[] = "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}]}";
static const char osc2[] = "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}, "
                           "{path: /etc/b, content: {inline: {data: b}}}]}";

static int setup(void **s) {
        if (!mkdtemp(dir) || asprintf(&state, "%s/state", dir) < 0 || asprintf(&root, "%s/root", dir) < 0)
                return -1;
        return mkdir(state, 0700) == 0 && mkdir(root, 0755) == 0 ? 0 : -1;
}

static int teardown(void **s) {
        int r = osc_remove_tree(dir);

        free(state);
        free(root);
        return r;
}

static OscChanges *prepare(const char *yaml, const char *checksum, OscBaseline *baseline, int expect) {
        _cleanup_free_ char *err = NULL;
        OscChanges *c = NULL;
        int r = osc_state_prepare(&(OscPrepareInput) { .state_directory = state, .root_directory = root, .yaml = yaml,
                                                       .size = strlen(yaml), .checksum = checksum },
                                  &c, baseline, &err);

        if (r != expect)
                fail_msg("prepare: %d %s", r, strempty(err));
        return c;
}

static void write_state(const char *name, const char *content) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", state, name) > 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0600), 0);
}

static bool state_exists(const char *name) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", state, name) > 0);
        return access(p, F_OK) == 0;
}

static void test_first_resume_commit_next(void **s) {
        OscChanges *c;
        OscBaseline b;

        c = prepare(osc1, "one", &b, 0);
        assert_int_equal(b, OSC_BASELINE_NONE);
        assert_int_equal(c->n_items, 1);
        assert_true(state_exists(OSC_STATE_CHANGES));         /* saved before anything ran */
        osc_changes_mark_done(c, 0);
        assert_int_equal(osc_state_save_changes(state, c), 0);
        osc_changes_free(c);

        c = prepare(osc1, "one", &b, 0);
        assert_int_equal(b, OSC_BASELINE_RESUMED);
        assert_true(osc_changes_complete(c));
        osc_changes_free(c);

        assert_int_equal(osc_state_commit(state, osc1, strlen(osc1)), 0);
        assert_false(state_exists(OSC_STATE_CHANGES));
        assert_true(state_exists(OSC_STATE_LAST_APPLIED));

        c = prepare(osc2, "two", &b, 0);
        assert_int_equal(b, OSC_BASELINE_LAST_APPLIED);
        assert_int_equal(c->n_items, 1);
        assert_string_equal(c->items[0].file.path, "/etc/b");
        osc_changes_free(c);

        /* saved work for another checksum is replaced */
        c = prepare(osc1, "three", &b, 0);
        assert_int_equal(b, OSC_BASELINE_LAST_APPLIED);
        assert_int_equal(c->n_items, 0);
        assert_string_equal(c->checksum, "three");
        osc_changes_free(c);
}

static void test_handover_and_errors(void **s) {
        OscChanges *c;
        OscBaseline b;

        assert_int_equal(osc_remove_file(state, "/" OSC_STATE_LAST_APPLIED), 0);
        assert_int_equal(osc_write_file(root, OSC_STATE_GNA_LAST_APPLIED, osc1, strlen(osc1), 0600, false), 1);
        c = prepare(osc2, "h", &b, 0);
        assert_int_equal(b, OSC_BASELINE_HANDOVER);
        assert_int_equal(c->n_items, 1);
        osc_changes_free(c);

        /* a corrupt work list is an error, not a silent recompute */
        write_state(OSC_STATE_CHANGES, "{\"items\": [");
        assert_null(prepare(osc2, "h", &b, -EBADMSG));
        write_state(OSC_STATE_CHANGES, "{\"items\": [{\"kind\": \"rm -rf\"}]}");
        assert_null(prepare(osc2, "h", &b, -EINVAL));

        /* an undecodable baseline is an error naming it */
        write_state(OSC_STATE_LAST_APPLIED, "spec: {files: 7}");
        {
                _cleanup_free_ char *p = NULL;
                assert_true(asprintf(&p, "%s/%s", state, OSC_STATE_CHANGES) > 0);
                (void) unlink(p);
        }
        assert_null(prepare(osc2, "x", &b, -EINVAL));
        /* and so is a new OSC that does not decode */
        write_state(OSC_STATE_LAST_APPLIED, osc1);
        assert_null(prepare("spec: {units: [{name: ../x}]}", "y", &b, -EINVAL));
}

/* A prepare that must be refused with a message containing `expected`; nothing comes back. */
static void prepare_refused(const char *yaml, const char *checksum, const OscProtected *own, const char *expected) {
        _cleanup_free_ char *err = NULL;
        OscChanges *c = NULL;
        OscBaseline b;

        assert_int_equal(osc_state_prepare(&(OscPrepareInput) { .state_directory = state, .root_directory = root,
                                                                 .yaml = yaml, .size = strlen(yaml),
                                                                 .checksum = checksum, .protected = own },
                                           &c, &b, &err),
                         -EPERM);
        assert_null(c);
        if (!strstr(err, expected))
                fail_msg("\"%s\" does not contain \"%s\"", err, expected);
}

/* Issue 23, finding 6: an OSC file inside the agent's state directory overwrote the verified kubelet
 * in the store. Refused when the work list is prepared, before anything is written or saved; also
 * when reached through a symlinked directory below the root, and in resumed work. */
static void test_own_files_refused(void **s) {
        _cleanup_(osc_protected_done) OscProtected own = {};
        _cleanup_free_ char *agent_state = NULL, *link = NULL, *changes = NULL, *store = NULL;
        static const char bad[] = "spec: {files: [{path: /etc/ok, content: {inline: {data: ok}}},\n"
                                  "  {path: /var/lib/inplace-agent/kubelet/1.31.4/kubelet, content: {inline: {data: x}}}]}";
        static const char via_link[] = "spec: {files: [{path: /opt/agent/state.json, content: {inline: {data: x}}}]}";
        static const char resumed[] = "spec: {files: [{path: /opt/agent/x, content: {inline: {data: x}}}]}";
        OscBaseline b;

        assert_true(asprintf(&agent_state, "%s/var/lib/inplace-agent", root) > 0);
        assert_true(asprintf(&store, "%s/kubelet/1.31.4", agent_state) > 0);
        assert_int_equal(mkdir_parents(store, 0700), 0);
        assert_int_equal(osc_protected_add(&own, agent_state, "state directory"), 0);
        assert_true(asprintf(&changes, "%s/%s", state, OSC_STATE_CHANGES) > 0);
        (void) unlink(changes);

        prepare_refused(bad, "bad", &own, "/var/lib/inplace-agent/kubelet/1.31.4/kubelet: inside the agent's state directory");
        assert_false(state_exists(OSC_STATE_CHANGES));          /* nothing saved, nothing written */
        assert_int_equal(rmdir(store), 0);                      /* empty: no kubelet written */

        /* a directory below the root that is a symlink into it */
        assert_true(asprintf(&link, "%s/opt", root) > 0);
        assert_int_equal(mkdir(link, 0755), 0);
        free(link);
        assert_true(asprintf(&link, "%s/opt/agent", root) > 0);
        assert_int_equal(symlink("../var/lib/inplace-agent", link), 0);
        prepare_refused(via_link, "link", &own, "/opt/agent/state.json: inside the agent's state directory");

        /* saved work (of an older agent) is checked too */
        osc_changes_free(prepare(resumed, "resume", &b, 0));
        prepare_refused(resumed, "resume", &own, "/opt/agent/x: inside");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_first_resume_commit_next),
                cmocka_unit_test(test_handover_and_errors),
                cmocka_unit_test(test_own_files_refused),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
