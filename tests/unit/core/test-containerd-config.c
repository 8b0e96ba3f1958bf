/* SPDX-License-Identifier: Apache-2.0 */
#include "core/containerd-config.h"
#include "tests.h"

#define HEAD                                                                                                 \
        "# Written by inplace-agent from the OperatingSystemConfig (spec.criConfig); every change here is\n" \
        "# overwritten. Add settings in /etc/containerd/conf.d/*.toml or criConfig.containerd.plugins.\n"    \
        "imports = [\"/etc/containerd/conf.d/*.toml\"]\n"                                                    \
        "version = 2\n"
#define CRI "[plugins.\"io.containerd.grpc.v1.cri\""
#define CNI "\n" CRI ".cni]\nbin_dir = \"/opt/cni/bin\"\n"
#define RUNC "\n" CRI ".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n"
#define REGISTRY "\n" CRI ".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n"

static char *render(const char *config_json, int *ret_r, char **ret_error) {
        json_t *j = config_json ? json_loads(config_json, 0, NULL) : NULL;
        char *out = NULL;

        assert_true(!config_json || j);
        *ret_r = containerd_config_render(j, &out, ret_error);
        json_decref(j);
        return out;
}

static void test_golden(void **state) {
        static const struct {
                const char *config;
                const char *toml;
        } table[] = {
                /* no criConfig.containerd fields: what upstream sets on top of the defaults */
                { NULL, HEAD CNI RUNC REGISTRY },
                { "{}", HEAD CNI RUNC REGISTRY },
                { "{\"sandboxImage\": \"registry.k8s.io/pause:3.10\", \"cgroupDriver\": \"systemd\"}",
                  HEAD "\n" CRI "]\nsandbox_image = \"registry.k8s.io/pause:3.10\"\n" CNI RUNC "\n" CRI
                       ".containerd.runtimes.runc.options]\nSystemdCgroup = true\n" REGISTRY },
                /* any other driver is false; an empty sandbox image keeps containerd's default */
                { "{\"sandboxImage\": \"\", \"cgroupDriver\": \"cgroupfs\", \"plugins\": null}",
                  HEAD CNI RUNC "\n" CRI
                                ".containerd.runtimes.runc.options]\nSystemdCgroup = false\n" REGISTRY },
                /* add: tables created, values typed; an empty table is kept; a later add merges key by key
                 * (null removes a key, a nested value is replaced, not merged) */
                { "{\"plugins\": ["
                  "{\"path\": [\"io.containerd.grpc.v1.cri\", \"containerd\", \"runtimes\", \"gvisor\"],"
                  " \"values\": {\"runtime_type\": \"io.containerd.runsc.v1\", \"n\": -3, \"f\": 1.5, \"g\": 2.0,"
                  "              \"big\": 1e300, \"ok\": false, \"options\": {\"a\": 1, \"b\": 2}}},"
                  "{\"op\": \"add\", \"path\": [\"io.containerd.grpc.v1.cri\", \"containerd\", \"runtimes\", \"gvisor\"],"
                  " \"values\": {\"options\": {\"b\": 3}, \"ok\": null}},"
                  "{\"path\": [\"io.containerd.internal.v1.opt\"]},"
                  "{\"path\": [\"x\"], \"values\": null}]}",
                  HEAD CNI "\n" CRI ".containerd.runtimes.gvisor]\nbig = 1e+300\nf = 1.5\ng = 2.0\nn = -3\n"
                           "runtime_type = \"io.containerd.runsc.v1\"\n"
                           "\n" CRI ".containerd.runtimes.gvisor.options]\nb = 3\n" RUNC REGISTRY
                           "\n[plugins.\"io.containerd.internal.v1.opt\"]\n\n[plugins.x]\n" },
                /* remove: the subtree goes, even what the agent sets; a missing path creates nothing;
                 * plugins may override the agent's own values */
                { "{\"sandboxImage\": \"p:1\", \"plugins\": ["
                  "{\"op\": \"remove\", \"path\": [\"io.containerd.grpc.v1.cri\", \"cni\"]},"
                  "{\"op\": \"remove\", \"path\": [\"nope\", \"deeper\"]},"
                  "{\"path\": [\"io.containerd.grpc.v1.cri\"], \"values\": {\"sandbox_image\": \"p:2\"}}]}",
                  HEAD "\n" CRI "]\nsandbox_image = \"p:2\"\n" RUNC REGISTRY },
                /* an empty path is the plugins table itself */
                { "{\"plugins\": [{\"op\": \"remove\", \"path\": []}, {\"path\": [], \"values\": {\"q\": \"r\"}}]}",
                  HEAD "\n[plugins]\nq = \"r\"\n" },
                /* escaping: keys that are not bare are quoted, strings escape quotes, backslashes and
                 * control characters (DEL included), UTF-8 passes through; arrays nest, tables in arrays are
                 * inline */
                { "{\"plugins\": [{\"op\": \"remove\", \"path\": [\"io.containerd.grpc.v1.cri\"]},"
                  "{\"path\": [\"a.b\", \"c d\", \"q\\\"\"], \"values\": {"
                  "\"s\": \"/a \\\"b\\\"\\\\\\n\\t\\b\\f\\r\\u0001\\u007f\\u00e4\","
                  "\"k=v\": [], \"arr\": [1, \"a\", [true, []], {\"x\": \"y\", \"z\": null, \"w w\": {}}, {}],"
                  "\"_-Az09\": 0}}]}",
                  HEAD "\n[plugins.\"a.b\".\"c d\".\"q\\\"\"]\n_-Az09 = 0\n"
                       "arr = [1, \"a\", [true, []], { \"w w\" = {}, x = \"y\" }, {}]\n\"k=v\" = []\n"
                       "s = \"/a \\\"b\\\"\\\\\\n\\t\\b\\f\\r\\u0001\\u007F\xc3\xa4\"\n" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL, *err = NULL;
                int r;

                out = render(table[i].config, &r, &err);
                if (r < 0 || !streq(out, table[i].toml))
                        fail_msg("case %zu: r=%d err=%s\n--- got\n%s--- want\n%s", i, r, err ?: "-",
                                 out ?: "", table[i].toml);
        }
}

/* Same input, same bytes: the applier's "write if changed" then makes a retry a no-op. */
static void test_deterministic(void **state) {
        static const char config[] =
                "{\"sandboxImage\": \"p\", \"cgroupDriver\": \"systemd\", \"plugins\": ["
                "{\"path\": [\"z\"], \"values\": {\"b\": 1, \"a\": 2, \"c\": {\"y\": 1, \"x\": 2}}},"
                "{\"path\": [\"a\"], \"values\": {\"k\": \"v\"}}]}";
        _cleanup_free_ char *a = NULL, *b = NULL;
        int r;

        a = render(config, &r, NULL);
        assert_int_equal(r, 0);
        b = render("{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"k\": \"v\"}},"
                   "{\"path\": [\"z\"], \"values\": {\"c\": {\"x\": 2, \"y\": 1}, \"a\": 2, \"b\": 1}}],"
                   " \"cgroupDriver\": \"systemd\", \"sandboxImage\": \"p\"}",
                   &r, NULL);
        assert_int_equal(r, 0);
        assert_string_equal(a, b);
}

static void test_invalid(void **state) {
        static const struct {
                const char *config;
                const char *message;
        } table[] = {
                { "[]", "spec.criConfig.containerd: expected an object" },
                { "{\"sandboxImage\": 1}", "spec.criConfig.containerd.sandboxImage: expected a string" },
                { "{\"cgroupDriver\": true}", "spec.criConfig.cgroupDriver: expected a string" },
                { "{\"plugins\": {}}", "spec.criConfig.containerd.plugins: expected an array" },
                { "{\"plugins\": [{\"path\": [\"a\"]}, 7]}",
                  "spec.criConfig.containerd.plugins[1]: expected an object" },
                { "{\"plugins\": [{\"op\": \"replace\", \"path\": [\"a\"]}]}",
                  "spec.criConfig.containerd.plugins[0].op: operation is not supported" },
                { "{\"plugins\": [{\"op\": 1, \"path\": [\"a\"]}]}",
                  "spec.criConfig.containerd.plugins[0].op: operation is not supported" },
                { "{\"plugins\": [{\"values\": {}}]}",
                  "spec.criConfig.containerd.plugins[0].path: expected an array of strings" },
                { "{\"plugins\": [{\"path\": [\"a\", 2]}]}",
                  "spec.criConfig.containerd.plugins[0].path[1]: expected a key (1..256 bytes, no control characters)" },
                { "{\"plugins\": [{\"path\": [\"\"]}]}",
                  "spec.criConfig.containerd.plugins[0].path[0]: expected a key (1..256 bytes, no control characters)" },
                { "{\"plugins\": [{\"path\": [\"a\\nb\"]}]}",
                  "spec.criConfig.containerd.plugins[0].path[0]: expected a key (1..256 bytes, no control characters)" },
                { "{\"plugins\": [{\"path\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"8\",\"9\",\"10\",\"11\",\"12\",\"13\",\"14\",\"15\"]}]}",
                  "spec.criConfig.containerd.plugins[0].path: nested too deeply" },
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": [1]}]}",
                  "spec.criConfig.containerd.plugins[0].values: expected an object" },
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"foo\": [1, null]}}]}",
                  "spec.criConfig.containerd.plugins[0].values.foo[1]: null is not allowed in an array" },
                { "{\"plugins\": [{\"path\": [\"a\"]}, {\"path\": [\"b\"]}, {\"path\": [\"a\"], \"values\": {\"ok\": 1, \"\": 2}}]}",
                  "spec.criConfig.containerd.plugins[2].values.: invalid key (empty, too long or with control characters)" },
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"foo\": {\"b\\u007fad\": 1}}}]}",
                  "spec.criConfig.containerd.plugins[0].values.foo.b\x7f"
                  "ad: invalid key (empty, too long or with control characters)" },
                /* "plugins" + 1 path element + 14 nested levels = 16 tables/arrays: one too many */
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"l\": [[[[[[[[[[[[[[1]]]]]]]]]]]]]]}}]}",
                  "spec.criConfig.containerd.plugins[0].values.l[0][0][0][0][0][0][0][0][0][0][0][0][0]: nested too deeply" },
                /* through a value that is not a table */
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"k\": 1}}, {\"path\": [\"a\", \"k\", \"z\"]}]}",
                  "spec.criConfig.containerd.plugins[1].path[1]: not a table in the containerd config" },
                { "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"k\": 1}}, {\"op\": \"remove\", \"path\": [\"a\", \"k\", \"z\"]}]}",
                  "spec.criConfig.containerd.plugins[1].path[1]: not a table in the containerd config" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL, *err = NULL;
                int r;

                out = render(table[i].config, &r, &err);
                if (r != -EINVAL || !err || !streq(err, table[i].message))
                        fail_msg("case %zu: r=%d err=%s, want %s", i, r, err ?: "-", table[i].message);
                assert_null(out);
        }
}

