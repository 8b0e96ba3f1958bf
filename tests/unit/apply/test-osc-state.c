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
static char *warning; /* of the last prepare() */

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

        warning = mfree(warning);
        free(state);
        free(root);
        return r;
}

static OscChanges *prepare(const char *yaml, const char *checksum, OscBaseline *baseline, int expect) {
        _cleanup_free_ char *err = NULL;
        OscChanges *c = NULL;
        int r;

        warning = mfree(warning);
        r = osc_state_prepare(&(OscPrepareInput) { .state_directory = state,
                                                   .root_directory = root,
                                                   .yaml = yaml,
                                                   .size = strlen(yaml),
                                                   .checksum = checksum },
                              &c, baseline, &warning, &err);
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

static off_t state_size(const char *name) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        assert_true(asprintf(&p, "%s/%s", state, name) > 0);
        assert_int_equal(stat(p, &st), 0);
        return st.st_size;
}

static void remove_state(const char *name) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", state, name) > 0);
        (void) unlink(p);
}

/* An OSC of `n` inline files /etc/f<i>. */
static char *files_osc(size_t n) {
        char *yaml = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&yaml, &size);

        assert_non_null(f);
        fputs("spec: {files: [", f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s{path: /etc/f%zu, content: {inline: {data: x}}}", i > 0 ? ", " : "", i);
        fputs("]}", f);
        assert_int_equal(fclose(f), 0);
        return yaml;
}

static void test_first_resume_commit_next(void **s) {
        OscChanges *c;
        OscBaseline b;

        c = prepare(osc1, "one", &b, 0);
        assert_int_equal(b, OSC_BASELINE_NONE);
        assert_int_equal(c->n_items, 1);
        assert_true(state_exists(OSC_STATE_CHANGES)); /* saved before anything ran */
        assert_true(state_exists(OSC_STATE_PLAN));
        osc_changes_mark_done(c, 0);
        assert_int_equal(osc_state_save_done(state, c, &(size_t) { 0 }, 1), 0);
        osc_changes_free(c);

        c = prepare(osc1, "one", &b, 0);
        assert_int_equal(b, OSC_BASELINE_RESUMED);
        assert_true(osc_changes_complete(c));
        osc_changes_free(c);

        assert_int_equal(osc_state_commit(state, osc1, strlen(osc1)), 0);
        assert_false(state_exists(OSC_STATE_CHANGES));
        assert_false(state_exists(OSC_STATE_DONE));
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
        assert_int_equal(osc_write_file(root, OSC_STATE_GNA_LAST_APPLIED, osc1, strlen(osc1), 0600, false),
                         1);
        c = prepare(osc2, "h", &b, 0);
        assert_int_equal(b, OSC_BASELINE_HANDOVER);
        assert_int_equal(c->n_items, 1);
        osc_changes_free(c);

        /* a new OSC that does not decode is an error naming the field */
        assert_null(prepare("spec: {units: [{name: ../x}]}", "y", &b, -EINVAL));
}

