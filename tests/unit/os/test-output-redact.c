/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "os/output-redact.h"
#include "tests.h"

static char *line(OutputRedact *r, const char *s) {
        char *out = NULL;

        assert_int_equal(output_redact_line(r, s, strlen(s), &out), 0);
        return out;
}

static void test_lines(void **state) {
        static const struct {
                const char *in, *out;
        } table[] = {
                { "plain progress 42%", "plain progress 42%" },
                { "Authorization: Bearer eyAbC.123-x", "Authorization: Bearer [redacted]" },
                { "> authorization: basic dXNlcjpwdw==", "> authorization: basic [redacted]" },
                { "fetching https://builder:s3cr3t@mirror.example/os.img ok",
                  "fetching https://[redacted]@mirror.example/os.img ok" },
                { "git@github.com:x/y and https://host/path@v1",
                  "git@github.com:x/y and https://host/path@v1" },
                { "password=hunter2 next", "password=[redacted] next" },
                { "--client-secret=abc --verbose", "--client-secret=[redacted] --verbose" },
                { "{\"token\": \"abc.def\", \"n\": 1}", "{\"token\": \"[redacted]\", \"n\": 1}" },
                { "AWS_SECRET_ACCESS_KEY='xyz'", "AWS_SECRET_ACCESS_KEY='[redacted]'" },
                { "api_key: k-1; other", "api_key: [redacted]; other" },
                { "join with abcdef.0123456789abcdef now", "join with [redacted] now" },
                { "sa eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl end", "sa [redacted] end" },
                /* near misses stay */
                { "tokens refreshed: 3", "tokens refreshed: 3" },
                { "abcdef.0123456789abcdefg", "abcdef.0123456789abcdefg" },
                { "version 1.2.3 and eyJ alone", "version 1.2.3 and eyJ alone" },
                { "", "" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                OutputRedact r = {};
                _cleanup_free_ char *out = line(&r, table[i].in);

                assert_non_null(out);
                if (!streq(out, table[i].out))
                        fail_msg("%s: got \"%s\", want \"%s\"", table[i].in, out, table[i].out);
                assert_false(r.in_private_key);
        }
}

static void test_private_key_block(void **state) {
        OutputRedact r = {};
        _cleanup_free_ char *begin = line(&r, "-----BEGIN RSA PRIVATE KEY-----");
        char *body = line(&r, "MIIEowIBAAKCAQEAmarker");
        char *end = line(&r, "-----END RSA PRIVATE KEY-----");
        _cleanup_free_ char *after = line(&r, "after");

        assert_string_equal(begin, OUTPUT_REDACTED_KEY);
        assert_null(body);
        assert_null(end);
        assert_string_equal(after, "after");
        assert_false(r.in_private_key);
}

static void test_text(void **state) {
        _cleanup_free_ char *t =
                output_redact_text("a\npassword: x\n-----BEGIN PRIVATE KEY-----\nsecretbody\n"
                                   "-----END PRIVATE KEY-----\nb\n");
        _cleanup_free_ char *unterminated =
                output_redact_text("x\n-----BEGIN EC PRIVATE KEY-----\nbody to the end");
        _cleanup_free_ char *empty = output_redact_text(NULL);

        assert_string_equal(t, "a\npassword: [redacted]\n[redacted private key]\nb\n");
        assert_string_equal(unterminated, "x\n[redacted private key]\n");
        assert_string_equal(empty, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lines),
                cmocka_unit_test(test_private_key_block),
                cmocka_unit_test(test_text),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
