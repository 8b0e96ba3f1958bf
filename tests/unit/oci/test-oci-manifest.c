/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "oci/oci-manifest.h"
#include "tests.h"

#define DA "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define DB "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define DC "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

static const char oci_image[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" DA
        "\",\"size\":7},"
        "\"layers\":["
        "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" DB "\",\"size\":100},"
        "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"" DC "\",\"size\":200},"
        "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"" DC "\",\"size\":0}]}";

static const char docker_image[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_MT_MANIFEST "\","
        "\"config\":{\"mediaType\":\"application/vnd.docker.container.image.v1+json\",\"digest\":\"" DA
        "\",\"size\":7},"
        "\"layers\":[{\"mediaType\":\"application/vnd.docker.image.rootfs.diff.tar.gzip\",\"digest\":\"" DB
        "\",\"size\":5}]}";

static const char index_json[] =
        "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"manifests\":["
        "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" DA "\",\"size\":1,"
        " \"platform\":{\"os\":\"linux\",\"architecture\":\"arm\",\"variant\":\"v6\"}},"
        "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" DB "\",\"size\":2,"
        " \"platform\":{\"os\":\"linux\",\"architecture\":\"arm\"}},"
        "{\"mediaType\":\"application/vnd.in-toto+json\",\"digest\":\"" DC "\",\"size\":3,"
        " \"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}},"
        "{\"mediaType\":\"" OCI_MT_MANIFEST "\",\"digest\":\"" DC "\",\"size\":4,"
        " \"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";

static void test_oci_image(void **state) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        char buf[DIGEST_STRING_MAX];

        assert_int_equal(oci_manifest_parse(oci_image, strlen(oci_image), OCI_MT_MANIFEST, &m), 0);
        assert_int_equal(m->kind, OCI_MANIFEST_IMAGE);
        assert_int_equal(m->n_layers, 3);
        assert_string_equal(digest_format(&m->config.digest, buf), DA);
        assert_int_equal(m->layers[0].compression, OCI_COMPRESSION_GZIP);
        assert_int_equal(m->layers[1].compression, OCI_COMPRESSION_ZSTD);
        assert_int_equal(m->layers[2].compression, OCI_COMPRESSION_NONE);
        assert_int_equal(m->layers[1].size, 200);
}

static void test_docker_image_and_content_type(void **state) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        OciManifest *x = NULL;

        assert_int_equal(oci_manifest_parse(docker_image, strlen(docker_image),
                                            DOCKER_MT_MANIFEST "; charset=utf-8", &m),
                         0);
        assert_int_equal(m->kind, OCI_MANIFEST_IMAGE);
        assert_int_equal(m->layers[0].compression, OCI_COMPRESSION_GZIP);
        /* header says index, body says image: refused */
        assert_int_equal(oci_manifest_parse(docker_image, strlen(docker_image), OCI_MT_INDEX, &x), -EBADMSG);
        assert_null(x);
}

static void test_index_platforms(void **state) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL, *img = NULL;
        const OciDescriptor *d = NULL;

        assert_int_equal(oci_manifest_parse(index_json, strlen(index_json), "application/json", &m), 0);
        assert_int_equal(m->kind, OCI_MANIFEST_INDEX);
        assert_int_equal(m->n_manifests, 4);

        assert_int_equal(oci_manifest_select_platform(m, "linux", "amd64", NULL, &d), 0);
        assert_int_equal(d->size, 4); /* the attestation entry is skipped */
        assert_int_equal(oci_manifest_select_platform(m, "linux", "arm", "v6", &d), 0);
        assert_int_equal(d->size, 1);
        assert_int_equal(oci_manifest_select_platform(m, "linux", "arm", "v7", &d), 0);
        assert_int_equal(d->size, 2); /* no variant = any */
        assert_int_equal(oci_manifest_select_platform(m, "linux", "s390x", NULL, &d), -ENOENT);

        assert_int_equal(oci_manifest_parse(oci_image, strlen(oci_image), NULL, &img), 0);
        assert_int_equal(oci_manifest_select_platform(img, "linux", "amd64", NULL, &d), -EINVAL);
}

static void test_rejects(void **state) {
        static const char *const bad[] = {
                "",
                "[]",
                "{}",
                "not json",
                "{\"schemaVersion\":\"2\"}",
                "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST "\",\"layers\":[]}",
                "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_MANIFEST
                "\",\"config\":{\"mediaType\":\"x\",\"digest\":\"" DA "\",\"size\":-1},\"layers\":[]}",
                "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX "\",\"manifests\":[]}",
                "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX
                "\",\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha256:00\",\"size\":1}]}",
                "{\"schemaVersion\":2,\"schemaVersion\":2}",
        };
        static const char *const unsupported[] = {
                "{\"schemaVersion\":1,\"name\":\"x\"}",
                "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.example\"}",
                "{\"schemaVersion\":2,\"mediaType\":\"" DOCKER_MT_MANIFEST "\","
                "\"config\":{\"mediaType\":\"x\",\"digest\":\"" DA "\",\"size\":1},"
                "\"layers\":[{\"mediaType\":\"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip\",\"digest\":\"" DB
                "\",\"size\":1}]}",
                "{\"schemaVersion\":2,\"mediaType\":\"" OCI_MT_INDEX
                "\",\"manifests\":[{\"mediaType\":\"x\",\"digest\":\"sha512:00\",\"size\":1}]}",
        };
        OciManifest *m = NULL;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(oci_manifest_parse(bad[i], strlen(bad[i]), NULL, &m), -EBADMSG);
                assert_null(m);
        }
        for (size_t i = 0; i < ELEMENTSOF(unsupported); i++)
                assert_int_equal(oci_manifest_parse(unsupported[i], strlen(unsupported[i]), NULL, &m),
                                 -EPROTONOSUPPORT);
        assert_null(m);
}

static void test_limits(void **state) {
        _cleanup_free_ char *big = NULL;
        size_t size = 0;
        OciManifest *m = NULL;
        FILE *f;

        /* more layers than allowed */
        f = open_memstream(&big, &size);
        assert_non_null(f);
        fprintf(f,
                "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":\"x\",\"digest\":\"%s\",\"size\":1},\"layers\":[",
                OCI_MT_MANIFEST, DA);
        for (unsigned i = 0; i <= OCI_LAYERS_MAX; i++)
                fprintf(f,
                        "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar\",\"digest\":\"%s\",\"size\":1}",
                        i ? "," : "", DB);
        fprintf(f, "]}");
        fclose(f);
        assert_int_equal(oci_manifest_parse(big, size, NULL, &m), -EBADMSG);
        assert_int_equal(oci_manifest_parse(big, OCI_MANIFEST_MAX + 1, NULL, &m), -EFBIG);
        assert_null(m);
}

static void test_platform_from_machine(void **state) {
        const char *arch, *variant;

        assert_int_equal(oci_platform_from_machine("x86_64", &arch, &variant), 0);
        assert_string_equal(arch, "amd64");
        assert_null(variant);
        assert_int_equal(oci_platform_from_machine("armv7l", &arch, &variant), 0);
        assert_string_equal(arch, "arm");
        assert_string_equal(variant, "v7");
        assert_int_equal(oci_platform_from_machine("pdp11", &arch, &variant), -EOPNOTSUPP);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_oci_image),       cmocka_unit_test(test_docker_image_and_content_type),
                cmocka_unit_test(test_index_platforms), cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_limits),          cmocka_unit_test(test_platform_from_machine),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
