/* SPDX-License-Identifier: Apache-2.0 */
/* The executor against its explicit dependencies (ExecutorDeps): a real sd_event loop, a real Http,
 * a reporter without an API client, a fake systemd. What it decides is the core's business
 * (test-node-update.c); here: set-up errors come back instead of being logged, the restart
 * annotation and a drift round hold decisions back as an input, a state file that cannot be written
 * is retried rather than dropped, a fresh node's first OSC is applied through the OSC runner before
 * its Node exists, and a failed OSC is recorded with its failure code and logged once. */
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/config.h"
#include "fake-systemd.h"
#include "log-capture.h"
#include "net/http.h"
#include "report/reporter.h"
#include "test-loop.h"
#include "tests.h"
#include "update/executor.h"
#include "update/state-file.h"
#include "util/fileio.h"
#include "util/log.h"

typedef struct Env {
        char dir[64];
        char *state_dir;
        char *state_file;
        sd_event *event;
        Http *http;
        Reporter *reporter;
        Config *config;
        FakeSystemd *systemd;
        sd_bus *bus;
        UnitControl *units;
        ExecutorDeps deps;
} Env;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static int setup(void **state) {
        Env *env = calloc(1, sizeof(Env));
        char *kubelet;

        assert_non_null(env);
        strcpy(env->dir, "/tmp/test-executor-XXXXXX");
        assert_non_null(mkdtemp(env->dir));
        assert_true(asprintf(&env->state_dir, "%s/state", env->dir) > 0);
        assert_true(asprintf(&env->state_file, "%s/state/%s", env->dir, STATE_FILE_NAME) > 0);
        assert_true(asprintf(&kubelet, "%s/kubelet", env->dir) > 0);

        assert_int_equal(config_new(&env->config), 0);
        assert_int_equal(
                config_finalize(env->config,
                                &(ConfigOverrides) { .node_name = "node-1", .state_dir = env->state_dir },
                                NULL),
                0);
        free(env->config->kubelet.binary_path);
        env->config->kubelet.binary_path = kubelet;
        free(env->config->os_release);
        assert_true(asprintf(&env->config->os_release, "%s/os-release", env->dir) > 0);
        free(env->config->osc.root_directory);
        assert_true(asprintf(&env->config->osc.root_directory, "%s/root", env->dir) > 0);
        assert_int_equal(mkdir(env->config->osc.root_directory, 0755), 0);

        assert_int_equal(sd_event_new(&env->event), 0);
        assert_int_equal(http_new(env->event, &env->http), 0);
        assert_int_equal(reporter_new("node-1", &env->reporter), 0);
        env->deps = (ExecutorDeps) {
                .event = env->event,
                .config = env->config,
                .http = env->http,
                .reporter = env->reporter,
        };
        *state = env;
        return 0;
}

