/* SPDX-License-Identifier: Apache-2.0 */
#include "oci/registry-auth.h"
#include "tests.h"

static void test_bearer_challenge(void **state) {
        _cleanup_(registry_challenge_freep) RegistryChallenge *c = NULL;
        _cleanup_free_ char *url = NULL;

        assert_int_equal(
                registry_challenge_parse(
                        "Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
                        "scope=\"repository:library/busybox:pull\"",
                        &c),
                0);
        assert_int_equal(c->scheme, REGISTRY_AUTH_BEARER);
        assert_string_equal(c->realm, "https://auth.docker.io/token");
        assert_string_equal(c->service, "registry.docker.io");
        assert_string_equal(c->scope, "repository:library/busybox:pull");
        assert_int_equal(registry_challenge_token_url(c, "ignored", &url), 0);
        assert_string_equal(url,
                            "https://auth.docker.io/token?service=registry.docker.io"
                            "&scope=repository%3Alibrary%2Fbusybox%3Apull");
}

static void test_challenge_variants(void **state) {
        _cleanup_(registry_challenge_freep) RegistryChallenge *a = NULL, *b = NULL, *c = NULL;
        _cleanup_free_ char *url = NULL;

        /* case-insensitive scheme, spaces, unknown params, escaped quote, no scope */
        assert_int_equal(
                registry_challenge_parse(
                        "bearer  realm=\"https://r/t?x=1\" , service=\"my \\\"svc\\\"\", error=\"invalid_token\"",
                        &a),
                0);
        assert_string_equal(a->service, "my \"svc\"");
        assert_null(a->scope);
        assert_int_equal(registry_challenge_token_url(a, "repository:a/b:pull", &url), 0);
        assert_string_equal(url, "https://r/t?x=1&service=my%20%22svc%22&scope=repository%3Aa%2Fb%3Apull");

        /* Basic only; and Bearer preferred over Basic when both are offered */
        assert_int_equal(registry_challenge_parse("Basic realm=\"Registry Realm\"", &b), 0);
        assert_int_equal(b->scheme, REGISTRY_AUTH_BASIC);
        assert_int_equal(
                registry_challenge_parse("Basic realm=\"x\", Bearer realm=\"https://t\",service=s", &c), 0);
        assert_int_equal(c->scheme, REGISTRY_AUTH_BEARER);
        assert_string_equal(c->service, "s");
}

static void test_challenge_rejects(void **state) {
        RegistryChallenge *c = NULL;
        char long_header[REGISTRY_CHALLENGE_MAX + 10];

        assert_int_equal(registry_challenge_parse("", &c), -EBADMSG);
        assert_int_equal(registry_challenge_parse("Bearer service=\"x\"", &c), -EBADMSG);
        assert_int_equal(registry_challenge_parse("Bearer realm=\"unterminated", &c), -EBADMSG);
        assert_int_equal(registry_challenge_parse("Negotiate abc", &c), -EPROTONOSUPPORT);
        memset(long_header, 'a', sizeof(long_header) - 1);
        long_header[sizeof(long_header) - 1] = '\0';
        assert_int_equal(registry_challenge_parse(long_header, &c), -EBADMSG);
        assert_null(c);
}

static void test_token_url_rejects_bad_realm(void **state) {
        _cleanup_(registry_challenge_freep) RegistryChallenge *c = NULL;
        char *url = NULL;

        assert_int_equal(registry_challenge_parse("Bearer realm=\"file:///etc/passwd\"", &c), 0);
        assert_int_equal(registry_challenge_token_url(c, NULL, &url), -EINVAL);
        assert_null(url);
}

#define TOK1 "{\"token\":\"abc.def\",\"expires_in\":300}"
#define TOK2 "{\"access_token\":\"xyz\"}"
#define TOK3 "{\"token\":\"a\\r\\nX-Evil: 1\"}"

