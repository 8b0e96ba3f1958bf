/* SPDX-License-Identifier: Apache-2.0 */
/* The OSC runner against a fake systemd (unit files enabled, jobs confirmed by JobRemoved) and the
 * canned-response HTTP server (the API server for a secretRef's Secret, the kubelet's /healthz):
 * a run of a file and a unit restart committed as last applied; a secretRef file; the kubelet health
 * item; failures coming back with their UpdateFailureCode and a message naming the item; a run
 * cancelled in flight; a newer OSC ending a registry's readiness probe at once. The diff itself is
 * test-osc-diff.c's, the applier's unit order the osc-apply integration test's. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/config.h"
#include "fake-systemd.h"
#include "log-capture.h"
#include "test-kube.h"
#include "update/osc-runner.h"
#include "util/fileio.h"

#define CHECKSUM "checksum-1"

typedef struct Env {
        char dir[64];
        char *state, *root, *units;
        TestKube kube;
        Config *config;
        FakeSystemd *systemd;
        sd_bus *bus;
        UnitControl *uc;
        OscRunner *runner;

        bool done;
        int error;
        UpdateFailureCode code;
        char message[1024];
} Env;

static int setup(void **state) {
        Env *env = calloc(1, sizeof(Env));
        char healthz[128];

        assert_non_null(env);
        strcpy(env->dir, "/tmp/test-osc-runner-XXXXXX");
        assert_non_null(mkdtemp(env->dir));
        assert_true(asprintf(&env->state, "%s/state", env->dir) > 0);
        assert_true(asprintf(&env->root, "%s/root", env->dir) > 0);
        assert_true(asprintf(&env->units, "%s/units", env->dir) > 0);
        assert_int_equal(mkdir(env->root, 0755), 0);
        assert_int_equal(mkdir(env->units, 0755), 0);

        test_kube_init(&env->kube, NULL, NULL);
        snprintf(healthz, sizeof(healthz), "%s/healthz", env->kube.server);

        assert_int_equal(config_new(&env->config), 0);
        assert_int_equal(
                config_finalize(env->config,
                                &(ConfigOverrides) { .node_name = "node-1", .state_dir = env->state }, NULL),
                0);
        assert_int_equal(mkdir(env->state, 0700), 0);
        assert_int_equal(free_and_strdup(&env->config->osc.root_directory, env->root), 0);
        assert_int_equal(free_and_strdup(&env->config->systemd.unit_directory, env->units), 0);
        assert_int_equal(free_and_strdup(&env->config->kubelet.healthz_url, healthz), 0);
        env->config->kubelet.health_timeout_usec = 2 * USEC_PER_SEC; /* probed every 0.5 s */

        assert_int_equal(fake_systemd_new(env->kube.event, &env->systemd, &env->bus), 0);
        assert_int_equal(unit_control_new(env->bus, 5 * USEC_PER_SEC, &env->uc), 0);
        assert_int_equal(osc_runner_new(&(OscRunnerDeps) { .event = env->kube.event,
                                                           .config = env->config,
                                                           .http = env->kube.http,
                                                           .units = env->uc },
                                        &env->runner),
                         0);
        osc_runner_set_kube(env->runner, env->kube.client);
        *state = env;
        return 0;
}

static int teardown(void **state) {
        Env *env = *state;

        osc_runner_free(env->runner);
        unit_control_free(env->uc);
        sd_bus_flush_close_unref(env->bus);
        fake_systemd_free(env->systemd);
        test_kube_done(&env->kube);
        config_free(env->config);
        assert_int_equal(osc_remove_tree(env->dir), 0);
        free(env->state);
        free(env->root);
        free(env->units);
        free(env);
        return 0;
}

static void on_done(OscRunner *r, int error, UpdateFailureCode code, const char *message, void *userdata) {
        Env *env = userdata;

        assert_false(env->done);
        env->done = true;
        env->error = error;
        env->code = code;
        snprintf(env->message, sizeof(env->message), "%s", strempty(message));
}

/* The work of `yaml` as CHECKSUM, prepared before the Node exists (as on a fresh node). */
static OscWorkView prepare(Env *env, const char *yaml) {
        _cleanup_(osc_desired_freep) OscDesired *osc = calloc(1, sizeof(OscDesired));
        OscWorkView view;

        assert_non_null(osc);
        assert_non_null(osc->checksum = strdup(CHECKSUM));
        assert_non_null(osc->yaml = strdup(yaml));
        osc->yaml_size = strlen(yaml);
        osc_runner_prepare(env->runner, osc, NULL, "1.0", 0, &view);
        if (view.error)
                fail_msg("prepare: %s", view.error);
        return view;
}

