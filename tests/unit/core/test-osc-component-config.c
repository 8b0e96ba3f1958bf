/* SPDX-License-Identifier: Apache-2.0 */
#include "core/osc-component-config.h"
#include "tests.h"
#include "util/base64.h"

static char *const replaced[] = { (char *) "gardener-node-agent.service", NULL };

static int run(const char *yaml, OscComponentConfig **ret, char **err) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;

        assert_int_equal(osc_model_decode_yaml(yaml, strlen(yaml), NULL, &m, NULL), 0);
        return osc_component_config_from_model(m, replaced, ret, err);
}

static void test_decode(void **state) {
        static const char yaml[] =
                "spec:\n"
                "  units: [{name: gardener-node-agent.service, content: x,\n"
                "           filePaths: [/opt/bin/gardener-node-agent, /var/lib/gardener-node-agent/config-v1.110.0.yaml]}]\n"
                "  files:\n"
                "  - path: /var/lib/gardener-node-agent/config-v1.110.0.yaml\n"
                "    content:\n"
                "      inline:\n"
                "        data: |\n"
                "          apiVersion: nodeagent.config.gardener.cloud/v1alpha1\n"
                "          kind: NodeAgentConfiguration\n"
                "          apiServer: {server: 'https://api.example:443', caFile: /var/lib/gardener-node-agent/cluster-ca.crt}\n"
                "          controllers:\n"
                "            operatingSystemConfig: {secretName: gardener-node-agent-pool, kubernetesVersion: 1.31.4}\n"
                "            token:\n"
                "              syncPeriod: 1h30m\n"
                "              syncConfigs:\n"
                "              - {secretName: kube-proxy, path: /var/lib/kube-proxy/kubeconfig}\n"
                "              - {secretName: gardener-valitail, path: /var/lib/valitail/auth-token}\n";
        _cleanup_(osc_component_config_freep) OscComponentConfig *c = NULL;

        assert_int_equal(run(yaml, &c, NULL), 0);
        assert_string_equal(c->file, "/var/lib/gardener-node-agent/config-v1.110.0.yaml");
        assert_string_equal(c->api_server, "https://api.example:443");
        assert_string_equal(c->ca_file, "/var/lib/gardener-node-agent/cluster-ca.crt");
        assert_string_equal(c->secret_name, "gardener-node-agent-pool");
        assert_string_equal(c->kubernetes_version, "1.31.4");
        assert_int_equal(c->n_token_syncs, 2);
        assert_int_equal(c->token_sync_period_usec, 90 * 60 * USEC_PER_SEC);
        assert_string_equal(c->token_syncs[1].secret_name, "gardener-valitail");
        assert_string_equal(c->token_syncs[1].path, "/var/lib/valitail/auth-token");
}

