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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_limit),
                cmocka_unit_test(test_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
