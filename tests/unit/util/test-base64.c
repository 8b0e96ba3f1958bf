/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>

#include "tests.h"
#include "util/base64.h"

static void check(const char *text, size_t max, int want, const char *plain) {
        _cleanup_free_ char *out = NULL;
        size_t size = 0;

        assert_int_equal(base64_decode(text, max, &out, &size), want);
        if (want < 0)
                return;
        assert_int_equal(size, strlen(plain));
        assert_memory_equal(out, plain, size);
}

/* SIZE_MAX is "no limit" (osc-runner decodes a secretRef file's Secret data with it): it must not wrap
 * around and refuse every value longer than four characters. Found by test-secrets-never-leak. */
static void test_no_limit(void **state) {
        check("aGk=", SIZE_MAX, 0, "hi");
        check("aXBhLW1hcmtlci0wMTIzNDU2Nzg5YWJjZGVm", SIZE_MAX, 0, "ipa-marker-0123456789abcdef");
        check("aXBhLW1hcmtlci0wMTIzNDU2Nzg5YWJjZGVm", SIZE_MAX - 1, 0, "ipa-marker-0123456789abcdef");
}

static void test_limits(void **state) {
        check("", 0, 0, "");
        check("aGk=", 2, 0, "hi");
        check("aGk=", 1, -EFBIG, NULL);
        check("aGVsbG8h", 6, 0, "hello!");
        check("aGVsbG8h", 5, -EFBIG, NULL);
        check("aGk", SIZE_MAX, -EBADMSG, NULL);
        check("a!k=", SIZE_MAX, -EBADMSG, NULL);
}

static void check_full(const char *text, size_t n, bool strict, int want, const char *plain) {
        _cleanup_free_ char *out = NULL;
        size_t size = 0;

        assert_int_equal(base64_decode_full(text, n, strict, SIZE_MAX, &out, &size), want);
        if (want < 0)
                return;
        assert_int_equal(size, strlen(plain));
        assert_memory_equal(out, plain, size + 1); /* NUL-terminated */
}

/* Strict is Go's StdEncoding: what EVP_DecodeBlock alone lets through must be refused. "====" used
 * to decode to -1 bytes in base64_decode() (every trailing '=' was subtracted from EVP's count) and
 * wrote before the buffer with max = SIZE_MAX (osc-runner's secretRef data). */
static void test_strict(void **state) {
        check("====", SIZE_MAX, -EBADMSG, NULL);
        check("aGk=====", SIZE_MAX, -EBADMSG, NULL);
        check("A===", SIZE_MAX, -EBADMSG, NULL);
        check("aG=k", SIZE_MAX, -EBADMSG, NULL);     /* '=' inside */
        check("aGk=aGk=", SIZE_MAX, -EBADMSG, NULL); /* data after padding */
        check(" aGk=", SIZE_MAX, -EBADMSG, NULL);
        check("aGk= ", SIZE_MAX, -EBADMSG, NULL);
        check("aGVs\nbG8h", SIZE_MAX, -EBADMSG, NULL);
        check("aGVsbG8", SIZE_MAX, -EBADMSG, NULL);  /* padding is not optional */
        check("aGVsbG8-", SIZE_MAX, -EBADMSG, NULL); /* no URL alphabet */
        check("aGVsbG8_", SIZE_MAX, -EBADMSG, NULL);
        check("aGVsbA==", SIZE_MAX, 0, "hell");
        check("aGVsbG8=", SIZE_MAX, 0, "hello");
        check("+/+/", SIZE_MAX, 0, "\xfb\xff\xbf");
        check_full("aGk=\0\0\0\0", 8, /* strict= */ true, -EBADMSG, NULL); /* a JSON string's NUL */
        check_full("aGk=", 4, /* strict= */ true, 0, "hi");
        check_full("aGk=junk", 4, /* strict= */ true, 0, "hi"); /* only `n` bytes are read */
}

/* Not strict (kubeconfig's -data fields): blanks and line breaks anywhere are skipped, the rest is
 * as strict. */
static void test_lenient(void **state) {
        static const char folded[] = "  aGVs\r\nbG8h\n\taGk=\n";

        check_full(folded, strlen(folded), /* strict= */ false, 0, "hello!hi");
        check_full(folded, strlen(folded), /* strict= */ true, -EBADMSG, NULL);
        check_full(" \n", 2, /* strict= */ false, 0, "");
        check_full("aG=k", 4, /* strict= */ false, -EBADMSG, NULL);
        check_full("aG k", 4, /* strict= */ false, -EBADMSG, NULL); /* three characters are left */
        check_full("aGk= =", 6, /* strict= */ false, -EBADMSG, NULL);
        check_full("aG\vk=", 5, /* strict= */ false, -EBADMSG, NULL); /* only space, tab, CR, LF */
}

static void test_roundtrip(void **state) {
        for (size_t n = 0; n < 64; n++) {
                _cleanup_free_ char *enc = NULL, *dec = NULL;
                unsigned char data[64];
                size_t size;

                for (size_t i = 0; i < n; i++)
                        data[i] = (unsigned char) (i * 37 + n);
                assert_int_equal(base64_encode(data, n, false, &enc), 0);
                assert_int_equal(base64_decode(enc, n, &dec, &size), 0);
                assert_int_equal(size, n);
                if (n > 0)
                        assert_memory_equal(dec, data, n);
                if (n > 0) {
                        _cleanup_free_ char *again = NULL;
                        assert_int_equal(base64_decode(enc, n - 1, &again, &size), -EFBIG);
                }
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_limit),  cmocka_unit_test(test_limits),
                cmocka_unit_test(test_strict),    cmocka_unit_test(test_lenient),
                cmocka_unit_test(test_roundtrip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
