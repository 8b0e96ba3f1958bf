/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "identity/gna-config.h"
#include "identity/identity.h"
#include "tests.h"
#include "util/fileio.h"

#define CONFIG(secret)                                                                                           \
        "apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"                   \
        "apiServer:\n  server: https://api.example:443\n  caFile: /var/lib/gardener-node-agent/cluster-ca.crt\n" \
        "controllers:\n  operatingSystemConfig:\n    secretName: " secret                                        \
        "\n    kubernetesVersion: 1.31.4\n"

static void write_in(const char *dir, const char *name, const char *text) {
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0600), 0);
}

static void rm_rf(const char *dir) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
        assert_int_equal(system(cmd), 0);
}

/* gardener-node-init's config-<version>.yaml, the lexically last of several, else an older node's
 * config.yaml: the OSC Secret's name and the API server a fresh node has before any OSC. */
static void test_provisioned(void **state) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_free_ char *error = NULL, *server = NULL, *ca = NULL;
        char dir[] = "/tmp/test-gna-config-XXXXXX";

        assert_non_null(mkdtemp(dir));
        assert_int_equal(gna_config_read(dir, &cc, &error), -ENOENT);
        assert_int_equal(identity_gna_api_server(dir, &server, &ca), 0);
        assert_null(server);

        write_in(dir, "config.yaml", CONFIG("gardener-node-agent-old"));
        assert_int_equal(gna_config_read(dir, &cc, &error), 0);
        assert_string_equal(cc->secret_name, "gardener-node-agent-old");
        cc = osc_component_config_free(cc);

        write_in(dir, "config-v1.119.0.yaml", CONFIG("gardener-node-agent-a"));
        write_in(dir, "config-v1.120.0.yaml", CONFIG("gardener-node-agent-b"));
        assert_int_equal(gna_config_read(dir, &cc, &error), 0);
        assert_string_equal(cc->secret_name, "gardener-node-agent-b");
        assert_non_null(strstr(cc->file, "config-v1.120.0.yaml"));
        assert_string_equal(cc->kubernetes_version, "1.31.4");
        assert_int_equal(identity_gna_api_server(dir, &server, &ca), 0);
        assert_string_equal(server, "https://api.example:443");
        assert_string_equal(ca, "/var/lib/gardener-node-agent/cluster-ca.crt");

        /* Undecodable: an error naming the file and the field. */
        cc = osc_component_config_free(cc);
        write_in(dir, "config-v1.121.0.yaml",
                 "controllers:\n  operatingSystemConfig:\n    secretName: [x]\n");
        assert_int_equal(gna_config_read(dir, &cc, &error), -EINVAL);
        assert_non_null(strstr(error, "config-v1.121.0.yaml"));
        assert_non_null(strstr(error, "controllers.operatingSystemConfig.secretName"));
        rm_rf(dir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_provisioned),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
