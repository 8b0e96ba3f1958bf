/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <sys/stat.h>

#include "identity/kubelet-rebootstrap.h"
#include "tests.h"
#include "util/fileio.h"

#define PEM                                                                                                   \
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN EC PRIVATE KEY-----\nMHc\n" \
        "-----END EC PRIVATE KEY-----\n"
#define REAL                                                                                                           \
        "apiVersion: v1\nkind: Config\nclusters:\n- name: old\n  cluster:\n    server: https://old\n"                  \
        "users:\n- name: old-user\n  user:\n    client-certificate: /var/lib/kubelet/pki/kubelet-client-current.pem\n" \
        "contexts:\n- name: ctx\n  context:\n    cluster: default-cluster\n    user: default-auth\n"                   \
        "current-context: ctx\n"

typedef struct Env {
        char dir[64];
        char kubelet[128], state[128], real[160], boot[160], pki[160], pem[192];
        KubeletRebootstrapParams p;
} Env;

static void env_setup(Env *e, bool with_real) {
        snprintf(e->dir, sizeof(e->dir), "/tmp/test-krb-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->kubelet, sizeof(e->kubelet), "%s/var/lib/kubelet", e->dir);
        snprintf(e->state, sizeof(e->state), "%s/kubelet-rebootstrap.json", e->dir);
        snprintf(e->real, sizeof(e->real), "%s/kubeconfig-real", e->kubelet);
        snprintf(e->boot, sizeof(e->boot), "%s/kubeconfig-bootstrap", e->kubelet);
        snprintf(e->pki, sizeof(e->pki), "%s/pki", e->kubelet);
        snprintf(e->pem, sizeof(e->pem), "%s/kubelet-client-current.pem", e->pki);
        assert_int_equal(mkdir_parents(e->pki, 0755), 0);
        assert_int_equal(write_file_atomic(e->pem, PEM, strlen(PEM), 0600), 0);
        {
                char sub[200];

                snprintf(sub, sizeof(sub), "%s/sub", e->pki);
                assert_int_equal(mkdir(sub, 0755), 0);
                snprintf(sub, sizeof(sub), "%s/sub/kubelet-client-2024.pem", e->pki);
                assert_int_equal(write_file_atomic(sub, "x", 1, 0600), 0);
        }
        if (with_real)
                assert_int_equal(write_file_atomic(e->real, REAL, strlen(REAL), 0600), 0);
        e->p = (KubeletRebootstrapParams) {
                .kubelet_directory = e->kubelet,
                .state_file = e->state,
                .ca_file = "/var/lib/gardener-node-agent/cluster-ca.crt",
                .server = "https://api.example:443",
        };
}

static void env_teardown(Env *e) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", e->dir);
        assert_int_equal(system(cmd), 0);
}

static bool exists(const char *p) {
        return access(p, F_OK) == 0;
}

static void test_pure_conversion(void **state) {
        json_t *real = json_pack("{s:s, s:[{s:s}], s:[{s:s}], s:[{s:s}], s:s}", "kind", "Config", "clusters",
                                 "name", "old", "users", "name", "old", "contexts", "name", "ctx",
                                 "current-context", "ctx");
        json_t *out = kubelet_bootstrap_kubeconfig(real, "/ca.crt", "https://s", "AB", 2);
        json_t *cl, *us;

        assert_non_null(out);
        cl = json_array_get(json_object_get(out, "clusters"), 0);
        us = json_array_get(json_object_get(out, "users"), 0);
        assert_int_equal(json_array_size(json_object_get(out, "clusters")), 1);
        assert_string_equal(json_string_value(json_object_get(cl, "name")), "default-cluster");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(cl, "cluster"), "certificate-authority")),
                "/ca.crt");
        assert_string_equal(json_string_value(json_object_get(json_object_get(cl, "cluster"), "server")),
                            "https://s");
        assert_string_equal(json_string_value(json_object_get(us, "name")), "default-auth");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(us, "user"), "client-certificate-data")),
                "QUI=");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(us, "user"), "client-key-data")), "QUI=");
        assert_string_equal(json_string_value(json_object_get(
                                    json_array_get(json_object_get(out, "contexts"), 0), "name")),
                            "ctx");
        assert_string_equal(json_string_value(json_object_get(out, "current-context")), "ctx");
        json_decref(out);
        out = json_string("x");
        assert_null(kubelet_bootstrap_kubeconfig(out, "/ca", "https://s", "A", 1));
        json_decref(out);
        json_decref(real);
}

