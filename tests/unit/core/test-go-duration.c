/* SPDX-License-Identifier: Apache-2.0 */
#include "core/go-duration.h"
#include "tests.h"

static void test_parse(void **state) {
        static const struct {
                const char *in;
                uint64_t usec;
        } good[] = {
                { "0", 0 },
                { "-0", 0 },
                { "+5s", 5 * USEC_PER_SEC },
                { "0s", 0 },
                { "300ms", 300 * USEC_PER_MSEC },
                { "1.5h", 5400 * USEC_PER_SEC },
                { "2h45m", (2 * 3600 + 45 * 60) * USEC_PER_SEC },
                { "1m30s", 90 * USEC_PER_SEC },
                { "3m27.5s", 207500 * USEC_PER_MSEC },
                { ".5s", 500 * USEC_PER_MSEC },
                { "5.s", 5 * USEC_PER_SEC },
                { "2us", 2 },
                { "2\xc2\xb5s", 2 },
                { "2\xce\xbcs", 2 },
                { "1500ns", 1 },
                { "1s1ms1us", USEC_PER_SEC + USEC_PER_MSEC + 1 },
        };
        static const struct {
                const char *in;
                int error;
        } bad[] = {
                { "", -EINVAL },     { "5", -EINVAL },
                { "s", -EINVAL },    { ".s", -EINVAL },
                { "5x", -EINVAL },   { "5 s", -EINVAL },
                { "1d", -EINVAL },   { "-5s", -ERANGE },
                { "++5s", -EINVAL }, { "99999999999999999999h", -ERANGE },
                { "5s ", -EINVAL },
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                uint64_t v = 42;
                assert_int_equal(go_duration_parse(good[i].in, &v), 0);
                assert_int_equal(v, good[i].usec);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                uint64_t v = 42;
                assert_int_equal(go_duration_parse(bad[i].in, &v), bad[i].error);
                assert_int_equal(v, 42);
        }
}

static void test_format(void **state) {
        char b[GO_DURATION_STR_MAX];

        assert_string_equal(go_duration_format_seconds(b, sizeof(b), 0), "0s");
        assert_string_equal(go_duration_format_seconds(b, sizeof(b), 12 * USEC_PER_SEC + 999999), "12s");
        assert_string_equal(go_duration_format_seconds(b, sizeof(b), 300 * USEC_PER_SEC), "5m0s");
        assert_string_equal(go_duration_format_seconds(b, sizeof(b), 3723 * USEC_PER_SEC), "1h2m3s");
}

static void test_reconciliation_delay(void **state) {
        uint64_t d = 0;

        assert_int_equal(reconciliation_delay_update(NULL, &d), -ENODATA);
        assert_int_equal(d, 0);
        assert_int_equal(reconciliation_delay_update("1m30s", &d), 0);
        assert_int_equal(d, 90 * USEC_PER_SEC);
        assert_int_equal(reconciliation_delay_update("soon", &d), -EINVAL); /* keeps the previous */
        assert_int_equal(d, 90 * USEC_PER_SEC);
        assert_int_equal(reconciliation_delay_update("-5s", &d), -EINVAL);
        assert_int_equal(d, 90 * USEC_PER_SEC);
        assert_int_equal(reconciliation_delay_update(NULL, &d), -ENODATA);
        assert_int_equal(d, 90 * USEC_PER_SEC);
        assert_int_equal(reconciliation_delay_update("0", &d), 0);
        assert_int_equal(d, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_format),
                cmocka_unit_test(test_reconciliation_delay),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