/* A prepare that must be refused with a message containing `expected`; nothing comes back. */
static void prepare_refused(const char *yaml, const char *checksum, const OscProtected *own,
                            const char *expected) {
        _cleanup_free_ char *err = NULL;
        OscChanges *c = NULL;
        OscBaseline b;

        assert_int_equal(osc_state_prepare(&(OscPrepareInput) { .state_directory = state,
                                                                .root_directory = root,
                                                                .yaml = yaml,
                                                                .size = strlen(yaml),
                                                                .checksum = checksum,
                                                                .protected = own },
                                           &c, &b, NULL, &err),
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
        static const char bad[] =
                "spec: {files: [{path: /etc/ok, content: {inline: {data: ok}}},\n"
                "  {path: /var/lib/inplace-agent/kubelet/1.31.4/kubelet, content: {inline: {data: x}}}]}";
        static const char via_link[] =
                "spec: {files: [{path: /opt/agent/state.json, content: {inline: {data: x}}}]}";
        static const char resumed[] = "spec: {files: [{path: /opt/agent/x, content: {inline: {data: x}}}]}";
        OscBaseline b;

        assert_true(asprintf(&agent_state, "%s/var/lib/inplace-agent", root) > 0);
        assert_true(asprintf(&store, "%s/kubelet/1.31.4", agent_state) > 0);
        assert_int_equal(mkdir_parents(store, 0700), 0);
        assert_int_equal(osc_protected_add(&own, agent_state, "state directory"), 0);
        assert_true(asprintf(&changes, "%s/%s", state, OSC_STATE_CHANGES) > 0);
        (void) unlink(changes);

        prepare_refused(bad, "bad", &own,
                        "/var/lib/inplace-agent/kubelet/1.31.4/kubelet: inside the agent's state directory");
        assert_false(state_exists(OSC_STATE_CHANGES)); /* nothing saved, nothing written */
        assert_int_equal(rmdir(store), 0);             /* empty: no kubelet written */

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

/* A truncated or undecodable work list, a done-log of another list or with a bad line: moved aside
 * with a warning naming the file, and the work starts over from the last-applied OSC. */
static void test_corrupt_work_list_moved_aside(void **s) {
        static const char *const bad[] = {
                "{\"items\": [",                         /* truncated */
                "{\"items\": [{\"kind\": \"rm -rf\"}]}", /* decodes, but not as a work list */
                "",
        };
        OscChanges *c;
        OscBaseline b;

        write_state(OSC_STATE_LAST_APPLIED, osc1);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_state(OSC_STATE_CHANGES, bad[i]);
                c = prepare(osc2, "two", &b, 0);
                assert_int_equal(b, OSC_BASELINE_LAST_APPLIED);
                assert_int_equal(c->n_items, 1);
                assert_non_null(warning);
                assert_non_null(strstr(warning, OSC_STATE_CHANGES));
                assert_non_null(strstr(warning, "moved it and " OSC_STATE_DONE " aside"));
                assert_true(state_exists(OSC_STATE_CHANGES OSC_STATE_CORRUPT_SUFFIX));
                assert_true(state_exists(OSC_STATE_CHANGES)); /* the new list */
                osc_changes_free(c);
        }

        static const char *const bad_logs[] = {
                "inplace-agent done-log v1 other\n0\n", /* another work list's */
                "inplace-agent done-log v1 two\n7\n",   /* no item 7 */
                "inplace-agent done-log v1 two\nzero\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad_logs); i++) {
                write_state(OSC_STATE_DONE, bad_logs[i]);
                c = prepare(osc2, "two", &b, 0);
                assert_int_equal(b, OSC_BASELINE_LAST_APPLIED);
                assert_false(osc_changes_complete(c));
                assert_non_null(warning);
                assert_non_null(strstr(warning, OSC_STATE_DONE));
                assert_true(state_exists(OSC_STATE_DONE OSC_STATE_CORRUPT_SUFFIX));
                assert_false(state_exists(OSC_STATE_DONE));
                osc_changes_free(c);
        }

        /* A torn last line (a kill or power loss in the middle of an append) is simply not done. */
        write_state(OSC_STATE_DONE, "inplace-agent done-log v1 two\n0");
        c = prepare(osc2, "two", &b, 0);
        assert_int_equal(b, OSC_BASELINE_RESUMED);
        assert_null(warning);
        assert_int_equal(osc_changes_next(c), 0);
        osc_changes_free(c);
        remove_state(OSC_STATE_CHANGES);
        remove_state(OSC_STATE_DONE);
}

/* An undecodable last-applied OSC is moved aside: the whole new OSC is applied (from GNA's, if any). */
static void test_corrupt_last_applied_moved_aside(void **s) {
        OscChanges *c;
        OscBaseline b;

        write_state(OSC_STATE_LAST_APPLIED, "spec: {files: 7}");
        c = prepare(osc2, "x", &b, 0);
        assert_int_equal(b, OSC_BASELINE_HANDOVER); /* GNA's from the test before */
        assert_int_equal(c->n_items, 1);
        assert_non_null(strstr(warning, "unable to decode the old OSC read from file path"));
        assert_non_null(strstr(warning, OSC_STATE_LAST_APPLIED));
        assert_true(state_exists(OSC_STATE_LAST_APPLIED OSC_STATE_CORRUPT_SUFFIX));
        assert_false(state_exists(OSC_STATE_LAST_APPLIED));
        osc_changes_free(c);

        assert_int_equal(osc_write_file(root, OSC_STATE_GNA_LAST_APPLIED, "spec: [", 7, 0600, false), 1);
        c = prepare(osc2, "y", &b, 0);
        assert_int_equal(b, OSC_BASELINE_NONE);
        assert_int_equal(c->n_items, 2);
        assert_non_null(strstr(warning, OSC_STATE_GNA_LAST_APPLIED));
        osc_changes_free(c);
        write_state(OSC_STATE_LAST_APPLIED, osc1);
}

/* O(n) bookkeeping: the list once, then one short line per item; a resume after any item continues
 * right after it. A list saved by an older agent (done flags in the list, no log) resumes too. */
static void test_done_log_is_linear_and_exact(void **s) {
        _cleanup_free_ char *yaml = files_osc(2000);
        OscChanges *c;
        OscBaseline b;
        off_t list_size;

        remove_state(OSC_STATE_LAST_APPLIED);
        c = prepare(yaml, "big", &b, 0);
        assert_int_equal(c->n_items, 2000);
        list_size = state_size(OSC_STATE_CHANGES);
        for (size_t i = 0; i < 50; i++) {
                osc_changes_mark_done(c, i);
                assert_int_equal(osc_state_save_done(state, c, &i, 1), 0);
        }
        {
                size_t batch[1184];

                for (size_t i = 0; i < ELEMENTSOF(batch); i++)
                        batch[i] = 50 + i;
                assert_int_equal(osc_state_save_done(state, c, batch, ELEMENTSOF(batch)), 0);
        }
        osc_changes_free(c);
        assert_int_equal(state_size(OSC_STATE_CHANGES), list_size); /* written once */
        assert_true(state_size(OSC_STATE_DONE) <= 40 + 1234 * 5);   /* a few bytes per item */

        c = prepare(yaml, "big", &b, 0);
        assert_int_equal(b, OSC_BASELINE_RESUMED);
        assert_null(warning);
        assert_int_equal(osc_changes_next(c), 1234);
        assert_true(c->items[1233].done);
        assert_false(c->items[1234].done);
        osc_changes_free(c);

        /* The old format: the whole list rewritten with done flags after each item. */
        remove_state(OSC_STATE_DONE);
        c = prepare(yaml, "big", &b, 0);
        for (size_t i = 0; i < 10; i++)
                osc_changes_mark_done(c, i);
        {
                json_t *j = osc_changes_to_json(c);
                char *dump = json_dumps(j, JSON_COMPACT);

                write_state(OSC_STATE_CHANGES, dump);
                free(dump);
                json_decref(j);
        }
        osc_changes_free(c);
        c = prepare(yaml, "big", &b, 0);
        assert_int_equal(b, OSC_BASELINE_RESUMED);
        assert_int_equal(osc_changes_next(c), 10);
        osc_changes_free(c);
        remove_state(OSC_STATE_CHANGES);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_first_resume_commit_next),
                cmocka_unit_test(test_handover_and_errors),
                cmocka_unit_test(test_own_files_refused),
                cmocka_unit_test(test_corrupt_work_list_moved_aside),
                cmocka_unit_test(test_corrupt_last_applied_moved_aside),
                cmocka_unit_test(test_done_log_is_linear_and_exact),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
