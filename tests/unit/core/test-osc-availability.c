/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/osc-availability.h"
#include "tests.h"

static void test_reasons(void **state) {
        assert_null(osc_availability_reason(OSC_AVAILABILITY_UNKNOWN));
        assert_string_equal(osc_availability_reason(OSC_AVAILABILITY_FOUND), "OSCSecretFound");
        assert_string_equal(osc_availability_reason(OSC_AVAILABILITY_NOT_FOUND), "OSCSecretNotFound");
        assert_string_equal(osc_availability_reason(OSC_AVAILABILITY_FORBIDDEN), "OSCSecretForbidden");
        assert_string_equal(osc_availability_reason(OSC_AVAILABILITY_NOT_NAMED), "OSCSecretNotNamed");
        assert_null(osc_availability_reason(_OSC_AVAILABILITY_INVALID));
        assert_false(osc_availability_is_problem(OSC_AVAILABILITY_UNKNOWN));
        assert_false(osc_availability_is_problem(OSC_AVAILABILITY_FOUND));
        assert_true(osc_availability_is_problem(OSC_AVAILABILITY_NOT_FOUND));
        assert_true(osc_availability_is_problem(OSC_AVAILABILITY_FORBIDDEN));
        assert_true(osc_availability_is_problem(OSC_AVAILABILITY_NOT_NAMED));
}

static void test_messages(void **state) {
        OscSecretRef label = { .namespace = "kube-system",
                               .name = "gardener-node-agent-a",
                               .source = OSC_SECRET_FROM_LABEL };
        OscSecretRef config = { .namespace = "kube-system", .name = "osc-b" };
        _cleanup_free_ char *found = NULL, *missing = NULL, *forbidden = NULL, *bare = NULL, *unnamed = NULL;
        char *m = NULL;

        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_NOT_FOUND, &label, NULL, &missing), 0);
        assert_string_equal(missing,
                            "OSC Secret kube-system/gardener-node-agent-a (named by the Node label "
                            "worker.gardener.cloud/gardener-node-agent-secret-name) does not exist; "
                            "waiting for it to be created");
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_FOUND, &config, NULL, &found), 0);
        assert_string_equal(found, "OSC Secret kube-system/osc-b (named by osc.secretName) is readable");
        /* 403 and 404 read differently; the server's reason is kept, made valid UTF-8 */
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_FORBIDDEN, &label,
                                                  "secrets \"gardener-node-agent-a\" is forbidden\x01\xff",
                                                  &forbidden),
                         0);
        assert_string_equal(forbidden,
                            "OSC Secret kube-system/gardener-node-agent-a (named by the Node label "
                            "worker.gardener.cloud/gardener-node-agent-secret-name) may not be read: "
                            "forbidden (HTTP 403): secrets \"gardener-node-agent-a\" is forbidden ?; "
                            "check the agent's RBAC (or the node-agent authorizer); retrying");
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_FORBIDDEN, &config, "", &bare), 0);
        assert_non_null(strstr(bare, "forbidden (HTTP 403); check"));
        assert_int_equal(
                osc_availability_message(OSC_AVAILABILITY_NOT_NAMED, &(OscSecretRef) {}, NULL, &unnamed), 0);
        assert_string_equal(unnamed,
                            "no OSC Secret is named: the Node has no label "
                            "worker.gardener.cloud/gardener-node-agent-secret-name and osc.secretName is "
                            "not set; waiting for the label");
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_UNKNOWN, &label, NULL, &m), -EINVAL);
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_NOT_FOUND, &(OscSecretRef) {}, NULL, &m),
                         -EINVAL);
        assert_null(m);
}

static void test_long_detail_is_cut(void **state) {
        OscSecretRef ref = { .namespace = "kube-system", .name = "x", .source = OSC_SECRET_FROM_LABEL };
        _cleanup_free_ char *detail = malloc(5001), *msg = NULL;

        assert_non_null(detail);
        memset(detail, 'a', 5000);
        detail[5000] = 0;
        assert_int_equal(osc_availability_message(OSC_AVAILABILITY_FORBIDDEN, &ref, detail, &msg), 0);
        assert_true(strlen(msg) < 600);
        assert_non_null(strstr(msg, "aaa...; check"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_reasons),
                cmocka_unit_test(test_messages),
                cmocka_unit_test(test_long_detail_is_cut),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
