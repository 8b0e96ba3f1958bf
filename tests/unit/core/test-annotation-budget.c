/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's annotations stay within their shares whatever the input: huge strings, many values,
 * bytes that need escaping or are not UTF-8; the shares together are a quarter of the API's limit. */
#include "core/annotation-budget.h"
#include "core/node-view.h"
#include "tests.h"
#include "util/utf8.h"

#define HUGE (2 * 1024 * 1024)

static bool ends_with_dots(const char *s) {
        size_t n = strlen(s);

        return n >= 3 && streq(s + n - 3, "...");
}

static const char *const keys[] = {
        NODE_ANNOTATION_PLAN,     NODE_ANNOTATION_FAILURE,     NODE_ANNOTATION_FAILED_REASON,
        NODE_ANNOTATION_PROGRESS, NODE_ANNOTATION_UPDATING_OS, NODE_ANNOTATION_CHECKSUM,
};

/* HUGE bytes of what makes JSON longest: quotes, control characters, invalid UTF-8, multibyte. */
static char *nasty(void) {
        static const char pattern[] = "\"\x01\\\xff"
                                      "\xc3\xa9x";
        char *s = malloc(HUGE + 1);

        assert_non_null(s);
        for (size_t i = 0; i < HUGE; i++)
                s[i] = pattern[i % (sizeof(pattern) - 1)];
        s[HUGE] = 0;
        return s;
}

static void test_shares_leave_room_for_others(void **state) {
        size_t sum = 0;

        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                sum += strlen(keys[i]) + annotation_budget(keys[i]);
        assert_int_equal(sum, annotation_budget_sum());
        assert_true(annotation_budget_sum() <= ANNOTATION_BUDGET_TOTAL);
        assert_true(ANNOTATION_BUDGET_TOTAL <= NODE_ANNOTATIONS_MAX / 4);
        assert_int_equal(annotation_budget("example.com/other"), ANNOTATION_BUDGET_OTHER);
}

static void test_string_within_share(void **state) {
        _cleanup_free_ char *big = nasty();

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_free_ char *s = annotation_fit_string(keys[i], big), *small = NULL;

                assert_non_null(s);
                assert_true(strlen(s) <= annotation_budget(keys[i]));
                assert_true(utf8_is_valid(s, strlen(s)));
                assert_true(ends_with_dots(s));
                small = annotation_fit_string(keys[i], "1.2.3");
                assert_string_equal(small, "1.2.3");
        }
}

static void test_json_long_strings_cut(void **state) {
        _cleanup_free_ char *big = nasty();
        /* jansson takes only UTF-8: the message as a producer would pass it, sanitised. */
        _cleanup_free_ char *clean = utf8_sanitize(big, HUGE, HUGE);
        _cleanup_(json_decrefp) json_t *failure =
                json_pack("{s:s, s:s, s:i, s:s}", "code", "FileApplyFailed", "class", "retriable", "attempt",
                          3, "message", clean);

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                _cleanup_free_ char *s = annotation_fit_json(keys[i], failure);
                _cleanup_(json_decrefp) json_t *back = NULL;

                assert_non_null(s);
                assert_true(strlen(s) <= annotation_budget(keys[i]));
                back = json_loads(s, 0, NULL);
                assert_non_null(back);
                /* Short values survive; only the long one is cut. */
                assert_string_equal(json_string_value(json_object_get(back, "code")), "FileApplyFailed");
                assert_int_equal(json_integer_value(json_object_get(back, "attempt")), 3);
                assert_true(ends_with_dots(json_string_value(json_object_get(back, "message"))));
        }
}

static void test_json_too_many_values(void **state) {
        _cleanup_(json_decrefp) json_t *items = json_array();
        _cleanup_free_ char *s = NULL;
        _cleanup_(json_decrefp) json_t *back = NULL;

        for (int i = 0; i < 100000; i++)
                assert_int_equal(json_array_append_new(
                                         items, json_pack("{s:s, s:i}", "action", "write-file", "i", i)),
                                 0);
        s = annotation_fit_json(NODE_ANNOTATION_PLAN, items);
        assert_non_null(s);
        assert_true(strlen(s) <= annotation_budget(NODE_ANNOTATION_PLAN));
        back = json_loads(s, 0, NULL);
        assert_non_null(back);
        assert_true(json_is_true(json_object_get(back, "truncated")));
        assert_true(json_integer_value(json_object_get(back, "bytes")) > 2 * 1024 * 1024);
}

static void test_json_that_fits_is_untouched(void **state) {
        _cleanup_(json_decrefp) json_t *v = json_pack("{s:s, s:[s]}", "phase", "Staging", "items", "x");
        _cleanup_free_ char *s = annotation_fit_json(NODE_ANNOTATION_PROGRESS, v);

        assert_string_equal(s, "{\"phase\":\"Staging\",\"items\":[\"x\"]}");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_shares_leave_room_for_others),
                cmocka_unit_test(test_string_within_share),
                cmocka_unit_test(test_json_long_strings_cut),
                cmocka_unit_test(test_json_too_many_values),
                cmocka_unit_test(test_json_that_fits_is_untouched),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
