/* SPDX-License-Identifier: Apache-2.0 */
#include "core/health-tracker.h"
#include "tests.h"

#define S USEC_PER_SEC

#define CHECK HEALTH_OWNER_CHECK
#define RESTARTING HEALTH_OWNER_CHECK_RESTARTING
#define UPDATE HEALTH_OWNER_UPDATE

static void test_grace_and_restart(void **state) {
        HealthTracker t = {};

        assert_int_equal(health_tracker_observe(&t, true, 0, HEALTH_GRACE_USEC, CHECK), HEALTH_OK);
        assert_int_equal(health_tracker_observe(&t, false, 10 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FIRST_FAILURE);
        assert_int_equal(health_tracker_observe(&t, false, 40 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 69 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FAILING);
        /* An update step restarting the unit itself, or our own restart in flight: no restart. */
        assert_int_equal(health_tracker_observe(&t, false, 70 * S, HEALTH_GRACE_USEC, UPDATE),
                         HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 70 * S, HEALTH_GRACE_USEC, RESTARTING),
                         HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 70 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_RESTART);
        /* A restart that did not work is asked for again at the next probe. */
        assert_int_equal(health_tracker_observe(&t, false, 100 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_RESTART);
        health_tracker_restarted(&t, 100 * S);
        assert_int_equal(health_tracker_observe(&t, false, 130 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 160 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_RESTART);
        assert_int_equal(health_tracker_observe(&t, true, 190 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_RECOVERED);
        assert_int_equal(health_tracker_observe(&t, true, 220 * S, HEALTH_GRACE_USEC, CHECK), HEALTH_OK);
        assert_int_equal(health_tracker_observe(&t, false, 250 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FIRST_FAILURE);
}

/* A probe that fails while an in-place update restarts the kubelet itself (its restart, then its own
 * health check) is the update's to judge: no "unhealthy" Warning after a successful update, and the
 * grace time does not start. A unit failing before the update took it over is still failing. */
/* Upstream's cadence (healthcheck/kubelet.go, containerd.go; 30 s requeue): a kubelet that answers
 * 500 from the start is first reported by the first round and restarted by the third, 60 s later —
 * with the duty's fake clock, rounds stamped with their start, the restart comes at 60 s, whatever the
 * probes' answer times were. */
static uint64_t first_restart_usec(uint64_t period_usec, uint64_t first_round_usec) {
        HealthTracker t = {};

        for (uint64_t now = first_round_usec; now < first_round_usec + 10 * 60 * S; now += period_usec)
                switch (health_tracker_observe(&t, /* healthy= */ false, now, HEALTH_GRACE_USEC, CHECK)) {
                case HEALTH_RESTART:
                        return now;
                case HEALTH_FIRST_FAILURE:
                        assert_int_equal(now, first_round_usec);
                        break;
                default:
                        assert_int_equal(t.first_failure_usec, first_round_usec);
                }
        fail();
        return 0;
}

static void test_upstream_cadence(void **state) {
        assert_int_equal(first_restart_usec(30 * S, 0), 60 * S);
        assert_int_equal(first_restart_usec(30 * S, 7 * S), 67 * S);
        /* A check every 10 s restarts at the same time, a check every 40 s at its second round after. */
        assert_int_equal(first_restart_usec(10 * S, 0), 60 * S);
        assert_int_equal(first_restart_usec(40 * S, 0), 80 * S);
}

static void test_update_owns_the_unit(void **state) {
        HealthTracker t = {};

        assert_int_equal(health_tracker_observe(&t, true, 0, HEALTH_GRACE_USEC, CHECK), HEALTH_OK);
        assert_int_equal(health_tracker_observe(&t, false, 10 * S, HEALTH_GRACE_USEC, UPDATE), HEALTH_OWNED);
        assert_int_equal(health_tracker_observe(&t, false, 100 * S, HEALTH_GRACE_USEC, UPDATE),
                         HEALTH_OWNED);
        /* The update is done and the unit healthy: nothing recovered, nothing to say. */
        assert_int_equal(health_tracker_observe(&t, true, 110 * S, HEALTH_GRACE_USEC, CHECK), HEALTH_OK);
        /* Unhealthy after the update: ours again, from the first failure on. */
        assert_int_equal(health_tracker_observe(&t, false, 120 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_FIRST_FAILURE);
        assert_int_equal(health_tracker_observe(&t, false, 150 * S, HEALTH_GRACE_USEC, UPDATE),
                         HEALTH_FAILING);
        assert_int_equal(health_tracker_observe(&t, false, 180 * S, HEALTH_GRACE_USEC, CHECK),
                         HEALTH_RESTART);
}

static void test_toggles(void **state) {
        ToggleTracker t = {};
        uint64_t now = 1000 * S;

        assert_false(toggle_tracker_observe(&t, true, now)); /* first sight: no toggle */
        for (unsigned i = 0; i < 4; i++) {
                assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
                assert_false(toggle_tracker_observe(&t, true, now += 30 * S));
        }
        assert_false(toggle_tracker_observe(&t, true, now += S)); /* still Ready: no toggle */
        assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
        assert_true(toggle_tracker_observe(&t, true, now += 30 * S)); /* the fifth within 10 min */
        assert_false(toggle_tracker_observe(&t, false, now += 30 * S));
        assert_true(toggle_tracker_observe(&t, true, now += 30 * S)); /* and the sixth */
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
                cmocka_unit_test(test_upstream_cadence),
                cmocka_unit_test(test_update_owns_the_unit),
                cmocka_unit_test(test_toggles),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
