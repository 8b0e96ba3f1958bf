/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One certificate request round trip (docs/contract.md §9.6, upstream
 * certificatesigningrequest.RequestCertificate): POST the CertificateSigningRequest (a 409 AlreadyExists is
 * accepted when the stored request is ours — the name is digested from our key, so that is a retry of our
 * own create), then GET it every poll interval until it carries a certificate, is Denied or Failed, changes
 * uid, or the deadline passes.
 *
 * Polling by GET, not a watch: the node-agent authorizer lets an agent renewing with its own certificate
 * only `get` and `create` CSRs (docs/kube-api.md §6.3), and upstream polls every 2 s for that reason. A
 * watch would work for the bootstrap token only; one code path for both is what upstream does too.
 *
 * Runs on the client's sd_event loop; never blocks. Does not log: the outcome comes back with a message
 * that names the CSR and, for a decision, its reason and message — never the request or certificate bytes.
 * Ownership: the caller owns the CsrRequest; freeing it cancels it without a callback. The KubeClient is
 * borrowed and must outlive it. */

#include <stddef.h>
#include <stdint.h>

#include "kube/kube-client.h"
#include "util/macro.h"

typedef struct CsrRequest CsrRequest;

typedef enum CsrOutcome {
        CSR_ISSUED,  /* certificate is set */
        CSR_DENIED,  /* Denied condition */
        CSR_FAILED,  /* Failed condition (e.g. the signer refused it) */
        CSR_TIMEOUT, /* not issued before the deadline */
        CSR_ERROR,   /* the API answered with an error (error is its -errno) */
} CsrOutcome;

/* `certificate` (PEM, NUL-terminated) is set only for CSR_ISSUED and borrowed for the call; `message` is
 * always set and borrowed. The callback may free the request. */
typedef void (*CsrRequestCallback)(CsrRequest *r, CsrOutcome outcome, int error, const char *certificate,
                                   size_t certificate_size, const char *message, void *userdata);

/* `object` is the CSR to create (client_csr_object()); a reference is taken. Starts at once. */
int csr_request_start(KubeClient *client, json_t *object, uint64_t poll_usec, uint64_t timeout_usec,
                      CsrRequestCallback cb, void *userdata, CsrRequest **ret) _warn_unused_result_;
CsrRequest *csr_request_free(CsrRequest *r);
DEFINE_CLEANUP_FUNC(CsrRequest, csr_request_free);

const char *csr_request_name(const CsrRequest *r);
const char *csr_outcome_to_string(CsrOutcome o);
