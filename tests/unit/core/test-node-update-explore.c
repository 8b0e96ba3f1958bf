/* SPDX-License-Identifier: Apache-2.0 */
/* The update decider explored (issue 31, update-model.h): every event sequence up to a depth, with
 * every invariant checked after every effect; a violation prints the shortest sequence as a
 * ready-to-paste test. The regression tests below are such sequences, each found by the explorer on
 * a decider that had the bug. bench/run --only explore runs it deeper. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"
#include "update-model.h"

#define QUICK_DEPTH 7
#define ALL_OSCS                                                                         \
        ((1u << OSC_KUBELET_PATCH) | (1u << OSC_KUBELET_MINOR) | (1u << OSC_OS_UPDATE) | \
         (1u << OSC_FILES) | (1u << OSC_FILES_GATED) | (1u << OSC_ROTATION))

static const ModelOptions replay_options = { .oscs = ALL_OSCS };

static void expect_no_violation(const ModelEvent *events, size_t n) {
        char *violation = NULL;

        if (model_replay(&replay_options, events, n, &violation) != 0)
                fail_msg("%s", violation);
}

/* An OS update drained, applied in place (provider-local: os-release changes at once): the start
 * the regression sequences below share, then `events`. */
static void expect_no_violation_after_os_update(const ModelEvent *events, size_t n) {
        static const ModelEvent os_update[] = {
                { EV_NEW_OSC, OSC_OS_UPDATE, RUN_OK },
                { EV_READY, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, 0, RUN_OS_IN_PLACE }, /* RunOsCommand */
        };
        ModelEvent all[64];

        assert_true(ELEMENTSOF(os_update) + n <= ELEMENTSOF(all));
        memcpy(all, os_update, sizeof(os_update));
        memcpy(all + ELEMENTSOF(os_update), events, n * sizeof(ModelEvent));
        expect_no_violation(all, ELEMENTSOF(os_update) + n);
}

static void explore(const ModelOptions *o) {
        _cleanup_(model_result_done) ModelResult r = {};
        _cleanup_free_ char *test = NULL;

        assert_int_equal(model_explore(o, &r), 0);
        printf("explored %zu states, %zu transitions, depth %u%s\n", r.states, r.transitions, r.depth,
               r.truncated ? " (truncated)" : "");
        if (r.violated) {
                test = model_format_test("test_explored_violation", o, &r);
                fail_msg("%s; the shortest sequence:\n%s", r.violation, strempty(test));
        }
}

/* ---- regression sequences, each printed by the explorer on a decider that had the bug ---- */

/* Garden Linux (issue 29 item 3), on main with --truth-only: the OS update reboots into an /etc that
 * lost the OSC's units and the kubelet unit, the repair at start restores nothing, the kubelet check
 * fails, and the next decision started a marking transaction with nothing to do that reported
 * update-result=successful unchecked ("SUCCESS: update-result=successful of tx-b while the OSC's
 * units do not run"). Now that transaction verifies, after the back-off, and fails. */
