/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "kube/kubeconfig.h"
#include "tests.h"
#include "util/fileio.h"

static char *mfree_str(char *p) {
        free(p);
        return NULL;
}

static void remove_file(const char *dir, const char *name) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        assert_int_equal(unlink(p), 0);
}

static KubeConfig *load_fixture(const char *name) {
        _cleanup_free_ char *path = NULL, *error = NULL;
        KubeConfig *c = NULL;
        const char *dir = getenv("TEST_DATA");

        assert_non_null(dir);
        assert_true(asprintf(&path, "%s/kubeconfig/%s", dir, name) > 0);
        if (kubeconfig_load(path, &c, &error) < 0)
                fail_msg("%s: %s", name, error);
        assert_non_null(c);
        assert_string_equal(c->source, path);
        return c;
}

static void test_gardener_node_agent(void **state) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = load_fixture("gardener-node-agent.yaml");
        _cleanup_free_ char *cert = NULL, *key = NULL;
        const char *dir = getenv("TEST_DATA");

        /* The trailing '/' goes, the proxy prefix stays; the current context picks the cluster. */
        assert_string_equal(c->server, "https://api.shoot.example.com:6443/k8s/clusters/x");
        assert_string_equal(c->tls_server_name, "api.internal");
        assert_non_null(c->ca_data);
        assert_int_equal(c->ca_data_size, strlen(c->ca_data));
        assert_string_equal(c->ca_data, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
        assert_null(c->ca_file);
        /* Relative paths are resolved against the kubeconfig's directory. */
        assert_true(asprintf(&cert, "%s/kubeconfig/pki/client.crt", dir) > 0);
        assert_true(asprintf(&key, "%s/kubeconfig/../keys/client.key", dir) > 0);
        assert_string_equal(c->cert_file, cert);
        assert_string_equal(c->key_file, key);
        assert_null(c->cert_data);
        assert_null(c->token);
        assert_null(c->token_file);
        assert_string_equal(c->namespace, "kube-system");
}

static void test_token_file_json(void **state) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = load_fixture("token-file.json");
        _cleanup_free_ char *token = NULL;

        assert_string_equal(c->server, "https://10.0.0.1");
        assert_string_equal(c->ca_file, "/etc/ca.pem");
        assert_null(c->ca_data);
        assert_null(c->tls_server_name);
        assert_string_equal(c->token, "static-token");
        assert_true(asprintf(&token, "%s/kubeconfig/token", getenv("TEST_DATA")) > 0);
        assert_string_equal(c->token_file, token);
        assert_null(c->cert_file);
        assert_null(c->namespace);
}

static void test_kubelet(void **state) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = load_fixture("kubelet.yaml");

        assert_string_equal(c->server, "https://[fd00::1]:443");
        assert_string_equal(c->ca_file, "/var/lib/kubelet/ca.crt");
        assert_string_equal(c->cert_file, "/var/lib/kubelet/pki/kubelet-client-current.pem");
        assert_string_equal(c->key_file, "/var/lib/kubelet/pki/kubelet-client-current.pem");
        assert_string_equal(c->namespace, "default");
}

#define HEAD \
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
#define CLUSTER "clusters:\n- name: k\n  cluster:\n    server: https://h\n"

static void test_data_overrides_path(void **state) {
        static const char text[] = HEAD
                "clusters:\n- name: k\n  cluster:\n    server: https://h:1/\n    certificate-authority: ca.pem\n"
                "    certificate-authority-data: |\n      Zm9v\n      YmFy\n"
                "users:\n- name: u\n  user:\n    client-certificate: c.pem\n    client-key: k.pem\n"
                "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n";
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;

        assert_int_equal(kubeconfig_parse(text, strlen(text), "/etc/x/kc", &c, NULL), 0);
        assert_string_equal(c->server, "https://h:1");
        assert_string_equal(c->ca_data, "foobar");
        assert_int_equal(c->ca_data_size, 6);
        assert_null(c->ca_file);
        assert_string_equal(c->cert_data, "cert");
        assert_string_equal(c->key_data, "key");
        assert_null(c->cert_file);
        assert_null(c->key_file);
}

static void test_relative_to_root_and_cwd(void **state) {
        static const char text[] = HEAD CLUSTER "users:\n- name: u\n  user:\n    tokenFile: t\n";
        _cleanup_(kubeconfig_freep) KubeConfig *a = NULL, *b = NULL;
        _cleanup_free_ char *cwd = get_current_dir_name(), *expected = NULL;

        assert_int_equal(kubeconfig_parse(text, strlen(text), "/kc", &a, NULL), 0);
        assert_string_equal(a->token_file, "/t");
        assert_int_equal(kubeconfig_parse(text, strlen(text), "kc", &b, NULL), 0);
        assert_true(asprintf(&expected, "%s/t", cwd) > 0);
        assert_string_equal(b->token_file, expected);
}

static void test_anonymous_context(void **state) {
        static const char text[] =
                "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n" CLUSTER;
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;

        assert_int_equal(kubeconfig_parse(text, strlen(text), "/kc", &c, NULL), 0);
        assert_null(c->token);
        assert_null(c->cert_file);
}

