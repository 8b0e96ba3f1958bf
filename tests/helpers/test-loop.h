/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Driving an sd_event loop from a cmocka test: run until a condition holds, with a deadline, so a
 * missing callback fails the test instead of hanging it. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "tests.h"
#include "util/time-util.h"

static inline uint64_t test_now_usec(void) {
        return clock_now_usec(CLOCK_MONOTONIC);
}

#define TEST_LOOP_UNTIL(event, cond, timeout_usec)                                   \
        do {                                                                         \
                uint64_t _deadline = test_now_usec() + (timeout_usec);               \
                while (!(cond)) {                                                    \
                        if (test_now_usec() > _deadline)                             \
                                fail_msg("timed out waiting for: %s", #cond);        \
                        assert_true(sd_event_run((event), 50 * USEC_PER_MSEC) >= 0); \
                }                                                                    \
        } while (0)

/* Runs the loop for a while and asserts cond never became true. */
#define TEST_LOOP_NOT(event, cond, duration_usec)                                    \
        do {                                                                         \
                uint64_t _end = test_now_usec() + (duration_usec);                   \
                while (test_now_usec() < _end) {                                     \
                        assert_false(cond);                                          \
                        assert_true(sd_event_run((event), 10 * USEC_PER_MSEC) >= 0); \
                }                                                                    \
                assert_false(cond);                                                  \
        } while (0)
