/* SPDX-License-Identifier: Apache-2.0 */
/* Issue 23: every OSC the agent refuses, refused as a whole with the field and the reason. */
#include <jansson.h>
#include <stdio.h>

#include "tests.h"
#include "update/osc-intake.h"
#include "util/base64.h"

#define KUBELET "/opt/bin/kubelet"

static char *const replaced[] = { (char *) "gardener-node-agent.service", NULL };

static json_t *secret_of_bytes(const char *yaml, size_t size, const char *checksum) {
        _cleanup_free_ char *b64 = NULL;

        assert_int_equal(base64_encode(yaml, size, false, &b64), 0);
        return json_pack("{s:{s:{s:s}}, s:{s:s}}", "metadata", "annotations", "checksum/data-script",
                         checksum, "data", "osc.yaml", b64);
}

/* A good OSC with one extra `files` entry and one extra unit (YAML list items, may be ""). */
static char *osc_yaml(const char *file, const char *unit) {
        char *s;

        assert_true(
                asprintf(
                        &s,
                        "kind: OperatingSystemConfig\n"
                        "spec:\n"
                        "  inPlaceUpdates: {operatingSystemVersion: '1592.6', kubelet: '1.31.4'}\n"
                        "  files:\n"
                        "  - path: " KUBELET "\n"
                        "    content: {imageRef: {image: 'reg.io/hyperkube:v1.31.4', filePathInImage: /kubelet}}\n"
                        "%s"
                        "  units:\n"
                        "  - name: kubelet.service\n"
                        "%s",
                        file, unit) >= 0);
        return s;
}

static OscDesired *intake(json_t *secret, OscComponentConfig **ret_cc) {
        OscComponentConfig *cc = NULL;
        OscDesired *osc = NULL;

        assert_int_equal(osc_intake(secret, KUBELET, replaced, NULL, &osc, &cc), 0);
        assert_non_null(osc);
        if (ret_cc)
                *ret_cc = cc;
        else
                osc_component_config_free(cc);
        return osc;
}

static void test_good(void **state) {
        _cleanup_free_ char *yaml = osc_yaml("", "");
        _cleanup_(json_decrefp) json_t *secret = secret_of_bytes(yaml, strlen(yaml), "c1");
        _cleanup_(osc_desired_freep) OscDesired *osc = intake(secret, NULL);

        assert_null(osc->refused);
        assert_string_equal(osc->checksum, "c1");
        assert_string_equal(osc->kubelet_version, "1.31.4");
}