static void test_token_parse(void **state) {
        _cleanup_free_ char *t1 = NULL, *t2 = NULL;
        char *x = NULL;
        uint64_t exp = 0;

        assert_int_equal(registry_token_parse(TOK1, strlen(TOK1), &t1, &exp), 0);
        assert_string_equal(t1, "abc.def");
        assert_int_equal(exp, 300 * USEC_PER_SEC);
        assert_int_equal(registry_token_parse(TOK2, strlen(TOK2), &t2, &exp), 0);
        assert_string_equal(t2, "xyz");
        assert_int_equal(exp, 60 * USEC_PER_SEC);
        assert_int_equal(registry_token_parse(TOK3, strlen(TOK3), &x, &exp), -EBADMSG);
        assert_int_equal(registry_token_parse("{}", 2, &x, &exp), -EBADMSG);
        assert_int_equal(registry_token_parse("nope", 4, &x, &exp), -EBADMSG);
        assert_null(x);
}

#define AUTH_FILE                                                                      \
        "{\"auths\":{"                                                                 \
        "\"reg.io\":{\"auth\":\"aG9zdDpob3N0cHc=\"},"      /* host:hostpw */           \
        "\"reg.io/team\":{\"auth\":\"dGVhbTp0ZWFtcHc=\"}," /* team:teampw */           \
        "\"reg.io/team/app\":{\"username\":\"app\",\"password\":\"apppw\"},"           \
        "\"https://index.docker.io/v1/\":{\"auth\":\"aHViOmh1YnB3\"}," /* hub:hubpw */ \
        "\"http://legacy.io:5000/v2/\":{\"auth\":\"bGVnOmxlZ3B3\"},"   /* leg:legpw */ \
        "\"bad.io\":{\"auth\":\"!!!!\"},"                                              \
        "\"token.io\":{\"identitytoken\":\"x\"}"                                       \
        "}}"

static void lookup_expect(const char *registry, const char *repo, int expect_r, const char *user,
                          const char *pw) {
        RegistryCredentials *c = NULL;

        assert_int_equal(registry_auth_file_lookup(AUTH_FILE, strlen(AUTH_FILE), registry, repo, &c),
                         expect_r);
        if (expect_r == 0) {
                assert_string_equal(c->username, user);
                assert_string_equal(c->password, pw);
        } else
                assert_null(c);
        registry_credentials_free(c);
}

static void test_auth_file_lookup(void **state) {
        lookup_expect("reg.io", "other/x", 0, "host", "hostpw");
        lookup_expect("reg.io", "team/x", 0, "team", "teampw");
        lookup_expect("reg.io", "team/app", 0, "app", "apppw");
        lookup_expect("reg.io", "teamx/app", 0, "host", "hostpw"); /* prefix on a component boundary only */
        lookup_expect("docker.io", "library/busybox", 0, "hub", "hubpw");
        lookup_expect("legacy.io:5000", "a", 0, "leg", "legpw");
        lookup_expect("legacy.io", "a", -ENOENT, NULL, NULL);
        lookup_expect("reg.io:5000", "a", -ENOENT, NULL, NULL);
        lookup_expect("bad.io", "a", -EBADMSG, NULL, NULL);
        lookup_expect("token.io", "a", -ENOENT, NULL, NULL);
}

static void test_basic_header(void **state) {
        RegistryCredentials c = { .username = (char *) "host", .password = (char *) "hostpw" };
        _cleanup_free_ char *h = NULL;

        assert_int_equal(registry_credentials_basic_header(&c, &h), 0);
        assert_string_equal(h, "Basic aG9zdDpob3N0cHc=");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_bearer_challenge),  cmocka_unit_test(test_challenge_variants),
                cmocka_unit_test(test_challenge_rejects), cmocka_unit_test(test_token_url_rejects_bad_realm),
                cmocka_unit_test(test_token_parse),       cmocka_unit_test(test_auth_file_lookup),
                cmocka_unit_test(test_basic_header),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
