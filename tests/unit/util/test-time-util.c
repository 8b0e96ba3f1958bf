/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/time-util.h"

static void test_parse_valid(void **state) {
        static const struct {
                const char *in;
                uint64_t usec;
        } table[] = {
                { "90s", 90 * USEC_PER_SEC },
                { "5m", 300 * USEC_PER_SEC },
                { "1h30m", 5400 * USEC_PER_SEC },
                { "250ms", 250 * USEC_PER_MSEC },
                { "1h1m1s1ms", 3661 * USEC_PER_SEC + USEC_PER_MSEC },
                { "0s", 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                uint64_t u = 1;
                assert_int_equal(parse_duration(table[i].in, &u), 0);
                assert_int_equal(u, table[i].usec);
        }
}

static void test_parse_invalid(void **state) {
        static const char *const bad[] = { "", "-5s", "banana", "5", "5x", "1.5h", "h", "5 m", "s5" };
        uint64_t u = 42;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(parse_duration(bad[i], &u), -EINVAL);
                assert_int_equal(u, 42);
        }
        assert_int_equal(parse_duration("99999999999999999999s", &u), -ERANGE);
        assert_int_equal(parse_duration(NULL, &u), -EINVAL);
}

static void test_format(void **state) {
        char buf[DURATION_MAX_STR];

        assert_string_equal(format_duration(buf, sizeof(buf), 0), "0s");
        assert_string_equal(format_duration(buf, sizeof(buf), 5400 * USEC_PER_SEC), "1h30m");
        assert_string_equal(format_duration(buf, sizeof(buf), 90 * USEC_PER_SEC), "1m30s");
        assert_string_equal(format_duration(buf, sizeof(buf), 250 * USEC_PER_MSEC), "250ms");
}

static void test_roundtrip(void **state) {
        static const char *const in[] = { "1h30m", "10m", "40s", "1h1m1s1ms" };
        char buf[DURATION_MAX_STR];
        uint64_t u;

        for (size_t i = 0; i < ELEMENTSOF(in); i++) {
                assert_int_equal(parse_duration(in[i], &u), 0);
                assert_string_equal(format_duration(buf, sizeof(buf), u), in[i]);
        }
}

static void test_rfc3339(void **state) {
        char buf[RFC3339_MAX];

        assert_string_equal(format_rfc3339(buf, 0, false), "1970-01-01T00:00:00Z");
        assert_string_equal(format_rfc3339(buf, 1700000000123456ULL, false), "2023-11-14T22:13:20Z");
        assert_string_equal(format_rfc3339(buf, 1700000000123456ULL, true), "2023-11-14T22:13:20.123456Z");
        assert_string_equal(format_rfc3339(buf, 1700000000000042ULL, true), "2023-11-14T22:13:20.000042Z");
}

static void test_clocks(void **state) {
        uint64_t a, b;

        a = clock_now_usec(CLOCK_MONOTONIC);
        b = clock_now_usec(CLOCK_MONOTONIC);
        assert_true(a > 0 && b >= a);
        /* Some time after 2020-01-01. */
        assert_true(clock_now_usec(CLOCK_REALTIME) > 1577836800ULL * USEC_PER_SEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_valid), cmocka_unit_test(test_parse_invalid),
                cmocka_unit_test(test_format),      cmocka_unit_test(test_roundtrip),
                cmocka_unit_test(test_rfc3339),     cmocka_unit_test(test_clocks),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
