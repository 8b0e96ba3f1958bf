/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/version.h"
#include "tests.h"

#define ERR (-EINVAL)

static void test_compare_table(void **state) {
        static const struct {
                const char *a;
                VersionOp op;
                const char *b;
                int expected; /* 1, 0 or ERR */
        } table[] = {
                /* docs/node-protocol.md §3.2 examples and scenario 28 (IsOsVersionUpToDate: a = current, b =
                 * desired) */
                { "1.2", VERSION_OP_EQ, "1.2.0", 1 },
                { "1.2.0-foo.12", VERSION_OP_EQ, "1.2.0", 1 },
                { "1.1.0", VERSION_OP_EQ, "1.2.0", 0 },
                { "1.2.0", VERSION_OP_EQ, "invalid", ERR },
                { "1592.6.7", VERSION_OP_EQ, "1592", 1 }, /* "= 1592" is ~1592 */
                { "1592.0.0", VERSION_OP_EQ, "1592", 1 },
                { "1593.0.0", VERSION_OP_EQ, "1592", 0 },
                { "1592.6.3", VERSION_OP_EQ, "1592.6", 1 }, /* "= 1592.6" is ~1592.6 */
                { "1592.7.0", VERSION_OP_EQ, "1592.6", 0 },
                { "1592.5.9", VERSION_OP_EQ, "1592.6", 0 },
                { "1592.6.5", VERSION_OP_LE, "1592.6", 1 }, /* dirty <= ignores patch */
                { "1592.7.0", VERSION_OP_LE, "1592.6", 0 },
                { "1592.6.5", VERSION_OP_LE, "1592.6.4", 0 },
                { "15.03", VERSION_OP_EQ, "15.3.0", 1 }, /* leading zeros */
                { "1632.0.0", VERSION_OP_GE, "1443.8.0", 1 },
                { "15.3.20220818", VERSION_OP_EQ, "15.3.20220818", 1 },
                { "15", VERSION_OP_EQ, "15.3.20220818", 0 }, /* SUSE "15 SP3" never matches */
                { "1.2.3.4", VERSION_OP_EQ, "1.2.3", ERR },  /* 4th part */
                { "1.2.3", VERSION_OP_EQ, "1.2.3.4", ERR },
                { "", VERSION_OP_EQ, "1.2.3", ERR },
                { "1.2.3", VERSION_OP_EQ, "", ERR }, /* improper constraint */
                { "1.2.3", VERSION_OP_EQ, "   ", ERR },
                /* normalisation: every v deleted, cut at -, + and ~ */
                { "v1.2.3", VERSION_OP_EQ, "1.2.3", 1 },
                { "1.2.3", VERSION_OP_EQ, "v1.2.3", 1 },
                { "1v.2v.3v", VERSION_OP_EQ, "1.2.3", 1 },
                { "1.2.3+build.7", VERSION_OP_EQ, "1.2.3", 1 },
                { "1.2.3~rc1", VERSION_OP_EQ, "1.2.3", 1 },
                { "1.2.3", VERSION_OP_EQ, "1.2.3-rc.1", 1 },
                { "-1.2.3", VERSION_OP_EQ, "1.2.3", ERR }, /* cut to "" */
                { "V1.2.3", VERSION_OP_EQ, "1.2.3", ERR }, /* only lower-case v goes */
                /* wildcards are accepted on the reference side only */
                { "1.5.0", VERSION_OP_EQ, "1.x", 1 },
                { "2.0.0", VERSION_OP_EQ, "1.*", 0 },
                { "1.2.9", VERSION_OP_EQ, "1.2.X", 1 },
                { "5.0.0", VERSION_OP_EQ, "x", 1 },
                { "1.x", VERSION_OP_EQ, "1.2", ERR },
                { "1.2.3", VERSION_OP_EQ, "1x", ERR },
                /* whitespace: tolerated around the reference, never in the version */
                { "1.2.3", VERSION_OP_EQ, " 1.2.3 ", 1 },
                { " 1.2.3", VERSION_OP_EQ, "1.2.3", ERR },
                { "1.2.3", VERSION_OP_EQ, "1.2.3 1.2.4", ERR },
                { "1.2.3", VERSION_OP_EQ, "1.2.3,1.2.4", ERR },
                /* malformed */
                { "1..2", VERSION_OP_EQ, "1.2", ERR },
                { "1.2.", VERSION_OP_EQ, "1.2", ERR },
                { ".1", VERSION_OP_EQ, "1", ERR },
                { "1.2.3", VERSION_OP_EQ, "1..3", ERR },
                { "abc", VERSION_OP_EQ, "1", ERR },
                { "18446744073709551615", VERSION_OP_EQ, "18446744073709551615", 1 },
                { "18446744073709551616", VERSION_OP_EQ, "1", ERR },
                { "1", VERSION_OP_EQ, "18446744073709551616", ERR },
                /* minVersionForUpdate (docs/contract.md §5: current >= min) and downgrade checks */
                { "1592.6", VERSION_OP_GE, "1592.4", 1 },
                { "1592.4", VERSION_OP_GE, "1592.4", 1 },
                { "1592.3.9", VERSION_OP_GE, "1592.4", 0 },
                { "1592", VERSION_OP_GE, "1592.0.1", 0 },
                { "1.2.0", VERSION_OP_LT, "1.3.0", 1 },
                { "1.3.0", VERSION_OP_LT, "1.3", 0 },
                /* the other operators, Masterminds' dirty rules */
                { "11.1.0", VERSION_OP_GT, "11", 0 },
                { "12.0.0", VERSION_OP_GT, "11", 1 },
                { "11.2.1", VERSION_OP_GT, "11.1", 1 },
                { "11.1.5", VERSION_OP_GT, "11.1", 0 },
                { "11.1.5", VERSION_OP_GT, "11.1.4", 1 },
                { "1.2.3", VERSION_OP_NE, "1.2", 0 },
                { "1.3.0", VERSION_OP_NE, "1.2", 1 },
                { "1.2.3", VERSION_OP_NE, "1.2.4", 1 },
                { "1.2.3", VERSION_OP_NE, "1.2.3", 0 },
                { "1.9.9", VERSION_OP_NE, "1", 0 },
                { "1.2.4", VERSION_OP_LE, "1.2.3", 0 },
                { "1.2.3", VERSION_OP_LE, "1.2.3", 1 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                const char *why = NULL;
                int r = version_compare(table[i].a, table[i].op, table[i].b, &why);

                if (r != table[i].expected)
                        fail_msg("\"%s\" %s \"%s\": got %d, expected %d (%s)", table[i].a,
                                 version_op_to_string(table[i].op), table[i].b, r, table[i].expected,
                                 strempty(why));
                if (r < 0)
                        assert_non_null(why);
        }
}

static void test_error_texts(void **state) {
        const char *why = NULL;

        assert_int_equal(version_compare("1.2.0", VERSION_OP_EQ, "invalid", &why), -EINVAL);
        assert_non_null(strstr(why, "improper constraint"));
        assert_int_equal(version_compare("invalid", VERSION_OP_EQ, "1.2.0", &why), -EINVAL);
        assert_non_null(strstr(why, "invalid semantic version"));
        /* the reference is checked first, as Masterminds builds the constraint first */
        assert_int_equal(version_compare("invalid", VERSION_OP_EQ, "bad", &why), -EINVAL);
        assert_non_null(strstr(why, "improper constraint"));
        assert_int_equal(version_compare("1", VERSION_OP_EQ, "1", NULL), 1);
}

static void test_parse_and_normalize(void **state) {
        static const struct {
                const char *in;
                uint64_t major, minor, patch;
        } ok[] = {
                { "1", 1, 0, 0 },         { "1.31", 1, 31, 0 },
                { "v1.31.4", 1, 31, 4 },  { "1.31.4-gke.100", 1, 31, 4 },
                { "007.08.09", 7, 8, 9 },
        };
        char too_long[VERSION_STRING_MAX + 2];

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                Version v;
                assert_int_equal(version_parse(ok[i].in, &v, NULL), 0);
                assert_true(v.major == ok[i].major && v.minor == ok[i].minor && v.patch == ok[i].patch);
        }

        memset(too_long, '1', sizeof(too_long) - 1);
        too_long[sizeof(too_long) - 1] = '\0';
        {
                Version v = { 9, 9, 9 };
                const char *why = NULL;
                assert_int_equal(version_parse(too_long, &v, &why), -EINVAL);
                assert_int_equal(v.major, 9); /* untouched on failure */
                assert_non_null(why);
        }
        {
                _cleanup_free_ char *n = NULL;
                assert_int_equal(version_normalize("v1.2v.3-rc.1+x", &n), 0);
                assert_string_equal(n, "1.2.3");
        }
        {
                Version a = { 1, 2, 3 }, b = { 1, 10, 0 };
                assert_int_equal(version_cmp(&a, &b), -1);
                assert_int_equal(version_cmp(&b, &a), 1);
                assert_int_equal(version_cmp(&a, &a), 0);
        }
}