/* Applies the prepared work and waits for `done`: never from inside osc_runner_apply(). */
static void apply(Env *env, uint64_t timeout_usec) {
        env->done = false;
        assert_int_equal(osc_runner_apply(env->runner, CHECKSUM, on_done, env), 0);
        assert_false(env->done);
        assert_int_equal(osc_runner_apply(env->runner, CHECKSUM, on_done, env), -EBUSY);
        TEST_LOOP_UNTIL(env->kube.event, env->done, timeout_usec);
}

static char *rooted(Env *env, const char *path) {
        char *p;

        assert_true(asprintf(&p, "%s%s", env->root, path) > 0);
        return p;
}

static bool state_exists(Env *env, const char *name) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", env->state, name) > 0);
        return access(p, F_OK) == 0;
}

static void assert_contains(const char *haystack, const char *needle) {
        if (!strstr(haystack, needle))
                fail_msg("\"%s\" lacks \"%s\"", haystack, needle);
}

static void test_file_and_unit_restart(void **state) {
        Env *env = *state;
        _cleanup_free_ char *file = rooted(env, "/etc/a"), *unit = NULL, *data = NULL;
        OscWorkView view;

        assert_int_equal(fake_systemd_add_unit(env->systemd, "x.service", FAKE_OK), 0);
        view = prepare(env,
                       "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}],"
                       " units: [{name: x.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]}");
        assert_true(view.pending);
        assert_false(view.restarts_kubelet);
        assert_true(state_exists(env, OSC_STATE_CHANGES)); /* saved before anything runs */
        assert_int_equal(osc_runner_apply(env->runner, "another", on_done, env), -ESTALE);

        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, 0);
        assert_int_equal(env->code, _UPDATE_FAILURE_INVALID);
        assert_int_equal(read_full_file(file, 64, &data, NULL), 0);
        assert_string_equal(data, "a");
        assert_true(asprintf(&unit, "%s/x.service", env->units) > 0);
        assert_int_equal(access(unit, F_OK), 0);
        assert_contains(fake_systemd_calls(env->systemd),
                        "EnableUnitFiles:x.service Reload RestartUnit:x.service");
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "x.service"), 1);
        /* Committed: the last-applied OSC, nothing left to do for it. */
        assert_true(state_exists(env, OSC_STATE_LAST_APPLIED));
        assert_false(osc_runner_work_pending(env->runner));
        view = prepare(env,
                       "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}],"
                       " units: [{name: x.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]}");
        assert_false(view.pending);
        apply(env, 5 * USEC_PER_SEC); /* only says so again */
        assert_int_equal(env->error, 0);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "x.service"), 1);
}

/* The runner applies the model decoded at intake, without decoding the bytes again (here the model
 * says /etc/b, the bytes /etc/a: only the model's file is written), leaves the executor's OscDesired
 * as it was, and keeps what it needs: the run goes on after the OscDesired is freed and commits the
 * bytes as the last-applied OSC. */
static void test_shared_model(void **state) {
        static const char yaml[] = "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}]}";
        static const char model_yaml[] =
                "spec: {files: [{path: /etc/b, content: {inline: {data: b}}}], units:"
                " [{name: x.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]}";
        Env *env = *state;
        _cleanup_free_ char *a = rooted(env, "/etc/a"), *b = rooted(env, "/etc/b"), *last = NULL,
                            *data = NULL;
        OscDesired *osc = calloc(1, sizeof(OscDesired));
        OscWorkView view;

        assert_non_null(osc);
        assert_int_equal(fake_systemd_add_unit(env->systemd, "x.service", FAKE_OK), 0);
        assert_non_null(osc->checksum = strdup(CHECKSUM));
        assert_non_null(osc->yaml = strdup(yaml));
        osc->yaml_size = strlen(yaml);
        assert_int_equal(osc_model_decode_yaml(model_yaml, strlen(model_yaml),
                                               osc_runner_model_options(env->runner), &osc->model, NULL),
                         0);
        osc_runner_prepare(env->runner, osc, NULL, "1.0", 0, &view);
        assert_null(view.error);
        assert_true(view.pending);
        assert_non_null(osc->yaml);             /* not taken */
        assert_int_equal(osc->model->n_ref, 2); /* the runner's reference */
        osc_desired_free(osc);

        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, 0);
        assert_int_equal(access(b, F_OK), 0);
        assert_int_equal(access(a, F_OK), -1);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "x.service"), 1);
        assert_true(asprintf(&last, "%s/%s", env->state, OSC_STATE_LAST_APPLIED) > 0);
        assert_int_equal(read_full_file(last, 1024, &data, NULL), 0);
        assert_string_equal(data, yaml);
}

