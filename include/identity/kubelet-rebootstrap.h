/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The kubelet half of a CA rotation in place (docs/contract.md §9.7, docs/node-protocol.md §6.4 "CA
 * rotation, then the kubelet"; upstream reconciler.go rebootstrapKubelet): make the kubelet request a new
 * client certificate against the new CA bundle.
 *
 *   1. write-bootstrap: kubeconfig-real → kubeconfig-bootstrap with clusters {default-cluster:
 *      {certificate-authority: <apiServer.caFile>, server: <apiServer.server>}} and users {default-auth:
 *      {client-certificate-data, client-key-data: pki/kubelet-client-current.pem}}, contexts kept (0600,
 *      atomically, fsynced). Without kubeconfig-real nothing is written; then kubeconfig-bootstrap must
 *      exist already, else the rotation fails (upstream's message).
 *   2. remove-real: kubeconfig-real removed.
 *   3. remove-pki: pki/ removed — only ever after step 1 is on disk, so a kill at any point leaves the
 *      kubelet able to register again.
 *   4. restart-kubelet: the caller restarts kubelet.service and runs the health check (systemd/ and
 *      kubelet/ are not this layer's), then calls kubelet_rebootstrap_finish().
 * Each completed step is persisted in `state_file` before the next begins; a run after a kill resumes at
 * the persisted step (every step is idempotent). Not wired into the executor yet (the OSC applier owns
 * that): the executor calls kubelet_rebootstrap_run() when the OSC's CA bundle changed.
 *
 * kubelet_bootstrap_kubeconfig() is pure; the rest does small blocking local file I/O. Does not log;
 * errors come back as -errno plus a message naming paths only (never key or certificate bytes). */

#include <jansson.h>
#include <stddef.h>

#include "util/macro.h"

typedef enum KubeletRebootstrapStep {
        KUBELET_REBOOTSTRAP_WRITE_BOOTSTRAP,
        KUBELET_REBOOTSTRAP_REMOVE_REAL,
        KUBELET_REBOOTSTRAP_REMOVE_PKI,
        KUBELET_REBOOTSTRAP_RESTART_KUBELET,
        KUBELET_REBOOTSTRAP_DONE,
        _KUBELET_REBOOTSTRAP_STEP_MAX,
        _KUBELET_REBOOTSTRAP_STEP_INVALID = -EINVAL,
} KubeletRebootstrapStep;

const char *kubelet_rebootstrap_step_to_string(KubeletRebootstrapStep s);
KubeletRebootstrapStep kubelet_rebootstrap_step_from_string(const char *s);

typedef struct KubeletRebootstrapParams {
        const char *kubelet_directory; /* <root>/var/lib/kubelet */
        const char *state_file;        /* where the next step is persisted */
        const char *ca_file;           /* apiServer.caFile of GNA's component config */
        const char *server;            /* apiServer.server of GNA's component config */
} KubeletRebootstrapParams;

/* Pure: the bootstrap kubeconfig from the real one (its contexts kept), the CA file, the server and the
 * kubelet's current client PEM (certificate and key). NULL on ENOMEM or when `real` is not an object. */
json_t *kubelet_bootstrap_kubeconfig(const json_t *real, const char *ca_file, const char *server,
                                     const char *pem, size_t pem_size);

/* Runs the file steps from the persisted one on; returns the step the caller has to do next
 * (KUBELET_REBOOTSTRAP_RESTART_KUBELET, or DONE when a finished run is found). */
int kubelet_rebootstrap_run(const KubeletRebootstrapParams *p, KubeletRebootstrapStep *ret_next,
                            char **ret_error) _warn_unused_result_;

/* After the kubelet restarted and is healthy: the run is over (the state file is removed). */
int kubelet_rebootstrap_finish(const KubeletRebootstrapParams *p, char **ret_error) _warn_unused_result_;
