/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A credentials rotation in place (docs/contract.md §9.7, docs/node-protocol.md §6.4 "Inside
 * performInPlaceUpdate"): what the executor runs for UPDATE_ACTION_ROTATE_CREDENTIALS. One enum-driven step
 * machine:
 *
 *   CA rotation (rotate_ca):
 *     renew-agent      our client certificate renewed against the new bundle, GNA's apiServer.caFile
 *                      below osc.rootDirectory (identity_renew(), wait for IDENTITY_CHANGED); the new
 *                      kubeconfig names that file, as upstream's does; skipped when the kubeconfig
 *                      holds someone else's credentials (nothing of ours to renew);
 *     kubelet-files    kubelet_rebootstrap_run(): kubeconfig-bootstrap written, kubeconfig-real and
 *                      pki/ removed (its own steps, persisted in its own state file);
 *     restart-kubelet  kubelet.service restarted over D-Bus;
 *     kubelet-health   the kubelet health check, then kubelet_rebootstrap_finish();
 *   service-account-key rotation (rotate_sa):
 *     resync-tokens    every token sync config re-read, waiting until all were written.
 *
 * The CA comes first (the agent's own certificate, docs/contract.md §9.7), then the tokens
 * are re-read with the renewed client. (Upstream's performInPlaceUpdate signals the token controller
 * before the CA steps; the order does not matter to the result: both are done before the success
 * marking, and the token reads work with the old and the new certificate alike.)
 *
 * The run is persisted when it starts and after every completed step (<stateDirectory>/
 * credential-rotation.json: the transaction, the next step, and GNA's apiServer.caFile/server, which
 * a resumed run may need before the OSC Secret was read again); a run for the same transaction after
 * a kill resumes at the persisted step (each is idempotent; restart-kubelet is simply done again). A
 * record of another transaction is ignored. Errors reading or writing it fail the start.
 *
 * Runs on the sd_event loop. Logs one line per step (daemon layer), never key, certificate or token
 * bytes. Ownership: the executor owns the CredentialRotation; everything in CredentialRotationDeps is
 * borrowed and outlives it. The callback comes exactly once, never from inside
 * credential_rotation_start(), never after credential_rotation_free(); it may free the rotation. */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "core/node-update.h"
#include "core/osc-component-config.h"
#include "identity/identity.h"
#include "identity/token-sync.h"
#include "net/http-probe.h"
#include "net/http.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

#define CREDENTIAL_ROTATION_STATE_FILE "credential-rotation.json"
#define KUBELET_REBOOTSTRAP_STATE_FILE "kubelet-rebootstrap.json"
/* IDENTITY_FAILED events (the identity retries with back-off itself) before the rotation gives up. */
#define CREDENTIAL_ROTATION_RENEW_ATTEMPTS 3
/* How long the renew-agent and kubelet steps wait for GNA's component config (a run resumed after a
 * restart may come before the OSC Secret was read again) before they fail. */
#define CREDENTIAL_ROTATION_CONFIG_WAIT_USEC (60 * USEC_PER_SEC)

typedef enum CredentialRotationStep {
        CREDENTIAL_ROTATION_RENEW_AGENT,
        CREDENTIAL_ROTATION_KUBELET_FILES,
        CREDENTIAL_ROTATION_RESTART_KUBELET,
        CREDENTIAL_ROTATION_KUBELET_HEALTH,
        CREDENTIAL_ROTATION_RESYNC_TOKENS,
        CREDENTIAL_ROTATION_DONE,
        _CREDENTIAL_ROTATION_STEP_MAX,
        _CREDENTIAL_ROTATION_STEP_INVALID = -EINVAL,
} CredentialRotationStep;

const char *credential_rotation_step_to_string(CredentialRotationStep s);
CredentialRotationStep credential_rotation_step_from_string(const char *s);

typedef struct CredentialRotationDeps {
        sd_event *event;
        Http *http;
        UnitControl *units; /* NULL without a bus: a CA rotation fails */
        /* The owner's slots, read when needed (the daemon creates and replaces these objects). */
        Identity *const *identity;            /* *identity NULL: the agent does not manage its certificate */
        TokenSync *const *tokens;             /* *tokens NULL: no token sync configured */
        OscComponentConfig *const *component; /* GNA's component config: apiServer.caFile/server */
} CredentialRotationDeps;

typedef struct CredentialRotationParams {
        const char *transaction; /* the persisted step belongs to it */
        bool ca, sa;
        const char *state_directory;
        const char *kubelet_directory; /* <osc.rootDirectory>/var/lib/kubelet */
        const char *root_directory;    /* osc.rootDirectory (NULL: "/"): GNA's caFile is below it */
        const char *kubelet_unit;
        HttpProbeOptions health;
        uint64_t config_wait_usec; /* 0: CREDENTIAL_ROTATION_CONFIG_WAIT_USEC */
} CredentialRotationParams;

typedef struct CredentialRotation CredentialRotation;

/* error 0: done. Else -errno, `code` CredentialsRotationFailed (KubeletUnhealthy for the health check,
 * UnitRestartFailed for the restart) and a message naming the step, never secret bytes. */
typedef void (*CredentialRotationDone)(CredentialRotation *cr, int error, UpdateFailureCode code,
                                       const char *message, void *userdata);

int credential_rotation_start(const CredentialRotationDeps *deps, const CredentialRotationParams *p,
                              CredentialRotationDone done, void *userdata, CredentialRotation **ret);
/* Cancels without callback. */
CredentialRotation *credential_rotation_free(CredentialRotation *cr);
DEFINE_CLEANUP_FUNC(CredentialRotation, credential_rotation_free);

/* What the identity reported (forwarded from the daemon's one identity callback). */
void credential_rotation_identity_event(CredentialRotation *cr, IdentityEvent ev);
/* GNA's component config (deps->component) changed: a kubelet step waiting for it goes on. */
void credential_rotation_component_changed(CredentialRotation *cr);