#define SECRET_FILE                                                                                     \
        "spec: {files: [{path: /etc/s, permissions: 416, content: {secretRef: {name: s, dataKey: k}}}," \
        " {path: /etc/after, content: {inline: {data: b}}}]}"

static void test_secret_ref(void **state) {
        Env *env = *state;
        _cleanup_free_ char *file = rooted(env, "/etc/s"), *after = rooted(env, "/etc/after"), *data = NULL;
        struct stat st;

        prepare(env, SECRET_FILE);
        test_kube_push(&env->kube, 200, NULL, "{\"kind\":\"Secret\",\"data\":{\"k\":\"aGVsbG8=\"}}");
        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, 0);
        test_kube_assert_request(&env->kube, 0, "GET /api/v1/namespaces/kube-system/secrets/s ");
        assert_int_equal(read_full_file(file, 64, &data, NULL), 0);
        assert_string_equal(data, "hello");
        assert_int_equal(stat(file, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(access(after, F_OK), 0); /* the applier went on after our item */
}

/* A failure comes back as the enum with a message naming the item; the item and those after it
 * stay not done, so the retry starts there. */
static void test_failure_code(void **state) {
        Env *env = *state;
        _cleanup_free_ char *after = rooted(env, "/etc/after");
        OscWorkView view;

        prepare(env, SECRET_FILE);
        test_kube_push(&env->kube, 200, NULL, "{\"kind\":\"Secret\",\"data\":{\"other\":\"eA==\"}}");
        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, -ENOENT);
        assert_int_equal(env->code, UPDATE_FAILURE_FILE_APPLY_FAILED);
        assert_string_equal(env->message, "/etc/s: Secret s has no data key k");
        assert_int_equal(access(after, F_OK), -1);
        assert_true(osc_runner_work_pending(env->runner));
        view = prepare(env, SECRET_FILE);
        assert_true(view.pending);

        /* Without an API client the Secret cannot be read: said so, as the same code. */
        osc_runner_set_kube(env->runner, NULL);
        apply(env, 5 * USEC_PER_SEC);
        assert_int_equal(env->error, -ENOTCONN);
        assert_int_equal(env->code, UPDATE_FAILURE_FILE_APPLY_FAILED);
        assert_string_equal(env->message, "/etc/s: no API server connection to read the Secret");
}

#define KUBELET_UNIT \
        "spec: {units: [{name: kubelet.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]}"

/* A changed kubelet unit: restarted, then its /healthz polled until 200. */
static void test_kubelet_health(void **state) {
        Env *env = *state;
        OscWorkView view;

        assert_int_equal(fake_systemd_add_unit(env->systemd, "kubelet.service", FAKE_OK), 0);
        view = prepare(env, KUBELET_UNIT);
        assert_true(view.restarts_kubelet);
        test_kube_push(&env->kube, 500, NULL, "not yet");
        test_kube_push(&env->kube, 200, NULL, "ok");
        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, 0);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "kubelet.service"), 1);
        assert_int_equal(fake_http_requests(env->kube.fake), 2);
        test_kube_assert_request(&env->kube, 1, "GET /healthz ");
}

/* A kubelet that stays unhealthy: KubeletUnhealthy with upstream's reason (docs/node-protocol.md §9 scenario
 * 25). */
static void test_kubelet_unhealthy(void **state) {
        Env *env = *state;

        assert_int_equal(fake_systemd_add_unit(env->systemd, "kubelet.service", FAKE_OK), 0);
        prepare(env, KUBELET_UNIT);
        for (int i = 0; i < 10; i++)
                test_kube_push(&env->kube, 500, NULL, "unhealthy");
        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, -ETIMEDOUT);
        assert_int_equal(env->code, UPDATE_FAILURE_KUBELET_UNHEALTHY);
        assert_contains(env->message, "kubelet is not healthy after in-place update: ");
        assert_contains(env->message, "HTTP 500");
        assert_true(osc_runner_work_pending(env->runner));
}

/* Cancelled while its own item is in flight: no callback, the item stays not done, and the run can
 * be started again. */
