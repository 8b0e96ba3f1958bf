/* SPDX-License-Identifier: Apache-2.0 */
/* The Manager as the daemon runs it, against what a unit test can give it: no kubeconfig, a
 * notification socket of the test's, and either no system bus (an address nobody listens on) or the
 * fake systemd as the system bus (tests/helpers/fake-systemd.h, listen mode). It is built, runs,
 * says what it waits for (READY=1, STATUS=: a bootstrap credential), brings its systemd side up
 * (Subscribe) and back after the bus went away, stops on SIGTERM (STOPPING=1) and frees
 * everything; a set-up error names its cause and leaves the configuration the caller's. With an API
 * server it is the integration suite's (the kubeconfig must name an https:// server, which the
 * canned-response server does not speak). */
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/config.h"
#include "daemon/manager.h"
#include "fake-systemd.h"
#include "tests.h"
#include "util/fileio.h"

typedef struct Env {
        char dir[64];
        char *state;
        Config *config;
        KubeTuning tuning;
        int notify_fd;
} Env;

static int setup(void **state) {
        Env *env = calloc(1, sizeof(Env));
        _cleanup_free_ char *kubeconfig = NULL, *bus = NULL, *root = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        sigset_t ss;

        assert_non_null(env);
        strcpy(env->dir, "/tmp/test-manager-XXXXXX");
        assert_non_null(mkdtemp(env->dir));
        assert_true(asprintf(&env->state, "%s/state", env->dir) > 0);
        assert_true(asprintf(&kubeconfig, "%s/kubeconfig", env->dir) > 0);
        assert_true(asprintf(&root, "%s/root", env->dir) > 0);
        assert_int_equal(mkdir(root, 0755), 0);

        assert_int_equal(config_new(&env->config), 0);
        assert_int_equal(config_finalize(env->config, &(ConfigOverrides) { .node_name = "node-1",
                                                                            .state_dir = env->state,
                                                                            .kubeconfig = kubeconfig },
                                         NULL), 0);
        assert_int_equal(free_and_strdup(&env->config->osc.root_directory, root), 0);
        free(env->config->os_release);
        assert_true(asprintf(&env->config->os_release, "%s/os-release", env->dir) > 0);
        kube_tuning_init(&env->tuning);

        /* No system bus: the manager retries it in the background. */
        assert_true(asprintf(&bus, "unix:path=%s/no-bus", env->dir) > 0);
        assert_int_equal(setenv("DBUS_SYSTEM_BUS_ADDRESS", bus, 1), 0);
        /* The notifications come to us. */
        env->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(env->notify_fd >= 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", env->dir);
        assert_int_equal(bind(env->notify_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
        /* As main.c does before manager_new(). */
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGCHLD);
        assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        *state = env;
        return 0;
}

static int teardown(void **state) {
        Env *env = *state;

        (void) unsetenv("NOTIFY_SOCKET");
        (void) unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
        close(env->notify_fd);
        config_free(env->config);
        assert_int_equal(osc_remove_tree(env->dir), 0);
        free(env->state);
        free(env);
        return 0;
}

/* Every notification so far, one per line. */
static char *notifications(Env *env) {
        char *all = strdup(""), buf[4096];
        ssize_t n;

        assert_non_null(all);
        while ((n = recv(env->notify_fd, buf, sizeof(buf) - 1, 0)) > 0) {
                char *grown;

                buf[n] = 0;
                assert_true(asprintf(&grown, "%s%s\n", all, buf) > 0);
                free(all);
                all = grown;
        }
        return all;
}

static void assert_contains(const char *haystack, const char *needle) {
        if (!strstr(haystack, needle))
                fail_msg("\"%s\" lacks \"%s\"", haystack, needle);
}

static void test_new_error_leaves_the_config(void **state) {
        Env *env = *state;
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL;
        Config *config = env->config;

        /* A state directory that is a file: the executor cannot load its state. */
        assert_int_equal(write_file_atomic(env->state, "x", 1, 0600), 0);
        assert_true(manager_new(&env->config, &env->tuning, &m, &error) < 0);
        assert_null(m);
        assert_ptr_equal(env->config, config);          /* still the caller's, freed by teardown */
        assert_non_null(error);
        assert_contains(error, env->state);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) raise(SIGTERM);
        return 0;
}

static void test_runs_without_api_server_and_stops(void **state) {
        Env *env = *state;
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *timer = NULL;       /* before the manager and loop */

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        assert_null(env->config);                       /* the manager's now */
        /* The manager's loop is this thread's default one: SIGTERM after a while. */
        assert_int_equal(sd_event_default(&event), 0);
        assert_int_equal(sd_event_add_time_relative(event, &timer, CLOCK_MONOTONIC, 500 * USEC_PER_MSEC, 0,
                                                    on_timer, NULL), 0);
        assert_int_equal(manager_run(m), 0);

        said = notifications(env);
        assert_contains(said, "READY=1");
        assert_contains(said, "STATUS=Waiting for node node-1");
        assert_contains(said, "STOPPING=1");
        /* What it waits for: a credential to bootstrap its client certificate with. */
        assert_contains(said, "no bootstrap credential");
}

static unsigned count(const char *haystack, const char *needle) {
        unsigned n = 0;

        for (const char *p = haystack; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* A case's script runs every 10 ms until it raises SIGTERM. */
static int step_again(sd_event_source *s) {
        return sd_event_source_set_time_relative(s, 10 * USEC_PER_MSEC) < 0 ? 0 :
               sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* Runs the Manager with the case's script; SIGTERM after 10 s at the latest. */
static void run_script(Manager *m, sd_event *event, sd_event_time_handler_t script, void *userdata) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *step = NULL, *deadline = NULL;

        assert_int_equal(sd_event_add_time_relative(event, &step, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 0,
                                                    script, userdata), 0);
        assert_int_equal(sd_event_add_time_relative(event, &deadline, CLOCK_MONOTONIC, 10 * USEC_PER_SEC, 0,
                                                    on_timer, NULL), 0);
        assert_int_equal(manager_run(m), 0);
}

typedef struct BusScript {
        FakeSystemd *fake;
        bool dropped;                   /* the bus went away once */
        bool done;                      /* subscribed again after it: SIGTERM sent */
} BusScript;

/* Every 10 ms: once the Manager subscribed, the bus goes away; once it subscribed again, SIGTERM. */
static int on_bus_step(sd_event_source *s, uint64_t usec, void *userdata) {
        BusScript *b = userdata;
        unsigned n = count(fake_systemd_calls(b->fake), "Subscribe");

        if (!b->dropped && n == 1) {
                fake_systemd_disconnect(b->fake);
                b->dropped = true;
        } else if (b->dropped && n == 2) {
                b->done = true;
                (void) raise(SIGTERM);
                return 0;
        }
        return step_again(s);
}

/* The fake systemd as the system bus, on the loop the Manager will take (this thread's default). */
static FakeSystemd *systemd_on_the_bus(Env *env, sd_event **ret_event) {
        _cleanup_free_ char *path = NULL, *address = NULL;
        FakeSystemd *fake;

        assert_true(sd_event_default(ret_event) >= 0);
        assert_true(asprintf(&path, "%s/system_bus_socket", env->dir) > 0);
        assert_int_equal(fake_systemd_listen(*ret_event, path, &fake), 0);
        assert_true(asprintf(&address, "unix:path=%s", path) > 0);
        assert_int_equal(setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1), 0);
        return fake;
}

static void test_systemd_side_up_and_back(void **state) {
        Env *env = *state;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(fake_systemd_freep) FakeSystemd *fake = systemd_on_the_bus(env, &event);
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL;
        BusScript script = { .fake = fake };

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        run_script(m, event, on_bus_step, &script);

        if (!script.dropped)
                fail_msg("no Subscribe: \"%s\"", fake_systemd_calls(fake));
        if (!script.done)
                fail_msg("no second Subscribe after the bus came back: \"%s\"", fake_systemd_calls(fake));
        assert_int_equal(count(fake_systemd_calls(fake), "Hello"), 2);
        said = notifications(env);
        assert_contains(said, "READY=1");
        assert_contains(said, "STOPPING=1");
}

/* SIGTERM once `unit` has a job (held: the apply waits for it). */
typedef struct JobScript {
        FakeSystemd *fake;
        const char *unit;
        bool done;
} JobScript;

static int on_job_step(sd_event_source *s, uint64_t usec, void *userdata) {
        JobScript *j = userdata;

        if (fake_systemd_n_jobs(j->fake, j->unit) > 0) {
                j->done = true;
                (void) raise(SIGTERM);
                return 0;
        }
        return step_again(s);
}

/* SIGTERM in the middle of an apply: the drift round at start (no API server needed) finds the
 * last-applied OSC's unit file gone and repairs it through the executor's OSC runner; the unit's
 * restart is held by systemd when the signal comes. The Manager stops cleanly, freeing the runner
 * with its job in flight (the sanitizer run checks for leaks and use-after-free). */
static void test_sigterm_during_an_apply(void **state) {
        Env *env = *state;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(fake_systemd_freep) FakeSystemd *fake = systemd_on_the_bus(env, &event);
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL, *applied = NULL, *units = NULL, *unit_file = NULL;
        static const char osc[] = "spec: {units: [{name: x.service,"
                                  " content: \"[Service]\\nExecStart=/bin/true\\n\"}]}";
        JobScript script = { .fake = fake, .unit = "x.service" };

        assert_int_equal(fake_systemd_add_unit(fake, "x.service", FAKE_HELD), 0);
        assert_int_equal(mkdir(env->state, 0700), 0);
        assert_true(asprintf(&applied, "%s/%s", env->state, OSC_STATE_LAST_APPLIED) > 0);
        assert_int_equal(write_file_atomic(applied, osc, strlen(osc), 0600), 0);
        assert_true(asprintf(&units, "%s/units", env->dir) > 0);
        assert_int_equal(mkdir(units, 0755), 0);
        assert_int_equal(free_and_strdup(&env->config->systemd.unit_directory, units), 0);

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        run_script(m, event, on_job_step, &script);

        if (!script.done)
                fail_msg("no job for x.service: \"%s\"", fake_systemd_calls(fake));
        assert_true(asprintf(&unit_file, "%s/x.service", units) > 0);
        assert_int_equal(access(unit_file, F_OK), 0);           /* the repair had begun */
        assert_contains(fake_systemd_calls(fake), "RestartUnit:x.service");
        said = notifications(env);
        assert_contains(said, "STOPPING=1");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_new_error_leaves_the_config, setup, teardown),
                cmocka_unit_test_setup_teardown(test_runs_without_api_server_and_stops, setup, teardown),
                cmocka_unit_test_setup_teardown(test_systemd_side_up_and_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sigterm_during_an_apply, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
