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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_first_resume_commit_next),
                cmocka_unit_test(test_handover_and_errors),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
