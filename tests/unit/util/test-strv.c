/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/strv.h"

static void test_length_contains(void **state) {
        char *l[] = { (char *) "a", (char *) "bb", (char *) "", NULL };

        assert_int_equal(strv_length(NULL), 0);
        assert_int_equal(strv_length(l), 3);
        assert_int_equal(strv_length(&l[3]), 0);
        assert_true(strv_contains(l, "bb"));
        assert_true(strv_contains(l, ""));
        assert_false(strv_contains(l, "b"));
        assert_false(strv_contains(NULL, "a"));
}

static void test_copy_free(void **state) {
        char *l[] = { (char *) "x", (char *) "y", NULL };
        _cleanup_strv_free_ char **c = NULL, **e = NULL;
        char **n = (char **) 1;

        assert_int_equal(strv_copy(l, &c), 0);
        assert_int_equal(strv_length(c), 2);
        assert_ptr_not_equal(c[0], l[0]);
        assert_string_equal(c[0], "x");
        assert_string_equal(c[1], "y");
        assert_null(c[2]);

        /* NULL stays NULL; an empty list stays an empty list. */
        assert_int_equal(strv_copy(NULL, &n), 0);
        assert_null(n);
        assert_int_equal(strv_copy(&l[2], &e), 0);
        assert_non_null(e);
        assert_null(e[0]);

        assert_null(strv_free(NULL));
        c = strv_free(c);
        assert_null(c);
}

static void test_consume(void **state) {
        _cleanup_strv_free_ char **l = NULL;

        assert_int_equal(strv_consume(&l, strdup("a")), 0);
        assert_int_equal(strv_consume(&l, strdup("b")), 0);
        assert_int_equal(strv_consume(&l, NULL), -ENOMEM);
        assert_int_equal(strv_length(l), 2);
        assert_string_equal(l[1], "b");
        assert_null(l[2]);
}

static void test_uniq(void **state) {
        _cleanup_strv_free_ char **l = NULL;
        static const char *const in[] = { "b", "a", "b", "c", "a", "b", NULL };

        assert_int_equal(strv_uniq(NULL), 0);
        for (size_t i = 0; in[i]; i++)
                assert_int_equal(strv_consume(&l, strdup(in[i])), 0);
        assert_int_equal(strv_uniq(l), 0);
        assert_int_equal(strv_length(l), 3);
        assert_string_equal(l[0], "b");
        assert_string_equal(l[1], "a");
        assert_string_equal(l[2], "c");
        assert_null(l[3]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_length_contains),
                cmocka_unit_test(test_copy_free),
                cmocka_unit_test(test_consume),
                cmocka_unit_test(test_uniq),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