static void test_errors(void **state) {
        static const struct {
                const char *yaml;
                int r;
                const char *message;
        } table[] = {
                { "spec: {files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: x}}}]}",
                  -ENOENT, NULL },
                { "spec: {units: [{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}]}",
                  -ENOENT, NULL },
                { "spec: {units: ["
                  "{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}"
                  "], files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {secretRef: {name: a, dataKey: b}}}]}",
                  -EINVAL, "/var/lib/gardener-node-agent/config.yaml: the component config must be inline" },
                { "spec: {units: ["
                  "{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}"
                  "], files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: 'apiServer: {server: 7}'}}}]}",
                  -EINVAL, "/var/lib/gardener-node-agent/config.yaml: apiServer.server: expected a string" },
                { "spec: {units: ["
                  "{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}"
                  "], files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: "
                  "'controllers: {token: {syncConfigs: [{secretName: a, path: relative}]}}'}}}]}",
                  -EINVAL,
                  "/var/lib/gardener-node-agent/config.yaml: controllers.token.syncConfigs[0]: needs a secretName and an absolute path" },
                { "spec: {units: ["
                  "{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}"
                  "], files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: "
                  "'controllers: {token: {syncConfigs: [{secretName: a, path: /a}, {secretName: ../kube-proxy, path: /b}]}}'}}}]}",
                  -EINVAL,
                  "/var/lib/gardener-node-agent/config.yaml: controllers.token.syncConfigs[1].secretName: "
                  "\"../kube-proxy\" is not a valid DNS-1123 subdomain: must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric character" },
                /* identity/token-sync's check, now the one parser's: it was not looked at here. */
                { "spec: {units: ["
                  "{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}"
                  "], files: [{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: "
                  "'controllers: {token: {syncPeriod: soon, syncConfigs: [{secretName: a, path: /a}]}}'}}}]}",
                  -EINVAL,
                  "/var/lib/gardener-node-agent/config.yaml: controllers.token.syncPeriod: not a positive duration" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                OscComponentConfig *c = NULL;
                int r = run(table[i].yaml, &c, &err);

                if (r != table[i].r)
                        fail_msg("case %zu: %d %s", i, r, strempty(err));
                assert_null(c);
                if (table[i].message)
                        assert_string_equal(err, table[i].message);
        }
}

static json_t *secret_of(const char *yaml) {
        _cleanup_free_ char *b64 = NULL;

        assert_int_equal(base64_encode(yaml, strlen(yaml), false, &b64), 0);
        return json_pack("{s:{s:s}}", "data", "osc.yaml", b64);
}

#define CC_YAML(syncs)                                                                                            \
        "spec:\n"                                                                                                 \
        "  units: [{name: gardener-node-agent.service, filePaths: [/var/lib/gardener-node-agent/config.yaml]}]\n" \
        "  files:\n"                                                                                              \
        "  - path: /var/lib/gardener-node-agent/config.yaml\n"                                                    \
        "    content:\n"                                                                                          \
        "      inline:\n"                                                                                         \
        "        data: |\n"                                                                                       \
        "          apiServer: {server: 'https://a:443'}\n"                                                        \
        "          controllers: {token: {syncConfigs: [" syncs "]}}\n"

/* Issue 14: the manager reads the token syncs straight from the Secret, and recreates the TokenSync
 * only when they changed. */
static void test_from_secret(void **state) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *a = NULL, *b = NULL, *c = NULL;
        _cleanup_(json_decrefp) json_t *sa = secret_of(CC_YAML("{secretName: t1, path: /var/t1}"));
        _cleanup_(json_decrefp) json_t *sb = secret_of(CC_YAML("{secretName: t1, path: /var/t1}"));
        _cleanup_(json_decrefp) json_t *sc = secret_of(CC_YAML("{secretName: t1, path: /var/t1}, "
                                                               "{secretName: t2, path: /var/t2}"));
        _cleanup_(json_decrefp) json_t *none = json_pack("{s:{}}", "data");
        _cleanup_(json_decrefp) json_t *bad = json_pack("{s:{s:s}}", "data", "osc.yaml", "!!!");
        _cleanup_free_ char *err = NULL, *err2 = NULL;
        OscComponentConfig *x = NULL;

        assert_int_equal(osc_component_config_from_secret(sa, replaced, &a, NULL), 0);
        assert_int_equal(osc_component_config_from_secret(sb, replaced, &b, NULL), 0);
        assert_int_equal(osc_component_config_from_secret(sc, replaced, &c, NULL), 0);
        assert_string_equal(a->api_server, "https://a:443");
        assert_int_equal(a->n_token_syncs, 1);
        assert_string_equal(a->token_syncs[0].path, "/var/t1");
        assert_true(osc_component_config_same_token_syncs(a, b));
        assert_false(osc_component_config_same_token_syncs(a, c));
        assert_false(osc_component_config_same_token_syncs(a, NULL));
        assert_true(osc_component_config_same_token_syncs(NULL, NULL));

        assert_int_equal(osc_component_config_from_secret(none, replaced, &x, &err), -ENODATA);
        assert_string_equal(err, "no osc.yaml key found in OSC secret");
        assert_int_equal(osc_component_config_from_secret(bad, replaced, &x, &err2), -EBADMSG);
        assert_null(x);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_from_secret),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
