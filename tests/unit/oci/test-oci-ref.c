/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/oci-ref.h"
#include "tests.h"

#define D "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

static void test_parse_table(void **state) {
        static const struct {
                const char *in, *registry, *repository, *tag, *digest, *api;
        } table[] = {
                { "busybox", "docker.io", "library/busybox", "latest", NULL, "registry-1.docker.io" },
                { "busybox:1.36", "docker.io", "library/busybox", "1.36", NULL, "registry-1.docker.io" },
                { "ns/app:v1", "docker.io", "ns/app", "v1", NULL, "registry-1.docker.io" },
                { "europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.31.2",
                  "europe-docker.pkg.dev", "gardener-project/releases/hyperkube", "v1.31.2", NULL,
                  "europe-docker.pkg.dev" },
                { "127.0.0.1:5000/kubelet:v1.31.2", "127.0.0.1:5000", "kubelet", "v1.31.2", NULL,
                  "127.0.0.1:5000" },
                { "localhost/kubelet", "localhost", "kubelet", "latest", NULL, "localhost" },
                { "localhost:5000/a/b@" D, "localhost:5000", "a/b", NULL, D, "localhost:5000" },
                { "reg.io/a:t@" D, "reg.io", "a", "t", D, "reg.io" },
                { "[::1]:5000/x:y", "[::1]:5000", "x", "y", NULL, "[::1]:5000" },
                { "reg.io/a__b/c-d--e/f.g:T_a-g.1", "reg.io", "a__b/c-d--e/f.g", "T_a-g.1", NULL, "reg.io" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(oci_ref_freep) OciRef *r = NULL;

                assert_int_equal(oci_ref_parse(table[i].in, &r), 0);
                assert_string_equal(r->registry, table[i].registry);
                assert_string_equal(r->repository, table[i].repository);
                if (table[i].tag)
                        assert_string_equal(r->tag, table[i].tag);
                else
                        assert_null(r->tag);
                if (table[i].digest)
                        assert_string_equal(r->digest, table[i].digest);
                else
                        assert_null(r->digest);
                assert_string_equal(oci_ref_api_host(r), table[i].api);
                assert_string_equal(oci_ref_manifest_reference(r),
                                    table[i].digest ? table[i].digest : table[i].tag);
        }
}

static void test_parse_rejects(void **state) {
        static const char *const bad[] = {
                "",
                "UPPER",
                "reg.io/UPPER:tag",
                "reg.io/a:",
                "reg.io/a:-tag",
                "reg.io/a@sha256:abc",
                "reg.io/a@md5:abc",
                "reg.io//a",
                "reg.io/a/",
                "reg.io/a..b",
                "reg.io/a___b",
                "reg.io/-a",
                "reg.io:99999/a",
                "reg.io:0/a",
                "reg.io:/a",
                "-reg.io/a",
                "reg.io/a:b:c",
                "a b",
                "reg.io/a?x=1",
                "reg.io/../a",
                "reg.io/a%2f",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                OciRef *r = NULL;

                assert_int_equal(oci_ref_parse(bad[i], &r), -EINVAL);
                assert_null(r);
        }
}

/* Issue 23: nothing in a reference reaches the URL path but grammar-checked parts. Each of these
 * would have put a dot segment, a query, a fragment or a second host into /v2/<name>/... */
static void test_no_url_injection(void **state) {
        static const struct {
                const char *in, *why;
        } bad[] = {
                { "reg.io/a/../b:v1", "repository" },
                { "reg.io/a/./b:v1", "repository" },
                { "reg.io/a:v1/../../x", "repository" },
                { "reg.io/a?x=y:v1", "repository" },
                { "reg.io/a:v1?x=y", "tag" },
                { "reg.io/a#frag:v1", "repository" },
                { "reg.io/a%2F..%2Fb:v1", "repository" },
                { "reg.io/a:v1%2F", "tag" },
                { "reg.io/a@sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad/../x",
                  "digest" },
                { "reg.io/a@sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
                  "digest" },
                { "user:pw@reg.io/a:v1", "digest" },
                { "reg.io..evil/a:v1", "registry" },
                { "reg.io.-x/a:v1", "registry" },
                { "reg-.io/a:v1", "registry" },
                { "[::1%eth0]:5000/a:v1", "registry" },
                { "[fe80::zz]/a:v1", "registry" },
                { "reg.io:5000:6000/a", "registry" },
                { "reg.io/a\n:v1", "repository" },
                { "reg.io/a b:v1", "repository" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                OciRef *r = NULL;
                const char *why = NULL;

                if (oci_ref_parse(bad[i].in, &r) != -EINVAL)
                        fail_msg("accepted \"%s\"", bad[i].in);
                assert_null(r);
                assert_int_equal(oci_ref_check(bad[i].in, &why), -EINVAL);
                if (!why || !strstr(why, bad[i].why))
                        fail_msg("\"%s\": reason \"%s\" does not name the %s", bad[i].in, strempty(why),
                                 bad[i].why);
        }
        assert_int_equal(
                oci_ref_check("europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.31.2", NULL), 0);
        assert_int_equal(oci_ref_check("Reg.IO:443/a:v1", NULL), 0);
        assert_int_equal(oci_ref_check("[2001:db8::1]/a:v1", NULL), 0);
}

static void test_name_total_length(void **state) {
        char ref[300];

        /* "reg.io/" + 248 characters = 255: the longest name. */
        strcpy(ref, "reg.io/");
        memset(ref + 7, 'a', 248);
        strcpy(ref + 255, ":v1");
        assert_int_equal(oci_ref_check(ref, NULL), 0);
        strcpy(ref + 255, "a:v1");
        assert_int_equal(oci_ref_check(ref, NULL), -EINVAL);
}

static void test_limits(void **state) {
        char tag[OCI_TAG_MAX + 2], ref[OCI_REF_MAX + 2];
        _cleanup_(oci_ref_freep) OciRef *r = NULL;

        memset(tag, 'a', sizeof(tag) - 1);
        tag[sizeof(tag) - 1] = '\0';
        assert_false(oci_tag_is_valid(tag));
        tag[OCI_TAG_MAX] = '\0';
        assert_true(oci_tag_is_valid(tag));

        memset(ref, 'a', sizeof(ref) - 1);
        ref[sizeof(ref) - 1] = '\0';
        assert_int_equal(oci_ref_parse(ref, &r), -EINVAL);
}

static void test_to_string(void **state) {
        _cleanup_(oci_ref_freep) OciRef *r = NULL;
        _cleanup_free_ char *s = NULL;

        assert_int_equal(oci_ref_parse("busybox", &r), 0);
        assert_int_equal(oci_ref_to_string(r, &s), 0);
        assert_string_equal(s, "docker.io/library/busybox:latest");
}

static void test_substitute_version(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
        char *x = NULL;

        assert_int_equal(oci_ref_substitute_version("reg.io/os/uki:{version}", "1592.6", &a), 0);
        assert_string_equal(a, "reg.io/os/uki:1592.6");
        assert_int_equal(oci_ref_substitute_version("r/{version}/x:{version}", "v1", &b), 0);
        assert_string_equal(b, "r/v1/x:v1");
        assert_int_equal(oci_ref_substitute_version("no-placeholder", "1", &c), 0);
        assert_string_equal(c, "no-placeholder");
        assert_int_equal(oci_ref_substitute_version("r:{version}", "1/../x", &x), -EINVAL);
        assert_int_equal(oci_ref_substitute_version("r:{version}", "", &x), -EINVAL);
        assert_null(x);
}

static void test_tag_version(void **state) {
        _cleanup_(oci_ref_freep) OciRef *r = NULL, *d = NULL;
        _cleanup_free_ char *v = NULL;
        char *x = NULL;

        assert_int_equal(oci_ref_parse("reg.io/hyperkube:v1.31.2", &r), 0);
        assert_int_equal(oci_ref_tag_version(r, &v), 0);
        assert_string_equal(v, "1.31.2");
        assert_int_equal(oci_ref_parse("reg.io/hyperkube@" D, &d), 0);
        assert_int_equal(oci_ref_tag_version(d, &x), -ENODATA);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_table),
                cmocka_unit_test(test_parse_rejects),
                cmocka_unit_test(test_no_url_injection),
                cmocka_unit_test(test_name_total_length),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_to_string),
                cmocka_unit_test(test_substitute_version),
                cmocka_unit_test(test_tag_version),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
