/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdio.h>

#include "core/config.h"
#include "tests.h"
#include "util/yaml-json.h"

static int apply_yaml(Config *c, const char *yaml, char **ret_error) {
        json_t *j = NULL;
        int r;

        assert_int_equal(yaml_to_json(yaml, strlen(yaml), &j, NULL), 0);
        r = config_apply_json(c, j, "test.yaml", ret_error);
        json_decref(j);
        return r;
}

static void test_defaults(void **state) {
        _cleanup_(config_freep) Config *c = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_string_equal(c->kubeconfig, "/var/lib/inplace-agent/kubeconfig");
        assert_string_equal(c->state_directory, "/var/lib/inplace-agent");
        assert_string_equal(c->kubelet.binary_path, "/opt/bin/kubelet");
        assert_string_equal(c->kubelet.unit, "kubelet.service");
        assert_int_equal(c->kubelet.health_timeout_usec, 300 * USEC_PER_SEC);
        assert_int_equal(c->kubelet.keep_versions, 2);
        assert_int_equal(c->os_update.backend, OS_UPDATE_BACKEND_COMMAND);
        assert_int_equal(c->os_update.timeout_usec, 600 * USEC_PER_SEC);
        assert_int_equal(c->os_update.image.boot_tries, 3);
        assert_int_equal(c->os_update.reboot, REBOOT_METHOD_LOGIN1);
        assert_int_equal(c->systemd.job_timeout_usec, 90 * USEC_PER_SEC);
        assert_true(c->lease.enabled);
        assert_int_equal(c->lease.duration_usec, 40 * USEC_PER_SEC);
        assert_true(c->console.enabled);
        assert_string_equal(c->console.path, "");
        assert_string_equal(c->restart.self_unit, "inplace-agent.service");
        assert_string_equal(c->osc.root_directory, "/");
        assert_string_equal(c->systemd.unit_directory, "/etc/systemd/system");
        assert_string_equal(c->osc.replaced_units[0], "gardener-node-agent.service");
        assert_null(c->osc.replaced_units[1]);
        assert_int_equal(c->osc.drift_repair, DRIFT_REPAIR_REPAIR);
        assert_int_equal(c->osc.drift_interval_usec, 600 * USEC_PER_SEC);
}

static void test_apply_all_keys(void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(
                apply_yaml(
                        c,
                        "nodeName: node-1\n"
                        "osc: {namespace: ns1, secretName: gardener-node-agent-pool, rootDirectory: /scratch,\n"
                        "      replacedUnits: [gardener-node-agent, other.service], driftRepair: warn, driftInterval: 30s}\n"
                        "kubelet:\n  unit: kube\n  healthTimeout: 1h30m\n  keepVersions: 3\n"
                        "osUpdate:\n  backend: image\n  timeout: 20m\n  reboot: systemd\n"
                        "  image: {reference: 'r.example/os:{version}', bootTries: 5}\n"
                        "registry:\n  mirrors:\n    registry.example.com: https://mirror.local:5000\n"
                        "systemd: {jobTimeout: 30s, unitDirectory: /run/user/1000/systemd/user}\n"
                        "lease: {enabled: false, name: gardener-node-agent-node-1, duration: 1m}\n"
                        "console: {enabled: false, path: /dev/kmsg}\n",
                        &err),
                0);
        assert_null(err);
        assert_string_equal(c->node_name, "node-1");
        assert_string_equal(c->osc.namespace, "ns1");
        assert_string_equal(c->osc.root_directory, "/scratch");
        assert_string_equal(c->osc.replaced_units[0], "gardener-node-agent.service");
        assert_string_equal(c->osc.replaced_units[1], "other.service");
        assert_null(c->osc.replaced_units[2]);
        assert_int_equal(c->osc.drift_repair, DRIFT_REPAIR_WARN);
        assert_int_equal(c->osc.drift_interval_usec, 30 * USEC_PER_SEC);
        assert_string_equal(c->systemd.unit_directory, "/run/user/1000/systemd/user");
        assert_string_equal(c->kubelet.unit, "kube.service");
        assert_int_equal(c->kubelet.health_timeout_usec, 5400 * USEC_PER_SEC);
        assert_int_equal(c->kubelet.keep_versions, 3);
        assert_int_equal(c->os_update.backend, OS_UPDATE_BACKEND_IMAGE);
        assert_int_equal(c->os_update.reboot, REBOOT_METHOD_SYSTEMD);
        assert_int_equal(c->os_update.image.boot_tries, 5);
        assert_int_equal(c->registry.n_mirrors, 1);
        assert_string_equal(c->registry.mirrors[0].host, "registry.example.com");
        assert_false(c->lease.enabled);
        assert_int_equal(c->lease.duration_usec, 60 * USEC_PER_SEC);
        assert_false(c->console.enabled);
        assert_string_equal(c->console.path, "/dev/kmsg");
}