static void test_kubelet_classification(void **state) {
        static const struct {
                const char *from, *to;
                KubeletChange expected;
        } table[] = {
                { "1.31.4", "1.31.5", KUBELET_CHANGE_PATCH },
                { "1.31", "1.32", KUBELET_CHANGE_MINOR },
                { "1.31.3", "1.32.1", KUBELET_CHANGE_MINOR },
                { "v1.31.4", "1.31.4", KUBELET_CHANGE_NONE },
                { "1.31.4", "v1.31.4-gke.7", KUBELET_CHANGE_NONE },
                { "1.32.1", "1.31.9", KUBELET_CHANGE_DOWNGRADE },
                { "1.31.5", "1.31.4", KUBELET_CHANGE_DOWNGRADE },
                { "1.30.1", "1.32.0", KUBELET_CHANGE_SKIP },
                { "1.31.0", "2.0.0", KUBELET_CHANGE_SKIP },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                KubeletChange c = _KUBELET_CHANGE_INVALID;
                assert_int_equal(version_classify_kubelet(table[i].from, table[i].to, &c, NULL), 0);
                if (c != table[i].expected)
                        fail_msg("%s -> %s: %s, expected %s", table[i].from, table[i].to,
                                 kubelet_change_to_string(c), kubelet_change_to_string(table[i].expected));
        }

        {
                KubeletChange c = KUBELET_CHANGE_NONE;
                const char *why = NULL;
                assert_int_equal(version_classify_kubelet("adopted", "1.31.2", &c, &why), -EINVAL);
                assert_non_null(why);
                assert_int_equal(version_classify_kubelet("1.31.2", "1.2.3.4", &c, NULL), -EINVAL);
        }
}