static void test_cancel_in_flight(void **state) {
        Env *env = *state;

        assert_int_equal(fake_systemd_add_unit(env->systemd, "kubelet.service", FAKE_OK), 0);
        prepare(env, KUBELET_UNIT);
        test_kube_push(&env->kube, 500, NULL, "unhealthy");
        env->done = false;
        assert_int_equal(osc_runner_apply(env->runner, CHECKSUM, on_done, env), 0);
        TEST_LOOP_UNTIL(env->kube.event, fake_http_requests(env->kube.fake) == 1, 10 * USEC_PER_SEC);
        osc_runner_cancel(env->runner);
        TEST_LOOP_NOT(env->kube.event, env->done, 1500 * USEC_PER_MSEC);
        assert_int_equal(fake_http_requests(env->kube.fake), 1); /* no probe after the cancel */
        assert_true(osc_runner_work_pending(env->runner));
        assert_false(state_exists(env, OSC_STATE_LAST_APPLIED));

        /* Started again: the restart is done (persisted), only the health check runs again. */
        test_kube_push(&env->kube, 200, NULL, "ok");
        apply(env, 10 * USEC_PER_SEC);
        assert_int_equal(env->error, 0);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "kubelet.service"), 1);
        assert_int_equal(fake_http_requests(env->kube.fake), 2);
        assert_true(state_exists(env, OSC_STATE_LAST_APPLIED));
}

/* A registry whose readinessProbe waits for a host that does not answer: a newer OSC ends the wait
 * at once (issue 23), with FileApplyFailed naming the upstream; the registry item stays not done. */
static void test_newer_osc_ends_probe(void **state) {
        Env *env = *state;
        _cleanup_free_ char *hosts = rooted(env, "/etc/containerd/certs.d/late.example/hosts.toml");
        _cleanup_free_ char *config = rooted(env, "/etc/containerd/config.toml");
        uint64_t t;

        assert_int_equal(fake_systemd_add_unit(env->systemd, "containerd.service", FAKE_OK), 0);
        prepare(env,
                "spec: {criConfig: {name: containerd, containerd: {registries: [{upstream: late.example,"
                " readinessProbe: true, hosts: [{url: \"http://127.0.0.1:1\"}]}]}}}");
        env->done = false;
        assert_int_equal(osc_runner_apply(env->runner, CHECKSUM, on_done, env), 0);
        /* The units first (containerd restarted for its new config), then the probe waits. */
        TEST_LOOP_UNTIL(env->kube.event, fake_systemd_n_jobs(env->systemd, "containerd.service") == 1,
                        10 * USEC_PER_SEC);
        TEST_LOOP_NOT(env->kube.event, env->done, 500 * USEC_PER_MSEC);
        assert_int_equal(access(config, F_OK), 0);

        osc_runner_set_desired(env->runner, CHECKSUM); /* the same OSC: the wait goes on */
        TEST_LOOP_NOT(env->kube.event, env->done, 200 * USEC_PER_MSEC);
        t = test_now_usec();
        osc_runner_set_desired(env->runner, "checksum-2");
        assert_false(env->done); /* from the loop, not from in here */
        TEST_LOOP_UNTIL(env->kube.event, env->done, 5 * USEC_PER_SEC);
        assert_true(test_now_usec() - t < USEC_PER_SEC); /* not the probe's next try (2 s) */
        assert_int_equal(env->error, -ESTALE);
        assert_int_equal(env->code, UPDATE_FAILURE_FILE_APPLY_FAILED);
        assert_contains(env->message,
                        "late.example: upstream late.example: readiness probe of http://127.0.0.1:1 "
                        "abandoned: OSC checksum-2 supersedes this one");
        assert_int_equal(access(hosts, F_OK), -1);
        assert_true(osc_runner_work_pending(env->runner));
}

/* A drift repair whose plan names a unit the guard refuses (gardener-node-agent.service, replaced by
 * the agent) restores everything else and names the refused unit; nothing of that unit is done. */