static void test_full_run(void **state) {
        _cleanup_free_ char *err = NULL, *text = NULL;
        KubeletRebootstrapStep next;
        struct stat st;
        size_t size;
        Env e;

        env_setup(&e, /* with_real= */ true);
        assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), 0);
        assert_int_equal(next, KUBELET_REBOOTSTRAP_RESTART_KUBELET);
        assert_false(exists(e.real));
        assert_false(exists(e.pki));
        assert_int_equal(stat(e.boot, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(read_full_file(e.boot, 1 << 20, &text, &size), 0);
        assert_non_null(strstr(text, "\"default-cluster\""));
        assert_non_null(strstr(text, "\"https://api.example:443\""));
        assert_non_null(strstr(text, "client-key-data"));
        assert_non_null(strstr(text, "\"ctx\""));
        free(text);
        assert_int_equal(read_full_file(e.state, 4096, &text, &size), 0);
        assert_non_null(strstr(text, "restart-kubelet"));
        /* Run again before the restart happened: nothing is redone, the restart is still due. */
        assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), 0);
        assert_int_equal(next, KUBELET_REBOOTSTRAP_RESTART_KUBELET);
        assert_int_equal(kubelet_rebootstrap_finish(&e.p, &err), 0);
        assert_false(exists(e.state));
        env_teardown(&e);
}

/* A kill after each persisted step: the next run resumes there, and at no point are both the bootstrap
 * kubeconfig and pki/ missing (the kubelet could not register again). */
static void test_resume_after_kill_at_each_step(void **state) {
        for (KubeletRebootstrapStep killed = KUBELET_REBOOTSTRAP_REMOVE_REAL;
             killed <= KUBELET_REBOOTSTRAP_RESTART_KUBELET; killed++) {
                _cleanup_free_ char *err = NULL, *text = NULL;
                char st[64];
                KubeletRebootstrapStep next;
                size_t size;
                Env e;

                env_setup(&e, /* with_real= */ true);
                /* What the disk looks like when the run was killed right after persisting `killed`. */
                assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), 0); /* full run, then rewind */
                if (killed <= KUBELET_REBOOTSTRAP_REMOVE_REAL)
                        assert_int_equal(write_file_atomic(e.real, REAL, strlen(REAL), 0600), 0);
                if (killed <= KUBELET_REBOOTSTRAP_REMOVE_PKI)
                        assert_int_equal(mkdir_parents(e.pki, 0755), 0);
                snprintf(st, sizeof(st), "{\"step\":\"%s\"}", kubelet_rebootstrap_step_to_string(killed));
                assert_int_equal(write_file_atomic(e.state, st, strlen(st), 0600), 0);
                assert_true(exists(e.boot) || exists(e.pki));

                assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), 0);
                assert_int_equal(next, KUBELET_REBOOTSTRAP_RESTART_KUBELET);
                assert_true(exists(e.boot));
                assert_false(exists(e.pki));
                assert_false(exists(e.real));
                assert_int_equal(read_full_file(e.boot, 1 << 20, &text, &size), 0);
                assert_non_null(strstr(text, "default-auth"));
                env_teardown(&e);
        }
}

static void test_pki_kept_when_bootstrap_cannot_be_written(void **state) {
        _cleanup_free_ char *err = NULL;
        KubeletRebootstrapStep next;
        Env e;

        env_setup(&e, /* with_real= */ true);
        assert_int_equal(unlink(e.pem), 0); /* no client PEM to embed */
        assert_true(kubelet_rebootstrap_run(&e.p, &next, &err) < 0);
        assert_non_null(strstr(err, "kubelet-client-current.pem"));
        assert_true(exists(e.pki));
        assert_true(exists(e.real));
        assert_false(exists(e.boot));
        assert_false(exists(e.state)); /* still at write-bootstrap */
        env_teardown(&e);
}

static void test_no_real_needs_existing_bootstrap(void **state) {
        _cleanup_free_ char *err = NULL;
        KubeletRebootstrapStep next;
        Env e;

        env_setup(&e, /* with_real= */ false);
        assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), -ENOENT);
        assert_non_null(strstr(err, "does not exist, cannot proceed with rebootstrap"));
        assert_true(exists(e.pki));
        free(err);
        err = NULL;
        assert_int_equal(write_file_atomic(e.boot, "{}", 2, 0600), 0);
        assert_int_equal(kubelet_rebootstrap_run(&e.p, &next, &err), 0);
        assert_int_equal(next, KUBELET_REBOOTSTRAP_RESTART_KUBELET);
        assert_false(exists(e.pki));
        env_teardown(&e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pure_conversion),
                cmocka_unit_test(test_full_run),
                cmocka_unit_test(test_resume_after_kill_at_each_step),
                cmocka_unit_test(test_pki_kept_when_bootstrap_cannot_be_written),
                cmocka_unit_test(test_no_real_needs_existing_bootstrap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
