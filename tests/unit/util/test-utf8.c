/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/utf8.h"

static void test_validity(void **state) {
        static const struct {
                const char *s;
                bool valid;
        } table[] = {
                { "plain", true },
                { "gr\xc3\xbc\xc3\x9f", true }, /* grüß */
                { "\xe2\x82\xac", true },       /* € */
                { "\xf0\x9f\x98\x80", true },   /* U+1F600 */
                { "\xc3", false },              /* truncated */
                { "\xc0\xaf", false },          /* overlong '/' */
                { "\xe0\x80\xaf", false },      /* overlong */
                { "\xed\xa0\x80", false },      /* surrogate */
                { "\xf4\x90\x80\x80", false },  /* > U+10FFFF */
                { "\xff", false },
                { "a\x80", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (utf8_is_valid(table[i].s, strlen(table[i].s)) != table[i].valid)
                        fail_msg("entry %zu", i);
}

static void test_sanitize(void **state) {
        static const char nul[] = "a\0b";
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL;

        a = utf8_sanitize("ok\n\ttext\r\x01", 10, 100);
        assert_string_equal(a, "ok\n\ttext  ");
        b = utf8_sanitize("bad\xff\xc3", 5, 100);
        assert_string_equal(b, "bad??");
        c = utf8_sanitize(nul, 3, 100);
        assert_string_equal(c, "a?b");
        /* cut on a character boundary with "..." and never above the limit */
        d = utf8_sanitize("abcdefghij", 10, 8);
        assert_string_equal(d, "abcde...");
        e = utf8_sanitize("ab\xe2\x82\xac\xe2\x82\xac", 8, 7);
        assert_string_equal(e, "ab...");
        assert_true(strlen(e) <= 7);
        f = utf8_sanitize("abcdefgh", 8, 8);
        assert_string_equal(f, "abcdefgh");
}

static void test_quote(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL;

        a = utf8_quote("a\"b\\c\nd\x01", 8);
        assert_string_equal(a, "\"a\\\"b\\\\c\\nd\\x01\"");
        b = utf8_quote("\xc3\xbc\xff", 3);
        assert_string_equal(b, "\"\xc3\xbc\\xff\"");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_validity),
                cmocka_unit_test(test_sanitize),
                cmocka_unit_test(test_quote),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
