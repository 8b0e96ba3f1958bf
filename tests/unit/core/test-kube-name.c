/* SPDX-License-Identifier: Apache-2.0 */
#include "core/kube-name.h"
#include "tests.h"

static void test_subdomain(void **state) {
        static const char *const good[] = {
                "a",
                "0",
                "demo-node",
                "gardener-node-agent-demo",
                "ip-10-0-1-2.eu-west-1.compute.internal",
                "a.b.c",
                "node-agent-csr-abc123",
                "kube-system",
                "x1-2-3",
        };
        static const char *const bad[] = {
                "",
                ".",
                "..",
                "../../default/secrets/other",
                "ipa-good?labelSelector=x",
                "a/b",
                "A",
                "Node",
                "a_b",
                "-a",
                "a-",
                ".a",
                "a.",
                "a..b",
                "a.-b",
                "a-.b",
                "a b",
                "a\nb",
                "a%2Fb",
                "a#b",
                "ä",
                "n1/status",
        };
        char name[300];

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!kube_name_is_valid(good[i], KUBE_NAME_SUBDOMAIN))
                        fail_msg("\"%s\" refused: %s", good[i],
                                 kube_name_invalid_reason(good[i], KUBE_NAME_SUBDOMAIN));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (kube_name_is_valid(bad[i], KUBE_NAME_SUBDOMAIN))
                        fail_msg("\"%s\" accepted", bad[i]);
        assert_false(kube_name_is_valid(NULL, KUBE_NAME_SUBDOMAIN));

        /* 253 characters in labels of at most 63: the longest name. */
        memset(name, 'a', sizeof(name));
        for (size_t i = 63; i < 253; i += 64)
                name[i] = '.';
        name[253] = '\0';
        assert_true(kube_name_is_valid(name, KUBE_NAME_SUBDOMAIN));
        name[253] = 'a';
        name[254] = '\0';
        assert_string_equal(kube_name_invalid_reason(name, KUBE_NAME_SUBDOMAIN),
                            "must be no more than 253 characters");
        /* A label of 64 inside a subdomain. */
        memset(name, 'a', 64);
        strcpy(name + 64, ".b");
        assert_false(kube_name_is_valid(name, KUBE_NAME_SUBDOMAIN));
}

static void test_label(void **state) {
        char name[70];

        assert_true(kube_name_is_valid("kube-system", KUBE_NAME_LABEL));
        assert_true(kube_name_is_valid("default", KUBE_NAME_LABEL));
        assert_false(kube_name_is_valid("kube.system", KUBE_NAME_LABEL));
        assert_false(kube_name_is_valid("default/secrets", KUBE_NAME_LABEL));
        assert_false(kube_name_is_valid("..", KUBE_NAME_LABEL));
        assert_false(kube_name_is_valid("", KUBE_NAME_LABEL));
        memset(name, 'a', 63);
        name[63] = '\0';
        assert_true(kube_name_is_valid(name, KUBE_NAME_LABEL));
        name[63] = 'a';
        name[64] = '\0';
        assert_string_equal(kube_name_invalid_reason(name, KUBE_NAME_LABEL),
                            "must be no more than 63 characters");
}

static void test_path_segment(void **state) {
        static const char *const good[] = { "node-agent-csr-Ab_9-Zx", "csr-1", "a.b", "~x", "...", ".x" };
        static const char *const bad[] = { "",    ".",   "..",  "a/b", "a?b", "a%2Fb",
                                           "a b", "a#b", "a+b", "a=b", "ä" };

        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!kube_name_is_valid(good[i], KUBE_NAME_PATH_SEGMENT))
                        fail_msg("\"%s\" refused", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (kube_name_is_valid(bad[i], KUBE_NAME_PATH_SEGMENT))
                        fail_msg("\"%s\" accepted", bad[i]);
}

static void test_check_message(void **state) {
        char long_name[400];

        {
                _cleanup_free_ char *err = NULL;

                assert_int_equal(kube_name_check("ok-name", KUBE_NAME_SUBDOMAIN, "x", &err), 0);
                assert_null(err);
                assert_int_equal(kube_name_check("../../default/secrets/other", KUBE_NAME_SUBDOMAIN,
                                                 "spec.files[2].content.secretRef.name", &err),
                                 -EINVAL);
                assert_string_equal(
                        err,
                        "spec.files[2].content.secretRef.name: \"../../default/secrets/other\" is not "
                        "a valid DNS-1123 subdomain: must consist of lower case alphanumeric "
                        "characters, '-' or '.', and must start and end with an alphanumeric character");
        }
        {
                /* Untrusted bytes are escaped and the name is cut. */
                _cleanup_free_ char *err = NULL;

                memset(long_name, 'a', sizeof(long_name) - 1);
                long_name[sizeof(long_name) - 1] = '\0';
                long_name[1] = '\n';
                long_name[2] = '"';
                assert_int_equal(kube_name_check(long_name, KUBE_NAME_LABEL, "osc.namespace", &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "osc.namespace: \"a\\n\\\"aaa"));
                assert_non_null(
                        strstr(err, "aaa\"... is not a valid DNS-1123 label: must be no more than 63"));
                assert_null(strchr(err, '\n'));
                assert_true(strlen(err) < 300);
        }
        assert_int_equal(kube_name_check("", KUBE_NAME_LABEL, "x", NULL), -EINVAL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_subdomain),
                cmocka_unit_test(test_label),
                cmocka_unit_test(test_path_segment),
                cmocka_unit_test(test_check_message),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
