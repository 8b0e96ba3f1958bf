/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>

#include "oci/oci-manifest.h"

static const char *const kind_table[_OCI_MANIFEST_KIND_MAX] = {
        [OCI_MANIFEST_IMAGE] = "image",
        [OCI_MANIFEST_INDEX] = "index",
};

static const char *const compression_table[_OCI_COMPRESSION_MAX] = {
        [OCI_COMPRESSION_NONE] = "none",
        [OCI_COMPRESSION_GZIP] = "gzip",
        [OCI_COMPRESSION_ZSTD] = "zstd",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(oci_manifest_kind, OciManifestKind, kind_table);

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(oci_compression, OciCompression, compression_table);

OciManifestKind oci_manifest_kind_from_media_type(const char *media_type) {
        if (!media_type)
                return _OCI_MANIFEST_KIND_INVALID;
        if (streq(media_type, OCI_MT_MANIFEST) || streq(media_type, DOCKER_MT_MANIFEST))
                return OCI_MANIFEST_IMAGE;
        if (streq(media_type, OCI_MT_INDEX) || streq(media_type, DOCKER_MT_LIST))
                return OCI_MANIFEST_INDEX;
        return _OCI_MANIFEST_KIND_INVALID;
}

OciCompression oci_compression_from_media_type(const char *media_type) {
        static const struct {
                const char *type;
                OciCompression compression;
        } table[] = {
                { "application/vnd.oci.image.layer.v1.tar", OCI_COMPRESSION_NONE },
                { "application/vnd.oci.image.layer.v1.tar+gzip", OCI_COMPRESSION_GZIP },
                { "application/vnd.oci.image.layer.v1.tar+zstd", OCI_COMPRESSION_ZSTD },
                { "application/vnd.oci.image.layer.nondistributable.v1.tar", OCI_COMPRESSION_NONE },
                { "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", OCI_COMPRESSION_GZIP },
                { "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", OCI_COMPRESSION_ZSTD },
                { "application/vnd.docker.image.rootfs.diff.tar.gzip", OCI_COMPRESSION_GZIP },
        };

        if (!media_type)
                return _OCI_COMPRESSION_INVALID;
        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(media_type, table[i].type))
                        return table[i].compression;
        return _OCI_COMPRESSION_INVALID;
}

static void platform_done(OciPlatform *p) {
        free(p->os);
        free(p->architecture);
        free(p->variant);
}

static void descriptor_done(OciDescriptor *d) {
        free(d->media_type);
        platform_done(&d->platform);
}

OciManifest *oci_manifest_free(OciManifest *m) {
        if (!m)
                return NULL;
        free(m->media_type);
        descriptor_done(&m->config);
        for (size_t i = 0; i < m->n_layers; i++)
                descriptor_done(&m->layers[i]);
        free(m->layers);
        for (size_t i = 0; i < m->n_manifests; i++)
                descriptor_done(&m->manifests[i]);
        free(m->manifests);
        free(m);
        return NULL;
}

static int dup_optional_string(json_t *obj, const char *key, size_t max, char **ret) {
        json_t *v = json_object_get(obj, key);

        if (!v) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > max)
                return -EBADMSG;
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int parse_platform(json_t *obj, OciPlatform *ret) {
        json_t *p = json_object_get(obj, "platform");
        int r;

        if (!p)
                return 0;
        if (!json_is_object(p))
                return -EBADMSG;
        r = dup_optional_string(p, "os", 64, &ret->os);
        if (r < 0)
                return r;
        r = dup_optional_string(p, "architecture", 64, &ret->architecture);
        if (r < 0)
                return r;
        return dup_optional_string(p, "variant", 64, &ret->variant);
}

static int parse_descriptor(json_t *obj, OciDescriptor *ret) {
        json_t *mt, *digest, *size;
        int r;

        if (!json_is_object(obj))
                return -EBADMSG;
        mt = json_object_get(obj, "mediaType");
        digest = json_object_get(obj, "digest");
        size = json_object_get(obj, "size");
        if (!json_is_string(mt) || json_string_length(mt) == 0 || json_string_length(mt) > 255 ||
            !json_is_string(digest) || !json_is_integer(size))
                return -EBADMSG;
        if (json_integer_value(size) < 0 || (uint64_t) json_integer_value(size) > OCI_BLOB_SIZE_MAX)
                return -EBADMSG;

        r = digest_parse(json_string_value(digest), &ret->digest);
        if (r < 0)
                return r == -EPROTONOSUPPORT ? r : -EBADMSG;
        ret->size = (uint64_t) json_integer_value(size);
        ret->media_type = strdup(json_string_value(mt));
        if (!ret->media_type)
                return -ENOMEM;
        return parse_platform(obj, &ret->platform);
}

