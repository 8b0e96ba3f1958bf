/* SPDX-License-Identifier: Apache-2.0 */
#include <openssl/evp.h>
#include <stdio.h>

#include "core/osc.h"
#include "tests.h"
#include "util/fileio.h"

#define KUBELET_PATH "/opt/bin/kubelet"

static char *fixture(const char *name, size_t *ret_size) {
        _cleanup_free_ char *path = NULL;
        char *data = NULL;
        const char *dir = getenv("TEST_DATA");

        assert_non_null(dir);
        assert_true(asprintf(&path, "%s/osc/%s", dir, name) > 0);
        assert_int_equal(read_full_file(path, 1024 * 1024, &data, ret_size), 0);
        return data;
}

static char *base64(const char *data, size_t size) {
        char *out = malloc(size / 3 * 4 + 8);

        assert_non_null(out);
        EVP_EncodeBlock((unsigned char *) out, (const unsigned char *) data, (int) size);
        return out;
}

/* A Secret as the API returns it; checksum NULL leaves the annotation out. */
static json_t *secret_for(const char *yaml, size_t size, const char *checksum) {
        _cleanup_free_ char *b64 = base64(yaml, size);
        json_t *s = json_pack("{s:s, s:s, s:{s:s, s:s, s:{}}, s:{s:s}, s:s}", "apiVersion", "v1", "kind",
                              "Secret", "metadata", "name", "gardener-node-agent-worker-a", "namespace",
                              "kube-system", "annotations", "data", "osc.yaml", b64, "type", "Opaque");

        assert_non_null(s);
        if (checksum)
                assert_int_equal(
                        json_object_set_new(json_object_get(json_object_get(s, "metadata"), "annotations"),
                                            OSC_CHECKSUM_ANNOTATION, json_string(checksum)),
                        0);
        return s;
}

static OscDesired *decode_fixture(const char *name, const char *checksum) {
        _cleanup_free_ char *yaml = NULL, *err = NULL;
        OscDesired *o = NULL;
        json_t *secret;
        size_t size;
        int r;

        yaml = fixture(name, &size);
        secret = secret_for(yaml, size, checksum);
        r = osc_decode_secret(secret, KUBELET_PATH, &o, &err);
        json_decref(secret);
        if (r < 0)
                fail_msg("%s: %d %s", name, r, strempty(err));
        return o;
}

static void test_full_in_place_osc(void **state) {
        _cleanup_(osc_desired_freep) OscDesired *o = decode_fixture("inplace-os-kubelet.yaml", "0b3c1d");
        _cleanup_free_ char *kv = NULL;

        assert_string_equal(o->checksum, "0b3c1d");
        assert_true(o->in_place);
        assert_string_equal(o->os_version, "1592.7");
        assert_string_equal(o->kubelet_version, "1.32.1");
        assert_string_equal(o->min_version_for_update, "1592.4");
        assert_false(o->has_rotation);
        assert_null(o->ca_rotation);
        assert_null(o->sa_rotation);
        assert_string_equal(o->os_update_command, "/opt/gardener/bin/inplace-update.sh");
        assert_non_null(o->os_update_args);
        assert_string_equal(o->os_update_args[0], "1592.7");
        assert_null(o->os_update_args[1]);
        assert_true(o->kubelet_file_found);
        assert_string_equal(o->kubelet_image,
                            "europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.32.1");
        assert_string_equal(o->kubelet_file_in_image, "/kubelet");

        assert_int_equal(osc_kubelet_version(o, &kv, NULL), 0);
        assert_string_equal(kv, "1.32.1");
}

static void test_rotation_and_digest(void **state) {
        _cleanup_(osc_desired_freep) OscDesired *o = decode_fixture("inplace-rotation.yaml", NULL);
        _cleanup_free_ char *kv = NULL;

        assert_null(o->checksum);
        assert_true(o->has_rotation);
        assert_string_equal(o->ca_rotation, "2025-03-01T10:00:00Z");
        assert_null(o->sa_rotation); /* the struct exists, its time does not */
        assert_null(o->min_version_for_update);
        assert_string_equal(o->os_version, "1592.6.0");
        assert_string_equal(o->kubelet_version, "v1.31.4");
        assert_null(o->os_update_args[0]); /* no args: an empty list, not NULL */
        assert_int_equal(osc_kubelet_version(o, &kv, NULL), 0);
        assert_string_equal(kv, "1.31.4");
}

