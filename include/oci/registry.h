/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OCI distribution client on the sd-event loop (through http.c; nothing blocks but short local
 * writes and fsyncs): resolves a reference to an image manifest (following an index to the platform
 * manifest) and downloads blobs into a blob directory, verifying every manifest and blob against its
 * digest while it streams (CONTRACT §7: nothing is used before it is verified).
 *
 *  - endpoints: registry.mirrors[<host>] first, then https://<host>; any failure at a mirror falls back
 *    to the next endpoint, a digest mismatch included;
 *  - auth: on 401 the WWW-Authenticate challenge is answered once per endpoint: Bearer → token from the
 *    realm (with Basic credentials from registry.authFile when it has any), Basic → credentials from
 *    registry.authFile; tokens are cached per endpoint and scope until they expire;
 *  - TLS verification always on, registry.caFile added as trust anchor; redirects (blob storage) are
 *    followed, and curl never forwards our Authorization header to another host;
 *  - transient failures (connect/timeout/reset, 408, 429, 5xx) are retried with exponential backoff
 *    (Retry-After honoured), max_attempts per endpoint; a blob arriving slower than the stall floor
 *    (default 1 KiB/s over 30 s) fails the attempt as a stall naming the blob, keeping the .partial;
 *    when every endpoint failed, the message is the last failure plus the first endpoint's;
 *  - blobs stream to <blob_directory>/<hex>.partial and are renamed to <hex> once verified; a transfer
 *    that fails after the descriptor's last byte arrived (a Content-Length longer than the body) is
 *    verified as it is, a body shorter than the descriptor is resumed; an
 *    interrupted download (also across restarts) resumes with Range from what is on disk, re-hashing
 *    that prefix in slices on the loop; a server without Range support restarts from 0; a resumed
 *    blob that fails verification is downloaded once more from 0 before DigestMismatch is reported;
 *  - free space is checked before a blob is requested (DiskSpace).
 *
 * Does not log: every outcome comes back through the done callback as -errno, an ArtifactFailure
 * and a one-line message naming the URL and the reason. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/artifact-failure.h"
#include "core/config.h"
#include "net/http.h"
#include "oci/oci-manifest.h"
#include "oci/oci-ref.h"

typedef struct RegistryOptions {
        const char *ca_file;                    /* may be NULL: system trust store only */
        const char *auth_file;                  /* may be NULL */
        const RegistryMirror *mirrors;          /* upstream host → mirror base URL */
        size_t n_mirrors;
        const char *blob_directory;             /* created if missing; same fs as the store */
        unsigned max_attempts;                  /* per endpoint; 0 = 4 */
        uint64_t retry_base_usec;               /* first backoff; 0 = 500 ms; doubles up to 30 s */
        uint64_t min_free_bytes;                /* kept free besides the blob; 0 = 64 MiB */
        /* Stall detector: a blob download slower than stall_bytes per second over stall_usec fails
         * the attempt (retriable ArtifactUnavailable naming the blob; the .partial is kept for the
         * resume). 0 = REGISTRY_STALL_BYTES / REGISTRY_STALL_USEC; tests use a short window. */
        uint64_t stall_bytes;
        uint64_t stall_usec;
} RegistryOptions;

#define REGISTRY_STALL_BYTES 1024U
#define REGISTRY_STALL_USEC (30 * USEC_PER_SEC)

typedef struct RegistryClient RegistryClient;
typedef struct RegistryOp RegistryOp;

/* Strings in `o` are copied. `http` and `event` must outlive the client. */
int registry_client_new(sd_event *event, Http *http, const RegistryOptions *o, RegistryClient **ret);
/* Every op must have been freed first. */
RegistryClient *registry_client_free(RegistryClient *c);
DEFINE_CLEANUP_FUNC(RegistryClient, registry_client_free);

typedef struct RegistryResult {
        int error;                              /* 0 or -errno */
        ArtifactFailure failure;                /* NONE on success */
        const char *message;                    /* NULL on success */
        /* registry_resolve(): */
        const OciManifest *manifest;            /* the platform's image manifest */
        const char *manifest_digest;            /* its digest */
        const char *top_digest;                 /* digest of what the reference named (index or manifest) */
        /* registry_fetch_blob(): */
        const char *blob_path;                  /* <blob_directory>/<hex>, verified */
        uint64_t bytes_downloaded;              /* this run (0 if it was already there) */
        uint64_t resumed_from;                  /* bytes found on disk from an earlier run */
} RegistryResult;

/* Called once per op, never from inside the call that started it. All pointers in `result` are
 * borrowed and valid until the callback returns (the manifest too: copy what you need), also after the
 * callback freed the op, which it may. */
typedef void (*RegistryDone)(RegistryOp *op, const RegistryResult *result, void *userdata);
/* Progress of a blob download (bytes of this blob, the resumed prefix included). */
typedef void (*RegistryProgress)(RegistryOp *op, uint64_t done, uint64_t total, void *userdata);

/* Resolves `ref` to the image manifest for os/architecture/variant. NULL os means "linux"; NULL
 * architecture means this machine's (uname, oci_platform_from_machine()), and then a NULL variant means
 * this machine's too; otherwise a NULL variant matches any. */
int registry_resolve(RegistryClient *c, const OciRef *ref, const char *os, const char *architecture,
                     const char *variant, RegistryDone done, void *userdata, RegistryOp **ret);

/* Downloads and verifies one blob of `ref`'s repository. */
int registry_fetch_blob(RegistryClient *c, const OciRef *ref, const OciDescriptor *blob,
                        RegistryProgress progress, RegistryDone done, void *userdata, RegistryOp **ret);

/* Cancels (no callback) and frees. A partial blob stays on disk for a later resume. */
RegistryOp *registry_op_free(RegistryOp *op);
DEFINE_CLEANUP_FUNC(RegistryOp, registry_op_free);

/* <blob_directory>/<hex> for a digest (the file may not exist). */
int registry_blob_path(RegistryClient *c, const Digest *d, char **ret);
/* <blob_directory>/<hex>.partial: where registry_fetch_blob() writes the blob while it downloads (it
 * exists once that call returned, unless the verified blob was already there). The bytes up to the
 * count its progress callback last reported are final; a count of 0 after a larger one means the
 * download started over. */
int registry_blob_partial_path(RegistryClient *c, const Digest *d, char **ret);
