/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/osc-model.h"
#include "tests.h"

static const char full[] = "apiVersion: extensions.gardener.cloud/v1alpha1\n"
                           "kind: OperatingSystemConfig\n"
                           "spec:\n"
                           "  purpose: reconcile\n"
                           "  criConfig:\n"
                           "    name: containerd\n"
                           "    cgroupDriver: systemd\n"
                           "    containerd:\n"
                           "      sandboxImage: reg/pause:3.9\n"
                           "      registries:\n"
                           "      - upstream: docker.io\n"
                           "        server: https://registry-1.docker.io\n"
                           "        readinessProbe: true\n"
                           "        hosts:\n"
                           "        - url: https://mirror.local\n"
                           "          caCerts: [/etc/ca.pem]\n"
                           "          overridePath: true\n"
                           "  files:\n"
                           "  - path: /etc/plain\n"
                           "    permissions: 420\n"
                           "    content:\n"
                           "      inline:\n"
                           "        data: hello\n"
                           "  - path: /etc/b64\n"
                           "    content:\n"
                           "      inline:\n"
                           "        encoding: b64\n"
                           "        data: aGVsbG8K\n"
                           "  - path: /etc/secret\n"
                           "    content:\n"
                           "      secretRef: {name: s1, dataKey: k}\n"
                           "  - path: /opt/bin/kubelet\n"
                           "    permissions: 493\n"
                           "    content:\n"
                           "      imageRef: {image: 'reg/hyperkube:v1.31.2', filePathInImage: /kubelet}\n"
                           "  - path: /etc/other-host\n"
                           "    hostName: node-b\n"
                           "    content: {inline: {data: x}}\n"
                           "  - path: /etc/my-host\n"
                           "    hostName: node-a\n"
                           "    unknownField: ignored\n"
                           "    content: {inline: {data: y}}\n"
                           "  units:\n"
                           "  - name: a.service\n"
                           "    enable: true\n"
                           "    content: '[Service]'\n"
                           "    dropIns: [{name: 10-a.conf, content: x}]\n"
                           "    filePaths: [/etc/plain]\n"
                           "  - name: containerd.service\n"
                           "    dropIns: [{name: 10-os.conf, content: y}]\n"
                           "  inPlaceUpdates:\n"
                           "    operatingSystemVersion: '1592.6.0'\n"
                           "    kubelet: '1.31.2'\n"
                           "    credentialsRotation:\n"
                           "      certificateAuthorities: {lastInitiationTime: '2025-01-01T00:00:00Z'}\n"
                           "      serviceAccountKey: {}\n"
                           "status:\n"
                           "  extensionUnits:\n"
                           "  - name: a.service\n"
                           "    command: stop\n"
                           "    dropIns: [{name: 20-ext.conf, content: z}]\n"
                           "    filePaths: [/etc/ext]\n"
                           "  - name: ext.service\n"
                           "    content: '[Unit]'\n"
                           "  extensionFiles:\n"
                           "  - path: /etc/ext\n"
                           "    content: {inline: {data: e}}\n"
                           "  - path: /etc/plain\n"
                           "    content: {inline: {data: duplicate}}\n";

static OscModel *decode(const char *yaml, const OscModelOptions *opts) {
        _cleanup_free_ char *err = NULL;
        OscModel *m = NULL;
        int r = osc_model_decode_yaml(yaml, strlen(yaml), opts, &m, &err);

        if (r < 0)
                fail_msg("decode: %d %s", r, strempty(err));
        return m;
}

