/* SPDX-License-Identifier: Apache-2.0 */
/* registry_resolve(): a manifest is verified before it is used. */
#include "oci/registry-manifest.h"
#include "registry-fixture.h"
#include "tests.h"

static void test_tag_digest_header_mismatch(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;

        /* The registry vouches for another digest than what it sent: refused at the mirror; the
         * upstream (https://reg.test) cannot be reached either, so the op fails. */
        registry_fixture_push(c, 200, "Docker-Content-Digest: " CONFIG_DIGEST "\r\n",
                              registry_fixture_manifest);
        assert_int_equal(
                registry_resolve(c->client, c->ref, NULL, "amd64", NULL, registry_fixture_on_done, c, &op),
                0);
        registry_fixture_run(c);
        assert_true(c->error < 0);
        assert_int_equal(fake_http_requests(c->fake), 1); /* a mismatch is not retried at the same place */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_tag_digest_header_mismatch, registry_fixture_setup,
                                                registry_fixture_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