static void test_rolling_pool(void **state) {
        _cleanup_(osc_desired_freep) OscDesired *o = decode_fixture("rolling.yaml", "abc");
        _cleanup_free_ char *kv = NULL;

        assert_false(o->in_place);
        assert_null(o->os_version);
        assert_null(o->os_update_command);
        assert_int_equal(osc_kubelet_version(o, &kv, NULL), 0); /* from the image tag */
        assert_string_equal(kv, "1.31.5");
}

static void test_extension_files_and_inline(void **state) {
        _cleanup_(osc_desired_freep) OscDesired *a = decode_fixture("extension-files.yaml", NULL);
        _cleanup_(osc_desired_freep) OscDesired *b = decode_fixture("inline-kubelet.yaml", NULL);
        char *kv = NULL;

        assert_true(a->kubelet_file_found);
        assert_string_equal(a->kubelet_image, "registry.example.com/custom/kubelet:v1.33.0");
        assert_string_equal(a->kubelet_file_in_image, "/usr/local/bin/kubelet");

        assert_true(b->kubelet_file_found);
        assert_null(b->kubelet_image);
        assert_null(b->kubelet_file_in_image);
        b->in_place = false; /* without inPlaceUpdates and image there is no version */
        assert_int_equal(osc_kubelet_version(b, &kv, NULL), -ENODATA);
        assert_null(kv);
}

static OscDesired *decode_text(const char *yaml) {
        _cleanup_free_ char *err = NULL;
        OscDesired *o = NULL;

        if (osc_decode_yaml(yaml, strlen(yaml), NULL, KUBELET_PATH, &o, &err) < 0)
                fail_msg("%s", strempty(err));
        return o;
}

/* docs/node-protocol.md §2.2 step 3: the kube-apiserver manifest in spec.files makes a control-plane node;
 * upstream looks at spec.files only, so one in status.extensionFiles does not. */
static void test_control_plane(void **state) {
        _cleanup_(osc_desired_freep) OscDesired *cp = decode_text(
                "spec:\n  files:\n  - path: /etc/a\n  - path: " OSC_KUBE_APISERVER_MANIFEST "\n");
        _cleanup_(osc_desired_freep) OscDesired *ext =
                decode_text("status:\n  extensionFiles:\n  - path: " OSC_KUBE_APISERVER_MANIFEST "\n");
        _cleanup_(osc_desired_freep) OscDesired *worker = decode_fixture("inplace-os-kubelet.yaml", NULL);
        _cleanup_(osc_desired_freep) OscDesired *near = decode_text(
                "spec:\n  files:\n  - path: /etc/kubernetes/manifests/kube-apiserver.yaml.bak\n");

        assert_true(cp->control_plane);
        assert_false(ext->control_plane);
        assert_false(worker->control_plane);
        assert_false(near->control_plane);
}

static void test_fixture_errors(void **state) {
        static const struct {
                const char *name;
                int r;
                const char *prefix;
        } table[] = {
                { "bad-kubelet-type.yaml", -EINVAL, "spec.inPlaceUpdates.kubelet: expected a string" },
                { "not-yaml.yaml", -EBADMSG, "unable to decode OSC from secret data key osc.yaml: line " },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *yaml = NULL, *err = NULL;
                OscDesired *o = NULL;
                json_t *secret;
                size_t size;

                yaml = fixture(table[i].name, &size);
                secret = secret_for(yaml, size, "x");
                assert_int_equal(osc_decode_secret(secret, KUBELET_PATH, &o, &err), table[i].r);
                json_decref(secret);
                assert_null(o);
                assert_non_null(err);
                if (strncmp(err, table[i].prefix, strlen(table[i].prefix)) != 0)
                        fail_msg("%s: \"%s\"", table[i].name, err);
        }
}