static void test_full(void **state) {
        OscModelOptions opts = { .host_name = "node-a", .containerd_path = "/usr/bin:/bin" };
        _cleanup_(osc_model_freep) OscModel *m = decode(full, &opts);
        const OscFile *f;
        const OscUnit *u;
        _cleanup_free_ char *content = NULL, *toml = NULL;
        size_t size;

        /* files: spec + status, host-filtered, first entry per path wins */
        assert_int_equal(m->n_files, 6);
        f = osc_model_find_file(m, "/etc/plain");
        assert_non_null(f);
        assert_int_equal(osc_file_mode(f), 0644);
        assert_false(f->in_status);
        assert_int_equal(osc_file_inline_content(f, &content, &size), 0);
        assert_string_equal(content, "hello");
        free(content);
        f = osc_model_find_file(m, "/etc/b64");
        assert_int_equal(osc_file_mode(f), 0600);
        assert_int_equal(osc_file_inline_content(f, &content, &size), 0);
        assert_string_equal(content, "hello\n");
        assert_int_equal(size, 6);
        f = osc_model_find_file(m, "/etc/secret");
        assert_int_equal(f->source, OSC_FILE_SECRET);
        assert_string_equal(f->secret_name, "s1");
        assert_string_equal(f->secret_key, "k");
        f = osc_model_find_file(m, "/opt/bin/kubelet");
        assert_int_equal(f->source, OSC_FILE_IMAGE);
        assert_string_equal(f->file_in_image, "/kubelet");
        assert_null(osc_model_find_file(m, "/etc/other-host"));
        assert_non_null(osc_model_find_file(m, "/etc/my-host"));
        assert_true(osc_model_find_file(m, "/etc/ext")->in_status);
        /* ... in the OSC's order (the duplicate after /etc/ext is gone), found through a sorted index */
        assert_string_equal(m->files[0].path, "/etc/plain");
        assert_string_equal(m->files[m->n_files - 1].path, "/etc/ext");
        for (size_t i = 1; i < m->n_files; i++)
                assert_true(strcmp(m->files[m->files_by_path[i - 1]].path,
                                   m->files[m->files_by_path[i]].path) < 0);
        assert_null(osc_model_find_file(m, "/etc/zzz"));
        assert_null(osc_model_find_file(m, "/"));

        /* units merged: later entries override command, append drop-ins and filePaths */
        assert_int_equal(m->n_units, 3);
        u = osc_model_find_unit(m, "a.service");
        assert_int_equal(u->enable, 1);
        assert_int_equal(u->command, OSC_UNIT_COMMAND_STOP);
        assert_string_equal(u->content, "[Service]");
        assert_int_equal(u->n_drop_ins, 2);
        assert_string_equal(u->drop_ins[1].name, "20-ext.conf");
        assert_int_equal(u->n_file_paths, 2);
        assert_true(osc_unit_lists_file(u, "/etc/ext"));
        assert_int_equal(osc_unit_effective_command(u), OSC_UNIT_COMMAND_STOP);
        assert_int_equal(osc_unit_effective_command(osc_model_find_unit(m, "ext.service")),
                         OSC_UNIT_COMMAND_RESTART);

        /* injected containerd drop-in, byte for byte */
        u = osc_model_find_unit(m, "containerd.service");
        assert_null(u->content);
        assert_int_equal(u->n_drop_ins, 2);
        assert_string_equal(u->drop_ins[1].name, "30-env_config.conf");
        assert_string_equal(u->drop_ins[1].content,
                            "[Service]\nEnvironment=\"PATH=/var/bin/containerruntimes:/usr/bin:/bin\"\n");

        /* containerd, registries, hosts.toml */
        assert_true(m->has_containerd);
        assert_string_equal(json_string_value(json_object_get(m->containerd_config, "cgroupDriver")),
                            "systemd");
        assert_int_equal(m->n_registries, 1);
        assert_true(m->registries[0].readiness_probe);
        assert_int_equal(osc_registry_hosts_toml(&m->registries[0], &toml), 0);
        assert_string_equal(toml,
                            "# managed by gardener-node-agent\n"
                            "server = \"https://registry-1.docker.io\"\n\n"
                            "[host.\"https://mirror.local\"]\n"
                            "  capabilities = [\"pull\",\"resolve\"]\n"
                            "  ca = [\"/etc/ca.pem\"]\n"
                            "  override_path = true\n\n");

        /* in-place */
        assert_true(m->in_place);
        assert_string_equal(m->os_version, "1592.6.0");
        assert_string_equal(m->kubelet_version, "1.31.2");
        assert_true(m->has_rotation && m->has_ca_rotation && m->has_sa_rotation);
        assert_string_equal(m->ca_rotation, "2025-01-01T00:00:00Z");
        assert_null(m->sa_rotation);
}

static void test_round_trip(void **state) {
        OscModelOptions opts = { .host_name = "node-a" };
        _cleanup_(osc_model_freep) OscModel *m = decode(full, &opts);

        for (size_t i = 0; i < m->n_files; i++) {
                OscFile copy;
                json_t *a = osc_file_to_json(&m->files[i]), *b;

                assert_int_equal(osc_file_copy(&m->files[i], &copy), 0);
                b = osc_file_to_json(&copy);
                assert_true(json_equal(a, b));
                json_decref(a);
                json_decref(b);
                osc_file_done(&copy);
        }
        for (size_t i = 0; i < m->n_units; i++) {
                OscUnit copy;
                json_t *a = osc_unit_to_json(&m->units[i]), *b;

                assert_int_equal(osc_unit_copy(&m->units[i], &copy), 0);
                b = osc_unit_to_json(&copy);
                assert_true(json_equal(a, b));
                json_decref(a);
                json_decref(b);
                osc_unit_done(&copy);
        }
}

static void test_no_injection_without_cri(void **state) {
        _cleanup_(osc_model_freep) OscModel *m = decode("spec:\n  units: [{name: x.service}]\n",
                                                        &(OscModelOptions) { .containerd_path = "/bin" });

        assert_int_equal(m->n_units, 1);
        assert_false(m->has_cri);
        assert_null(osc_model_find_unit(m, "containerd.service"));
}