static void test_repair_leaves_refused_unit_out(void **state) {
        static const char yaml[] =
                "spec: {files: [{path: /etc/a, content: {inline: {data: a}}}],"
                " units: [{name: x.service, content: \"[Service]\\nExecStart=/bin/true\\n\"},"
                " {name: gardener-node-agent.service, content: \"[Service]\\nExecStart=/opt/bin/gna\\n\"}]}";
        Env *env = *state;
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_(osc_changes_freep) OscChanges *c = calloc(1, sizeof(OscChanges));
        _cleanup_free_ char *file = rooted(env, "/etc/a"), *err = NULL, *gna = NULL;
        const char *units[] = { "x.service", "gardener-node-agent.service" };
        OscWork *w;

        assert_non_null(c);
        assert_int_equal(osc_model_decode_yaml(yaml, strlen(yaml), NULL, &m, &err), 0);
        assert_int_equal(fake_systemd_add_unit(env->systemd, "x.service", FAKE_OK), 0);
        assert_int_equal(fake_systemd_add_unit(env->systemd, "gardener-node-agent.service", FAKE_OK), 0);
        assert_non_null(w = osc_changes_add_item(c, OSC_WORK_WRITE_FILE));
        assert_int_equal(osc_file_copy(&m->files[0], &w->file), 0);
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                assert_non_null(w = osc_changes_add_item(c, OSC_WORK_WRITE_UNIT));
                assert_int_equal(osc_unit_copy(osc_model_find_unit(m, units[i]), &w->unit), 0);
        }
        assert_non_null(osc_changes_add_item(c, OSC_WORK_DAEMON_RELOAD));
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                assert_non_null(w = osc_changes_add_item(c, OSC_WORK_UNIT_COMMAND));
                assert_non_null(w->name = strdup(units[i]));
                w->command = OSC_UNIT_COMMAND_RESTART;
        }

        assert_int_equal(osc_runner_repair(env->runner, c, on_done, env), 0);
        TEST_LOOP_UNTIL(env->kube.event, env->done, 10 * USEC_PER_SEC);
        print_message("repair: error %d, message \"%s\"; calls: %s\n", env->error, env->message,
                      fake_systemd_calls(env->systemd));
        assert_int_equal(env->error, 0);
        assert_contains(env->message, "gardener-node-agent.service (the agent runs in place of this unit");
        assert_int_equal(access(file, F_OK), 0);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "x.service"), 1);
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "gardener-node-agent.service"), 0);
        assert_true(asprintf(&gna, "%s/gardener-node-agent.service", env->units) > 0);
        assert_int_equal(access(gna, F_OK), -1);
        for (size_t i = 0; i < c->n_items; i++) {
                bool of_gna = streq_ptr(osc_work_target(&c->items[i]), "gardener-node-agent.service");

                assert_true(c->items[i].done);
                assert_int_equal(c->items[i].refused, of_gna);
        }
}

/* Issue 32: a unit the admin masked is named once per OSC, not once for each of its items (its write
 * and enable, its restart), with all they left out; its drop-in is written, the OSC committed. */
static void test_masked_unit_named_once(void **state) {
        Env *env = *state;
        _cleanup_free_ char *unit = NULL, *logged = NULL, *line = NULL;
        LogCapture capture;

        assert_true(asprintf(&unit, "%s/x.service", env->units) > 0);
        assert_int_equal(symlink("/dev/null", unit), 0);
        assert_int_equal(fake_systemd_add_unit(env->systemd, "x.service", FAKE_OK), 0);
        prepare(env,
                "spec: {units: [{name: x.service, command: restart, content: \"[Service]\\nExecStart=/bin/true\\n\","
                " dropIns: [{name: 10-a.conf, content: \"[Service]\\nEnvironment=A=1\\n\"}]}]}");
        log_capture_start(&capture, env->dir);
        apply(env, 10 * USEC_PER_SEC);
        logged = log_capture_stop(&capture);
        assert_int_equal(env->error, 0);
        assert_true(state_exists(env, OSC_STATE_LAST_APPLIED));
        assert_int_equal(fake_systemd_n_jobs(env->systemd, "x.service"), 0);
        assert_int_equal(log_count_lines(logged, "warning", unit), 1);
        assert_true(
                asprintf(&line,
                         "OSC %s: left masked (a symlink to /dev/null), unmask for the OSC to manage it: "
                         "%s (not written or enabled, not restarted).",
                         CHECKSUM, unit) > 0);
        assert_contains(logged, line);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_masked_unit_named_once, setup, teardown),
                cmocka_unit_test_setup_teardown(test_file_and_unit_restart, setup, teardown),
                cmocka_unit_test_setup_teardown(test_secret_ref, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_code, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kubelet_health, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kubelet_unhealthy, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_in_flight, setup, teardown),
                cmocka_unit_test_setup_teardown(test_newer_osc_ends_probe, setup, teardown),
                cmocka_unit_test_setup_teardown(test_repair_leaves_refused_unit_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shared_model, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