/* The last element of an "add" path that holds a value becomes a table (upstream replaces it). */
static void test_add_replaces_a_value(void **state) {
        _cleanup_free_ char *out = NULL;
        int r;

        out = render(
                "{\"plugins\": [{\"op\": \"remove\", \"path\": [\"io.containerd.grpc.v1.cri\"]},"
                "{\"path\": [\"a\"], \"values\": {\"k\": 1}}, {\"path\": [\"a\", \"k\"], \"values\": {\"z\": true}}]}",
                &r, NULL);
        assert_int_equal(r, 0);
        assert_string_equal(out, HEAD "\n[plugins.a.k]\nz = true\n");
}

/* Later plugins add and remove below tables an earlier one brought in: the caller's config stays as
 * it was, so rendering it again gives the same file. */
static void test_input_untouched(void **state) {
        static const char config[] =
                "{\"plugins\": [{\"path\": [\"a\"], \"values\": {\"k\": {\"x\": 1, \"y\": 2}}},"
                "{\"path\": [\"a\", \"k\"], \"values\": {\"z\": 3}},"
                "{\"op\": \"remove\", \"path\": [\"a\", \"k\", \"x\"]}]}";
        json_t *j = json_loads(config, 0, NULL), *copy = json_deep_copy(j);
        _cleanup_free_ char *a = NULL, *b = NULL;

        assert_int_equal(containerd_config_render(j, &a, NULL), 0);
        assert_true(json_equal(j, copy));
        assert_int_equal(containerd_config_render(j, &b, NULL), 0);
        assert_string_equal(a, b);
        assert_non_null(strstr(a, "\n[plugins.a.k]\ny = 2\nz = 3\n"));
        json_decref(j);
        json_decref(copy);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_golden),          cmocka_unit_test(test_deterministic),
                cmocka_unit_test(test_invalid),         cmocka_unit_test(test_add_replaces_a_value),
                cmocka_unit_test(test_input_untouched),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