/* Issue 23: permissions 4095 / 2541 gave files mode 07777 / 04755; upstream applies only the
 * permission bits. The canonical form keeps the value (the diff compares it with GNA's). */
static void test_only_permission_bits(void **state) {
        static const char yaml[] =
                "spec: {files: [{path: /a, permissions: 4095, content: {inline: {data: x}}},\n"
                "                {path: /b, permissions: 2541, content: {inline: {data: x}}},\n"
                "                {path: /c, permissions: 0, content: {inline: {data: x}}}]}";
        _cleanup_(osc_model_freep) OscModel *m = decode(yaml, NULL);
        json_t *j;

        assert_int_equal(osc_file_mode(osc_model_find_file(m, "/a")), 0777);
        assert_int_equal(osc_file_mode(osc_model_find_file(m, "/b")), 0755);
        assert_int_equal(osc_file_mode(osc_model_find_file(m, "/c")), 0);
        j = osc_file_to_json(osc_model_find_file(m, "/b"));
        assert_int_equal(json_integer_value(json_object_get(j, "permissions")), 2541);
        json_decref(j);
}

/* Issue 30: upstream skips a file without content (getFileContentData: ok=false) and applies the
 * rest; the model keeps it, without a source, and its canonical form round-trips. */
static void test_file_without_content(void **state) {
        static const char yaml[] =
                "spec: {files: [{path: /etc/kubernetes/manifests/kube-apiserver.yaml, content: {}},\n"
                "                {path: /b, permissions: 420},\n"
                "                {path: /c, content: {inline: {data: x}}}]}";
        _cleanup_(osc_model_freep) OscModel *m = decode(yaml, NULL);
        const OscFile *f = osc_model_find_file(m, "/etc/kubernetes/manifests/kube-apiserver.yaml");
        OscFile copy;
        json_t *j;

        assert_int_equal(m->n_files, 3);
        assert_int_equal(f->source, OSC_FILE_NONE);
        assert_int_equal(osc_model_find_file(m, "/b")->source, OSC_FILE_NONE);
        assert_int_equal(osc_model_find_file(m, "/c")->source, OSC_FILE_INLINE);
        assert_int_equal(osc_file_inline_content(f, &(char *) { NULL }, NULL), -EINVAL);
        assert_int_equal(osc_file_copy(f, &copy), 0);
        assert_int_equal(copy.source, OSC_FILE_NONE);
        j = osc_file_to_json(&copy);
        assert_int_equal(json_object_size(json_object_get(j, "content")), 0);
        json_decref(j);
        osc_file_done(&copy);
}

