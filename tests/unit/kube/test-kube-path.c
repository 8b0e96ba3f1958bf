/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/kube-path.h"
#include "tests.h"

static void assert_path(KubeResource res, const char *ns, const char *name, const char *sub,
                        const char *want) {
        _cleanup_free_ char *path = NULL;

        assert_int_equal(kube_path(res, ns, name, sub, &path), 0);
        assert_string_equal(path, want);
        assert_true(kube_path_is_safe(path));
}

static void test_paths(void **state) {
        assert_path(KUBE_RESOURCE_NODES, NULL, NULL, NULL, "/api/v1/nodes");
        assert_path(KUBE_RESOURCE_NODES, NULL, "demo-node", NULL, "/api/v1/nodes/demo-node");
        assert_path(KUBE_RESOURCE_NODES, NULL, "demo-node", "status", "/api/v1/nodes/demo-node/status");
        assert_path(KUBE_RESOURCE_PODS, NULL, NULL, NULL, "/api/v1/pods");
        assert_path(KUBE_RESOURCE_PODS, "kube-system", "coredns-1", NULL,
                    "/api/v1/namespaces/kube-system/pods/coredns-1");
        assert_path(KUBE_RESOURCE_SECRETS, "kube-system", NULL, NULL,
                    "/api/v1/namespaces/kube-system/secrets");
        assert_path(KUBE_RESOURCE_SECRETS, "kube-system", "gardener-node-agent-demo", NULL,
                    "/api/v1/namespaces/kube-system/secrets/gardener-node-agent-demo");
        assert_path(KUBE_RESOURCE_EVENTS, "default", "demo-node.17f3a", NULL,
                    "/api/v1/namespaces/default/events/demo-node.17f3a");
        assert_path(
                KUBE_RESOURCE_LEASES, "kube-system", "gardener-node-agent-demo-node", NULL,
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gardener-node-agent-demo-node");
        assert_path(KUBE_RESOURCE_CSRS, NULL, "node-agent-csr-abc", NULL,
                    "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-agent-csr-abc");
        /* CSR names are base64url, as kubelet's and GNA's (the API server does not restrict them). */
        assert_path(KUBE_RESOURCE_CSRS, NULL, "node-agent-csr-Ab_9-Zx", NULL,
                    "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-agent-csr-Ab_9-Zx");
}

/* Issue 23: names from the cluster that would have selected another object or added a query. */
static void test_refused(void **state) {
        static const struct {
                KubeResource res;
                const char *ns, *name, *sub;
        } bad[] = {
                { KUBE_RESOURCE_SECRETS, "kube-system", "../../default/secrets/other", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "ipa-good?labelSelector=x", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "a/b", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "..", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "a%2Fb", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "a#b", NULL },
                { KUBE_RESOURCE_SECRETS, "kube-system", "", NULL },
                { KUBE_RESOURCE_SECRETS, "default/secrets", "x", NULL },
                { KUBE_RESOURCE_SECRETS, "kube.system", "x", NULL },
                { KUBE_RESOURCE_SECRETS, NULL, "x", NULL },     /* namespaced object without namespace */
                { KUBE_RESOURCE_NODES, "default", "n1", NULL }, /* cluster-scoped with one */
                { KUBE_RESOURCE_NODES, NULL, "n1", "status/../x" },
                { KUBE_RESOURCE_NODES, NULL, "n1", "" },
                { KUBE_RESOURCE_NODES, NULL, NULL, "status" }, /* subresource of a collection */
                { KUBE_RESOURCE_PODS, "kube-system", "Pod_1", NULL },
                { KUBE_RESOURCE_CSRS, NULL, "..", NULL },
                { KUBE_RESOURCE_CSRS, NULL, "a/../b", NULL },
                { KUBE_RESOURCE_CSRS, NULL, "a?b", NULL },
                { KUBE_RESOURCE_CSRS, NULL, "a%2F", NULL },
                { _KUBE_RESOURCE_MAX, NULL, "x", NULL },
                { _KUBE_RESOURCE_INVALID, NULL, "x", NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *path = NULL;

                if (kube_path(bad[i].res, bad[i].ns, bad[i].name, bad[i].sub, &path) != -EINVAL)
                        fail_msg("case %zu (%s/%s) made a path: %s", i, strempty(bad[i].ns),
                                 strempty(bad[i].name), strempty(path));
                assert_null(path);
        }
}

static void test_query(void **state) {
        _cleanup_free_ char *path = NULL;

        assert_int_equal(kube_path(KUBE_RESOURCE_NODES, NULL, NULL, NULL, &path), 0);
        assert_int_equal(kube_path_add_query(&path, "fieldSelector", "metadata.name=n1"), 0);
        assert_int_equal(kube_path_add_query(&path, "resourceVersion", "12 &x=y/../"), 0);
        assert_string_equal(
                path,
                "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&resourceVersion=12%20%26x%3Dy%2F..%2F");
        assert_true(kube_path_is_safe(path));
        assert_int_equal(kube_path_add_query(&path, "bad key", "x"), -EINVAL);
        assert_int_equal(kube_path_add_query(&path, "", "x"), -EINVAL);
}

static void test_escape(void **state) {
        _cleanup_free_ char *a = kube_path_escape("aZ09-._~"), *b = kube_path_escape("/?#%\xff =&");

        assert_string_equal(a, "aZ09-._~");
        assert_string_equal(b, "%2F%3F%23%25%FF%20%3D%26");
}

static void test_is_safe(void **state) {
        static const char *const good[] = {
                "/api/v1/nodes/n1",
                "/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1",
                "/version",
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x",
        };
        static const char *const bad[] = {
                "",
                "api/v1/nodes",
                "/",
                "/api/v1/namespaces/kube-system/secrets/../../default/secrets/other",
                "/api/v1/nodes/./n1",
                "/api/v1/nodes/..",
                "/api/v1//nodes",
                "/api/v1/nodes/",
                "/api/v1/nodes/a b",
                "/api/v1/nodes/%2E%2E",
                "/api/v1/nodes/n1#x",
                "/api/v1/nodes?x=%zz",
                "/api/v1/nodes?x=%2",
                "/api/v1/nodes\n",
                "/api/v1/nodes/n1;x",
                "/api/v1/nodes?x=a/b",
        };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!kube_path_is_safe(good[i]))
                        fail_msg("refused \"%s\"", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (kube_path_is_safe(bad[i]))
                        fail_msg("accepted \"%s\"", bad[i]);
        assert_false(kube_path_is_safe(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_paths),  cmocka_unit_test(test_refused), cmocka_unit_test(test_query),
                cmocka_unit_test(test_escape), cmocka_unit_test(test_is_safe),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
