/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* OCI distribution client on the sd-event loop (through http.c; nothing blocks but short local
 * writes and fsyncs): the client and the life of one operation, which registry_resolve()
 * (oci/registry-manifest.h) and registry_fetch_blob() (oci/registry-blob.h) start. Every manifest and
 * blob is verified against its digest while it streams (docs/contract.md §7: nothing is used before it is
 * verified).
 *
 *  - endpoints: registry.mirrors[<host>] first, then https://<host> (oci/registry-mirror.h); any
 *    failure at a mirror falls back to the next endpoint, a digest mismatch included; when every
 *    endpoint failed, the message is the last failure plus the first endpoint's;
 *  - auth: on 401 the WWW-Authenticate challenge is answered once per endpoint: Bearer → token from the
 *    realm (with Basic credentials from registry.authFile when it has any), Basic → credentials from
 *    registry.authFile; tokens are cached per endpoint and scope until they expire
 *    (oci/registry-token-cache.h);
 *  - TLS verification always on, registry.caFile added as trust anchor; redirects (blob storage) are
 *    followed, and curl never forwards our Authorization header to another host;
 *  - transient failures (connect/timeout/reset, 408, 429, 5xx) are retried with exponential backoff
 *    (Retry-After honoured), max_attempts per endpoint; a blob arriving slower than the stall floor
 *    (default 1 KiB/s over 30 s) fails the attempt as a stall naming the blob, keeping the .partial.
 *
 * The client owns its options' copies, the token cache and counts its ops; each op is owned by whoever
 * started it (registry_op_free() cancels it).
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
        const char *ca_file;           /* may be NULL: system trust store only */
        const char *auth_file;         /* may be NULL */
        const RegistryMirror *mirrors; /* upstream host → mirror base URL */
        size_t n_mirrors;
        const char *blob_directory; /* created if missing; same fs as the store */
        unsigned max_attempts;      /* per endpoint; 0 = 4 */
        uint64_t retry_base_usec;   /* first backoff; 0 = 500 ms; doubles up to 30 s */
        uint64_t min_free_bytes;    /* kept free besides the blob; 0 = 64 MiB */
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
int registry_client_new(sd_event *event, Http *http, const RegistryOptions *o,
                        RegistryClient **ret) _warn_unused_result_;
/* Every op must have been freed first. */
RegistryClient *registry_client_free(RegistryClient *c);
DEFINE_CLEANUP_FUNC(RegistryClient, registry_client_free);

typedef struct RegistryResult {
        int error;               /* 0 or -errno */
        ArtifactFailure failure; /* NONE on success */
        const char *message;     /* NULL on success */
        /* registry_resolve(): */
        const OciManifest *manifest; /* the platform's image manifest */
        const char *manifest_digest; /* its digest */
        const char *top_digest;      /* digest of what the reference named (index or manifest) */
        /* registry_fetch_blob(): */
        const char *blob_path;     /* <blob_directory>/<hex>, verified */
        uint64_t bytes_downloaded; /* this run (0 if it was already there) */
        uint64_t resumed_from;     /* bytes found on disk from an earlier run */
} RegistryResult;

/* Called once per op, never from inside the call that started it. All pointers in `result` are
 * borrowed and valid until the callback returns (the manifest too: copy what you need), also after the
 * callback freed the op, which it may. */
typedef void (*RegistryDone)(RegistryOp *op, const RegistryResult *result, void *userdata);
/* Progress of a blob download (bytes of this blob, the resumed prefix included). */
typedef void (*RegistryProgress)(RegistryOp *op, uint64_t done, uint64_t total, void *userdata);

/* Cancels (no callback) and frees. A partial blob stays on disk for a later resume. */
RegistryOp *registry_op_free(RegistryOp *op);
DEFINE_CLEANUP_FUNC(RegistryOp, registry_op_free);
