/* SPDX-License-Identifier: Apache-2.0 */
#include "identity/token-sync.h"
#include "tests.h"

static int parse(const char *text, TokenSyncConfigs *c, char **err) {
        json_t *doc = json_loads(text, 0, NULL);
        int r;

        assert_non_null(doc);
        r = token_sync_configs_from_json(doc, c, err);
        json_decref(doc);
        return r;
}

static void test_sync_configs(void **state) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs c = {};
        _cleanup_free_ char *err = NULL;

        assert_int_equal(
                parse("{\"controllers\":{\"token\":{\"syncPeriod\":\"1h30m\",\"syncConfigs\":["
                      "{\"secretName\":\"gardener-valitail\",\"path\":\"/var/lib/valitail/auth-token\"},"
                      "{\"secretName\":\"shoot-access-x\",\"path\":\"/var/lib/x/token\"}]}}}",
                      &c, &err),
                0);
        assert_int_equal(c.n, 2);
        assert_int_equal(c.sync_period_usec, 90 * 60 * USEC_PER_SEC);
        assert_string_equal(c.items[0].secret_name, "gardener-valitail");
        assert_string_equal(c.items[1].path, "/var/lib/x/token");
}

static void test_defaults_and_absent(void **state) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs c = {};
        _cleanup_free_ char *err = NULL;

        assert_int_equal(parse("{\"apiServer\":{\"server\":\"https://x\"}}", &c, &err), 0);
        assert_int_equal(c.n, 0);
        assert_int_equal(c.sync_period_usec, TOKEN_SYNC_PERIOD_DEFAULT_USEC);
}

static void test_rejects(void **state) {
        static const char *const bad[] = {
                "{\"controllers\":{\"token\":{\"syncConfigs\":{}}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":\"rel/token\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":\"/a/../etc/shadow\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"Bad_Name\",\"path\":\"/t\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"path\":\"/t\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncPeriod\":\"0s\"}}}",
                "{\"controllers\":{\"token\":{\"syncPeriod\":12}}}",
                /* The OSC's component config refused these; this parser let them through before there
                 * was one parser: a name that is no DNS-1123 subdomain, "." components, a directory. */
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a..b\",\"path\":\"/t\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":\"/a/./t\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":\"/a/..\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":\"/a/\"}]}}}",
                "{\"controllers\":{\"token\":{\"syncConfigs\":[{\"secretName\":\"a\",\"path\":7}]}}}",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                TokenSyncConfigs c = {};
                _cleanup_free_ char *err = NULL;

                assert_int_equal(parse(bad[i], &c, &err), -EINVAL);
                assert_non_null(err);
                assert_non_null(strstr(err, "controllers.token."));
                assert_int_equal(c.n, 0);
        }
}

/* At most OSC_TOKEN_SYNCS_MAX entries, as the OSC's component config. */
static void test_too_many(void **state) {
        _cleanup_(json_decrefp) json_t *doc =
                json_pack("{s:{s:{s:[]}}}", "controllers", "token", "syncConfigs");
        json_t *list = json_object_get(json_object_get(json_object_get(doc, "controllers"), "token"),
                                       "syncConfigs");
        TokenSyncConfigs c = {};
        _cleanup_free_ char *err = NULL;

        for (int i = 0; i <= OSC_TOKEN_SYNCS_MAX; i++)
                assert_int_equal(json_array_append_new(
                                         list, json_pack("{s:s, s:s}", "secretName", "t", "path", "/t")),
                                 0);
        assert_int_equal(token_sync_configs_from_json(doc, &c, &err), -EINVAL);
        assert_non_null(strstr(err, "controllers.token.syncConfigs: expected a list of at most"));
        assert_int_equal(c.n, 0);
}

/* The period of the OSC's component config is the TokenSync's (it was always the default). */
static void test_period_from_component(void **state) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs c = {};
        OscComponentConfig cc = { .token_sync_period_usec = 600 * USEC_PER_SEC };

        assert_int_equal(token_sync_configs_from_component(&cc, &c), 0);
        assert_int_equal(c.sync_period_usec, 600 * USEC_PER_SEC);
        token_sync_configs_clear(&c);
        assert_int_equal(token_sync_configs_from_component(NULL, &c), 0);
        assert_int_equal(c.sync_period_usec, TOKEN_SYNC_PERIOD_DEFAULT_USEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sync_configs),
                cmocka_unit_test(test_defaults_and_absent),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_too_many),
                cmocka_unit_test(test_period_from_component),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
