/* SPDX-License-Identifier: Apache-2.0 */
/* unit-control against a fake systemd on a socketpair (tests/helpers/fake-systemd.c): the paths a
 * real manager does not produce on demand. The real one is exercised by test_unit_control.py. */
#include <stdio.h>

#include "fake-systemd.h"
#include "systemd/unit-control.h"
#include "test-loop.h"
#include "tests.h"

typedef struct Fixture {
        sd_event *event;
        sd_bus *client;
        FakeSystemd *fake;
        UnitControl *uc;
        unsigned n_done;
        int error;
        char detail[512];
        char job_result[32];
        char active_state[32];
        sd_id128_t before, after;
} Fixture;

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(fake_systemd_new(f->event, &f->fake, &f->client), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "ok.service", FAKE_OK), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "same.service", FAKE_NO_RESTART), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "fails.service", FAKE_JOB_FAILED), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "dies.service", FAKE_DIES), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "hang.service", FAKE_HANG), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "held.service", FAKE_HELD), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        unit_control_free(f->uc);
        sd_bus_close_unref(f->client);
        fake_systemd_free(f->fake);
        sd_event_unref(f->event);
        free(f);
        return 0;
}

static void on_done(const UnitJobResult *res, void *userdata) {
        Fixture *f = userdata;

        f->n_done++;
        f->error = res->error;
        snprintf(f->detail, sizeof(f->detail), "%s", strempty(res->detail));
        snprintf(f->job_result, sizeof(f->job_result), "%s", strempty(res->job_result));
        snprintf(f->active_state, sizeof(f->active_state), "%s", strempty(res->active_state));
        f->before = res->invocation_before;
        f->after = res->invocation_after;
}

static void run_one(Fixture *f, UnitAction action, const char *unit, uint64_t timeout_usec) {
        if (!f->uc)
                assert_int_equal(unit_control_new(f->client, timeout_usec, &f->uc), 0);
        f->n_done = 0;
        assert_int_equal(unit_control_run(f->uc, action, unit, NULL, on_done, f, NULL), 0);
        assert_int_equal(f->n_done, 0); /* never called back synchronously */
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->n_done, 1);
        assert_int_equal(unit_control_n_jobs(f->uc), 0);
}

static void test_restart_confirmed(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_RESTART, "ok.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(f->job_result, "done");
        assert_string_equal(f->active_state, "active");
        assert_false(sd_id128_is_null(f->before));
        assert_false(sd_id128_equal(f->before, f->after));
        /* Subscribe() went out before the first job; the decoy JobRemoved signals were ignored. */
        assert_string_equal(fake_systemd_calls(f->fake), "Subscribe RestartUnit:ok.service");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "ok.service"), 1);
}

static void test_restart_without_new_invocation_is_an_error(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_RESTART, "same.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -ESTALE);
        assert_non_null(strstr(f->detail, "InvocationID"));
}

static void test_failed_job_reports_result(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_RESTART, "fails.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -EIO);
        assert_string_equal(f->job_result, "failed");
        assert_non_null(strstr(f->detail, "job result: failed"));
        assert_non_null(strstr(f->detail, "exit-code"));
}

static void test_done_job_but_failed_unit(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_START, "dies.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -EIO);
        assert_string_equal(f->job_result, "done");
        assert_string_equal(f->active_state, "failed");
        assert_non_null(strstr(f->detail, "signal"));
}

static void test_unknown_unit(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_RESTART, "nope.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -ENOENT); /* NoSuchUnit, via libsystemd's error map */
        assert_string_equal(f->detail, "Unit nope.service not found.");
        assert_string_equal(f->job_result, "");
}

static void test_timeout(void **state) {
        Fixture *f = *state;
        uint64_t t0 = test_now_usec(), dt;

        run_one(f, UNIT_ACTION_RESTART, "hang.service", 200 * USEC_PER_MSEC);
        dt = test_now_usec() - t0;
        assert_int_equal(f->error, -ETIMEDOUT);
        assert_non_null(strstr(f->detail, "no result within 200ms"));
        assert_non_null(strstr(f->detail, "/job/"));
        assert_true(dt >= 200 * USEC_PER_MSEC);
        assert_true(dt < 2 * USEC_PER_SEC);
}