static void test_errors(void **state) {
        static const struct {
                const char *text;
                const char *message; /* expected substring */
        } cases[] = {
                { "a: [1\n", "/kc: line" },
                { "- 1\n", "not a kubeconfig" },
                { "apiVersion: v1\n" CLUSTER, "current-context: not set" },
                { "current-context: x\n" CLUSTER, "no context named \"x\"" },
                { HEAD, "context.cluster: no cluster named \"k\"" },
                { HEAD "clusters:\n- name: k\n  cluster: {}\n", "clusters[\"k\"].cluster.server: missing" },
                { HEAD "clusters:\n- name: k\n  cluster:\n    server: http://h\n",
                  "is not an https:// URL" },
                { HEAD "clusters:\n- name: k\n  cluster:\n    server: https:///x\n",
                  "is not an https:// URL" },
                { HEAD "clusters:\n- name: k\n  cluster:\n    server: https://h?x=1\n", "must not contain" },
                { HEAD "clusters:\n- name: k\n  cluster:\n    server: 5\n",
                  "cluster.server: expected a string" },
                { HEAD
                  "clusters:\n- name: k\n  cluster:\n    server: https://h\n    insecure-skip-tls-verify: true\n",
                  "clusters[\"k\"].cluster.insecure-skip-tls-verify: not supported" },
                { HEAD "clusters:\n- name: k\n  cluster:\n    server: https://h\n    proxy-url: http://p\n",
                  "cluster.proxy-url: not supported" },
                { HEAD
                  "clusters:\n- name: k\n  cluster:\n    server: https://h\n    certificate-authority-data: \"!!\"\n",
                  "certificate-authority-data: not valid base64" },
                { HEAD CLUSTER, "context.user: no user named \"u\"" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    exec: {command: aws}\n",
                  "users[\"u\"].user.exec: credential plugins are not supported" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n",
                  "users[\"u\"].user.auth-provider: auth providers are not supported" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    username: a\n    password: b\n",
                  "user.username: basic authentication" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    as: admin\n", "user.as: impersonation" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    token: 12345\n",
                  "user.token: expected a string" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    client-certificate: c.pem\n",
                  "client-certificate and client-key must be given together" },
                { HEAD CLUSTER "users:\n- name: u\n  user:\n    client-key-data: a2V5\n",
                  "client-certificate and client-key must be given together" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;
                _cleanup_free_ char *error = NULL;
                int r;

                r = kubeconfig_parse(cases[i].text, strlen(cases[i].text), "/kc", &c, &error);
                if (r >= 0 || !error || !strstr(error, cases[i].message))
                        fail_msg("case %zu: r=%d error=%s, expected \"%s\"", i, r, error, cases[i].message);
                assert_null(c);
                assert_true(error && strncmp(error, "/kc: ", 5) == 0);
        }
}

static void write_file(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        assert_int_equal(write_file_atomic(p, content, strlen(content), 0600), 0);
}

static void test_in_cluster(void **state) {
        char dir[] = "/tmp/test-kubeconfig-XXXXXX";
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL, *v6 = NULL;
        _cleanup_free_ char *error = NULL, *missing = NULL, *token = NULL, *ca = NULL;

        assert_non_null(mkdtemp(dir));

        assert_int_equal(kubeconfig_in_cluster(NULL, "443", dir, &c, &error), -ENOENT);
        assert_non_null(strstr(error, "KUBERNETES_SERVICE_HOST"));
        error = mfree_str(error);
        assert_int_equal(kubeconfig_in_cluster("10.96.0.1", "443", dir, &c, &error), -ENOENT);
        assert_non_null(strstr(error, "/token"));
        error = mfree_str(error);

        write_file(dir, "token", "abc\n");
        assert_int_equal(kubeconfig_in_cluster("10.96.0.1", "443", dir, &c, &error), -ENOENT);
        assert_non_null(strstr(error, "/ca.crt"));
        error = mfree_str(error);
        assert_int_equal(kubeconfig_in_cluster("10.96.0.1", "44x", dir, &c, &error), -EINVAL);
        error = mfree_str(error);

        write_file(dir, "ca.crt", "PEM");
        write_file(dir, "namespace", "garden\n");
        assert_int_equal(kubeconfig_in_cluster("10.96.0.1", "443", dir, &c, &error), 0);
        assert_string_equal(c->server, "https://10.96.0.1:443");
        assert_true(asprintf(&token, "%s/token", dir) > 0);
        assert_true(asprintf(&ca, "%s/ca.crt", dir) > 0);
        assert_string_equal(c->token_file, token);
        assert_string_equal(c->ca_file, ca);
        assert_null(c->token);
        assert_string_equal(c->namespace, "garden");
        assert_string_equal(c->source, "in-cluster");

        assert_int_equal(kubeconfig_in_cluster("fd00::1", "6443", dir, &v6, NULL), 0);
        assert_string_equal(v6->server, "https://[fd00::1]:6443");

        /* A kubeconfig that does not exist and no cluster environment: a clear -ENOENT. */
        assert_int_equal(unsetenv("KUBERNETES_SERVICE_HOST"), 0);
        assert_true(asprintf(&missing, "%s/nope", dir) > 0);
        assert_int_equal(kubeconfig_load(missing, &c, &error), -ENOENT);
        assert_non_null(strstr(error, "does not exist"));

        remove_file(dir, "token");
        remove_file(dir, "ca.crt");
        remove_file(dir, "namespace");
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_gardener_node_agent),
                cmocka_unit_test(test_token_file_json),
                cmocka_unit_test(test_kubelet),
                cmocka_unit_test(test_data_overrides_path),
                cmocka_unit_test(test_relative_to_root_and_cwd),
                cmocka_unit_test(test_anonymous_context),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_in_cluster),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
