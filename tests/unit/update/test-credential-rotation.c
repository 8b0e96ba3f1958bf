/* SPDX-License-Identifier: Apache-2.0 */
/* The credentials rotation's step machine on a real sd_event loop, without systemd or an API server:
 * the kubelet's files are re-bootstrapped and the step persisted before the restart (which fails here:
 * no bus), a second run of the same transaction resumes at the persisted step with the persisted
 * caFile/server, another transaction's record is ignored, a missing component config is a clear
 * failure that touches nothing, and a freed rotation never calls back. The end to end run with
 * systemd, the kubelet's health and the API server is tests/integration/test_credentials.py. */
#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

#include "net/http.h"
#include "test-loop.h"
#include "tests.h"
#include "update/credential-rotation.h"
#include "util/fileio.h"

typedef struct Env {
        char dir[64];
        char *state_dir, *kubelet_dir;
        sd_event *event;
        Http *http;
        Identity *identity;            /* stays NULL: no certificate of ours to renew */
        TokenSync *tokens;             /* stays NULL */
        OscComponentConfig *component; /* set by set_component() */
        bool called;
        int error;
        UpdateFailureCode code;
        char *message;
} Env;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static char *path(Env *env, const char *name) {
        static char buf[4][256];
        static unsigned i;
        char *p = buf[i++ % 4];

        snprintf(p, sizeof(buf[0]), "%s/%s", env->dir, name);
        return p;
}

static void put(const char *p, const char *text) {
        assert_int_equal(write_file_atomic(p, text, strlen(text), 0600), 0);
}

static int setup(void **state) {
        Env *env = calloc(1, sizeof(Env));

        assert_non_null(env);
        strcpy(env->dir, "/tmp/test-credrot-XXXXXX");
        assert_non_null(mkdtemp(env->dir));
        assert_true(asprintf(&env->state_dir, "%s/state", env->dir) > 0);
        assert_true(asprintf(&env->kubelet_dir, "%s/kubelet", env->dir) > 0);
        assert_int_equal(mkdir(env->state_dir, 0700), 0);
        assert_int_equal(mkdir(env->kubelet_dir, 0700), 0);
        assert_int_equal(mkdir(path(env, "kubelet/pki"), 0700), 0);
        put(path(env, "kubelet/pki/kubelet-client-current.pem"), "-----BEGIN CERTIFICATE-----\nx\n");
        put(path(env, "kubelet/kubeconfig-real"),
            "{\"clusters\":[],\"users\":[],\"contexts\":[{\"name\":\"k\",\"context\":{}}]}");
        assert_int_equal(sd_event_new(&env->event), 0);
        assert_int_equal(http_new(env->event, &env->http), 0);
        *state = env;
        return 0;
}