static void test_refused(void **state) {
        static const struct {
                const char *file, *unit, *needle;
        } table[] = {
                { "  - path: etc/relative\n    content: {inline: {data: x}}\n", "",
                  "file \"etc/relative\": path must be absolute" },
                { "  - path: /etc/../etc/shadow\n    content: {inline: {data: x}}\n", "",
                  "file \"/etc/../etc/shadow\": path must be absolute without . or .." },
                { "  - path: /etc/x\n    permissions: abc\n    content: {inline: {data: x}}\n", "",
                  "spec.files[1].permissions: expected an integer" },
                { "  - path: /etc/x\n    permissions: -1\n    content: {inline: {data: x}}\n", "",
                  "file \"/etc/x\": permissions out of range" },
                { "  - path: /etc/x\n    content: {inline: {encoding: b64, data: '!!!!'}}\n", "",
                  "file \"/etc/x\": content is not valid base64" },
                { "  - path: \"/etc/x\\0y\"\n    content: {inline: {data: x}}\n", "", "spec.files[1].path" },
                { "", "  - name: a/b.service\n", "spec.units[1]: invalid unit name \"a/b.service\"" },
                { "", "  - name: a.service\n    dropIns: [{name: ../x.conf, content: y}]\n",
                  "unit \"a.service\": invalid drop-in name \"../x.conf\"" },
                { "  - path: /etc/s\n    content: {secretRef: {name: ../../default/secrets/other, dataKey: k}}\n",
                  "",
                  "spec.files[1].content.secretRef.name: \"../../default/secrets/other\" is not a valid DNS-1123 subdomain" },
                { "  - path: /etc/s\n    content: {secretRef: {name: 'ipa-good?labelSelector=x', dataKey: k}}\n",
                  "", "spec.files[1].content.secretRef.name: \"ipa-good?labelSelector=x\"" },
                { "  - path: /opt/bin/tool\n    content: {imageRef: {image: 'reg.io/a/../b:v1', filePathInImage: /t}}\n",
                  "",
                  "file \"/opt/bin/tool\": content.imageRef.image \"reg.io/a/../b:v1\" is not a valid image reference: "
                  "the repository" },
                { "  - path: /opt/bin/tool\n    content: {imageRef: {image: 'reg.io/a:v1?x=y', filePathInImage: /t}}\n",
                  "", "is not a valid image reference: the tag" },
                { "  - path: /var/lib/gardener-node-agent/config.yaml\n"
                  "    content: {inline: {data: 'controllers: {token: {syncConfigs: [{secretName: ../x, path: /a}]}}'}}\n",
                  "  - name: gardener-node-agent.service\n    filePaths: [/var/lib/gardener-node-agent/config.yaml]\n",
                  "controllers.token.syncConfigs[0].secretName: \"../x\"" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *yaml = osc_yaml(table[i].file, table[i].unit);
                _cleanup_(json_decrefp) json_t *secret = secret_of_bytes(yaml, strlen(yaml), "c1");
                OscComponentConfig *cc = NULL;
                _cleanup_(osc_desired_freep) OscDesired *osc = intake(secret, &cc);

                if (!osc->refused || !strstr(osc->refused, table[i].needle))
                        fail_msg("case %zu: refused \"%s\", expected \"%s\"", i, strempty(osc->refused),
                                 table[i].needle);
                assert_null(cc);
                assert_string_equal(osc->checksum, "c1"); /* kept: the failure belongs to this OSC */
                assert_null(osc->yaml);
                assert_null(osc->kubelet_version);
        }
}

static void test_refused_secret(void **state) {
        /* Not base64, no osc.yaml, more than OSC_YAML_MAX, a NUL in the checksum. */
        _cleanup_(json_decrefp) json_t *not_b64 = json_pack("{s:{s:s}}", "data", "osc.yaml", "!!!!");
        _cleanup_(json_decrefp) json_t *no_key = json_pack("{s:{s:{s:s}}, s:{}}", "metadata", "annotations",
                                                           "checksum/data-script", "c9", "data");
        _cleanup_(json_decrefp) json_t *nul =
                json_loads("{\"metadata\": {\"annotations\": {\"checksum/data-script\": "
                           "\"a\\u0000b\"}}, \"data\": {}}",
                           JSON_ALLOW_NUL, NULL);
        _cleanup_free_ char *big = malloc(4 << 20);
        _cleanup_(json_decrefp) json_t *huge = NULL;
        OscDesired *osc;

        osc = intake(not_b64, NULL);
        assert_non_null(strstr(osc->refused, "invalid base64 data"));
        assert_null(osc->checksum);
        osc_desired_free(osc);

        osc = intake(no_key, NULL);
        assert_string_equal(osc->refused, "no osc.yaml key found in OSC secret");
        assert_string_equal(osc->checksum, "c9");
        osc_desired_free(osc);

        osc = intake(nul, NULL);
        assert_non_null(osc->refused);
        assert_null(osc->checksum); /* not a checksum anyone could match */
        osc_desired_free(osc);

        assert_non_null(big);
        memset(big, '#', 4 << 20); /* a YAML comment of 4 MiB */
        huge = secret_of_bytes(big, 4 << 20, "c4");
        osc = intake(huge, NULL);
        assert_string_equal(osc->refused, "osc.yaml is larger than 3145728 bytes");
        assert_string_equal(osc->checksum, "c4");
        osc_desired_free(osc);
}

static void test_component_config_taken(void **state) {
        _cleanup_free_ char *yaml = osc_yaml(
                "  - path: /var/lib/gardener-node-agent/config.yaml\n"
                "    content: {inline: {data: 'controllers: {token: {syncConfigs: [{secretName: kube-proxy, path: /a}]}}'}}\n",
                "  - name: gardener-node-agent.service\n    filePaths: [/var/lib/gardener-node-agent/config.yaml]\n");
        _cleanup_(json_decrefp) json_t *secret = secret_of_bytes(yaml, strlen(yaml), "c1");
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_(osc_desired_freep) OscDesired *osc = intake(secret, &cc);

        assert_null(osc->refused);
        assert_non_null(cc);
        assert_int_equal(cc->n_token_syncs, 1);
        assert_string_equal(cc->token_syncs[0].secret_name, "kube-proxy");
}

/* The model the runner applies is decoded here, once, with the runner's options: this host's files and
 * containerd's drop-in; another host's file is still checked (a relative path refuses the OSC). */
static void test_model_kept(void **state) {
        static const OscModelOptions opts = { .host_name = "node-1", .containerd_path = "/usr/bin" };
        _cleanup_free_ char *yaml =
                osc_yaml("  - {path: /etc/a, hostName: node-1, content: {inline: {data: a}}}\n"
                         "  - {path: /etc/b, hostName: node-2, content: {inline: {data: b}}}\n"
                         "  criConfig: {name: containerd}\n",
                         "");
        _cleanup_free_ char *bad =
                osc_yaml("  - {path: etc/c, hostName: node-2, content: {inline: {data: c}}}\n", "");
        _cleanup_(json_decrefp) json_t *secret = secret_of_bytes(yaml, strlen(yaml), "c1"),
                                       *refused = secret_of_bytes(bad, strlen(bad), "c2");
        OscComponentConfig *cc = NULL;
        OscDesired *osc = NULL;
        const OscUnit *u;

        assert_int_equal(osc_intake(secret, KUBELET, replaced, &opts, &osc, &cc), 0);
        if (osc->refused)
                fail_msg("refused: %s", osc->refused);
        assert_non_null(osc->model);
        assert_non_null(osc_model_find_file(osc->model, "/etc/a"));
        assert_null(osc_model_find_file(osc->model, "/etc/b"));
        assert_non_null(u = osc_model_find_unit(osc->model, OSC_CONTAINERD_UNIT));
        assert_int_equal(u->n_drop_ins, 1);
        assert_string_equal(u->drop_ins[0].name, OSC_CONTAINERD_DROPIN);
        assert_non_null(osc->yaml);
        osc = osc_desired_free(osc);
        osc_component_config_free(cc);

        assert_int_equal(osc_intake(refused, KUBELET, replaced, &opts, &osc, &cc), 0);
        assert_non_null(osc->refused);
        assert_null(osc->model);
        assert_null(cc);
        osc_desired_free(osc);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_good),           cmocka_unit_test(test_refused),
                cmocka_unit_test(test_refused_secret), cmocka_unit_test(test_component_config_taken),
                cmocka_unit_test(test_model_kept),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
