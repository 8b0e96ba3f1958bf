/* SPDX-License-Identifier: Apache-2.0 */
#include <systemd/sd-event.h>

#include "test-loop.h"
#include "tests.h"
#include "util/event-util.h"
#include "util/time-util.h"

static void test_event_now(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        uint64_t a, b, c;

        /* Before any iteration the loop has no time of its own: the clock is read. */
        assert_int_equal(sd_event_new(&e), 0);
        a = clock_now_usec(CLOCK_MONOTONIC);
        b = event_now_usec(e);
        assert_true(b >= a);
        /* After one, the iteration's time, the same for every caller until the next. */
        assert_true(sd_event_run(e, 0) >= 0);
        c = event_now_usec(e);
        assert_true(c >= a);
        assert_int_equal(event_now_usec(e), c);
        assert_true(clock_now_usec(CLOCK_MONOTONIC) >= c);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static void test_timer_arm(void **state) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *s = NULL;
        unsigned fired = 0;
        uint64_t t0;

        assert_int_equal(sd_event_new(&e), 0);
        assert_int_equal(sd_event_add_time_relative(e, &s, CLOCK_MONOTONIC, 0, 1, on_timer, &fired), 0);
        assert_int_equal(sd_event_source_set_enabled(s, SD_EVENT_OFF), 0);

        t0 = clock_now_usec(CLOCK_MONOTONIC);
        assert_int_equal(event_timer_arm(s, 50 * USEC_PER_MSEC), 0);
        TEST_LOOP_UNTIL(e, fired > 0, 5 * USEC_PER_SEC);
        assert_true(clock_now_usec(CLOCK_MONOTONIC) - t0 >= 50 * USEC_PER_MSEC);
        /* One shot. */
        assert_int_equal(sd_event_run(e, 100 * USEC_PER_MSEC), 0);
        assert_int_equal(fired, 1);

        /* A finishing loop cannot take timers any more. */
        assert_int_equal(sd_event_exit(e, 0), 0);
        TEST_LOOP_UNTIL(e, sd_event_get_state(e) == SD_EVENT_FINISHED, USEC_PER_SEC);
        assert_int_equal(event_timer_arm(s, 0), -ESTALE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_event_now),
                cmocka_unit_test(test_timer_arm),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