static void test_normalize_kubelet(void **state) {
        static const struct {
                const char *in, *out;
        } ok[] = {
                { "v1.31.2", "1.31.2" },
                { "1.31.2", "1.31.2" },
                { "V1.31.2", "1.31.2" },
                { "v1.31.2-gke.100", "1.31.2-gke.100" },
                { "1.31.2+build_7", "1.31.2+build_7" },
        };
        static const char *const bad[] = {
                "", "v", "..", "../1.2", "1.2/3", "v.1", "1.2 3", "1.2\n", "x1.2", "vv1.2", "1.2:3",
        };

        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(version_normalize_kubelet(ok[i].in, &out), 0);
                assert_string_equal(out, ok[i].out);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *out = NULL;
                if (version_normalize_kubelet(bad[i], &out) != -EINVAL)
                        fail_msg("\"%s\" accepted", bad[i]);
                assert_null(out);
        }
        assert_true(version_is_safe_name("1592.7"));
        assert_true(version_is_safe_name("15.3.20220818"));
        assert_false(version_is_safe_name("v1592.7"));
        assert_false(version_is_safe_name("1592/../x"));
        assert_false(version_is_safe_name(""));
        assert_false(version_is_safe_name(NULL));
}

static void test_names(void **state) {
        for (VersionOp op = 0; op < _VERSION_OP_MAX; op++) {
                assert_non_null(version_op_to_string(op));
                assert_int_equal(version_op_from_string(version_op_to_string(op)), op);
        }
        for (KubeletChange c = 0; c < _KUBELET_CHANGE_MAX; c++) {
                assert_non_null(kubelet_change_to_string(c));
                assert_int_equal(kubelet_change_from_string(kubelet_change_to_string(c)), c);
        }
        assert_null(version_op_to_string(_VERSION_OP_MAX));
        assert_int_equal(version_op_from_string("=="), -EINVAL);
        assert_int_equal(version_op_from_string(NULL), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_compare_table),       cmocka_unit_test(test_error_texts),
                cmocka_unit_test(test_parse_and_normalize), cmocka_unit_test(test_kubelet_classification),
                cmocka_unit_test(test_normalize_kubelet),   cmocka_unit_test(test_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