static int teardown(void **state) {
        Env *env = *state;

        unit_control_free(env->units);
        sd_bus_flush_close_unref(env->bus);
        fake_systemd_free(env->systemd);
        reporter_free(env->reporter);
        http_free(env->http);
        sd_event_unref(env->event);
        config_free(env->config);
        (void) nftw(env->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(env->state_dir);
        free(env->state_file);
        free(env);
        return 0;
}

static void null_drift_done(int error, const char *message, void *userdata) {
        fail_msg("no repair ran, yet it was called back");
}

static bool exists(const char *path) {
        return access(path, F_OK) == 0;
}

static void test_new_error_names_the_state_directory(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *error = NULL;
        FILE *f;

        /* A state directory that is a file: an error naming it, for the caller to log once. */
        f = fopen(env->state_dir, "w");
        assert_non_null(f);
        fclose(f);
        assert_true(executor_new(&env->deps, &e, &error) < 0);
        assert_null(e);
        assert_non_null(error);
        assert_non_null(strstr(error, env->state_dir));
}

static void test_restart_annotation_holds_decisions(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;

        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        executor_set_restarts_busy(e, true);
        assert_int_equal(executor_start(e), 0);
        executor_set_node(e, NULL);
        /* Nothing is decided (and so nothing persisted) while units are being restarted... */
        TEST_LOOP_NOT(env->event, exists(env->state_file), 300 * USEC_PER_MSEC);
        assert_false(executor_is_busy(e));
        /* ...and the decision follows as soon as the restart handler is done. */
        executor_set_restarts_busy(e, false);
        TEST_LOOP_UNTIL(env->event, exists(env->state_file), 5 * USEC_PER_SEC);
}

/* The drift repair holds decisions for its round, and is refused while something else owns the
 * units or the OSC applier. */
static void test_drift_round_holds_decisions(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;
        OscChanges c = {};
        const char *why = NULL;

        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        assert_non_null(executor_osc_model_options(e));
        assert_non_null(executor_own_files(e));
        /* Claimed before the start (the round at start goes first)... */
        assert_int_equal(executor_drift_claim(e, &why), 0);
        assert_null(why);
        assert_true(executor_blocks_unit_restarts(e));
        /* ...without systemd there is nothing to repair with... */
        assert_int_equal(executor_drift_repair(e, &c, null_drift_done, NULL), -ENOTCONN);
        assert_int_equal(executor_start(e), 0);
        executor_set_node(e, NULL);
        /* ...nothing is decided during the round... */
        TEST_LOOP_NOT(env->event, exists(env->state_file), 300 * USEC_PER_MSEC);
        /* ...and the decision follows its release. */
        executor_drift_release(e);
        assert_false(executor_blocks_unit_restarts(e));
        TEST_LOOP_UNTIL(env->event, exists(env->state_file), 5 * USEC_PER_SEC);

        executor_set_restarts_busy(e, true);
        assert_int_equal(executor_drift_claim(e, &why), -EBUSY);
        assert_string_equal(why, "the restart annotation is being carried out");
        executor_set_restarts_busy(e, false);
        TEST_LOOP_NOT(env->event, false, 100 * USEC_PER_MSEC);
        assert_int_equal(executor_drift_claim(e, &why), 0);
        executor_drift_release(e);
}

/* Saved OSC work that the first decision would resume: no round before it is prepared. */
static void test_drift_waits_for_saved_work(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *saved = NULL;
        const char *why = NULL;
        FILE *f;

        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        assert_true(asprintf(&saved, "%s/last-computed-osc-changes.json", env->state_dir) > 0);
        f = fopen(saved, "w");
        assert_non_null(f);
        fclose(f);
        assert_int_equal(executor_drift_claim(e, &why), -EBUSY);
        assert_string_equal(why, "an OSC change is prepared and not applied yet");
        assert_false(executor_blocks_unit_restarts(e));
        assert_int_equal(unlink(saved), 0);
        assert_int_equal(executor_drift_claim(e, &why), 0);
        executor_drift_release(e);
}

static void test_failed_save_is_retried(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;

        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        /* state.json cannot be replaced while a directory sits at its name. */
        assert_int_equal(mkdir(env->state_file, 0700), 0);
        assert_int_equal(executor_start(e), 0);
        TEST_LOOP_NOT(env->event, false, 300 * USEC_PER_MSEC);
        assert_int_equal(rmdir(env->state_file), 0);
        /* Without new input the decision is taken (and saved) again after the retry delay. */
        TEST_LOOP_UNTIL(env->event, exists(env->state_file), 15 * USEC_PER_SEC);
}

/* With systemd (the fake) for the OSC's units. */
static void with_systemd(Env *env) {
        assert_int_equal(fake_systemd_new(env->event, &env->systemd, &env->bus), 0);
        assert_int_equal(unit_control_new(env->bus, 5 * USEC_PER_SEC, &env->units), 0);
        env->deps.units = env->units;
}

static OscDesired *desired(const char *checksum, const char *yaml) {
        OscDesired *osc = calloc(1, sizeof(OscDesired));

        assert_non_null(osc);
        assert_non_null(osc->checksum = strdup(checksum));
        assert_non_null(osc->yaml = strdup(yaml));
        osc->yaml_size = strlen(yaml);
        return osc;
}

static bool file_contains(const char *path, const char *what) {
        _cleanup_free_ char *data = NULL;

        return read_full_file(path, 1 << 20, &data, NULL) >= 0 && strstr(data, what);
}

static unsigned count(const char *haystack, const char *needle) {
        unsigned n = 0;

        for (const char *p = haystack; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* A fresh node (no Node yet): its first OSC is applied through the OSC runner and committed. */
static void test_first_osc_before_the_node(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *file = NULL, *last = NULL;

        with_systemd(env);
        assert_true(asprintf(&file, "%s/etc/a", env->config->osc.root_directory) > 0);
        assert_true(asprintf(&last, "%s/last-applied-osc.yaml", env->state_dir) > 0);
        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        executor_set_osc(e, desired("c1", "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}]}"));
        executor_set_node(e, NULL);
        assert_int_equal(executor_start(e), 0);
        TEST_LOOP_UNTIL(env->event, access(last, F_OK) == 0 && !executor_is_busy(e), 10 * USEC_PER_SEC);
        assert_true(file_contains(file, "a"));
        assert_true(file_contains(env->state_file, "\"c1\""));
}

/* An OSC item that fails: the transaction records the failure code and the item's message, and the
 * journal says it once (the runner returns it, the executor logs it): one line at WARNING names it,
 * not an action line and a phase line both. */
static void test_osc_failure_recorded_and_logged_once(void **state) {
        Env *env = *state;
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *logged = NULL;
        LogCapture capture;

        with_systemd(env);
        log_capture_start(&capture, env->dir);

        assert_int_equal(executor_new(&env->deps, &e, NULL), 0);
        /* No API client: the secretRef file's Secret cannot be read. */
        executor_set_osc(e,
                         desired("c1",
                                 "spec: {files: [{path: /etc/s,"
                                 " content: {secretRef: {name: s, dataKey: k}}}]}"));
        executor_set_node(e, NULL);
        assert_int_equal(executor_start(e), 0);
        TEST_LOOP_UNTIL(env->event, file_contains(env->state_file, "FileApplyFailed"), 10 * USEC_PER_SEC);
        TEST_LOOP_NOT(env->event, false, 200 * USEC_PER_MSEC);
        e = executor_free(e);

        logged = log_capture_stop(&capture);
        assert_true(file_contains(env->state_file, "/etc/s: no API server connection to read the Secret"));
        assert_int_equal(
                log_count_lines(logged, "warning", "/etc/s: no API server connection to read the Secret"),
                1);
        assert_int_equal(log_count_lines(logged, "warning", "FileApplyFailed"), 1);
        assert_int_equal(count(logged, "Applying the OSC failed"), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_new_error_names_the_state_directory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_annotation_holds_decisions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_save_is_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drift_round_holds_decisions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_drift_waits_for_saved_work, setup, teardown),
                cmocka_unit_test_setup_teardown(test_first_osc_before_the_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_osc_failure_recorded_and_logged_once, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