static void test_stop_reload_daemon_reload(void **state) {
        Fixture *f = *state;

        run_one(f, UNIT_ACTION_STOP, "ok.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(f->active_state, "inactive");
        run_one(f, UNIT_ACTION_RELOAD, "ok.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        run_one(f, UNIT_ACTION_DAEMON_RELOAD, NULL, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(fake_systemd_calls(f->fake),
                            "Subscribe StopUnit:ok.service ReloadUnit:ok.service Reload");
}

static void test_subscribe_refused(void **state) {
        Fixture *f = *state;

        fake_systemd_set_subscribe_error(f->fake, "org.freedesktop.DBus.Error.AccessDenied");
        assert_int_equal(unit_control_new(f->client, USEC_PER_SEC, &f->uc), 0);
        TEST_LOOP_UNTIL(f->event, strstr(fake_systemd_calls(f->fake), "Subscribe"), 5 * USEC_PER_SEC);
        /* Let the error reply arrive; then no job may be started that could never finish. */
        TEST_LOOP_UNTIL(f->event,
                        unit_control_run(f->uc, UNIT_ACTION_START, "ok.service", NULL, on_done, f, NULL) ==
                                -EACCES,
                        5 * USEC_PER_SEC);
}

static void test_already_subscribed_is_fine(void **state) {
        Fixture *f = *state;

        fake_systemd_set_subscribe_error(f->fake, "org.freedesktop.systemd1.AlreadySubscribed");
        run_one(f, UNIT_ACTION_RESTART, "ok.service", 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
}

static void test_cancel_and_free_do_not_call_back(void **state) {
        Fixture *f = *state;
        UnitJob *j = NULL;

        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        assert_int_equal(unit_control_restart_unit(f->uc, "ok.service", on_done, f, &j), 0);
        assert_non_null(j);
        assert_null(unit_job_cancel(j));
        assert_int_equal(unit_control_n_jobs(f->uc), 0);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);

        /* Pending jobs die with their UnitControl. */
        assert_int_equal(unit_control_restart_unit(f->uc, "hang.service", on_done, f, NULL), 0);
        assert_int_equal(unit_control_start_unit(f->uc, "ok.service", on_done, f, NULL), 0);
        assert_int_equal(unit_control_n_jobs(f->uc), 2);
        f->uc = unit_control_free(f->uc);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);
}

static void test_parallel_jobs(void **state) {
        Fixture *f = *state;

        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        assert_int_equal(unit_control_restart_unit(f->uc, "ok.service", on_done, f, NULL), 0);
        assert_int_equal(unit_control_stop_unit(f->uc, "dies.service", on_done, f, NULL), 0);
        assert_int_equal(unit_control_daemon_reload(f->uc, on_done, f, NULL), 0);
        TEST_LOOP_UNTIL(f->event, f->n_done == 3, 5 * USEC_PER_SEC);
        assert_int_equal(unit_control_n_jobs(f->uc), 0);
}

/* ---- the way to systemd breaks under a job (issue 23 finding 3, issue 24 scenario 8) */

/* What the Manager does when the bus daemon restarts: the connection closes, the UnitControl is told,
 * and later handed the next connection. */
static void bus_goes_down(Fixture *f) {
        fake_systemd_disconnect(f->fake);
        TEST_LOOP_UNTIL(f->event, sd_bus_is_open(f->client) <= 0, 5 * USEC_PER_SEC);
        assert_int_equal(unit_control_set_bus(f->uc, NULL), 0);
        assert_null(unit_control_get_bus(f->uc));
        f->client = sd_bus_close_unref(f->client);
}

static void bus_comes_back(Fixture *f) {
        assert_int_equal(fake_systemd_connect(f->fake, &f->client), 0);
        assert_int_equal(unit_control_set_bus(f->uc, f->client), 0);
        assert_ptr_equal(unit_control_get_bus(f->uc), f->client);
}

/* The held restart ends now, its JobRemoved delivered: the job succeeds by it. */
static void finish_held_by_signal(Fixture *f) {
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);
        assert_int_equal(fake_systemd_finish_held(f->fake, "held.service", /* signal= */ true), 0);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(f->job_result, "done");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "held.service"), 1);
}

/* The held restart ended unseen: judged a success by the unit's state, and never sent twice. */
static void assert_restarted_once(Fixture *f) {
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(f->active_state, "active");
        assert_false(sd_id128_equal(f->before, f->after));
        assert_int_equal(fake_systemd_n_jobs(f->fake, "held.service"), 1);
        assert_int_equal(unit_control_n_jobs(f->uc), 0);
}

