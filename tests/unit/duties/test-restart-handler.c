/* SPDX-License-Identifier: Apache-2.0 */
/* restart-handler on a fake systemd: sequencing, reporting, removal (sync, async, failing), the
 * persisted record across handler instances, a record that cannot be saved, values changing while
 * busy. */
#include <stdio.h>
#include <sys/stat.h>

#include "duties/restart-handler.h"
#include "fake-systemd.h"
#include "log-capture.h"
#include "test-loop.h"
#include "tests.h"

#define SELF "agent.service"

typedef enum RemoveMode {
        REMOVE_SYNC,  /* completes inside remove_annotation() (re-entrancy) */
        REMOVE_ASYNC, /* the test completes it */
        REMOVE_FAIL,  /* returns -EIO (n_fail times), then SYNC */
} RemoveMode;

typedef struct Fixture {
        sd_event *event;
        sd_bus *client;
        FakeSystemd *fake;
        UnitControl *uc;
        RestartHandler *h;
        char dir[64];
        char state_path[128];
        char log[4096]; /* "unit:a.service:ok rejected:x remove finished ..." */
        RemoveMode remove_mode;
        unsigned n_fail;
        unsigned n_remove, n_finished;
        unsigned self_jobs_at_remove;
        unsigned jobs_at_remove; /* restarts of a, b, c and SELF started before the removal */
} Fixture;

static void logf_(Fixture *f, const char *fmt, const char *a, const char *b) {
        size_t n = strlen(f->log);
        snprintf(f->log + n, sizeof(f->log) - n, n ? " " : "");
        n = strlen(f->log);
        snprintf(f->log + n, sizeof(f->log) - n, fmt, a, b);
}

static void on_unit_result(const char *unit, bool ok, const char *detail, void *userdata) {
        logf_(userdata, "unit:%s:%s", unit, ok ? "ok" : "fail");
}

static void on_rejected(const char *entry, const char *why, void *userdata) {
        if (entry)
                logf_(userdata, "rejected:%s%s", entry, "");
        else
                logf_(userdata, "rejected-summary:%s%s", why, "");
}

static int remove_annotation(const char *value, void *userdata) {
        Fixture *f = userdata;

        f->n_remove++;
        f->self_jobs_at_remove = fake_systemd_n_jobs(f->fake, SELF);
        f->jobs_at_remove = f->self_jobs_at_remove + fake_systemd_n_jobs(f->fake, "a.service") +
                fake_systemd_n_jobs(f->fake, "b.service") + fake_systemd_n_jobs(f->fake, "c.service");
        if (f->remove_mode == REMOVE_FAIL && f->n_fail > 0) {
                f->n_fail--;
                logf_(f, "remove-failed%s%s", "", "");
                return -EIO;
        }
        logf_(f, "remove%s%s", "", "");
        if (f->remove_mode != REMOVE_ASYNC)
                restart_handler_annotation_removed(f->h, 0);
        return 0;
}

static void on_finished(const char *value, void *userdata) {
        Fixture *f = userdata;

        f->n_finished++;
        logf_(f, "finished%s%s", "", "");
}

static const RestartHandlerCallbacks callbacks = {
        .on_unit_result = on_unit_result,
        .on_rejected = on_rejected,
        .remove_annotation = remove_annotation,
        .on_finished = on_finished,
};

static void new_handler(Fixture *f) {
        assert_int_equal(restart_handler_new(f->event, f->uc, SELF, f->state_path, &callbacks, f, &f->h), 0);
        restart_handler_set_retry_interval(f->h, 10 * USEC_PER_MSEC, 40 * USEC_PER_MSEC);
}

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        snprintf(f->dir, sizeof(f->dir), "/tmp/test-restart-handler-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->state_path, sizeof(f->state_path), "%s/restart-request.json", f->dir);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(fake_systemd_new(f->event, &f->fake, &f->client), 0);
        for (const char *const *u =
                     (const char *const[]) { "a.service", "b.service", "c.service", SELF, NULL };
             *u; u++)
                assert_int_equal(fake_systemd_add_unit(f->fake, *u, FAKE_OK), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "fails.service", FAKE_JOB_FAILED), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "hang.service", FAKE_HANG), 0);
        assert_int_equal(unit_control_new(f->client, 200 * USEC_PER_MSEC, &f->uc), 0);
        new_handler(f);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        restart_handler_free(f->h);
        unit_control_free(f->uc);
        sd_bus_close_unref(f->client);
        fake_systemd_free(f->fake);
        sd_event_unref(f->event);
        (void) unlink(f->state_path);
        (void) rmdir(f->dir);
        free(f);
        return 0;
}

