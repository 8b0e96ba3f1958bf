/* SPDX-License-Identifier: Apache-2.0 */
/* The registry operation's life against the canned-response server: retries, Retry-After, cancel. */
#include <time.h>

#include "oci/registry-manifest.h"
#include "registry-fixture.h"
#include "tests.h"

static void test_retry_then_success(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;

        registry_fixture_push(c, 503, NULL, "busy");
        registry_fixture_push(c, 200, "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n",
                              registry_fixture_manifest);
        assert_int_equal(
                registry_resolve(c->client, c->ref, NULL, "amd64", NULL, registry_fixture_on_done, c, &op),
                0);
        assert_false(c->done);
        registry_fixture_run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->n_layers, 1);
        assert_int_equal(fake_http_requests(c->fake), 2);
        assert_non_null(strstr(fake_http_last_request(c->fake), "GET /v2/kube/kubelet/manifests/v1.31.2"));
        assert_non_null(strstr(fake_http_last_request(c->fake), "application/vnd.oci.image.index.v1+json"));
}

static void test_retry_after_is_honoured(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;
        struct timespec t0, t1;

        registry_fixture_push(c, 429, "Retry-After: 1\r\n", "slow down");
        registry_fixture_push(c, 200, NULL, registry_fixture_manifest);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(
                registry_resolve(c->client, c->ref, NULL, "amd64", NULL, registry_fixture_on_done, c, &op),
                0);
        registry_fixture_run(c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_int_equal(c->error, 0);
        assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 950);
}

static void test_free_cancels(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;

        registry_fixture_push(c, 200, NULL, registry_fixture_manifest);
        assert_int_equal(
                registry_resolve(c->client, c->ref, NULL, "amd64", NULL, registry_fixture_on_done, c, &op),
                0);
        assert_int_equal(sd_event_run(c->event, 10 * USEC_PER_MSEC) >= 0, 1);
        assert_null(registry_op_free(op));
        for (int i = 0; i < 5; i++)
                assert_true(sd_event_run(c->event, 10 * USEC_PER_MSEC) >= 0);
        assert_false(c->done);
        assert_int_equal(http_active(c->http), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_retry_then_success, registry_fixture_setup,
                                                registry_fixture_teardown),
                cmocka_unit_test_setup_teardown(test_retry_after_is_honoured, registry_fixture_setup,
                                                registry_fixture_teardown),
                cmocka_unit_test_setup_teardown(test_free_cancels, registry_fixture_setup,
                                                registry_fixture_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
