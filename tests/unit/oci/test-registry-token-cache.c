/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/registry-token-cache.h"
#include "tests.h"
#include "util/time-util.h"

static void test_lookup_store(void **state) {
        RegistryTokenCache c = {};

        assert_null(registry_token_cache_lookup(&c, "https://a", "repository:x:pull", 0));
        assert_int_equal(registry_token_cache_store(&c, "https://a", "repository:x:pull", "Bearer 1",
                                                    300 * USEC_PER_SEC, 1000),
                         0);
        assert_string_equal(registry_token_cache_lookup(&c, "https://a", "repository:x:pull", 1000),
                            "Bearer 1");
        /* per endpoint and per scope */
        assert_null(registry_token_cache_lookup(&c, "https://b", "repository:x:pull", 1000));
        assert_null(registry_token_cache_lookup(&c, "https://a", "repository:y:pull", 1000));
        /* a new token for the same place replaces the old one */
        assert_int_equal(registry_token_cache_store(&c, "https://a", "repository:x:pull", "Bearer 2",
                                                    300 * USEC_PER_SEC, 2000),
                         0);
        assert_string_equal(registry_token_cache_lookup(&c, "https://a", "repository:x:pull", 2000),
                            "Bearer 2");
        assert_int_equal(registry_token_cache_store(&c, "https://b", "repository:x:pull", "Bearer 3",
                                                    300 * USEC_PER_SEC, 2000),
                         0);
        assert_string_equal(registry_token_cache_lookup(&c, "https://a", "repository:x:pull", 2000),
                            "Bearer 2");
        assert_string_equal(registry_token_cache_lookup(&c, "https://b", "repository:x:pull", 2000),
                            "Bearer 3");
        registry_token_cache_clear(&c);
        assert_null(c.tokens);
        assert_null(registry_token_cache_lookup(&c, "https://a", "repository:x:pull", 2000));
}

/* A token counts as expired 10 s early, or at half its lifetime when that is 20 s or less: it never
 * expires in the middle of a request. */
static void test_expiry(void **state) {
        RegistryTokenCache c = {};
        uint64_t t0 = 100 * USEC_PER_SEC;

        assert_int_equal(registry_token_cache_store(&c, "e", "s", "Bearer long", 300 * USEC_PER_SEC, t0), 0);
        assert_non_null(registry_token_cache_lookup(&c, "e", "s", t0 + 290 * USEC_PER_SEC - 1));
        assert_null(registry_token_cache_lookup(&c, "e", "s", t0 + 290 * USEC_PER_SEC));

        assert_int_equal(registry_token_cache_store(&c, "e", "s", "Bearer short", 20 * USEC_PER_SEC, t0), 0);
        assert_non_null(registry_token_cache_lookup(&c, "e", "s", t0 + 10 * USEC_PER_SEC - 1));
        assert_null(registry_token_cache_lookup(&c, "e", "s", t0 + 10 * USEC_PER_SEC));
        registry_token_cache_clear(&c);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_lookup_store),
                cmocka_unit_test(test_expiry),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
