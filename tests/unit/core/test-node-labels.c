/* SPDX-License-Identifier: Apache-2.0 */
#include "core/node-labels.h"
#include "tests.h"

static void test_zone_file(void **state) {
        _cleanup_free_ char *z = NULL;
        char *bad = NULL;

        assert_int_equal(node_zone_from_file("  eu-west-1a\n", &z), 0);
        assert_string_equal(z, "eu-west-1a");
        assert_int_equal(node_zone_from_file("\n", &bad), -EINVAL);
        assert_int_equal(node_zone_from_file("a b", &bad), -EINVAL);
        assert_int_equal(node_zone_from_file("-a", &bad), -EINVAL);
        assert_int_equal(node_zone_from_file(
                                 "0123456789012345678901234567890123456789012345678901234567890123", &bad),
                         -EINVAL);
        assert_null(bad);
}

static void expect_patch_role(const NodeView *v, bool control_plane, const char *zone, const char *want) {
        _cleanup_(json_decrefp) json_t *p = NULL;
        _cleanup_free_ char *s = NULL;

        assert_true(node_labels_patch(v, control_plane, zone, &p) >= 0);
        if (!want) {
                assert_null(p);
                return;
        }
        assert_non_null(p);
        s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(s, want);
}

static void expect_patch(const NodeView *v, const char *zone, const char *want) {
        expect_patch_role(v, /* control_plane= */ false, zone, want);
}

static void test_patch_only_what_differs(void **state) {
        NodeView bare = {}, labelled = { .role_worker = (char *) "", .zone = (char *) "z1" },
                 wrong = { .role_worker = (char *) "yes", .zone = (char *) "z0" };

        expect_patch(&bare, NULL, "{\"labels\":{\"node-role.kubernetes.io/worker\":\"\"}}");
        expect_patch(
                &bare, "z1",
                "{\"labels\":{\"node-role.kubernetes.io/worker\":\"\",\"topology.kubernetes.io/zone\":\"z1\"}}");
        expect_patch(&labelled, "z1", NULL);
        expect_patch(&labelled, NULL, NULL); /* no zone file: an existing label stays */
        expect_patch(&labelled, "z2", "{\"labels\":{\"topology.kubernetes.io/zone\":\"z2\"}}");
        expect_patch(&wrong, "z0", "{\"labels\":{\"node-role.kubernetes.io/worker\":\"\"}}");
}

/* docs/node-protocol.md §2.2 step 3: control-plane instead of worker; like upstream, the other role label is
 * not removed. */
static void test_control_plane_role(void **state) {
        NodeView bare = {}, worker = { .role_worker = (char *) "" },
                 cp = { .role_control_plane = (char *) "", .zone = (char *) "z1" };

        expect_patch_role(&bare, /* control_plane= */ true, NULL,
                          "{\"labels\":{\"node-role.kubernetes.io/control-plane\":\"\"}}");
        expect_patch_role(
                &worker, /* control_plane= */ true, "z1",
                "{\"labels\":{\"node-role.kubernetes.io/control-plane\":\"\",\"topology.kubernetes.io/zone\":\"z1\"}}");
        expect_patch_role(&cp, /* control_plane= */ true, "z1", NULL);
        expect_patch_role(&cp, /* control_plane= */ false, "z1",
                          "{\"labels\":{\"node-role.kubernetes.io/worker\":\"\"}}");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_zone_file),
                cmocka_unit_test(test_patch_only_what_differs),
                cmocka_unit_test(test_control_plane_role),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
