/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "oci/digest.h"
#include "tests.h"

#define EMPTY_SHA256 "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define ABC_SHA256 "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void test_parse_format_roundtrip(void **state) {
        char buf[DIGEST_STRING_MAX], hex[2 * DIGEST_SHA256_SIZE + 1];
        Digest d;

        assert_int_equal(digest_parse(ABC_SHA256, &d), 0);
        assert_string_equal(digest_format(&d, buf), ABC_SHA256);
        assert_string_equal(digest_format_hex(&d, hex), &ABC_SHA256[7]);
}

static void test_parse_rejects(void **state) {
        static const char *const bad[] = {
                "",
                "sha256",
                "sha256:",
                "sha256:abc",
                "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
                "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015adXX",
                "sha256:zz7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                ":ba7816bf",
                "SHA256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        };
        Digest d = { .sha256 = { 42 } };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(digest_parse(bad[i], &d), -EINVAL);
        assert_int_equal(digest_parse("sha512:abcd", &d), -EPROTONOSUPPORT);
        assert_int_equal(digest_parse(NULL, &d), -EINVAL);
        assert_int_equal(d.sha256[0], 42); /* untouched on failure */
}

static void test_buffer_and_stream(void **state) {
        _cleanup_(digest_context_freep) DigestContext *c = NULL;
        char buf[DIGEST_STRING_MAX];
        Digest d, e;

        assert_int_equal(digest_buffer("", 0, &d), 0);
        assert_string_equal(digest_format(&d, buf), EMPTY_SHA256);

        assert_int_equal(digest_context_new(&c), 0);
        assert_int_equal(digest_context_update(c, "a", 1), 0);
        assert_int_equal(digest_context_update(c, "bc", 2), 0);
        assert_int_equal(digest_context_size(c), 3);
        assert_int_equal(digest_context_final(c, &d), 0);
        assert_string_equal(digest_format(&d, buf), ABC_SHA256);

        /* final resets: the context is reusable */
        assert_int_equal(digest_context_size(c), 0);
        assert_int_equal(digest_context_update(c, "xyz", 3), 0);
        assert_int_equal(digest_context_reset(c), 0);
        assert_int_equal(digest_context_update(c, "abc", 3), 0);
        assert_int_equal(digest_context_final(c, &e), 0);
        assert_true(digest_equal(&d, &e));
}

static void test_verify_message(void **state) {
        _cleanup_free_ char *msg = NULL;
        Digest a, b;

        assert_int_equal(digest_parse(ABC_SHA256, &a), 0);
        assert_int_equal(digest_parse(EMPTY_SHA256, &b), 0);
        assert_int_equal(digest_verify(&a, &a, &msg), 0);
        assert_null(msg);
        assert_int_equal(digest_verify(&a, &b, &msg), -EBADMSG);
        assert_string_equal(msg, "digest mismatch: expected " ABC_SHA256 ", got " EMPTY_SHA256);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_format_roundtrip),
                cmocka_unit_test(test_parse_rejects),
                cmocka_unit_test(test_buffer_and_stream),
                cmocka_unit_test(test_verify_message),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
