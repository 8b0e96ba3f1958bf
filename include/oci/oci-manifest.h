/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Decoding of OCI / Docker v2 image manifests and indexes (manifest lists), and choosing the
 * manifest for a platform from an index. Pure: takes bytes, returns structs; no I/O, does not log.
 * Limits: a manifest document is at most OCI_MANIFEST_MAX bytes, at most OCI_LAYERS_MAX layers and
 * OCI_INDEX_ENTRIES_MAX index entries; every digest must be sha256 and every size non-negative and at
 * most OCI_BLOB_SIZE_MAX. Anything else is -EBADMSG (malformed) or -EPROTONOSUPPORT (well-formed but a
 * kind we do not handle: schema 1, foreign layers, non-sha256 digests). */

#include <stddef.h>
#include <stdint.h>

#include "oci/digest.h"
#include "util/macro.h"

#define OCI_MANIFEST_MAX (4U * 1024U * 1024U)
#define OCI_LAYERS_MAX 128U
#define OCI_INDEX_ENTRIES_MAX 256U
#define OCI_BLOB_SIZE_MAX (UINT64_C(16) * 1024 * 1024 * 1024)

#define OCI_MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define OCI_MT_INDEX "application/vnd.oci.image.index.v1+json"
#define DOCKER_MT_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define DOCKER_MT_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
/* Value of the Accept header for manifest requests: every kind we can decode. */
#define OCI_MANIFEST_ACCEPT OCI_MT_MANIFEST ", " OCI_MT_INDEX ", " DOCKER_MT_MANIFEST ", " DOCKER_MT_LIST

typedef enum OciManifestKind {
        OCI_MANIFEST_IMAGE, /* OCI image manifest or Docker schema 2 manifest */
        OCI_MANIFEST_INDEX, /* OCI index or Docker manifest list */
        _OCI_MANIFEST_KIND_MAX,
        _OCI_MANIFEST_KIND_INVALID = -EINVAL,
} OciManifestKind;

typedef enum OciCompression {
        OCI_COMPRESSION_NONE,
        OCI_COMPRESSION_GZIP,
        OCI_COMPRESSION_ZSTD,
        _OCI_COMPRESSION_MAX,
        _OCI_COMPRESSION_INVALID = -EINVAL,
} OciCompression;

typedef struct OciPlatform {
        char *os;           /* owned */
        char *architecture; /* owned */
        char *variant;      /* owned; NULL if absent */
} OciPlatform;

typedef struct OciDescriptor {
        char *media_type; /* owned */
        Digest digest;
        uint64_t size;
        OciCompression compression; /* layers only */
        OciPlatform platform;       /* index entries only; fields NULL if absent */
} OciDescriptor;

typedef struct OciManifest {
        OciManifestKind kind;
        char *media_type;      /* owned: the document's media type */
        OciDescriptor config;  /* image manifests only */
        OciDescriptor *layers; /* owned array: image manifests only, base layer first */
        size_t n_layers;
        OciDescriptor *manifests; /* owned array: indexes only */
        size_t n_manifests;
} OciManifest;

/* `content_type` is the HTTP Content-Type (may be NULL); the document's own "mediaType" wins when
 * present, and a disagreement between the two is -EBADMSG. */
int oci_manifest_parse(const void *data, size_t size, const char *content_type,
                       OciManifest **ret) _warn_unused_result_;
OciManifest *oci_manifest_free(OciManifest *m);
DEFINE_CLEANUP_FUNC(OciManifest, oci_manifest_free);

/* Chooses the entry of an index for os/architecture/variant (variant NULL = any; an entry without
 * variant matches any requested variant). Entries with an unknown media type are skipped. -ENOENT
 * when no entry fits, -EINVAL when `index` is not an index. Returns a borrowed pointer. */
int oci_manifest_select_platform(const OciManifest *index, const char *os, const char *architecture,
                                 const char *variant, const OciDescriptor **ret) _warn_unused_result_;

/* The OCI platform of this machine from uname's machine string: x86_64 → amd64, aarch64 → arm64
 * (variant v8), armv7l → arm/v7, ... -EOPNOTSUPP for an unknown machine. Borrowed strings. */
int oci_platform_from_machine(const char *machine, const char **ret_architecture,
                              const char **ret_variant) _warn_unused_result_;

const char *oci_manifest_kind_to_string(OciManifestKind k);
OciManifestKind oci_manifest_kind_from_media_type(const char *media_type);
const char *oci_compression_to_string(OciCompression c);
/* Layer media types: OCI tar / tar+gzip / tar+zstd (and nondistributable variants) and Docker's
 * rootfs.diff.tar.gzip. _OCI_COMPRESSION_INVALID for foreign or unknown layer types. */
OciCompression oci_compression_from_media_type(const char *media_type);