static void test_errors(void **state) {
        static const struct {
                const char *yaml;
                int error;
                const char *message;
        } table[] = {
                { "spec: {files: [{path: /a, content: {inline: {encoding: gzip, data: x}}}]}", -EINVAL,
                  "file \"/a\": invalid file codec id \"gzip\"" },
                { "spec: {files: [{path: /a, content: {inline: {encoding: b64, data: '!!'}}}]}", -EINVAL,
                  "file \"/a\": content is not valid base64" },
                { "spec: {files: [{path: relative, content: {inline: {data: x}}}]}", -EINVAL,
                  "file \"relative\": path must be absolute without . or .. or a trailing slash" },
                { "spec: {files: [{path: /a/../b, content: {inline: {data: x}}}]}", -EINVAL,
                  "file \"/a/../b\": path must be absolute without . or .. or a trailing slash" },
                /* issue 23: "/etc/x/" left an empty directory and failed with EISDIR, retried */
                { "spec: {files: [{path: /etc/x/, content: {inline: {data: x}}}]}", -EINVAL,
                  "file \"/etc/x/\": path must be absolute without . or .. or a trailing slash" },
                { "spec: {files: [{path: /, content: {inline: {data: x}}}]}", -EINVAL,
                  "file \"/\": path must be absolute without . or .. or a trailing slash" },
                { "spec: {files: [{path: /a, content: {inline: {data: x}, secretRef: {name: s, dataKey: k}}}]}",
                  -EINVAL, "file \"/a\": content has more than one of inline, secretRef and imageRef" },
                { "spec: {files: [{path: /a, content: {secretRef: {name: s, dataKey: k}, "
                  "imageRef: {image: i, filePathInImage: /f}}}]}",
                  -EINVAL, "file \"/a\": content has more than one of inline, secretRef and imageRef" },
                { "spec: {files: [{path: /a, permissions: 99999, content: {inline: {data: x}}}]}", -EINVAL,
                  "file \"/a\": permissions out of range" },
                { "spec: {files: [{path: /a, permissions: '0644', content: {inline: {data: x}}}]}", -EINVAL,
                  "spec.files[0].permissions: expected an integer" },
                { "spec: {files: [{path: /a, content: {secretRef: {name: s}}}]}", -EINVAL,
                  "spec.files[0].content.dataKey: must not be empty" },
                /* Issue 23: a Secret name that would have selected another object or added a query. */
                { "spec: {files: [{path: /a, content: {secretRef: {name: ../../default/secrets/other, dataKey: k}}}]}",
                  -EINVAL,
                  "spec.files[0].content.secretRef.name: \"../../default/secrets/other\" is not a valid DNS-1123 "
                  "subdomain: must consist of lower case alphanumeric characters, '-' or '.', and must start and "
                  "end with an alphanumeric character" },
                { "spec: {files: [{path: /a, content: {inline: {data: x}}}, "
                  "{path: /b, content: {secretRef: {name: 'ipa-good?labelSelector=x', dataKey: k}}}]}",
                  -EINVAL,
                  "spec.files[1].content.secretRef.name: \"ipa-good?labelSelector=x\" is not a valid DNS-1123 "
                  "subdomain: must consist of lower case alphanumeric characters, '-' or '.', and must start and "
                  "end with an alphanumeric character" },
                { "status: {extensionFiles: [{path: /a, content: {secretRef: {name: A, dataKey: k}}}]}",
                  -EINVAL, NULL },
                { "spec: {files: {}}", -EINVAL, "spec.files: expected a list" },
                { "spec: {units: [{name: ../x}]}", -EINVAL, "spec.units[0]: invalid unit name \"../x\"" },
                { "spec: {units: [{name: x, command: reload}]}", -EINVAL,
                  "unit \"x\": unknown command \"reload\"" },
                { "spec: {units: [{name: x, enable: 'yes'}]}", -EINVAL,
                  "spec.units[0].enable: expected true or false" },
                { "spec: {units: [{name: x, dropIns: [{name: a/b}]}]}", -EINVAL,
                  "unit \"x\": invalid drop-in name \"a/b\"" },
                { "status: {extensionUnits: [{content: x}]}", -EINVAL,
                  "status.extensionUnits[0].name: must not be empty" },
                { "spec: {criConfig: {containerd: {registries: [{upstream: '..'}]}}}", -EINVAL,
                  "spec.criConfig.containerd.registries[0]: invalid upstream \"..\"" },
                { "kind: Secret", -EINVAL, "kind: expected OperatingSystemConfig" },
                { "[1, 2]", -EINVAL, "osc.yaml: expected an OperatingSystemConfig object" },
                { "a: [", -EBADMSG, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                OscModel *m = NULL;
                int r = osc_model_decode_yaml(table[i].yaml, strlen(table[i].yaml), NULL, &m, &err);

                if (r != table[i].error)
                        fail_msg("case %zu: %d (%s)", i, r, strempty(err));
                assert_null(m);
                if (table[i].message)
                        assert_string_equal(err, table[i].message);
        }
}

static void test_limits(void **state) {
        _cleanup_free_ char *yaml = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&yaml, &size);
        _cleanup_free_ char *err = NULL;
        OscModel *m = NULL;

        fputs("spec:\n  units:\n  - name: x\n    dropIns:\n", f);
        for (int i = 0; i <= OSC_MODEL_DROPINS_MAX; i++)
                fprintf(f, "    - {name: d%d, content: c}\n", i);
        fclose(f);
        assert_int_equal(osc_model_decode_yaml(yaml, size, NULL, &m, &err), -EINVAL);
        assert_string_equal(err, "unit \"x\": more than 256 drop-ins");
}

static void test_kubelet_config(void **state) {
        _cleanup_(osc_model_freep) OscModel *m = decode(
                "spec:\n  files:\n  - path: /var/lib/kubelet/config/kubelet\n    content:\n      inline:\n"
                "        data: |\n          kind: KubeletConfiguration\n          cpuManagerPolicy: static\n",
                NULL);
        _cleanup_(osc_model_freep) OscModel *none = decode("spec: {}", NULL);
        _cleanup_free_ char *err = NULL;
        json_t *cfg = NULL;

        assert_int_equal(osc_model_kubelet_config(m, &cfg, NULL), 0);
        assert_string_equal(json_string_value(json_object_get(cfg, "cpuManagerPolicy")), "static");
        json_decref(cfg);
        assert_int_equal(osc_model_kubelet_config(none, &cfg, &err), -ENODATA);
        assert_string_equal(
                err, "kubelet config file with path: \"/var/lib/kubelet/config/kubelet\" not found in OSC");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_no_injection_without_cri),
                cmocka_unit_test(test_only_permission_bits),
                cmocka_unit_test(test_file_without_content),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_kubelet_config),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
