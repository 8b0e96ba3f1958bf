/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <sys/stat.h>

#include "identity/kubelet-bootstrap.h"
#include "tests.h"
#include "util/fileio.h"

typedef struct Env {
        char dir[64];
        char kubelet[128], token[128], boot[192], real[192], pem[192];
        KubeletBootstrapParams p;
} Env;

static void env_setup(Env *e, const char *token) {
        snprintf(e->dir, sizeof(e->dir), "/tmp/test-kbs-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->kubelet, sizeof(e->kubelet), "%s/var/lib/kubelet", e->dir);
        snprintf(e->token, sizeof(e->token), "%s/bootstrap-token", e->dir);
        snprintf(e->boot, sizeof(e->boot), "%s/" KUBELET_BOOTSTRAP_KUBECONFIG, e->kubelet);
        snprintf(e->real, sizeof(e->real), "%s/kubeconfig-real", e->kubelet);
        snprintf(e->pem, sizeof(e->pem), "%s/pki/kubelet-client-current.pem", e->kubelet);
        if (token)
                assert_int_equal(write_file_atomic(e->token, token, strlen(token), 0600), 0);
        e->p = (KubeletBootstrapParams) {
                .kubelet_directory = e->kubelet,
                .token_file = e->token,
                .server = "api.example:443",
                .ca_file = "/var/lib/gardener-node-agent/cluster-ca.crt",
        };
}

static void env_teardown(Env *e) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", e->dir);
        assert_int_equal(system(cmd), 0);
}

static const char *at(const json_t *doc, const char *list, const char *inner, const char *key) {
        return json_string_value(
                json_object_get(json_object_get(json_array_get(json_object_get(doc, list), 0), inner), key));
}

static void test_kubeconfig_is_upstreams(void **state) {
        json_t *doc =
                kubelet_bootstrap_token_kubeconfig("api.example:443", "/ca.crt", "abcdef.0123456789abcdef");

        assert_non_null(doc);
        assert_string_equal(at(doc, "clusters", "cluster", "server"), "https://api.example:443");
        assert_string_equal(at(doc, "clusters", "cluster", "certificate-authority"), "/ca.crt");
        assert_string_equal(at(doc, "users", "user", "token"), "abcdef.0123456789abcdef");
        assert_string_equal(at(doc, "contexts", "context", "cluster"), "kubelet-bootstrap");
        assert_string_equal(at(doc, "contexts", "context", "user"), "kubelet-bootstrap");
        assert_string_equal(json_string_value(json_object_get(doc, "current-context")), "kubelet-bootstrap");
        json_decref(doc);
        /* A server with its scheme keeps it. */
        doc = kubelet_bootstrap_token_kubeconfig("https://api:6443", "/ca", "t");
        assert_string_equal(at(doc, "clusters", "cluster", "server"), "https://api:6443");
        json_decref(doc);
}

static void test_written_for_a_new_kubelet(void **state) {
        _cleanup_free_ char *err = NULL, *text = NULL;
        json_t *doc;
        struct stat st;
        size_t size;
        Env e;

        env_setup(&e, "  abcdef.0123456789abcdef\n");
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), 1);
        assert_int_equal(stat(e.boot, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(read_full_file(e.boot, 1 << 16, &text, &size), 0);
        doc = json_loads(text, 0, NULL);
        assert_string_equal(at(doc, "users", "user", "token"), "abcdef.0123456789abcdef"); /* trimmed */
        json_decref(doc);
        /* Written again at the next start while the kubelet still has no credentials of its own. */
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), 1);
        env_teardown(&e);
}

static void test_nothing_to_do(void **state) {
        _cleanup_free_ char *err = NULL;
        Env e;

        /* No bootstrap token (retired after the first apply): nothing. */
        env_setup(&e, NULL);
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), 0);
        assert_int_equal(access(e.boot, F_OK), -1);
        env_teardown(&e);

        /* The kubelet has its own credentials: either file is enough, as upstream. */
        env_setup(&e, "t.s");
        assert_int_equal(mkdir_parents(e.kubelet, 0755), 0);
        assert_int_equal(write_file_atomic(e.real, "{}", 2, 0600), 0);
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), 0);
        assert_int_equal(access(e.boot, F_OK), -1);
        assert_int_equal(unlink(e.real), 0);
        assert_int_equal(mkdir_parents(e.pem, 0755), 0); /* a directory is there too */
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), 0);
        assert_int_equal(access(e.boot, F_OK), -1);
        env_teardown(&e);
}

static void test_no_server_is_an_error(void **state) {
        _cleanup_free_ char *err = NULL;
        Env e;

        env_setup(&e, "t.s");
        e.p.server = NULL;
        assert_int_equal(kubelet_bootstrap_provision(&e.p, &err), -ENODATA);
        assert_non_null(strstr(err, "apiServer.server"));
        assert_null(strstr(err, "t.s"));
        assert_int_equal(access(e.boot, F_OK), -1);
        env_teardown(&e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kubeconfig_is_upstreams),
                cmocka_unit_test(test_written_for_a_new_kubelet),
                cmocka_unit_test(test_nothing_to_do),
                cmocka_unit_test(test_no_server_is_an_error),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
