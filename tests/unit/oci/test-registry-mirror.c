/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/registry-mirror.h"
#include "tests.h"
#include "util/strv.h"

static void check_endpoints(const char *mirror_url, const char *ref, const char *first, const char *second) {
        RegistryMirror m = { .host = (char *) "reg.test", .url = (char *) mirror_url };
        _cleanup_strv_free_ char **l = NULL;
        OciRef *r = NULL;
        size_t n = 0;

        assert_int_equal(oci_ref_parse(ref, &r), 0);
        assert_int_equal(registry_mirror_endpoints(mirror_url ? &m : NULL, mirror_url ? 1 : 0, r, &l, &n),
                         0);
        assert_int_equal(n, second ? 2 : 1);
        assert_int_equal(strv_length(l), n);
        assert_string_equal(l[0], first);
        if (second)
                assert_string_equal(l[1], second);
        oci_ref_free(r);
}

static void test_endpoints(void **state) {
        /* the mirror first, then the upstream */
        check_endpoints("http://127.0.0.1:5000/", "reg.test/kube/kubelet:v1", "http://127.0.0.1:5000",
                        "https://reg.test");
        check_endpoints("mirror.example//", "reg.test/kube/kubelet:v1", "https://mirror.example",
                        "https://reg.test");
        /* a mirror of another registry does not apply */
        check_endpoints("https://mirror.example", "other.test/kube/kubelet:v1", "https://other.test", NULL);
        check_endpoints(NULL, "reg.test:5000/kube/kubelet:v1", "https://reg.test:5000", NULL);
}

static void test_endpoint_host(void **state) {
        _cleanup_free_ char *a = registry_mirror_endpoint_host("https://m.example:5000/path");
        _cleanup_free_ char *b = registry_mirror_endpoint_host("m.example");

        assert_string_equal(a, "m.example:5000");
        assert_string_equal(b, "m.example");
}

static void test_credentials(void **state) {
        static const char auth[] =
                "{\"auths\":{\"mirror.example\":{\"auth\":\"bTptaXJyb3I=\"},\"reg.test\":{\"auth\":\"dTp1cHN0cmVhbQ==\"}}}";
        static const char upstream_only[] = "{\"auths\":{\"reg.test\":{\"auth\":\"dTp1cHN0cmVhbQ==\"}}}";
        RegistryCredentials *c = NULL;
        OciRef *r = NULL;

        assert_int_equal(oci_ref_parse("reg.test/kube/kubelet:v1", &r), 0);
        /* a mirror named in the file has its own */
        assert_int_equal(
                registry_mirror_credentials(auth, strlen(auth), "https://mirror.example", true, r, &c), 0);
        assert_string_equal(c->username, "m");
        c = registry_credentials_free(c);
        /* one that is not uses the upstream's */
        assert_int_equal(registry_mirror_credentials(upstream_only, strlen(upstream_only),
                                                     "https://mirror.example", true, r, &c),
                         0);
        assert_string_equal(c->username, "u");
        c = registry_credentials_free(c);
        /* the upstream itself never looks at a mirror's entry */
        assert_int_equal(registry_mirror_credentials(auth, strlen(auth), "https://reg.test", false, r, &c),
                         0);
        assert_string_equal(c->username, "u");
        c = registry_credentials_free(c);
        assert_int_equal(registry_mirror_credentials("{\"auths\":{}}", 12, "https://reg.test", false, r, &c),
                         -ENOENT);
        oci_ref_free(r);
}

static void test_join_failure(void **state) {
        char *m = strdup("upstream: HTTP 404");

        registry_mirror_join_failure(&m, "mirror: blob stalled");
        assert_string_equal(m, "upstream: HTTP 404; before that: mirror: blob stalled");
        free(m);
        m = strdup("same");
        registry_mirror_join_failure(&m, "same");
        assert_string_equal(m, "same");
        registry_mirror_join_failure(&m, NULL);
        assert_string_equal(m, "same");
        free(m);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_endpoints),
                cmocka_unit_test(test_endpoint_host),
                cmocka_unit_test(test_credentials),
                cmocka_unit_test(test_join_failure),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
