/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/string-util.h"

static char *fmt(const char *format, ...) _printf_(1, 2);
static char *fmt(const char *format, ...) {
        va_list ap;
        char *s;

        va_start(ap, format);
        s = strdup_vprintf(format, ap);
        va_end(ap);
        return s;
}

static void test_strdup_vprintf(void **state) {
        _cleanup_free_ char *a = fmt("%s-%d", "x", 5), *b = fmt("%s", "");

        assert_string_equal(a, "x-5");
        assert_string_equal(b, "");
}

static int replace(char **s, const char *format, ...) _printf_(2, 3);
static int replace(char **s, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = free_and_vprintf(s, format, ap);
        va_end(ap);
        return r;
}

static void test_free_and_vprintf(void **state) {
        _cleanup_free_ char *s = NULL;

        assert_int_equal(replace(&s, "waiting for %s", "n1"), 0);
        assert_string_equal(s, "waiting for n1");
        assert_int_equal(replace(&s, "%s: %d%%", s, 40), 0); /* the old text may be an argument */
        assert_string_equal(s, "waiting for n1: 40%");
}

static void test_extend(void **state) {
        _cleanup_free_ char *s = NULL, *e = strdup("");

        assert_int_equal(strextendf_with_separator(&s, "; ", "%s: failed", "a.service"), 0);
        assert_string_equal(s, "a.service: failed");
        assert_int_equal(strextendf_with_separator(&s, "; ", "%s: stuck for %ds", "b.service", 3), 0);
        assert_string_equal(s, "a.service: failed; b.service: stuck for 3s");
        assert_int_equal(strextendf_with_separator(&s, NULL, "!"), 0);
        assert_string_equal(s, "a.service: failed; b.service: stuck for 3s!");
        /* nothing before: no separator */
        assert_int_equal(strextendf_with_separator(&e, ", ", "first"), 0);
        assert_string_equal(e, "first");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_strdup_vprintf),
                cmocka_unit_test(test_free_and_vprintf),
                cmocka_unit_test(test_extend),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
