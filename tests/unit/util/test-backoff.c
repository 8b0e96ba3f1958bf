/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/backoff.h"

#define SEC USEC_PER_SEC
#define MSEC USEC_PER_MSEC

/* random() yields 31 bits; the jitter wants the full 32-bit range. */
static uint32_t rand32(void) {
        return ((uint32_t) random() << 16) ^ (uint32_t) random();
}

static void test_steps_without_jitter(void **state) {
        static const uint64_t expected[] = {
                800 * MSEC,   1600 * MSEC,  3200 * MSEC, 6400 * MSEC,
                12800 * MSEC, 25600 * MSEC, 30 * SEC,    30 * SEC,
        };
        Backoff b;
        uint64_t now = 1000 * SEC;

        backoff_init(&b, 0, 0, 0);
        for (size_t i = 0; i < ELEMENTSOF(expected); i++) {
                assert_int_equal(backoff_next(&b, now, 0), expected[i]);
                now += expected[i];
        }
}

static void test_jitter_bounds(void **state) {
        Backoff b;
        uint64_t now = 5 * SEC;

        /* The largest random value lands just below 2d: the jitter is [0, 1)·d. */
        backoff_init(&b, 0, 0, 0);
        assert_int_equal(backoff_next(&b, now, UINT32_MAX),
                         800 * MSEC + (uint64_t) ((800 * MSEC * (uint64_t) UINT32_MAX) >> 32));
        assert_true(backoff_next(&b, now, UINT32_MAX) < 3200 * MSEC);
        assert_int_equal(backoff_next(&b, now, UINT32_MAX / 2 + 1), 3200 * MSEC + 1600 * MSEC);

        /* Many random draws: every sleep of step n is in [d, 2d). */
        for (unsigned round = 0; round < 50; round++) {
                uint64_t d = 800 * MSEC;

                backoff_init(&b, 0, 0, 0);
                for (unsigned i = 0; i < 10; i++) {
                        uint64_t s = backoff_next(&b, now, rand32());

                        assert_true(s >= d);
                        assert_true(s < 2 * d);
                        d = MIN(d * 2, 30 * SEC);
                }
        }
}

static void test_jitter_spreads(void **state) {
        uint64_t lo = UINT64_MAX, hi = 0;

        /* Independent clients starting at the same moment do not retry in lockstep. */
        for (unsigned i = 0; i < 100; i++) {
                Backoff b;
                uint64_t s;

                backoff_init(&b, 0, 0, 0);
                s = backoff_next(&b, 1, rand32());
                lo = MIN(lo, s);
                hi = MAX(hi, s);
        }
        assert_true(hi - lo > 400 * MSEC);
}

static void test_reset_after_quiet_period(void **state) {
        Backoff b;
        uint64_t now = 10 * SEC;

        backoff_init(&b, 0, 0, 0);
        assert_int_equal(backoff_next(&b, now, 0), 800 * MSEC);
        assert_int_equal(backoff_next(&b, now + 1 * SEC, 0), 1600 * MSEC);
        /* Exactly two minutes later is not "more than": no reset yet. */
        assert_int_equal(backoff_next(&b, now + 121 * SEC, 0), 3200 * MSEC);
        /* More than two minutes of quiet since the last step: back to the base. */
        assert_int_equal(backoff_next(&b, now + 241 * SEC + 1, 0), 800 * MSEC);
        assert_int_equal(backoff_next(&b, now + 242 * SEC, 0), 1600 * MSEC);

        backoff_reset(&b);
        assert_int_equal(backoff_next(&b, now + 243 * SEC, 0), 800 * MSEC);
}

static void test_custom_parameters(void **state) {
        Backoff b;

        backoff_init(&b, 100 * MSEC, 250 * MSEC, 1 * SEC);
        assert_int_equal(backoff_next(&b, 1, 0), 100 * MSEC);
        assert_int_equal(backoff_next(&b, 2, 0), 200 * MSEC);
        assert_int_equal(backoff_next(&b, 3, 0), 250 * MSEC);
        assert_int_equal(backoff_next(&b, 4, 0), 250 * MSEC);

        /* A cap below the base is raised to it. */
        backoff_init(&b, 2 * SEC, 1 * SEC, 0);
        assert_int_equal(backoff_next(&b, 1, 0), 2 * SEC);
        assert_int_equal(backoff_next(&b, 2, 0), 2 * SEC);
}

static void test_spread(void **state) {
        uint64_t lo = UINT64_MAX, hi = 0;
        Backoff b;

        /* A spread wider than the step widens only the jitter: never below the step, below
         * step + spread, and the steps still double underneath. */
        backoff_init(&b, 0, 0, 0);
        assert_int_equal(backoff_next_spread(&b, 1, 0, 10 * SEC), 800 * MSEC);
        assert_int_equal(backoff_next_spread(&b, 1, UINT32_MAX / 2 + 1, 10 * SEC), 1600 * MSEC + 5 * SEC);
        assert_true(backoff_next_spread(&b, 1, UINT32_MAX, 10 * SEC) < 3200 * MSEC + 10 * SEC);
        /* A step beyond the spread: plain [d, 2d) jitter, as backoff_next(). */
        backoff_init(&b, 20 * SEC, 0, 0);
        assert_int_equal(backoff_next_spread(&b, 1, UINT32_MAX / 2 + 1, 10 * SEC), 30 * SEC);
        /* Zero spread is backoff_next(). */
        backoff_init(&b, 0, 0, 0);
        assert_int_equal(backoff_next_spread(&b, 1, UINT32_MAX / 2 + 1, 0), 1200 * MSEC);

        /* A fleet retrying at the same moment is spread over most of the window. */
        for (unsigned i = 0; i < 200; i++) {
                uint64_t s;

                backoff_init(&b, 0, 0, 0);
                s = backoff_next_spread(&b, 1, rand32(), 10 * SEC);
                assert_true(s >= 800 * MSEC);
                assert_true(s < 10800 * MSEC);
                lo = MIN(lo, s);
                hi = MAX(hi, s);
        }
        assert_true(hi - lo > 8 * SEC);
}

static void test_exponential(void **state) {
        assert_int_equal(backoff_exponential(500, 30000, 0), 500);
        assert_int_equal(backoff_exponential(500, 30000, 1), 1000);
        assert_int_equal(backoff_exponential(500, 30000, 5), 16000);
        assert_int_equal(backoff_exponential(500, 30000, 6), 30000);
        assert_int_equal(backoff_exponential(500, 30000, 1000), 30000);
        /* No overflow on the way to a huge cap. */
        assert_int_equal(backoff_exponential(3, UINT64_MAX, 200), UINT64_MAX);
        assert_int_equal(backoff_exponential(UINT64_MAX / 2 + 1, UINT64_MAX, 1), UINT64_MAX);
        /* base above cap: cap. */
        assert_int_equal(backoff_exponential(50, 10, 0), 10);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exponential),
                cmocka_unit_test(test_steps_without_jitter),
                cmocka_unit_test(test_jitter_bounds),
                cmocka_unit_test(test_jitter_spreads),
                cmocka_unit_test(test_spread),
                cmocka_unit_test(test_reset_after_quiet_period),
                cmocka_unit_test(test_custom_parameters),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