static void test_secret_shape(void **state) {
        static const struct {
                const char *json;
                int r;
                const char *error;
        } table[] = {
                /* docs/node-protocol.md §9 scenario 34: no osc.yaml key */
                { "{\"data\":{}}", -ENODATA, "no osc.yaml key found in OSC secret" },
                { "{\"metadata\":{}}", -ENODATA, "no osc.yaml key found in OSC secret" },
                { "{\"data\":{\"osc.yaml\":null}}", -ENODATA, "no osc.yaml key found in OSC secret" },
                { "{\"data\":{\"osc.yml\":\"YQ==\"}}", -ENODATA, "no osc.yaml key found in OSC secret" },
                { "{\"data\":{\"osc.yaml\":1}}", -EINVAL, "data.osc.yaml: expected a base64 string" },
                { "[]", -EINVAL, "secret: expected an object" },
                { "{\"metadata\":{\"annotations\":{\"checksum/data-script\":1}},\"data\":{\"osc.yaml\":\"\"}}",
                  -EINVAL, "metadata.annotations.checksum/data-script: expected a string" },
                /* strict base64 */
                { "{\"data\":{\"osc.yaml\":\"abc\"}}", -EBADMSG,
                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data" },
                { "{\"data\":{\"osc.yaml\":\"ab=c\"}}", -EBADMSG,
                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data" },
                { "{\"data\":{\"osc.yaml\":\"YQ==YQ==\"}}", -EBADMSG,
                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data" },
                { "{\"data\":{\"osc.yaml\":\"YQ =\"}}", -EBADMSG,
                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data" },
                { "{\"data\":{\"osc.yaml\":\"====\"}}", -EBADMSG,
                  "unable to decode OSC from secret data key osc.yaml: invalid base64 data" },
                /* valid base64 of "a": a scalar document, not an OSC */
                { "{\"data\":{\"osc.yaml\":\"YQ==\"}}", -EINVAL,
                  "osc.yaml: expected an OperatingSystemConfig object" },
                /* empty data: an empty YAML stream is null */
                { "{\"data\":{\"osc.yaml\":\"\"}}", -EINVAL,
                  "osc.yaml: expected an OperatingSystemConfig object" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                OscDesired *o = NULL;
                json_t *j = json_loads(table[i].json, 0, NULL);
                int r;

                assert_non_null(j);
                r = osc_decode_secret(j, KUBELET_PATH, &o, &err);
                json_decref(j);
                if (r != table[i].r || !err || !streq(err, table[i].error))
                        fail_msg("%s: %d \"%s\"", table[i].json, r, strempty(err));
                assert_null(o);
        }
}

static void test_field_errors(void **state) {
        static const struct {
                const char *yaml;
                const char *error; /* NULL: decodes fine */
        } table[] = {
                { "spec: []", "spec: expected an object" },
                { "status: 1", "status: expected an object" },
                { "kind: Secret", "kind: expected OperatingSystemConfig" },
                { "[1, 2]", "osc.yaml: expected an OperatingSystemConfig object" },
                { "spec: {inPlaceUpdates: 5}", "spec.inPlaceUpdates: expected an object" },
                /* an unquoted 1592.6 is a YAML float: Go would refuse it for a string field too */
                { "spec: {inPlaceUpdates: {operatingSystemVersion: 1592.6}}",
                  "spec.inPlaceUpdates.operatingSystemVersion: expected a string" },
                { "spec: {inPlaceUpdates: {minVersionForUpdate: true}}",
                  "spec.inPlaceUpdates.minVersionForUpdate: expected a string" },
                { "spec: {inPlaceUpdates: {operatingSystemVersion: 'a\"b'}}",
                  "spec.inPlaceUpdates.operatingSystemVersion: invalid or longer than 128 bytes" },
                { "spec: {inPlaceUpdates: {credentialsRotation: []}}",
                  "spec.inPlaceUpdates.credentialsRotation: expected an object" },
                { "spec: {inPlaceUpdates: {credentialsRotation: {serviceAccountKey: {lastInitiationTime: 5}}}}",
                  "spec.inPlaceUpdates.credentialsRotation.serviceAccountKey.lastInitiationTime: expected a string" },
                { "status: {inPlaceUpdates: {osUpdate: {command: [x]}}}",
                  "status.inPlaceUpdates.osUpdate.command: expected a string" },
                { "status: {inPlaceUpdates: {osUpdate: {args: x}}}",
                  "status.inPlaceUpdates.osUpdate.args: expected a list" },
                { "status: {inPlaceUpdates: {osUpdate: {args: [a, 1]}}}",
                  "status.inPlaceUpdates.osUpdate.args[1]: expected a string" },
                { "status: {inPlaceUpdates: [x]}", "status.inPlaceUpdates: expected an object" },
                { "spec: {files: {}}", "spec.files: expected a list" },
                { "spec: {files: [1]}", "spec.files[0]: expected an object" },
                { "spec: {files: [{path: /a}, {path: 7}]}", "spec.files[1].path: expected a string" },
                { "spec: {files: [{path: /opt/bin/kubelet, content: {imageRef: {image: ''}}}]}",
                  "spec.files[0].content.imageRef.image: must not be empty" },
                { "spec: {files: [{path: /opt/bin/kubelet, content: {imageRef: {image: 'a b', filePathInImage: /k}}}]}",
                  "spec.files[0].content.imageRef.image: invalid or longer than 1024 bytes" },
                { "spec: {files: [{path: /opt/bin/kubelet, content: {imageRef: {image: r/k:v1}}}]}",
                  "spec.files[0].content.imageRef.filePathInImage: must not be empty" },
                { "spec: {files: [{path: /opt/bin/kubelet, content: 3}]}",
                  "spec.files[0].content: expected an object" },
                { "status: {extensionFiles: [{path: /opt/bin/kubelet, content: {imageRef: 1}}]}",
                  "status.extensionFiles[0].content.imageRef: expected an object" },
                /* the kubelet entry of spec.files wins; a bad duplicate later is not read */
                { "spec: {files: [{path: /opt/bin/kubelet, content: {imageRef: {image: r/k:v1, filePathInImage: /k}}},"
                  " {path: /opt/bin/kubelet, content: 3}]}",
                  NULL },
                /* nulls are Go zero values */
                { "spec: {inPlaceUpdates: {kubelet: null, credentialsRotation: null}, files: null}", NULL },
                { "apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\n", NULL },
                { "spec: {unknown: {deep: [1, {x: y}]}, inPlaceUpdates: {unknownToo: 1}}", NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                OscDesired *o = NULL;
                int r;

                r = osc_decode_yaml(table[i].yaml, strlen(table[i].yaml), NULL, KUBELET_PATH, &o, &err);
                if (!table[i].error) {
                        if (r != 0)
                                fail_msg("%s: %d %s", table[i].yaml, r, strempty(err));
                        o = osc_desired_free(o);
                        continue;
                }
                if (r != -EINVAL || !err || !streq(err, table[i].error))
                        fail_msg("%s: %d \"%s\"", table[i].yaml, r, strempty(err));
                assert_null(o);
        }
}

static void test_limits(void **state) {
        _cleanup_free_ char *err = NULL, *err2 = NULL, *err3 = NULL;
        _cleanup_free_ char *args = NULL, *files = NULL, *big = NULL;
        OscDesired *o = NULL;
        size_t n = 0;

        args = malloc(64 * 1024);
        assert_non_null(args);
        n = (size_t) sprintf(args, "status: {inPlaceUpdates: {osUpdate: {command: x, args: [");
        for (int i = 0; i <= OSC_ARGS_MAX; i++)
                n += (size_t) sprintf(args + n, "%sa", i ? ", " : "");
        strcpy(args + n, "]}}}");
        assert_int_equal(osc_decode_yaml(args, strlen(args), NULL, KUBELET_PATH, &o, &err), -EINVAL);
        assert_string_equal(err, "status.inPlaceUpdates.osUpdate.args: more than 64 entries");

        files = malloc(32 * (OSC_FILES_MAX + 2));
        assert_non_null(files);
        n = (size_t) sprintf(files, "spec:\n  files:\n");
        for (int i = 0; i <= OSC_FILES_MAX; i++)
                n += (size_t) sprintf(files + n, "  - {path: /f}\n");
        assert_int_equal(osc_decode_yaml(files, n, NULL, KUBELET_PATH, &o, &err2), -EINVAL);
        assert_string_equal(err2, "spec.files: more than 10000 files");

        big = malloc(OSC_YAML_MAX + 1);
        assert_non_null(big);
        memset(big, ' ', OSC_YAML_MAX + 1);
        assert_int_equal(osc_decode_yaml(big, OSC_YAML_MAX + 1, NULL, KUBELET_PATH, &o, &err3), -EFBIG);
        assert_null(o);

        {
                _cleanup_free_ char *e = NULL;
                char sum[OSC_SHORT_MAX + 2];

                memset(sum, 'a', sizeof(sum) - 1);
                sum[sizeof(sum) - 1] = '\0';
                assert_int_equal(
                        osc_decode_yaml("kind: OperatingSystemConfig", 27, sum, KUBELET_PATH, &o, &e),
                        -EINVAL);
        }
}

static void test_image_tag(void **state) {
        static const struct {
                const char *image, *tag; /* tag NULL: -ENODATA */
        } table[] = {
                { "europe-docker.pkg.dev/gardener-project/releases/hyperkube:v1.32.1", "v1.32.1" },
                { "registry.example.com:5000/hyperkube:v1.31.4@sha256:0123", "v1.31.4" },
                { "registry.example.com:5000/hyperkube", NULL },
                { "registry.example.com:5000/hyperkube@sha256:0123", NULL },
                { "kubelet:v1", "v1" },
                { "kubelet:", NULL },
                { "kubelet", NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *t = NULL;
                int r = osc_image_tag(table[i].image, &t);

                if (!table[i].tag) {
                        assert_int_equal(r, -ENODATA);
                        continue;
                }
                assert_int_equal(r, 0);
                assert_string_equal(t, table[i].tag);
        }

        {
                OscDesired o = { .kubelet_image = (char *) "r/k:latest" };
                char *v = NULL;
                assert_int_equal(osc_kubelet_version(&o, &v, NULL), -EINVAL);
                assert_null(v);
        }
}

/* Issue 16: absurd kubelet versions and an escaping filePathInImage are terminal errors naming the
 * field, not retriable failures that name nothing. */
static void test_hostile_kubelet_fields(void **state) {
        static const struct {
                const char *version, *image, *in_image, *error;
        } table[] = {
                { "1.31.2", "r/k:v1.31.2", "/kubelet", NULL },
                { NULL, "r/k:v1.31.2", "kubelet", NULL },
                { NULL, "r/k:v1.31.2", "/usr/local/bin/kubelet", NULL },
                { "99999999999999999999.0.0", "r/k:x", "/kubelet",
                  "spec.inPlaceUpdates.kubelet: \"99999999999999999999.0.0\" is not a valid kubelet version: "
                  "invalid semantic version: a part does not fit in 64 bits" },
                { "../../../../tmp/x", "r/k:x", "/kubelet",
                  "spec.inPlaceUpdates.kubelet: \"../../../../tmp/x\" is not a valid kubelet version: only "
                  "[0-9A-Za-z.+_-] starting with a digit may name a version" },
                { "1.31.2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "r/k:x", "/kubelet",
                  "spec.inPlaceUpdates.kubelet: \"1.31.2-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\" "
                  "is not a valid kubelet version: longer than 63 bytes, the limit of a label value" },
                { "1.31.2+k3s1", "r/k:x", "/kubelet",
                  "spec.inPlaceUpdates.kubelet: \"1.31.2+k3s1\" is not a valid kubelet version: not a valid label "
                  "value" },
                { NULL, "r/k:v99999999999999999999.1", "/kubelet",
                  "spec.files[2].content.imageRef.image (its tag): \"v99999999999999999999.1\" is not a valid kubelet "
                  "version: invalid semantic version: a part does not fit in 64 bits" },
                { NULL, "r/k", "/kubelet",
                  "spec.files[2].content.imageRef.image (its tag): \"\" is not a valid kubelet version: the image "
                  "has no tag" },
                { "1.31.2", "r/k:v1.31.2", "../../../../etc/shadow",
                  "spec.files[2].content.imageRef.filePathInImage: \"../../../../etc/shadow\" must be a normalised "
                  "path inside the image, without \"..\", \".\" or empty components" },
                { "1.31.2", "r/k:v1.31.2", "/a/./kubelet",
                  "spec.files[2].content.imageRef.filePathInImage: "
                  "\"/a/./kubelet\" must be a normalised path inside the image, without \"..\", \".\" or empty "
                  "components" },
                { "1.31.2", "r/k:v1.31.2", "/a//kubelet",
                  "spec.files[2].content.imageRef.filePathInImage: "
                  "\"/a//kubelet\" must be a normalised path inside the image, without \"..\", \".\" or empty "
                  "components" },
                { "1.31.2", "r/k:v1.31.2", "/bin/",
                  "spec.files[2].content.imageRef.filePathInImage: "
                  "\"/bin/\" must be a normalised path inside the image, without \"..\", \".\" or empty "
                  "components" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                OscDesired o = {
                        .in_place = true,
                        .kubelet_version = (char *) table[i].version,
                        .kubelet_image = (char *) table[i].image,
                        .kubelet_file_in_image = (char *) table[i].in_image,
                        .kubelet_file_field = (char *) "spec.files[2]",
                };
                _cleanup_free_ char *v = NULL, *err = NULL;
                int r = osc_kubelet_version(&o, &v, &err);

                if (r >= 0)
                        r = osc_check_kubelet_file_in_image(&o, &err);
                if (!table[i].error) {
                        if (r < 0)
                                fail_msg("%zu: %s", i, strempty(err));
                        continue;
                }
                assert_int_equal(r, -EINVAL);
                assert_string_equal(err, table[i].error);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_full_in_place_osc),
                cmocka_unit_test(test_hostile_kubelet_fields),
                cmocka_unit_test(test_rotation_and_digest),
                cmocka_unit_test(test_rolling_pool),
                cmocka_unit_test(test_extension_files_and_inline),
                cmocka_unit_test(test_control_plane),
                cmocka_unit_test(test_fixture_errors),
                cmocka_unit_test(test_secret_shape),
                cmocka_unit_test(test_field_errors),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_image_tag),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