static void test_regression_garden_linux_false_success(void **state) {
        static const ModelEvent events[] = {
                { EV_NEW_OSC, OSC_OS_UPDATE, RUN_OK },
                { EV_READY, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK }, /* RunOsCommand: the script reboots */
                { EV_REBOOT, REBOOT_ETC_RESET | REBOOT_REPAIR_FAILS, RUN_OK },
                { EV_RUN, -1, RUN_OK }, /* the checks fail */
                { EV_RUN, -1, RUN_OK }, /* update-result=failed */
                { EV_RUN, -1, RUN_OK }, /* was: the marking transaction, successful */
                { EV_WAIT, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_WAIT, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation(events, ELEMENTSOF(events));
}

/* On main: nothing checked the units at all ("SUCCESS: update-result=successful of tx-a without
 * CheckOSCUnits passing in this boot"). */
static void test_regression_success_without_units_check(void **state) {
        static const ModelEvent events[] = {
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation_after_os_update(events, ELEMENTSOF(events));
}

/* The node rebooted between the checks and the success report: it was reported on the strength of
 * the boot before. Now the checks run again first. */
static void test_regression_reboot_before_report(void **state) {
        static const ModelEvent events[] = {
                { EV_RUN, -1, RUN_OK },
                { EV_REBOOT, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation_after_os_update(events, ELEMENTSOF(events));
}

/* The agent died right after the re-verification was decided: the checks were not made again. */
static void test_regression_crash_in_reverification(void **state) {
        static const ModelEvent events[] = {
                { EV_RUN, -1, RUN_OK },
                { EV_REBOOT, 0, RUN_OK },
                { EV_RUN, 0, RUN_CRASH_BEFORE }, /* CheckOSCUnits */
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation_after_os_update(events, ELEMENTSOF(events));
}

/* The units were checked in one boot, the kubelet in the next. */
static void test_regression_checks_split_over_boots(void **state) {
        static const ModelEvent events[] = {
                { EV_RUN, 2, RUN_CRASH_BEFORE }, /* CheckKubeletHealth */
                { EV_REBOOT, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation_after_os_update(events, ELEMENTSOF(events));
}

/* update-result=successful landed, the agent died before its feedback, the node rebooted: the
 * re-verification failed and reported failed after successful. */
static void test_regression_result_landed_then_reboot(void **state) {
        static const ModelEvent events[] = {
                { EV_RUN, -1, RUN_OK },   { EV_RUN, 1, RUN_CRASH_AFTER }, /* ReportResult */
                { EV_REBOOT, 0, RUN_OK }, { EV_RUN, 1, RUN_FAIL },        /* CheckKubeletHealth */
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation_after_os_update(events, ELEMENTSOF(events));
}

/* A gated transaction past Applying finished after MCM moved on to a new desired state and
 * reported update-result=successful for the old one. */
static void test_regression_superseded_success(void **state) {
        static const ModelEvent events[] = {
                { EV_NEW_OSC, OSC_KUBELET_MINOR, RUN_OK },
                { EV_READY, 0, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_RUN, -1, RUN_OK },
                { EV_NEW_OSC, OSC_KUBELET_PATCH, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };

        expect_no_violation(events, ELEMENTSOF(events));
}

/* The quick depth: an OS update and a kubelet minor update, both backends' worth of crashes. */
static void test_explore_os_update(void **state) {
        explore(&(ModelOptions) { .depth = QUICK_DEPTH + 2, .oscs = 1u << OSC_OS_UPDATE });
}

static void test_explore_kubelet_minor(void **state) {
        explore(&(ModelOptions) { .depth = QUICK_DEPTH, .oscs = 1u << OSC_KUBELET_MINOR });
}

static void test_explore_files(void **state) {
        explore(&(ModelOptions) { .depth = QUICK_DEPTH,
                                  .oscs = (1u << OSC_FILES) | (1u << OSC_FILES_GATED) });
}

/* The model can fail: a sequence that breaks an invariant on purpose is reported. */
static void test_replay_reports_violation(void **state) {
        static const ModelEvent events[] = {
                { EV_NEW_OSC, OSC_KUBELET_MINOR, RUN_OK },
                { EV_READY, 0, RUN_OK },
                { EV_REBOOT, REBOOT_ETC_RESET | REBOOT_REPAIR_FAILS, RUN_OK },
                { EV_RUN, -1, RUN_OK },
        };
        char *violation = NULL;

        /* Consistent with the decider: the kubelet unit is gone, the transaction fails. */
        assert_int_equal(model_replay(&replay_options, events, ELEMENTSOF(events), &violation), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_replay_reports_violation),
                cmocka_unit_test(test_regression_garden_linux_false_success),
                cmocka_unit_test(test_regression_success_without_units_check),
                cmocka_unit_test(test_regression_reboot_before_report),
                cmocka_unit_test(test_regression_crash_in_reverification),
                cmocka_unit_test(test_regression_checks_split_over_boots),
                cmocka_unit_test(test_regression_result_landed_then_reboot),
                cmocka_unit_test(test_regression_superseded_success),
                cmocka_unit_test(test_explore_os_update),
                cmocka_unit_test(test_explore_kubelet_minor),
                cmocka_unit_test(test_explore_files),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