static void test_rejects(void **state) {
        static const struct {
                const char *yaml, *needle;
        } table[] = {
                { "bogus: 1\n", "test.yaml: bogus: unknown key" },
                { "kubelet: {healthTimeOut: 5m}\n", "kubelet.healthTimeOut: unknown key" },
                { "kubelet: {healthTimeout: -5s}\n", "kubelet.healthTimeout: \"-5s\" is not a duration" },
                { "kubelet: {healthTimeout: banana}\n",
                  "kubelet.healthTimeout: \"banana\" is not a duration" },
                { "kubelet: {healthTimeout: 0s}\n", "kubelet.healthTimeout: \"0s\" is out of range" },
                { "kubelet: {healthTimeout: 5}\n", "kubelet.healthTimeout: expected a string" },
                { "kubelet: {keepVersions: 0}\n", "kubelet.keepVersions: 0 is out of range" },
                { "kubelet: {keepVersions: \"2\"}\n", "kubelet.keepVersions: expected an integer" },
                { "kubelet: {binaryPath: relative/kubelet}\n",
                  "kubelet.binaryPath: \"relative/kubelet\" is not an absolute path" },
                { "kubelet: {unit: \"a;b\"}\n", "kubelet.unit: \"a;b\" is not a unit name" },
                { "kubelet: {healthzURL: ftp://x}\n", "kubelet.healthzURL" },
                { "kubelet: 5\n", "kubelet: expected a map" },
                { "osUpdate: {backend: rpm}\n", "osUpdate.backend: \"rpm\" is not one of" },
                { "osUpdate: {reboot: kexec}\n", "osUpdate.reboot" },
                { "lease: {enabled: yes}\n", "lease.enabled: expected true or false" },
                { "console: {path: kmsg}\n", "console.path: \"kmsg\" is not an absolute path" },
                { "nodeName: Node_1\n", "nodeName: \"Node_1\" is not a lower-case DNS name" },
                { "osc: {namespace: \"\"}\n", "osc.namespace" },
                /* Names that go into API paths (issue 23): a dot segment, a query, a second segment. */
                { "osc: {secretName: ../../default/secrets/other}\n",
                  "osc.secretName: \"../../default/secrets/other\"" },
                { "osc: {secretName: \"ipa-good?labelSelector=x\"}\n", "osc.secretName" },
                { "osc: {namespace: kube-system.x}\n",
                  "osc.namespace: \"kube-system.x\" is not a lower-case DNS label" },
                { "lease: {name: \"a..b\"}\n", "lease.name: \"a..b\"" },
                { "lease: {namespace: \"default/leases\"}\n", "lease.namespace" },
                { "nodeName: \"n1/status\"\n", "nodeName: \"n1/status\"" },
                { "osc: {rootDirectory: scratch}\n",
                  "osc.rootDirectory: \"scratch\" is not an absolute path" },
                { "osc: {replacedUnits: gardener-node-agent}\n",
                  "osc.replacedUnits: expected a list of unit names" },
                { "osc: {replacedUnits: [\"a;b\"]}\n", "osc.replacedUnits: \"a;b\" is not a unit name" },
                { "osc: {replacedUnits: [1]}\n", "osc.replacedUnits: entry 0: expected a string" },
                { "osc: {driftRepair: fix}\n", "osc.driftRepair: \"fix\" is not one of repair, warn" },
                { "osc: {driftInterval: 0s}\n", "osc.driftInterval: \"0s\" is out of range" },
                { "systemd: {unitDirectory: \"\"}\n",
                  "systemd.unitDirectory: \"\" is not an absolute path" },
                { "registry: {mirrors: [a]}\n", "registry.mirrors: expected a map" },
                { "registry: {mirrors: {a: ftp://x}}\n", "registry.mirrors: mirror for \"a\"" },
                { "- a\n", "test.yaml: the top level must be a map" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *err = NULL;

                assert_int_equal(config_new(&c), 0);
                assert_int_equal(apply_yaml(c, table[i].yaml, &err), -EINVAL);
                assert_non_null(err);
                if (!strstr(err, table[i].needle))
                        fail_msg("%s: got \"%s\", expected to contain \"%s\"", table[i].yaml, err,
                                 table[i].needle);
        }
}

static void test_finalize(void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_finalize(c,
                                         &(ConfigOverrides) { .node_name = "node-7",
                                                              .kubeconfig = "/env/kubeconfig",
                                                              .state_dir = "/tmp/state",
                                                              .hostname = "Ignored" },
                                         &err),
                         0);
        assert_string_equal(c->node_name, "node-7");
        assert_string_equal(c->kubeconfig, "/env/kubeconfig");
        assert_string_equal(c->state_directory, "/tmp/state");
        assert_string_equal(c->lease.name, "gardener-node-agent-node-7");
        assert_string_equal(c->bootstrap_kubeconfig,
                            "/tmp/state/bootstrap-kubeconfig"); /* docs/contract.md §9.6 */
}