static int teardown(void **state) {
        Env *env = *state;

        http_free(env->http);
        sd_event_unref(env->event);
        (void) nftw(env->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        free(env->state_dir);
        free(env->kubelet_dir);
        free(env->message);
        osc_component_config_free(env->component);
        free(env);
        return 0;
}

/* GNA's component config with this API server and CA file (NULL: none at all). */
static void set_component(Env *env, const char *ca_file, const char *server) {
        env->component = osc_component_config_free(env->component);
        if (!ca_file && !server)
                return;
        env->component = calloc(1, sizeof(OscComponentConfig));
        assert_non_null(env->component);
        env->component->ca_file = ca_file ? strdup(ca_file) : NULL;
        env->component->api_server = server ? strdup(server) : NULL;
}

static void on_done(CredentialRotation *cr, int error, UpdateFailureCode code, const char *message,
                    void *userdata) {
        Env *env = userdata;

        assert_false(env->called);
        env->called = true;
        env->error = error;
        env->code = code;
        free(env->message);
        env->message = message ? strdup(message) : NULL;
}

static int start(Env *env, const char *tx, bool ca, bool sa, CredentialRotation **ret) {
        CredentialRotationDeps deps = {
                .event = env->event,
                .http = env->http,
                .identity = &env->identity,
                .tokens = &env->tokens,
                .component = &env->component,
        };
        CredentialRotationParams p = {
                .transaction = tx,
                .ca = ca,
                .sa = sa,
                .state_directory = env->state_dir,
                .kubelet_directory = env->kubelet_dir,
                .kubelet_unit = "kubelet.service",
                .health = { .url = "http://127.0.0.1:1/healthz", .timeout_usec = USEC_PER_SEC },
                .config_wait_usec = 200 * USEC_PER_MSEC,
        };

        env->called = false;
        return credential_rotation_start(&deps, &p, on_done, env, ret);
}

/* One run to its callback, with this component config. */
static void run(Env *env, const char *tx, bool ca, bool sa, const char *ca_file, const char *server) {
        _cleanup_(credential_rotation_freep) CredentialRotation *cr = NULL;

        set_component(env, ca_file, server);
        assert_int_equal(start(env, tx, ca, sa, &cr), 0);
        assert_false(env->called); /* never from inside the start */
        TEST_LOOP_UNTIL(env->event, env->called, 5 * USEC_PER_SEC);
}

static char *state_text(Env *env) {
        char *text = NULL;
        size_t size;

        assert_int_equal(
                read_full_file(path(env, "state/" CREDENTIAL_ROTATION_STATE_FILE), 4096, &text, &size), 0);
        return text;
}

static void test_ca_files_persisted_then_resumed(void **state) {
        Env *env = *state;
        _cleanup_free_ char *s1 = NULL, *s2 = NULL, *s3 = NULL;

        run(env, "tx-1", /* ca= */ true, /* sa= */ false, "/ca.crt", "https://api:443");
        assert_true(env->error < 0);
        assert_int_equal(env->code, UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED);
        assert_string_equal(env->message, "cannot restart kubelet.service: no connection to systemd");
        assert_int_equal(access(path(env, "kubelet/kubeconfig-bootstrap"), F_OK), 0);
        assert_true(access(path(env, "kubelet/kubeconfig-real"), F_OK) < 0);
        assert_true(access(path(env, "kubelet/pki"), F_OK) < 0);
        s1 = state_text(env);
        assert_non_null(strstr(s1, "\"transaction\":\"tx-1\""));
        assert_non_null(strstr(s1, "\"step\":\"restart-kubelet\""));
        assert_non_null(strstr(s1, "\"caFile\":\"/ca.crt\""));

        /* The same transaction after a restart, before the OSC was read again: the persisted
         * caFile/server, and straight to the restart. */
        run(env, "tx-1", /* ca= */ true, /* sa= */ false, NULL, NULL);
        assert_string_equal(env->message, "cannot restart kubelet.service: no connection to systemd");
        s2 = state_text(env);
        assert_string_equal(s1, s2);

        /* Another transaction's record does not count: it starts over and needs its own config. */
        run(env, "tx-2", /* ca= */ true, /* sa= */ false, NULL, NULL);
        assert_non_null(strstr(env->message, "names no apiServer.caFile and apiServer.server"));
        s3 = state_text(env);
        assert_non_null(strstr(s3, "\"transaction\":\"tx-2\""));
        assert_non_null(strstr(s3, "\"step\":\"kubelet-files\""));
}

static void test_no_component_config_touches_nothing(void **state) {
        Env *env = *state;

        run(env, "tx-1", /* ca= */ true, /* sa= */ true, NULL, "https://api:443");
        assert_int_equal(env->code, UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED);
        assert_non_null(strstr(env->message, "names no apiServer.caFile"));
        assert_int_equal(access(path(env, "kubelet/kubeconfig-real"), F_OK), 0);
        assert_int_equal(access(path(env, "kubelet/pki"), F_OK), 0);
        assert_true(access(path(env, "kubelet/kubeconfig-bootstrap"), F_OK) < 0);
}

static void test_sa_only_without_tokens_is_done(void **state) {
        Env *env = *state;
        _cleanup_free_ char *s = NULL;

        run(env, "tx-1", /* ca= */ false, /* sa= */ true, "/ca.crt", "https://api:443"); /* no syncConfigs */
        assert_int_equal(env->error, 0);
        assert_null(env->message);
        s = state_text(env);
        assert_non_null(strstr(s, "\"step\":\"done\""));
        /* the kubelet is left alone */
        assert_int_equal(access(path(env, "kubelet/kubeconfig-real"), F_OK), 0);

        /* Done is remembered: a rerun of that transaction does nothing again. */
        run(env, "tx-1", /* ca= */ true, /* sa= */ true, NULL, NULL);
        assert_int_equal(env->error, 0);
        assert_int_equal(access(path(env, "kubelet/kubeconfig-real"), F_OK), 0);
}

/* Token syncs configured but no TokenSync running: a failure, not a silent "done". Without any
 * component config (a resumed run before the OSC Secret) it waits, then fails. */
static void test_sa_needs_the_token_sync(void **state) {
        Env *env = *state;

        set_component(env, "/ca.crt", "https://api:443");
        env->component->token_syncs = calloc(1, sizeof(OscTokenSync));
        env->component->token_syncs[0].secret_name = strdup("gardener-valitail");
        env->component->token_syncs[0].path = strdup("/var/lib/valitail/token");
        env->component->n_token_syncs = 1;
        env->component->file = strdup("/var/lib/gardener-node-agent/config.yaml");
        {
                _cleanup_(credential_rotation_freep) CredentialRotation *cr = NULL;

                assert_int_equal(start(env, "tx-1", false, true, &cr), 0);
                TEST_LOOP_UNTIL(env->event, env->called, 5 * USEC_PER_SEC);
        }
        assert_string_equal(env->message,
                            "cannot re-sync the tokens: the token sync of "
                            "/var/lib/gardener-node-agent/config.yaml is not running");

        run(env, "tx-2", /* ca= */ false, /* sa= */ true, NULL, NULL);
        assert_string_equal(env->message,
                            "cannot re-sync the tokens: GNA's component config in the OSC is not known");
}

static void test_free_never_calls_back(void **state) {
        Env *env = *state;
        CredentialRotation *cr = NULL;

        assert_int_equal(start(env, "tx-1", false, true, &cr), 0);
        credential_rotation_free(cr);
        TEST_LOOP_NOT(env->event, env->called, 200 * USEC_PER_MSEC);
}

/* After a restart the OSC Secret may come after the resumed rotation: the kubelet step waits for it. */
static void test_waits_for_the_component_config(void **state) {
        Env *env = *state;
        _cleanup_(credential_rotation_freep) CredentialRotation *cr = NULL;
        CredentialRotationDeps deps = {
                .event = env->event,
                .http = env->http,
                .identity = &env->identity,
                .tokens = &env->tokens,
                .component = &env->component,
        };
        CredentialRotationParams p = {
                .transaction = "tx-1",
                .ca = true,
                .state_directory = env->state_dir,
                .kubelet_directory = env->kubelet_dir,
                .kubelet_unit = "kubelet.service",
                .health = { .url = "http://127.0.0.1:1/healthz", .timeout_usec = USEC_PER_SEC },
                .config_wait_usec = 10 * USEC_PER_SEC,
        };

        assert_int_equal(credential_rotation_start(&deps, &p, on_done, env, &cr), 0);
        TEST_LOOP_NOT(env->event, env->called, 200 * USEC_PER_MSEC);
        assert_int_equal(access(path(env, "kubelet/kubeconfig-real"), F_OK), 0);
        credential_rotation_component_changed(cr); /* still none: goes on waiting */
        TEST_LOOP_NOT(env->event, env->called, 100 * USEC_PER_MSEC);
        set_component(env, "/ca.crt", "https://api:443");
        credential_rotation_component_changed(cr);
        TEST_LOOP_UNTIL(env->event, env->called, 5 * USEC_PER_SEC);
        assert_string_equal(env->message, "cannot restart kubelet.service: no connection to systemd");
        assert_int_equal(access(path(env, "kubelet/kubeconfig-bootstrap"), F_OK), 0);
}

static void test_step_names(void **state) {
        for (CredentialRotationStep s = 0; s < _CREDENTIAL_ROTATION_STEP_MAX; s++)
                assert_int_equal(credential_rotation_step_from_string(credential_rotation_step_to_string(s)),
                                 s);
        assert_int_equal(credential_rotation_step_from_string("nope"), _CREDENTIAL_ROTATION_STEP_INVALID);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_ca_files_persisted_then_resumed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_component_config_touches_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sa_only_without_tokens_is_done, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sa_needs_the_token_sync, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_never_calls_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_waits_for_the_component_config, setup, teardown),
                cmocka_unit_test(test_step_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
