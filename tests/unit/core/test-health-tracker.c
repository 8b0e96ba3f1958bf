/* SPDX-License-Identifier: Apache-2.0 */
#include "core/health-tracker.h"
#include "tests.h"

#define S USEC_PER_SEC

static void test_grace_and_restart(void **state) {
        HealthTracker t = {};

        assert_int_equal(health_tracker_observe(&t, true, 0, HEALTH_GRACE_USEC, true), HEALTH_OK);
        assert_int_equal(health_tracker_observe(&t, false, 10 * S, HEALTH_GRACE_USEC, true), HEALTH_FIRST_FAILURE);
        assert_int_equal(health_tracker_observe(&t, false, 40 * S, HEALTH_GRACE_USEC, true), HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 69 * S, HEALTH_GRACE_USEC, true), HEALTH_FAILING);
        /* An update step restarting the unit itself: no restart behind its back. */
        assert_int_equal(health_tracker_observe(&t, false, 70 * S, HEALTH_GRACE_USEC, false), HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 70 * S, HEALTH_GRACE_USEC, true), HEALTH_RESTART);
        /* A restart that did not work is asked for again at the next probe. */
        assert_int_equal(health_tracker_observe(&t, false, 100 * S, HEALTH_GRACE_USEC, true), HEALTH_RESTART);
        health_tracker_restarted(&t, 100 * S);
        assert_int_equal(health_tracker_observe(&t, false, 130 * S, HEALTH_GRACE_USEC, true), HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 160 * S, HEALTH_GRACE_USEC, true), HEALTH_RESTART);
        assert_int_equal(health_tracker_observe(&t, true, 190 * S, HEALTH_GRACE_USEC, true), HEALTH_RECOVERED);
        assert_int_equal(health_tracker_observe(&t, true, 220 * S, HEALTH_GRACE_USEC, true), HEALTH_OK);
        assert_int_equal(health_tracker_observe(&t, false, 250 * S, HEALTH_GRACE_USEC, true), HEALTH_FIRST_FAILURE);
}

static void test_toggles(void **state) {
        ToggleTracker t = {};
        uint64_t now = 1000 * S;

        assert_false(toggle_tracker_observe(&t, true, now));      /* first sight: no toggle */
        for (unsigned i = 0; i < 4; i++) {
                assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
                assert_false(toggle_tracker_observe(&t, true, now += 30 * S));
        }
        assert_false(toggle_tracker_observe(&t, true, now += S));        /* still Ready: no toggle */
        assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
        assert_true(toggle_tracker_observe(&t, true, now += 30 * S));    /* the fifth within 10 min */
        assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
        assert_true(toggle_tracker_observe(&t, true, now += 30 * S));    /* and the sixth */
        /* Slow toggles: five span more than 10 min, never a warning. */
        t = (ToggleTracker) {};
        assert_false(toggle_tracker_observe(&t, true, now));
        for (unsigned i = 0; i < 10; i++) {
                assert_false(toggle_tracker_observe(&t, false, now += 3 * 60 * S));
                assert_false(toggle_tracker_observe(&t, true, now += S));
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_grace_and_restart),
                cmocka_unit_test(test_toggles),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