/* $PATH is read once, at the edge, and handed down in the Config (the containerd drop-in's PATH);
 * an empty one is still the agent's. */
static void test_finalize_path(void **state) {
        _cleanup_(config_freep) Config *c = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_null(c->path);
        assert_int_equal(
                config_finalize(c, &(ConfigOverrides) { .node_name = "n", .path = "/usr/bin:/bin" }, NULL),
                0);
        assert_string_equal(c->path, "/usr/bin:/bin");
        assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = "n", .path = "" }, NULL), 0);
        assert_string_equal(c->path, "");
}

static void test_finalize_hostname(void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_finalize(c, &(ConfigOverrides) { .hostname = "Worker-1" }, &err), 0);
        assert_string_equal(c->node_name, "worker-1");
}

/* The names derived at finalize go into API paths too: checked there, naming where they came from. */
static void test_finalize_bad_names(void **state) {
        char long_name[241];

        {
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *err = NULL;

                assert_int_equal(config_new(&c), 0);
                assert_int_equal(config_finalize(c, &(ConfigOverrides) { .hostname = "my_host" }, &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "hostname: nodeName: the hostname \"my_host\""));
        }
        {
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *err = NULL;

                assert_int_equal(config_new(&c), 0);
                assert_int_equal(config_finalize(c,
                                                 &(ConfigOverrides) { .node_name = "../x",
                                                                      .node_name_source = "$NODE_NAME" },
                                                 &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "$NODE_NAME: \"../x\""));
        }
        /* 240 characters are a node name, but "gardener-node-agent-" + 240 is no Lease name. */
        memset(long_name, 'a', sizeof(long_name) - 1);
        for (size_t i = 63; i < sizeof(long_name) - 1; i += 64)
                long_name[i] = '.';
        long_name[sizeof(long_name) - 1] = '\0';
        {
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *err = NULL;

                assert_int_equal(config_new(&c), 0);
                assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = long_name }, &err),
                                 -EINVAL);
                assert_non_null(strstr(err, "lease.name: the default"));
        }
        {
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *err = NULL;

                assert_int_equal(config_new(&c), 0);
                assert_int_equal(apply_yaml(c, "lease: {name: my-lease}\n", &err), 0);
                assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = long_name }, &err), 0);
                assert_string_equal(c->lease.name, "my-lease");
        }
}

static void test_finalize_image_needs_reference(void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(apply_yaml(c, "osUpdate: {backend: image}\n", &err), 0);
        assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = "n" }, &err), -EINVAL);
        assert_non_null(strstr(err, "osUpdate.image.reference"));
}

static void test_to_json_roundtrip(void **state) {
        _cleanup_(config_freep) Config *c = NULL, *d = NULL;
        _cleanup_free_ char *err = NULL;
        json_t *j, *k;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = "n" }, &err), 0);
        j = config_to_json(c);
        assert_non_null(j);
        /* The printed effective configuration is itself a valid configuration. */
        assert_int_equal(config_new(&d), 0);
        assert_int_equal(config_apply_json(d, j, "effective", &err), 0);
        k = config_to_json(d);
        assert_true(json_equal(j, k));
        json_decref(j);
        json_decref(k);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_apply_all_keys),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_finalize),
                cmocka_unit_test(test_finalize_hostname),
                cmocka_unit_test(test_finalize_bad_names),
                cmocka_unit_test(test_finalize_image_needs_reference),
                cmocka_unit_test(test_to_json_roundtrip),
                cmocka_unit_test(test_finalize_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