static void start_held_restart(Fixture *f) {
        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        assert_int_equal(unit_control_restart_unit(f->uc, "held.service", on_done, f, NULL), 0);
        TEST_LOOP_UNTIL(f->event, strstr(fake_systemd_calls(f->fake), "RestartUnit:held.service"),
                        5 * USEC_PER_SEC);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 50 * USEC_PER_MSEC); /* waiting for JobRemoved */
}

static void test_job_ends_while_bus_is_down(void **state) {
        Fixture *f = *state;

        start_held_restart(f);
        bus_goes_down(f);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 50 * USEC_PER_MSEC); /* no stale error */
        /* The job ends meanwhile: its JobRemoved goes to nobody. */
        assert_int_equal(fake_systemd_finish_held(f->fake, "held.service", /* signal= */ true), 0);
        bus_comes_back(f);
        assert_restarted_once(f);
        /* Subscribed again on the new connection. */
        assert_string_equal(fake_systemd_calls(f->fake), "Subscribe RestartUnit:held.service Subscribe");
}

static void test_job_still_queued_after_reconnect(void **state) {
        Fixture *f = *state;

        start_held_restart(f);
        bus_goes_down(f);
        bus_comes_back(f);
        /* The re-read finds the job still queued: waited for, through the new subscription. */
        finish_held_by_signal(f);
}

static void test_lost_job_removed_is_found_after_reloading(void **state) {
        Fixture *f = *state;

        start_held_restart(f);
        /* systemd re-executes or reloads around the end of the job: the signal never comes. */
        assert_int_equal(fake_systemd_finish_held(f->fake, "held.service", /* signal= */ false), 0);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);
        assert_int_equal(fake_systemd_emit_reloading(f->fake, true), 0);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 50 * USEC_PER_MSEC);
        assert_int_equal(fake_systemd_emit_reloading(f->fake, false), 0);
        assert_restarted_once(f);
}

static void test_request_waits_for_the_bus(void **state) {
        Fixture *f = *state;

        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        bus_goes_down(f);
        assert_int_equal(unit_control_restart_unit(f->uc, "ok.service", on_done, f, NULL), 0);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);
        bus_comes_back(f);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_int_equal(fake_systemd_n_jobs(f->fake, "ok.service"), 1);
}

/* unit_control_reach(): nothing to wait for while systemd is there; else done once it is, or timed
 * out naming what is missing, and nothing is sent to systemd for it. */
static void test_reach(void **state) {
        Fixture *f = *state;

        assert_int_equal(unit_control_new(f->client, 300 * USEC_PER_MSEC, &f->uc), 0);
        TEST_LOOP_UNTIL(f->event, unit_control_get_bus(f->uc), 5 * USEC_PER_SEC);
        assert_int_equal(unit_control_reach(f->uc, on_done, f, NULL), 1);
        bus_goes_down(f);
        assert_int_equal(unit_control_reach(f->uc, on_done, f, NULL), 0);
        TEST_LOOP_NOT(f->event, f->n_done > 0, 100 * USEC_PER_MSEC);
        bus_comes_back(f);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_null(strstr(fake_systemd_calls(f->fake), "Unit")); /* nothing asked of systemd */

        bus_goes_down(f);
        f->n_done = 0;
        assert_int_equal(unit_control_reach(f->uc, on_done, f, NULL), 0);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -ETIMEDOUT);
        assert_non_null(strstr(f->detail, "no connection to the system bus"));
}

static void test_request_sent_as_the_bus_closes(void **state) {
        Fixture *f = *state;

        /* The request is written, but the peer goes before reading it: resumed on the next bus. */
        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        TEST_LOOP_UNTIL(f->event, strstr(fake_systemd_calls(f->fake), "Subscribe"), 5 * USEC_PER_SEC);
        assert_int_equal(unit_control_start_unit(f->uc, "ok.service", on_done, f, NULL), 0);
        bus_goes_down(f);
        assert_int_equal(f->n_done, 0);
        bus_comes_back(f);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, 0);
        assert_string_equal(f->active_state, "active");
}

/* The restart was carried out, but its answer went down with the connection: not sent again. */
static void start_restart_answer_lost(Fixture *f) {
        fake_systemd_set_swallow_replies(f->fake, true);
        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        assert_int_equal(unit_control_restart_unit(f->uc, "held.service", on_done, f, NULL), 0);
        TEST_LOOP_UNTIL(f->event, strstr(fake_systemd_calls(f->fake), "RestartUnit:held.service"),
                        5 * USEC_PER_SEC);
        bus_goes_down(f);
        fake_systemd_set_swallow_replies(f->fake, false);
}