static void run(Fixture *f, const char *value) {
        assert_int_equal(restart_handler_submit(f->h, value), 0);
        TEST_LOOP_UNTIL(f->event, !restart_handler_is_busy(f->h), 5 * USEC_PER_SEC);
}

static void test_order_dedupe_rejections_self_last(void **state) {
        Fixture *f = *state;

        run(f, "../x,b,agent, a ,b.service,,a");
        assert_string_equal(f->log,
                            "rejected:../x rejected: remove unit:b.service:ok unit:a.service:ok "
                            "unit:agent.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 1);
        assert_int_equal(fake_systemd_n_jobs(f->fake, "b.service"), 1);
        /* docs/contract.md §9.12: the annotation went before any restart, our own included. */
        assert_int_equal(f->jobs_at_remove, 0);
        assert_int_equal(fake_systemd_n_jobs(f->fake, SELF), 1);
}

static void test_slice_rejected_replaced_unit_is_self(void **state) {
        Fixture *f = *state;

        assert_int_equal(fake_systemd_add_unit(f->fake, "system.slice", FAKE_OK), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "gardener-node-agent.service", FAKE_OK), 0);
        run(f, "gardener-node-agent,system.slice,a,agent");
        assert_string_equal(f->log,
                            "rejected:system.slice remove unit:a.service:ok unit:agent.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "system.slice"), 0);
        assert_int_equal(fake_systemd_n_jobs(f->fake, "gardener-node-agent.service"), 0);
        assert_int_equal(fake_systemd_n_jobs(f->fake, SELF), 1);
}

static void test_many_rejections_are_one_message(void **state) {
        Fixture *f = *state;

        run(f, "1.slice,2.scope,x;y,4.target,a");
        assert_string_equal(f->log,
                            "rejected-summary:rejected 4 unit names: \"1.slice\" (is a slice: restarting it "
                            "restarts every unit in it, the agent, kubelet and containerd included; only "
                            "services, sockets and timers may be restarted), \"2.scope\" (only services, "
                            "sockets and timers may be restarted), \"x;y\" (contains a character outside "
                            "[A-Za-z0-9:_.\\-@]), \"4.target\" (only services, sockets and timers may be "
                            "restarted) remove unit:a.service:ok finished");
}

static void test_failures_do_not_stop_the_rest(void **state) {
        Fixture *f = *state;

        run(f, "fails,hang,nope,a");
        assert_string_equal(f->log,
                            "remove unit:fails.service:fail unit:hang.service:fail unit:nope.service:fail "
                            "unit:a.service:ok finished");
}

static void test_failed_removal_retries_without_restarting_again(void **state) {
        Fixture *f = *state;

        f->remove_mode = REMOVE_FAIL;
        f->n_fail = 3;
        run(f, "a,b");
        assert_string_equal(f->log,
                            "remove-failed remove-failed remove-failed remove unit:a.service:ok "
                            "unit:b.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 1);
        assert_int_equal(fake_systemd_n_jobs(f->fake, "b.service"), 1);
}

static void test_async_removal(void **state) {
        Fixture *f = *state;

        f->remove_mode = REMOVE_ASYNC;
        assert_int_equal(restart_handler_submit(f->h, "a,agent"), 0);
        TEST_LOOP_UNTIL(f->event, f->n_remove == 1, 5 * USEC_PER_SEC);
        TEST_LOOP_NOT(f->event,
                      fake_systemd_n_jobs(f->fake, SELF) + fake_systemd_n_jobs(f->fake, "a.service") > 0,
                      50 * USEC_PER_MSEC);
        assert_true(restart_handler_is_busy(f->h));
        restart_handler_annotation_removed(f->h, -ESTALE); /* changed meanwhile: still done */
        TEST_LOOP_UNTIL(f->event, !restart_handler_is_busy(f->h), 5 * USEC_PER_SEC);
        assert_int_equal(fake_systemd_n_jobs(f->fake, SELF), 1);
        restart_handler_annotation_removed(f->h, 0); /* late duplicate: ignored */
        assert_int_equal(f->n_finished, 1);
}

/* The handler dies once a's restart is done and the next one (b) is being started; a new handler
 * takes over with the record on disk. */
static void crash_after_a(Fixture *f, const char *value) {
        assert_int_equal(restart_handler_submit(f->h, value), 0);
        TEST_LOOP_UNTIL(f->event, strstr(f->log, "unit:a.service:ok"), 5 * USEC_PER_SEC);
        f->h = restart_handler_free(f->h);
        f->log[0] = '\0';
        new_handler(f);
}

static void test_resume_after_crash(void **state) {
        Fixture *f = *state;

        /* The next instance sees the Node without the annotation and still restarts c, but neither a
         * nor b again (b's restart was started: at most once), and reports no second Warning. */
        crash_after_a(f, "x;y,a,b,c");
        run(f, NULL);
        assert_string_equal(f->log, "unit:c.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 1);
        assert_true(fake_systemd_n_jobs(f->fake, "b.service") <= 1); /* whether the job got out */
        assert_int_equal(fake_systemd_n_jobs(f->fake, "c.service"), 1);
}

static void test_resume_then_new_value(void **state) {
        Fixture *f = *state;

        /* What the crashed instance left is finished first, then the new value. */
        crash_after_a(f, "a,b");
        assert_int_equal(restart_handler_submit(f->h, "c"), 0);
        TEST_LOOP_UNTIL(f->event, f->n_finished == 2, 5 * USEC_PER_SEC);
        assert_string_equal(f->log, "finished remove unit:c.service:ok finished");
}

static void test_removed_value_is_ignored_until_seen_absent(void **state) {
        Fixture *f = *state;
        struct stat st;

        run(f, "a");
        assert_int_equal(stat(f->state_path, &st), 0);
        f->log[0] = '\0';

        run(f, "a"); /* a stale Node view */
        assert_string_equal(f->log, "");

        /* After a restart of the agent, too. */
        f->h = restart_handler_free(f->h);
        new_handler(f);
        run(f, "a");
        assert_string_equal(f->log, "");

        run(f, NULL); /* seen absent */
        assert_int_equal(stat(f->state_path, &st), -1);
        run(f, "a"); /* now it is a new request */
        assert_string_equal(f->log, "remove unit:a.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 2);
}

static void test_new_value_while_busy_runs_afterwards(void **state) {
        Fixture *f = *state;

        assert_int_equal(restart_handler_submit(f->h, "a"), 0);
        assert_int_equal(restart_handler_submit(f->h, "b"), 0);
        assert_int_equal(restart_handler_submit(f->h, "c"), 0); /* latest wins */
        TEST_LOOP_UNTIL(f->event, f->n_finished == 2, 5 * USEC_PER_SEC);
        assert_string_equal(f->log, "remove unit:a.service:ok finished remove unit:c.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "b.service"), 0);

        /* A value that goes away and comes back while busy cancels what was queued in between. */
        f->log[0] = '\0';
        run(f, NULL);
        assert_int_equal(restart_handler_submit(f->h, "a"), 0);
        assert_int_equal(restart_handler_submit(f->h, "b"), 0);
        assert_int_equal(restart_handler_submit(f->h, "a"), 0);
        TEST_LOOP_UNTIL(f->event, !restart_handler_is_busy(f->h), 5 * USEC_PER_SEC);
        assert_string_equal(f->log, "remove unit:a.service:ok finished");
}

static void test_retry_stops_when_annotation_disappears(void **state) {
        Fixture *f = *state;

        f->remove_mode = REMOVE_FAIL;
        f->n_fail = 1000;
        assert_int_equal(restart_handler_submit(f->h, "a"), 0);
        TEST_LOOP_UNTIL(f->event, f->n_remove >= 2, 5 * USEC_PER_SEC);
        assert_true(restart_handler_is_busy(f->h));
        assert_int_equal(restart_handler_submit(f->h, "a"), 0); /* still there: keep retrying */
        assert_true(restart_handler_is_busy(f->h));
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 0); /* not before the removal */
        assert_int_equal(restart_handler_submit(f->h, ""), 0);          /* removed by someone else */
        TEST_LOOP_UNTIL(f->event, !restart_handler_is_busy(f->h), 5 * USEC_PER_SEC);
        {
                unsigned n = f->n_remove;
                TEST_LOOP_NOT(f->event, f->n_remove != n, 100 * USEC_PER_MSEC);
        }
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 1);
}

static void test_own_restart_is_recorded_first(void **state) {
        Fixture *f = *state;
        _cleanup_free_ char *data = NULL;
        FILE *fp;

        /* Our own restart never completes here (as if systemd stopped us): the record on disk must
         * already say the annotation is gone and we were restarted. */
        f->remove_mode = REMOVE_SYNC;
        restart_handler_free(f->h);
        f->h = NULL;
        fake_systemd_free(f->fake);
        unit_control_free(f->uc);
        sd_bus_close_unref(f->client);
        assert_int_equal(fake_systemd_new(f->event, &f->fake, &f->client), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, "a.service", FAKE_OK), 0);
        assert_int_equal(fake_systemd_add_unit(f->fake, SELF, FAKE_HANG), 0);
        assert_int_equal(unit_control_new(f->client, 5 * USEC_PER_SEC, &f->uc), 0);
        new_handler(f);

        assert_int_equal(restart_handler_submit(f->h, "agent,a"), 0);
        TEST_LOOP_UNTIL(f->event, fake_systemd_n_jobs(f->fake, SELF) == 1, 5 * USEC_PER_SEC);
        fp = fopen(f->state_path, "re");
        assert_non_null(fp);
        data = calloc(1, 4096);
        assert_non_null(data);
        assert_true(fread(data, 1, 4095, fp) > 0);
        fclose(fp);
        assert_non_null(strstr(data, "\"removed\":true"));
        assert_non_null(strstr(data, "\"agent.service\""));

        /* The next instance sees the annotation gone (or stale) and does nothing. */
        f->h = restart_handler_free(f->h);
        f->log[0] = '\0';
        new_handler(f);
        run(f, "agent,a");
        assert_string_equal(f->log, "");
        assert_int_equal(fake_systemd_n_jobs(f->fake, SELF), 1);
}

/* The header's at-most-once: a restart whose record is not on disk is not started (a crash right
 * after it would start it again). The handler waits, says so once, and goes on once it can save. */
static void test_unsaved_record_restarts_nothing(void **state) {
        Fixture *f = *state;
        _cleanup_free_ char *logged = NULL;
        char sub[sizeof(f->dir) + 8];
        LogCapture capture;

        log_capture_start(&capture, f->dir);
        assert_true((size_t) snprintf(sub, sizeof(sub), "%s/sub", f->dir) < sizeof(sub));
        assert_true((size_t) snprintf(f->state_path, sizeof(f->state_path), "%s/restart-request.json", sub) <
                    sizeof(f->state_path));
        f->h = restart_handler_free(f->h);
        new_handler(f); /* its state directory does not exist */

        assert_int_equal(restart_handler_submit(f->h, "a,agent"), 0);
        TEST_LOOP_UNTIL(f->event, f->n_remove == 1, 5 * USEC_PER_SEC);
        /* Several retries at 10-40 ms. */
        TEST_LOOP_NOT(f->event,
                      fake_systemd_n_jobs(f->fake, "a.service") + fake_systemd_n_jobs(f->fake, SELF),
                      300 * USEC_PER_MSEC);
        assert_true(restart_handler_is_busy(f->h));

        assert_int_equal(mkdir(sub, 0700), 0);
        TEST_LOOP_UNTIL(f->event, !restart_handler_is_busy(f->h), 5 * USEC_PER_SEC);
        logged = log_capture_stop(&capture);
        assert_string_equal(f->log, "remove unit:a.service:ok unit:agent.service:ok finished");
        assert_int_equal(fake_systemd_n_jobs(f->fake, "a.service"), 1);
        assert_int_equal(fake_systemd_n_jobs(f->fake, SELF), 1);
        assert_int_equal(log_count_lines(logged, "err", "not restarting a.service until it is saved"), 1);
        assert_int_equal(log_count_lines(logged, "err", "Failed to save"), 1);

        assert_int_equal(unlink(f->state_path), 0);
        assert_int_equal(rmdir(sub), 0);
}

static void test_corrupt_record_is_ignored(void **state) {
        Fixture *f = *state;
        FILE *fp = fopen(f->state_path, "we");

        assert_non_null(fp);
        fputs("{\"value\": 5, garbage", fp);
        fclose(fp);
        f->h = restart_handler_free(f->h);
        new_handler(f);
        run(f, "a");
        assert_string_equal(f->log, "remove unit:a.service:ok finished");
}

static void test_blank_value_does_nothing(void **state) {
        Fixture *f = *state;

        run(f, "  ");
        run(f, NULL);
        assert_string_equal(f->log, "");
        assert_int_equal(f->n_remove, 0);
}

static void test_free_while_busy(void **state) {
        Fixture *f = *state;

        assert_int_equal(restart_handler_submit(f->h, "hang,a"), 0);
        assert_true(restart_handler_is_busy(f->h));
        f->h = restart_handler_free(f->h);
        assert_string_equal(f->log, "remove");
        TEST_LOOP_NOT(f->event, !streq(f->log, "remove"), 300 * USEC_PER_MSEC);
        assert_int_equal(unit_control_n_jobs(f->uc), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_order_dedupe_rejections_self_last, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failures_do_not_stop_the_rest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_removal_retries_without_restarting_again, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_async_removal, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resume_after_crash, setup, teardown),
                cmocka_unit_test_setup_teardown(test_resume_then_new_value, setup, teardown),
                cmocka_unit_test_setup_teardown(test_slice_rejected_replaced_unit_is_self, setup, teardown),
                cmocka_unit_test_setup_teardown(test_many_rejections_are_one_message, setup, teardown),
                cmocka_unit_test_setup_teardown(test_removed_value_is_ignored_until_seen_absent, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_new_value_while_busy_runs_afterwards, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retry_stops_when_annotation_disappears, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_own_restart_is_recorded_first, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unsaved_record_restarts_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_record_is_ignored, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blank_value_does_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_while_busy, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