static int parse_descriptor_array(json_t *arr, size_t max, OciDescriptor **ret, size_t *ret_n) {
        OciDescriptor *list;
        size_t n;
        int r;

        if (!json_is_array(arr))
                return -EBADMSG;
        n = json_array_size(arr);
        if (n > max)
                return -E2BIG;

        list = calloc(MAX(n, 1U), sizeof(OciDescriptor));
        if (!list)
                return -ENOMEM;
        /* Hand the array over first so a failure half-way is freed with the manifest. */
        *ret = list;
        for (size_t i = 0; i < n; i++) {
                r = parse_descriptor(json_array_get(arr, i), &list[i]);
                *ret_n = i + 1;
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_image(json_t *root, OciManifest *m) {
        int r;

        r = parse_descriptor(json_object_get(root, "config"), &m->config);
        if (r < 0)
                return r;
        r = parse_descriptor_array(json_object_get(root, "layers"), OCI_LAYERS_MAX, &m->layers,
                                   &m->n_layers);
        if (r < 0)
                return r;
        if (m->n_layers == 0)
                return -EBADMSG;
        for (size_t i = 0; i < m->n_layers; i++) {
                /* Foreign layers (Windows base images) live elsewhere and are never pulled. */
                m->layers[i].compression = oci_compression_from_media_type(m->layers[i].media_type);
                if (m->layers[i].compression < 0)
                        return -EPROTONOSUPPORT;
        }
        return 0;
}

/* The media type of a Content-Type header without parameters ("; charset=utf-8"); NULL unless it is
 * one of the manifest kinds (registries also send application/json or octet-stream). */
static char *content_type_manifest_kind(const char *content_type) {
        char *t;

        if (!content_type)
                return NULL;
        t = strndup(content_type, strcspn(content_type, "; \t"));
        if (t && oci_manifest_kind_from_media_type(t) < 0) {
                free(t);
                return NULL;
        }
        return t;
}

static int manifest_media_type(json_t *root, const char *content_type, const char **ret) {
        _cleanup_free_ char *ct = NULL;
        json_t *mt = json_object_get(root, "mediaType");

        ct = content_type_manifest_kind(content_type);
        if (mt) {
                if (!json_is_string(mt))
                        return -EBADMSG;
                /* A registry that says one thing in the header and another in the body is broken
                 * or lying: do not guess which one is right. */
                if (ct && !streq(ct, json_string_value(mt)))
                        return -EBADMSG;
                *ret = json_string_value(mt);
                return 0;
        }
        /* OCI allows omitting mediaType; then the shape tells: "manifests" → index. */
        *ret = json_object_get(root, "manifests") ? OCI_MT_INDEX : OCI_MT_MANIFEST;
        return 0;
}

int oci_manifest_parse(const void *data, size_t size, const char *content_type, OciManifest **ret) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        json_auto_t *root = NULL;
        const char *media_type;
        json_t *schema;
        OciManifestKind kind;
        json_error_t err;
        int r;

        assert(data || size == 0);
        assert(ret);

        if (size > OCI_MANIFEST_MAX)
                return -EFBIG;
        root = json_loadb(data, size, JSON_REJECT_DUPLICATES, &err);
        if (!json_is_object(root))
                return -EBADMSG;

        schema = json_object_get(root, "schemaVersion");
        if (!json_is_integer(schema))
                return -EBADMSG;
        if (json_integer_value(schema) != 2)
                return -EPROTONOSUPPORT; /* schema 1 is long deprecated */

        r = manifest_media_type(root, content_type, &media_type);
        if (r < 0)
                return r;
        kind = oci_manifest_kind_from_media_type(media_type);
        if (kind < 0)
                return -EPROTONOSUPPORT;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->kind = kind;
        m->media_type = strdup(media_type);
        if (!m->media_type)
                return -ENOMEM;

        if (kind == OCI_MANIFEST_IMAGE)
                r = parse_image(root, m);
        else {
                r = parse_descriptor_array(json_object_get(root, "manifests"), OCI_INDEX_ENTRIES_MAX,
                                           &m->manifests, &m->n_manifests);
                if (r >= 0 && m->n_manifests == 0)
                        r = -EBADMSG;
        }
        if (r == -E2BIG)
                return -EBADMSG;
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

int oci_manifest_select_platform(const OciManifest *index, const char *os, const char *architecture,
                                 const char *variant, const OciDescriptor **ret) {
        assert(index);
        assert(os);
        assert(architecture);
        assert(ret);

        if (index->kind != OCI_MANIFEST_INDEX)
                return -EINVAL;

        /* First exact variant match, then an entry without variant (the spec's "any"). */
        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < index->n_manifests; i++) {
                        const OciDescriptor *d = &index->manifests[i];

                        if (oci_manifest_kind_from_media_type(d->media_type) != OCI_MANIFEST_IMAGE)
                                continue;
                        if (!streq_ptr(d->platform.os, os) ||
                            !streq_ptr(d->platform.architecture, architecture))
                                continue;
                        if (variant && pass == 0 && !streq_ptr(d->platform.variant, variant))
                                continue;
                        if (variant && pass == 1 && d->platform.variant)
                                continue;
                        *ret = d;
                        return 0;
                }
        return -ENOENT;
}

int oci_platform_from_machine(const char *machine, const char **ret_architecture, const char **ret_variant) {
        static const struct {
                const char *machine, *architecture, *variant;
        } table[] = {
                { "x86_64", "amd64", NULL },    { "aarch64", "arm64", NULL },   { "arm64", "arm64", NULL },
                { "armv7l", "arm", "v7" },      { "armv6l", "arm", "v6" },      { "i686", "386", NULL },
                { "i386", "386", NULL },        { "ppc64le", "ppc64le", NULL }, { "s390x", "s390x", NULL },
                { "riscv64", "riscv64", NULL },
        };

        assert(ret_architecture);
        assert(ret_variant);

        for (size_t i = 0; machine && i < ELEMENTSOF(table); i++)
                if (streq(machine, table[i].machine)) {
                        *ret_architecture = table[i].architecture;
                        *ret_variant = table[i].variant;
                        return 0;
                }
        return -EOPNOTSUPP;
}