static void test_answer_lost_job_still_queued(void **state) {
        Fixture *f = *state;

        start_restart_answer_lost(f);
        bus_comes_back(f);
        finish_held_by_signal(f); /* the job was adopted from Unit.Job */
}

static void test_answer_lost_job_done(void **state) {
        Fixture *f = *state;

        start_restart_answer_lost(f);
        assert_int_equal(fake_systemd_finish_held(f->fake, "held.service", /* signal= */ true), 0);
        bus_comes_back(f);
        /* No job left, a new InvocationID: the restart happened, judged by the unit's state. */
        assert_restarted_once(f);
}

static void test_timeout_while_down_says_why(void **state) {
        Fixture *f = *state;

        assert_int_equal(unit_control_new(f->client, 200 * USEC_PER_MSEC, &f->uc), 0);
        bus_goes_down(f);
        assert_int_equal(unit_control_start_unit(f->uc, "ok.service", on_done, f, NULL), 0);
        TEST_LOOP_UNTIL(f->event, f->n_done > 0, 5 * USEC_PER_SEC);
        assert_int_equal(f->error, -ETIMEDOUT);
        assert_string_equal(f->detail, "no result within 200ms: no connection to the system bus");
}

static void test_invalid_arguments(void **state) {
        Fixture *f = *state;
        UnitControl *uc = NULL;
        sd_bus *detached = NULL;

        assert_int_equal(unit_control_new(f->client, 0, &uc), -EINVAL);
        assert_int_equal(sd_bus_new(&detached), 0);
        assert_int_equal(unit_control_new(detached, USEC_PER_SEC, &uc), -ENXIO);
        assert_null(uc);
        /* A next connection on another loop: the jobs' timers could never fire with it. */
        assert_int_equal(unit_control_new(f->client, USEC_PER_SEC, &f->uc), 0);
        assert_int_equal(unit_control_set_bus(f->uc, detached), -EXDEV);
        sd_bus_unref(detached);
}

static void test_tables(void **state) {
        assert_int_equal(unit_job_result_to_errno("done"), 0);
        assert_int_equal(unit_job_result_to_errno("skipped"), 0);
        assert_int_equal(unit_job_result_to_errno("failed"), -EIO);
        assert_int_equal(unit_job_result_to_errno("canceled"), -ECANCELED);
        assert_int_equal(unit_job_result_to_errno("timeout"), -ETIME);
        assert_int_equal(unit_job_result_to_errno("dependency"), -EIO);
        assert_int_equal(unit_job_result_to_errno("something-new"), -EIO);
        assert_int_equal(unit_job_result_to_errno(NULL), -EIO);
        for (UnitAction a = 0; a < _UNIT_ACTION_MAX; a++)
                assert_int_equal(unit_action_from_string(unit_action_to_string(a)), a);
        assert_int_equal(unit_action_from_string("frob"), _UNIT_ACTION_INVALID);
        assert_null(unit_action_to_string(_UNIT_ACTION_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_restart_confirmed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_without_new_invocation_is_an_error, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_failed_job_reports_result, setup, teardown),
                cmocka_unit_test_setup_teardown(test_done_job_but_failed_unit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unknown_unit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_reload_daemon_reload, setup, teardown),
                cmocka_unit_test_setup_teardown(test_subscribe_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_already_subscribed_is_fine, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_and_free_do_not_call_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_parallel_jobs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_job_ends_while_bus_is_down, setup, teardown),
                cmocka_unit_test_setup_teardown(test_job_still_queued_after_reconnect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_lost_job_removed_is_found_after_reloading, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_reach, setup, teardown),
                cmocka_unit_test_setup_teardown(test_request_waits_for_the_bus, setup, teardown),
                cmocka_unit_test_setup_teardown(test_request_sent_as_the_bus_closes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_answer_lost_job_still_queued, setup, teardown),
                cmocka_unit_test_setup_teardown(test_answer_lost_job_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_timeout_while_down_says_why, setup, teardown),
                cmocka_unit_test_setup_teardown(test_invalid_arguments, setup, teardown),
                cmocka_unit_test(test_tables),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
