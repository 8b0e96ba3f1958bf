/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the registry client's units share: the client and the operation, and the operation's life
 * (registry.c) that the manifest (registry-manifest.c) and blob (registry-blob.c) units hook into.
 * Private to agent/oci/registry*.c. */

#include <systemd/sd-event.h>

#include "oci/digest.h"
#include "oci/registry-token-cache.h"
#include "oci/registry.h"

#define MESSAGE_BODY_MAX (64U * 1024U)

struct RegistryClient {
        sd_event *event;         /* ref held */
        Http *http;              /* borrowed: outlives the client */
        char *ca_file;           /* owned; NULL = system store */
        char *auth_file;         /* owned; NULL = no credentials */
        RegistryMirror *mirrors; /* owned array */
        size_t n_mirrors;
        char *blob_directory; /* owned */
        unsigned max_attempts;
        uint64_t retry_base_usec;
        uint64_t min_free_bytes;
        uint64_t stall_bytes, stall_usec;
        RegistryTokenCache tokens; /* owned */
        unsigned n_ops;
};

typedef enum OpKind {
        OP_MANIFEST,
        OP_BLOB,
} OpKind;

struct RegistryOp {
        RegistryClient *client; /* borrowed */
        OpKind kind;
        OciRef *ref;      /* owned copy */
        char *scope;      /* owned: repository:<repo>:pull */
        char **endpoints; /* owned strv: base URLs, mirror first (oci/registry-mirror.h) */
        size_t n_endpoints, endpoint;
        unsigned attempt;
        bool auth_answered;  /* a 401 was already answered at this endpoint */
        char *authorization; /* owned: header value for this endpoint, NULL = none */
        char *path;          /* owned: /v2/<repo>/manifests/<ref> or /blobs/<digest> */

        HttpRequest *req;       /* owned: the registry request in flight */
        HttpRequest *token_req; /* owned: the token request in flight */
        sd_event_source *timer; /* owned: retry backoff */
        sd_event_source *defer; /* owned: deferred start/finish and re-hashing */

        /* the failure that ends this endpoint, and the one reported when all endpoints failed */
        int error;
        ArtifactFailure failure;
        char *message;       /* owned */
        char *first_message; /* owned: the first endpoint's failure, once we failed over */

        /* manifests */
        bool have_expected;
        bool platform_stage;               /* the index was read; now its platform manifest */
        Digest expected;                   /* what the document must hash to */
        char *top_digest;                  /* owned */
        char *manifest_digest;             /* owned */
        OciManifest *manifest;             /* owned: result */
        char *os, *architecture, *variant; /* owned; variant may be NULL */

        /* blobs */
        OciDescriptor blob;  /* media_type borrowed-by-copy: owned string */
        char *partial_path;  /* owned */
        char *final_path;    /* owned */
        int fd;              /* owned: the .partial file */
        DigestContext *hash; /* owned */
        uint64_t offset;     /* bytes on disk and hashed */
        uint64_t resumed_from, downloaded;
        bool restarted_from_zero;       /* the one retry from 0 after a bad resumed blob was used */
        ArtifactFailure stream_failure; /* set by the data callback when it aborts */

        RegistryProgress on_progress;
        RegistryDone on_done;
        void *userdata; /* borrowed */
};

/* ---- the operation's life (registry.c) ---- */

int registry_op_new(RegistryClient *c, OpKind kind, const OciRef *ref, RegistryDone done, void *userdata,
                    RegistryOp **ret);
/* Starting from a deferred event keeps the promise that no callback runs inside the start call. */
int registry_op_defer(RegistryOp *op, sd_event_handler_t handler);
int registry_op_on_start(sd_event_source *s, void *userdata);
/* Sends the request for the current endpoint; a failure to send finishes the op. */
void registry_op_send(RegistryOp *op);
void registry_op_set_failure(RegistryOp *op, int error, ArtifactFailure failure, const char *fmt, ...)
        _printf_(4, 5);
/* Calls the done callback (which may free the op) with the op's result or its failure. */
void registry_op_finish(RegistryOp *op, bool success);
/* Retry at the same endpoint after a backoff, or give up on it. */
void registry_op_retry_or_next(RegistryOp *op, bool transient, uint64_t retry_after_usec);
void registry_op_reset_endpoint_state(RegistryOp *op);
/* The current endpoint is done for: try the next one, or report the last failure. */
void registry_op_endpoint_failed(RegistryOp *op);
bool registry_is_transient(int error, long status);

/* ---- manifests (registry-manifest.c) ---- */

int registry_manifest_prepare(RegistryOp *op, HttpRequest *req);
/* A 2xx answer. Returns true when the op went on (next stage) or finished; false to fail this
 * endpoint. */
bool registry_manifest_handle(RegistryOp *op, HttpRequest *req);

/* ---- blobs (registry-blob.c) ---- */

int registry_blob_prepare(RegistryOp *op, HttpRequest *req);
/* Before each attempt: cut the .partial back to what is hashed, check free space. < 0: the op was
 * finished. */
int registry_blob_before_send(RegistryOp *op);
/* A 2xx answer; the same contract as registry_manifest_handle(). */
bool registry_blob_handle(RegistryOp *op, HttpRequest *req);
/* A failed answer the blob unit deals with itself (no Range support, a write failure, a transfer
 * cut after the headers). Returns true when it did. */
bool registry_blob_handle_failure(RegistryOp *op, HttpRequest *req, int error, long status);
void registry_blob_restart_from_zero(RegistryOp *op);
