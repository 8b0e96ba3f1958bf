/* SPDX-License-Identifier: Apache-2.0 */
/* The phase machine, the transaction record, and the feedback of action outcomes. The decider that
 * turns inputs into actions lives in node-update-decide.c. */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <strings.h>

#include "node-update-internal.h"
#include "util/strv.h"
#include "util/time-util.h"
#include "util/utf8.h"

/* Failure messages end up in annotations and Events: keep them readable and bounded. */
#define FAILURE_MESSAGE_MAX 4096

#define API_BACKOFF_MAX_USEC (60 * USEC_PER_SEC)

static const char *const phase_names[_UPDATE_PHASE_MAX] = {
        [UPDATE_PHASE_IDLE] = "Idle",
        [UPDATE_PHASE_PLANNED] = "Planned",
        [UPDATE_PHASE_STAGING] = "Staging",
        [UPDATE_PHASE_STAGED] = "Staged",
        [UPDATE_PHASE_WAITING_FOR_DRAIN] = "WaitingForDrain",
        [UPDATE_PHASE_APPLYING] = "Applying",
        [UPDATE_PHASE_REBOOTING] = "Rebooting",
        [UPDATE_PHASE_VERIFYING] = "Verifying",
        [UPDATE_PHASE_SUCCEEDED] = "Succeeded",
        [UPDATE_PHASE_FAILED] = "Failed",
        [UPDATE_PHASE_ROLLED_BACK] = "RolledBack",
};

static const char *const event_names[_UPDATE_EVENT_MAX] = {
        [UPDATE_EVENT_BEGIN] = "Begin",           [UPDATE_EVENT_PLAN] = "Plan",
        [UPDATE_EVENT_STAGE] = "Stage",           [UPDATE_EVENT_STAGED] = "Staged",
        [UPDATE_EVENT_SELECTED] = "Selected",     [UPDATE_EVENT_READY] = "Ready",
        [UPDATE_EVENT_APPLIED] = "Applied",       [UPDATE_EVENT_REBOOT] = "Reboot",
        [UPDATE_EVENT_REBOOTED] = "Rebooted",     [UPDATE_EVENT_HEALTHY] = "Healthy",
        [UPDATE_EVENT_UNHEALTHY] = "Unhealthy",   [UPDATE_EVENT_ROLLED_BACK] = "RolledBack",
        [UPDATE_EVENT_FAILED] = "Failed",         [UPDATE_EVENT_CANCEL] = "Cancel",
        [UPDATE_EVENT_UNVERIFIED] = "Unverified",
};

static const char *const step_names[_UPDATE_STEP_MAX] = {
        [UPDATE_STEP_PLAN] = "plan",
        [UPDATE_STEP_STAGE_KUBELET] = "stage-kubelet",
        [UPDATE_STEP_STAGE_OS] = "stage-os",
        [UPDATE_STEP_SWITCH_KUBELET] = "switch-kubelet",
        [UPDATE_STEP_RESTART_KUBELET] = "restart-kubelet",
        [UPDATE_STEP_MARKER] = "mark-os-update",
        [UPDATE_STEP_OS_APPLY] = "update-os",
        [UPDATE_STEP_REBOOT] = "reboot",
        [UPDATE_STEP_HEALTH] = "kubelet-health",
        [UPDATE_STEP_ROLLBACK_KUBELET] = "rollback-kubelet",
        [UPDATE_STEP_ROLLBACK_RESTART] = "restart-previous-kubelet",
        [UPDATE_STEP_DELETE_PODS] = "delete-pods",
        [UPDATE_STEP_RESULT] = "report-result",
        [UPDATE_STEP_CHECKSUM] = "set-checksum",
        [UPDATE_STEP_PROGRESS] = "report-progress",
        [UPDATE_STEP_EVENT] = "emit-event",
        [UPDATE_STEP_COLLECT_KUBELETS] = "collect-kubelets",
        [UPDATE_STEP_APPLY_OSC] = "apply-osc",
        [UPDATE_STEP_ROTATE_CREDENTIALS] = "rotate-credentials",
        [UPDATE_STEP_CHECK_UNITS] = "check-osc-units",
};

static const char *const action_names[_UPDATE_ACTION_MAX] = {
        [UPDATE_ACTION_PUBLISH_PLAN] = "PublishPlan",
        [UPDATE_ACTION_REPORT_PROGRESS] = "ReportProgress",
        [UPDATE_ACTION_EMIT_EVENT] = "EmitEvent",
        [UPDATE_ACTION_STAGE_KUBELET] = "StageKubelet",
        [UPDATE_ACTION_STAGE_OS_IMAGE] = "StageOsImage",
        [UPDATE_ACTION_SET_MARKER] = "SetMarker",
        [UPDATE_ACTION_SWITCH_KUBELET] = "SwitchKubelet",
        [UPDATE_ACTION_RESTART_UNIT] = "RestartUnit",
        [UPDATE_ACTION_STOP_UNIT] = "StopUnit",
        [UPDATE_ACTION_RUN_OS_COMMAND] = "RunOsCommand",
        [UPDATE_ACTION_INSTALL_OS_IMAGE] = "InstallOsImage",
        [UPDATE_ACTION_REBOOT] = "Reboot",
        [UPDATE_ACTION_CHECK_KUBELET_HEALTH] = "CheckKubeletHealth",
        [UPDATE_ACTION_ROLLBACK_KUBELET] = "RollbackKubelet",
        [UPDATE_ACTION_DELETE_PODS] = "DeletePods",
        [UPDATE_ACTION_REPORT_RESULT] = "ReportResult",
        [UPDATE_ACTION_SET_CHECKSUM] = "SetChecksum",
        [UPDATE_ACTION_COLLECT_KUBELETS] = "CollectKubelets",
        [UPDATE_ACTION_APPLY_OSC] = "ApplyOSC",
        [UPDATE_ACTION_ROTATE_CREDENTIALS] = "RotateCredentials",
        [UPDATE_ACTION_CHECK_OSC_UNITS] = "CheckOSCUnits",
};

static const char *const failure_names[_UPDATE_FAILURE_MAX] = {
        [UPDATE_FAILURE_MIN_VERSION_NOT_MET] = "MinVersionNotMet",
        [UPDATE_FAILURE_INVALID_DESIRED_STATE] = "InvalidDesiredState",
        [UPDATE_FAILURE_ARTIFACT_UNAVAILABLE] = "ArtifactUnavailable",
        [UPDATE_FAILURE_DIGEST_MISMATCH] = "DigestMismatch",
        [UPDATE_FAILURE_UNSAFE_ARCHIVE] = "UnsafeArchive",
        [UPDATE_FAILURE_DISK_SPACE] = "DiskSpace",
        [UPDATE_FAILURE_KUBELET_UNHEALTHY] = "KubeletUnhealthy",
        [UPDATE_FAILURE_OS_COMMAND_FAILED] = "OSCommandFailed",
        [UPDATE_FAILURE_OS_COMMAND_TIMEOUT] = "OSCommandTimeout",
        [UPDATE_FAILURE_OS_ROLLED_BACK] = "OSRolledBack",
        [UPDATE_FAILURE_UNSUPPORTED_ROTATION] = "UnsupportedRotation",
        [UPDATE_FAILURE_UNIT_RESTART_FAILED] = "UnitRestartFailed",
        [UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED] = "CredentialsRotationFailed",
        [UPDATE_FAILURE_BOOTSTRAP_FAILED] = "BootstrapFailed",
        [UPDATE_FAILURE_FILE_APPLY_FAILED] = "FileApplyFailed",
        [UPDATE_FAILURE_UNIT_APPLY_FAILED] = "UnitApplyFailed",
        [UPDATE_FAILURE_UNSUPPORTED_CHANGE] = "UnsupportedChange",
        [UPDATE_FAILURE_OSC_UNITS_NOT_RUNNING] = "OSCUnitsNotRunning",
};

DEFINE_STRING_TABLE_LOOKUP(update_phase, UpdatePhase, phase_names);
DEFINE_STRING_TABLE_LOOKUP(update_event, UpdateEvent, event_names);
DEFINE_STRING_TABLE_LOOKUP(update_step, UpdateStep, step_names);
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(update_action_type, UpdateActionType, action_names);
DEFINE_STRING_TABLE_LOOKUP(update_failure_code, UpdateFailureCode, failure_names);

/* One table: the artifact layer's codes are a subset of the update's (docs/contract.md §8.9). */
static const UpdateFailureCode artifact_codes[_ARTIFACT_FAILURE_MAX] = {
        [ARTIFACT_FAILURE_NONE] = _UPDATE_FAILURE_INVALID,
        [ARTIFACT_FAILURE_UNAVAILABLE] = UPDATE_FAILURE_ARTIFACT_UNAVAILABLE,
        [ARTIFACT_FAILURE_DIGEST_MISMATCH] = UPDATE_FAILURE_DIGEST_MISMATCH,
        [ARTIFACT_FAILURE_UNSAFE_ARCHIVE] = UPDATE_FAILURE_UNSAFE_ARCHIVE,
        [ARTIFACT_FAILURE_DISK_SPACE] = UPDATE_FAILURE_DISK_SPACE,
        [ARTIFACT_FAILURE_KUBELET_UNHEALTHY] = UPDATE_FAILURE_KUBELET_UNHEALTHY,
};

UpdateFailureCode update_failure_from_artifact(ArtifactFailure f) {
        return f >= 0 && f < _ARTIFACT_FAILURE_MAX ? artifact_codes[f] : _UPDATE_FAILURE_INVALID;
}

bool update_phase_is_terminal(UpdatePhase p) {
        return p == UPDATE_PHASE_SUCCEEDED || p == UPDATE_PHASE_FAILED || p == UPDATE_PHASE_ROLLED_BACK;
}

bool update_checks_kubelet(const UpdateTransaction *tx) {
        return tx->gated || tx->kubelet_to || tx->os_to;
}

bool update_kubelet_can_roll_back(const UpdateTransaction *tx) {
        return tx->kubelet_from || tx->kubelet_none;
}

bool node_update_blocks_unit_restarts(const UpdateTransaction *tx) {
        return tx && tx->id && tx->phase >= UPDATE_PHASE_APPLYING && !update_phase_is_terminal(tx->phase);
}

bool node_update_holds_drift_repair(const UpdateTransaction *tx) {
        /* Once the OS step started, the OSC is committed (ApplyOSC comes before it): a process that
         * finds the step started and not finished came up after it, usually in the new OS after the
         * reboot it caused, where Garden Linux reset /etc. That node is restored before it is
         * verified (docs/architecture.md, "The update"). */
        if (tx && tx->phase == UPDATE_PHASE_APPLYING && tx->os_started_usec > 0)
                return false;
        return tx && tx->id && tx->phase >= UPDATE_PHASE_PLANNED && tx->phase <= UPDATE_PHASE_APPLYING;
}

bool update_action_is_best_effort(UpdateActionType t) {
        return t == UPDATE_ACTION_REPORT_PROGRESS || t == UPDATE_ACTION_EMIT_EVENT ||
                t == UPDATE_ACTION_COLLECT_KUBELETS;
}

bool update_failure_is_retriable(UpdateFailureCode code, const char *message) {
        switch (code) {
        case UPDATE_FAILURE_ARTIFACT_UNAVAILABLE:
        case UPDATE_FAILURE_DISK_SPACE:
        case UPDATE_FAILURE_FILE_APPLY_FAILED: /* a full disk, a unit D-Bus refused for a while: retry */
        case UPDATE_FAILURE_UNIT_APPLY_FAILED:
        case UPDATE_FAILURE_UNSUPPORTED_ROTATION:  /* a record of an older version: now supported */
        case UPDATE_FAILURE_OSC_UNITS_NOT_RUNNING: /* a repair, a boot hook or the admin may bring them */
                return true;
        case UPDATE_FAILURE_OS_COMMAND_FAILED:
                return message && strcasestr(message, "network problems");
        default:
                return false;
        }
}

bool update_rotates_ca(const UpdateTransaction *tx) {
        return tx->rotation && tx->ca_rotation && !streq_ptr(tx->ca_rotation, tx->applied.ca_rotation);
}

bool update_rotates_sa(const UpdateTransaction *tx) {
        return tx->rotation && tx->sa_rotation && !streq_ptr(tx->sa_rotation, tx->applied.sa_rotation);
}

/* The one transition table. Phases only move forward; CANCEL ends a transaction that has not
 * applied anything yet (its desired state changed), and is the only way back to Idle. */
static const struct {
        UpdatePhase from;
        UpdateEvent event;
        UpdatePhase to;
} transitions[] = {
        { UPDATE_PHASE_IDLE, UPDATE_EVENT_BEGIN, UPDATE_PHASE_STAGING },
        { UPDATE_PHASE_IDLE, UPDATE_EVENT_PLAN, UPDATE_PHASE_PLANNED },
        { UPDATE_PHASE_PLANNED, UPDATE_EVENT_STAGE, UPDATE_PHASE_STAGING },
        { UPDATE_PHASE_STAGING, UPDATE_EVENT_STAGED, UPDATE_PHASE_STAGED },
        { UPDATE_PHASE_STAGING, UPDATE_EVENT_READY, UPDATE_PHASE_APPLYING },
        { UPDATE_PHASE_STAGED, UPDATE_EVENT_SELECTED, UPDATE_PHASE_WAITING_FOR_DRAIN },
        { UPDATE_PHASE_STAGED, UPDATE_EVENT_READY, UPDATE_PHASE_APPLYING },
        { UPDATE_PHASE_WAITING_FOR_DRAIN, UPDATE_EVENT_READY, UPDATE_PHASE_APPLYING },
        { UPDATE_PHASE_APPLYING, UPDATE_EVENT_APPLIED, UPDATE_PHASE_VERIFYING },
        { UPDATE_PHASE_APPLYING, UPDATE_EVENT_REBOOT, UPDATE_PHASE_REBOOTING },
        { UPDATE_PHASE_APPLYING, UPDATE_EVENT_UNHEALTHY, UPDATE_PHASE_ROLLED_BACK },
        { UPDATE_PHASE_APPLYING, UPDATE_EVENT_ROLLED_BACK, UPDATE_PHASE_ROLLED_BACK },
        { UPDATE_PHASE_REBOOTING, UPDATE_EVENT_REBOOTED, UPDATE_PHASE_VERIFYING },
        { UPDATE_PHASE_REBOOTING, UPDATE_EVENT_ROLLED_BACK, UPDATE_PHASE_ROLLED_BACK },
        { UPDATE_PHASE_VERIFYING, UPDATE_EVENT_HEALTHY, UPDATE_PHASE_SUCCEEDED },
        { UPDATE_PHASE_VERIFYING, UPDATE_EVENT_UNHEALTHY, UPDATE_PHASE_ROLLED_BACK },
        { UPDATE_PHASE_PLANNED, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_STAGING, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_STAGED, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_WAITING_FOR_DRAIN, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_APPLYING, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_REBOOTING, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_VERIFYING, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_ROLLED_BACK, UPDATE_EVENT_FAILED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_SUCCEEDED, UPDATE_EVENT_UNVERIFIED, UPDATE_PHASE_FAILED },
        { UPDATE_PHASE_PLANNED, UPDATE_EVENT_CANCEL, UPDATE_PHASE_IDLE },
        { UPDATE_PHASE_STAGING, UPDATE_EVENT_CANCEL, UPDATE_PHASE_IDLE },
        { UPDATE_PHASE_STAGED, UPDATE_EVENT_CANCEL, UPDATE_PHASE_IDLE },
        { UPDATE_PHASE_WAITING_FOR_DRAIN, UPDATE_EVENT_CANCEL, UPDATE_PHASE_IDLE },
};

int node_update_next(UpdatePhase phase, UpdateEvent event, UpdatePhase *ret) {
        assert(ret);

        for (size_t i = 0; i < ELEMENTSOF(transitions); i++)
                if (transitions[i].from == phase && transitions[i].event == event) {
                        *ret = transitions[i].to;
                        return 0;
                }
        return -EBADR;
}

const char *update_min_version_for_update(const OscDesired *osc, const NodeView *node,
                                          const UpdateSettings *s) {
        if (osc && !isempty(osc->min_version_for_update))
                return osc->min_version_for_update;
        if (node && !isempty(node->min_version_for_update))
                return node->min_version_for_update;
        return s ? s->min_version_for_update : NULL;
}

void update_settings_from_config(const Config *c, UpdateSettings *ret) {
        assert(c);
        assert(ret);

        *ret = (UpdateSettings) {
                .backend = c->os_update.backend,
                .reboot = c->os_update.reboot,
                .kubelet_unit = c->kubelet.unit,
                .os_image_configured = !isempty(c->os_update.image.reference),
                .min_version_for_update = isempty(c->os_update.min_version_for_update) ?
                        NULL :
                        c->os_update.min_version_for_update,
        };
}

int update_transaction_new(UpdateTransaction **ret) {
        UpdateTransaction *t;

        assert(ret);

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->phase = UPDATE_PHASE_IDLE;
        t->blocked = _UPDATE_FAILURE_INVALID;
        t->progress_phase = _UPDATE_PHASE_INVALID;
        t->event_phase = _UPDATE_PHASE_INVALID;
        t->failure.code = _UPDATE_FAILURE_INVALID;
        *ret = t;
        return 0;
}

#define TX(k, t, f) \
        { .key = k, .type = TX_FIELD_##t, .offset = offsetof(UpdateTransaction, f) }
#define TX_GATE(k, t, f) \
        { .key = k, .type = TX_FIELD_##t, .offset = offsetof(UpdateTransaction, f), .gate = true }

/* In state.json's order: "transaction" and "phase" first, `inplace-agent status` prints them so. */
const TxField update_transaction_fields[] = {
        TX("transaction", STRING, id),
        TX("phase", PHASE, phase),
        TX("checksum", STRING, checksum),
        TX("nodeUid", STRING, node_uid),
        TX("gated", BOOL, gated),
        TX("os.from", STRING, os_from),
        TX("os.to", STRING, os_to),
        TX("os.backend", BACKEND, os_backend),
        TX("os.command", STRING, os_command),
        TX("os.args", STRV, os_args),
        TX("kubelet.from", STRING, kubelet_from),
        TX("kubelet.none", BOOL, kubelet_none),
        TX("kubelet.to", STRING, kubelet_to),
        TX("kubelet.kubernetesVersion", STRING, kubernetes_version),
        TX("kubelet.image", STRING, kubelet_image),
        TX("kubelet.pathInImage", STRING, kubelet_path_in_image),
        TX("rotation.requested", BOOL, rotation),
        TX("rotation.certificateAuthorities", STRING, ca_rotation),
        TX("rotation.serviceAccountKey", STRING, sa_rotation),
        TX("osc.apply", BOOL, osc_apply),
        TX("osc.restartsKubelet", BOOL, osc_restarts_kubelet),
        TX("beforeNode", BOOL, before_node),
        TX_GATE("blocked.code", CODE, blocked),
        TX("blocked.message", STRING, blocked_message),
        TX("done", STEPS, done),
        TX("attempt", UINT, attempt),
        TX("progressPhase", PHASE, progress_phase),
        TX("eventPhase", PHASE, event_phase),
        TX("bootId", STRING, boot_id),
        TX("verifiedBootId", STRING, verified_boot_id),
        TX("readySince", STRING, ready_since),
        TX("readyLeft", BOOL, ready_left),
        TX("osStartedUsec", U64, os_started_usec),
        TX_GATE("failure.code", CODE, failure.code),
        TX("failure.message", STRING, failure.message),
        TX("failure.step", STRING, failure.step),
        TX("failure.attempt", UINT, failure.attempt),
        TX("failure.usec", U64, failure.usec),
        TX("failure.keepReason", BOOL, failure.keep_reason),
        TX("startedUsec", U64, started_usec),
        TX("updatedUsec", U64, updated_usec),
        TX("retryUsec", U64, retry_usec),
        TX("apiFailures", UINT, api_failures),
        TX_GATE("applied", PRESENT, applied.valid),
        TX("applied.checksum", STRING, applied.checksum),
        TX("applied.certificateAuthorities", STRING, applied.ca_rotation),
        TX("applied.serviceAccountKey", STRING, applied.sa_rotation),
        TX("marker", STRING, marker),
};
const size_t update_transaction_n_fields = ELEMENTSOF(update_transaction_fields);

#define TX_PTR(t, f, type) ((type *) ((uint8_t *) (t) + (f)->offset))

UpdateTransaction *update_transaction_free(UpdateTransaction *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < update_transaction_n_fields; i++) {
                const TxField *f = &update_transaction_fields[i];

                if (f->type == TX_FIELD_STRING)
                        free(*TX_PTR(t, f, char *));
                else if (f->type == TX_FIELD_STRV)
                        strv_free(*TX_PTR(t, f, char **));
        }
        free(t);
        return NULL;
}

static int dup_str(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int update_transaction_copy(const UpdateTransaction *t, UpdateTransaction **ret) {
        _cleanup_(update_transaction_freep) UpdateTransaction *c = NULL;
        int r = 0;

        assert(t);
        assert(ret);

        c = malloc(sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = *t;
        /* Clear every pointer first so a failed copy can be freed safely. */
        for (size_t i = 0; i < update_transaction_n_fields; i++) {
                const TxField *f = &update_transaction_fields[i];

                if (f->type == TX_FIELD_STRING)
                        *TX_PTR(c, f, char *) = NULL;
                else if (f->type == TX_FIELD_STRV)
                        *TX_PTR(c, f, char **) = NULL;
        }
        for (size_t i = 0; r >= 0 && i < update_transaction_n_fields; i++) {
                const TxField *f = &update_transaction_fields[i];

                if (f->type == TX_FIELD_STRING)
                        r = dup_str(*TX_PTR(t, f, char *), TX_PTR(c, f, char *));
                else if (f->type == TX_FIELD_STRV)
                        r = strv_copy(*TX_PTR(t, f, char **), TX_PTR(c, f, char **));
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

void update_action_done(UpdateAction *a) {
        if (!a)
                return;
        free(a->transaction);
        free(a->unit);
        free(a->version);
        free(a->previous_version);
        free(a->image);
        free(a->path_in_image);
        free(a->command);
        strv_free(a->args);
        free(a->checksum);
        free(a->ca_rotation);
        free(a->sa_rotation);
        free(a->reason);
        json_decref(a->json);
        json_decref(a->failure);
        free(a->message);
        *a = (UpdateAction) {};
}

void update_decision_done(UpdateDecision *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n_actions; i++)
                update_action_done(&d->actions[i]);
        free(d->actions);
        update_transaction_free(d->tx);
        free(d->status);
        free(d->notice);
        *d = (UpdateDecision) {};
}

/* ---- feedback ---- */

static int check_current(const UpdateTransaction *tx, const UpdateAction *a) {
        if (!a->transaction)
                return 0; /* checksum-only: not bound to a transaction */
        if (!streq_ptr(a->transaction, tx->id) || a->phase != tx->phase)
                return -EBADR;
        return 0;
}

static void step_mark(UpdateTransaction *tx, UpdateStep s) {
        if (s >= 0 && s < 64)
                tx->done |= UINT64_C(1) << s;
}

static bool is_api_write(UpdateActionType t) {
        switch (t) {
        case UPDATE_ACTION_PUBLISH_PLAN:
        case UPDATE_ACTION_SET_MARKER:
        case UPDATE_ACTION_DELETE_PODS:
        case UPDATE_ACTION_REPORT_RESULT:
        case UPDATE_ACTION_SET_CHECKSUM:
                return true;
        default:
                return false;
        }
}

bool update_action_needs_node(UpdateActionType t) {
        return is_api_write(t) || t == UPDATE_ACTION_REPORT_PROGRESS || t == UPDATE_ACTION_EMIT_EVENT;
}

static int record_applied(UpdateTransaction *tx, const UpdateAction *a) {
        _cleanup_free_ char *sum = NULL, *ca = NULL, *sa = NULL;

        if (dup_str(a->checksum, &sum) < 0 || dup_str(a->ca_rotation, &ca) < 0 ||
            dup_str(a->sa_rotation, &sa) < 0)
                return -ENOMEM;
        free(tx->applied.checksum);
        free(tx->applied.ca_rotation);
        free(tx->applied.sa_rotation);
        tx->applied.checksum = TAKE_PTR(sum);
        tx->applied.ca_rotation = TAKE_PTR(ca);
        tx->applied.sa_rotation = TAKE_PTR(sa);
        tx->applied.valid = true;
        return 0;
}

/* A rotation is recorded in the node-level memory the moment it is done, not with the checksum at
 * the end: it runs before the OS update (gardener PR #15704), and an OS update that fails or rolls
 * back after it must not make the next attempt rotate a second time. */
static int record_rotation(UpdateTransaction *tx, const UpdateAction *a) {
        if ((a->rotate_ca && free_and_strdup(&tx->applied.ca_rotation, tx->ca_rotation) < 0) ||
            (a->rotate_sa && free_and_strdup(&tx->applied.sa_rotation, tx->sa_rotation) < 0))
                return -ENOMEM;
        return 0;
}

int node_update_action_done(UpdateTransaction *tx, const UpdateAction *a, uint64_t now_usec) {
        int r;

        assert(tx);
        assert(a);

        r = check_current(tx, a);
        if (r < 0)
                return r;

        switch (a->step) {
        case UPDATE_STEP_PROGRESS:
                tx->progress_phase = a->phase;
                break;
        case UPDATE_STEP_EVENT:
                tx->event_phase = a->phase;
                break;
        case UPDATE_STEP_MARKER:
                r = free_and_strdup(&tx->marker, a->version);
                if (r < 0)
                        return r;
                step_mark(tx, a->step);
                break;
        case UPDATE_STEP_RESULT:
                tx->progress_phase = a->phase;
                if (a->clear_marker) {
                        free(tx->marker);
                        tx->marker = NULL;
                }
                step_mark(tx, a->step);
                break;
        case UPDATE_STEP_ROTATE_CREDENTIALS:
                r = record_rotation(tx, a);
                if (r < 0)
                        return r;
                step_mark(tx, a->step);
                break;
        case UPDATE_STEP_CHECKSUM:
                r = record_applied(tx, a);
                if (r < 0)
                        return r;
                if (a->transaction)
                        step_mark(tx, a->step);
                break;
        default:
                step_mark(tx, a->step);
        }

        if (is_api_write(a->type)) {
                tx->api_failures = 0;
                tx->retry_usec = 0;
        }
        if (a->transaction)
                tx->updated_usec = now_usec;
        return 0;
}

static UpdateFailureCode default_code(UpdateActionType t) {
        switch (t) {
        case UPDATE_ACTION_STAGE_KUBELET:
        case UPDATE_ACTION_STAGE_OS_IMAGE:
                return UPDATE_FAILURE_ARTIFACT_UNAVAILABLE;
        case UPDATE_ACTION_RESTART_UNIT:
        case UPDATE_ACTION_STOP_UNIT:
                return UPDATE_FAILURE_UNIT_RESTART_FAILED;
        case UPDATE_ACTION_APPLY_OSC:
                return UPDATE_FAILURE_FILE_APPLY_FAILED;
        case UPDATE_ACTION_ROTATE_CREDENTIALS:
                return UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED;
        case UPDATE_ACTION_CHECK_OSC_UNITS:
                return UPDATE_FAILURE_OSC_UNITS_NOT_RUNNING;
        case UPDATE_ACTION_RUN_OS_COMMAND:
        case UPDATE_ACTION_INSTALL_OS_IMAGE:
        case UPDATE_ACTION_REBOOT:
                return UPDATE_FAILURE_OS_COMMAND_FAILED;
        default:
                return UPDATE_FAILURE_KUBELET_UNHEALTHY;
        }
}

/* Upstream's reason texts (docs/node-protocol.md §7.1), so MCM users see what they know. */
static const char *reason_prefix(const UpdateAction *a) {
        if (a->type == UPDATE_ACTION_CHECK_KUBELET_HEALTH)
                return "kubelet is not healthy after in-place update: ";
        if (a->type == UPDATE_ACTION_RUN_OS_COMMAND) /* os_update_failure_message() supplies the rest */
                return "failed to execute OS update command: ";
        return "";
}

int update_transaction_set_failure(UpdateTransaction *tx, UpdateFailureCode code, const char *prefix,
                                   const char *message, const char *step, uint64_t now_usec) {
        _cleanup_free_ char *clean = NULL, *full = NULL, *s = NULL;

        clean = utf8_sanitize(strempty(message), strlen(strempty(message)), FAILURE_MESSAGE_MAX);
        if (!clean)
                return -ENOMEM;
        if (asprintf(&full, "%s%s", strempty(prefix),
                     isempty(clean) ? strempty(update_failure_code_to_string(code)) : clean) < 0)
                return -ENOMEM;
        if (dup_str(step, &s) < 0)
                return -ENOMEM;

        free(tx->failure.message);
        free(tx->failure.step);
        tx->failure = (UpdateFailure) {
                .code = code,
                .message = TAKE_PTR(full),
                .step = TAKE_PTR(s),
                .attempt = tx->attempt,
                .usec = now_usec,
        };
        return 0;
}

static uint64_t api_backoff(unsigned failures) {
        uint64_t d = USEC_PER_SEC << MIN(failures, 10u);
        return MIN(d, API_BACKOFF_MAX_USEC);
}

int node_update_action_failed(UpdateTransaction *tx, const UpdateAction *a, UpdateFailureCode code,
                              const char *message, uint64_t now_usec) {
        UpdateEvent event = UPDATE_EVENT_FAILED;
        UpdatePhase next;
        const char *prefix;
        int r;

        assert(tx);
        assert(a);

        r = check_current(tx, a);
        if (r < 0)
                return r;

        /* Reports are best effort. */
        if (update_action_is_best_effort(a->type))
                return node_update_action_done(tx, a, now_usec);

        /* A failed API write changes nothing on the node: try again later, same phase. */
        if (is_api_write(a->type)) {
                tx->api_failures++;
                tx->retry_usec = now_usec + api_backoff(tx->api_failures - 1);
                return 0;
        }

        if (code < 0 || code >= _UPDATE_FAILURE_MAX)
                code = default_code(a->type);
        prefix = reason_prefix(a);

        /* The new kubelet failed after the switch, or the OSC work that goes with it did: roll the
         * binary back, if we know what to roll back to. */
        /* Verified again after a reboot, before the success was reported: it was not one. */
        if (tx->phase == UPDATE_PHASE_SUCCEEDED)
                event = UPDATE_EVENT_UNVERIFIED;
        else if ((a->type == UPDATE_ACTION_CHECK_KUBELET_HEALTH ||
                  a->type == UPDATE_ACTION_CHECK_OSC_UNITS || a->type == UPDATE_ACTION_APPLY_OSC ||
                  (a->type == UPDATE_ACTION_RESTART_UNIT && a->step == UPDATE_STEP_RESTART_KUBELET)) &&
                 (tx->done & (UINT64_C(1) << UPDATE_STEP_SWITCH_KUBELET)) &&
                 update_kubelet_can_roll_back(tx))
                event = UPDATE_EVENT_UNHEALTHY;
        r = node_update_next(tx->phase, event, &next);
        if (r < 0)
                return r;
        if (tx->phase == UPDATE_PHASE_ROLLED_BACK) {
                /* Keep why we rolled back; say that the way back failed too. */
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s; rolling back the kubelet failed: ", strempty(tx->failure.message)) < 0)
                        return -ENOMEM;
                r = update_transaction_set_failure(tx, tx->failure.code, p, message,
                                                   update_step_to_string(a->step), now_usec);
        } else
                r = update_transaction_set_failure(tx, code, prefix, message, update_step_to_string(a->step),
                                                   now_usec);
        if (r < 0)
                return r;
        tx->phase = next;
        tx->updated_usec = now_usec;
        return 0;
}

/* ---- JSON ---- */

/* The steps a transaction needs, in order; the basis of the percentage. */
static size_t planned_steps(const UpdateTransaction *tx, UpdateStep steps[static _UPDATE_STEP_MAX]) {
        size_t n = 0;

        steps[n++] = UPDATE_STEP_PLAN;
        if (tx->kubelet_to)
                steps[n++] = UPDATE_STEP_STAGE_KUBELET;
        if (tx->os_to && tx->os_backend == OS_UPDATE_BACKEND_IMAGE)
                steps[n++] = UPDATE_STEP_STAGE_OS;
        if (tx->kubelet_to)
                steps[n++] = UPDATE_STEP_SWITCH_KUBELET;
        if (tx->osc_apply)
                steps[n++] = UPDATE_STEP_APPLY_OSC;
        if (tx->kubelet_to && !tx->osc_restarts_kubelet)
                steps[n++] = UPDATE_STEP_RESTART_KUBELET;
        if (tx->rotation)
                steps[n++] = UPDATE_STEP_ROTATE_CREDENTIALS;
        if (tx->os_to) {
                steps[n++] = UPDATE_STEP_MARKER;
                steps[n++] = UPDATE_STEP_OS_APPLY;
        }

        steps[n++] = UPDATE_STEP_CHECK_UNITS;
        if (update_checks_kubelet(tx))
                steps[n++] = UPDATE_STEP_HEALTH;
        if (tx->gated)
                steps[n++] = UPDATE_STEP_DELETE_PODS;
        steps[n++] = UPDATE_STEP_RESULT;
        if (tx->checksum)
                steps[n++] = UPDATE_STEP_CHECKSUM;
        return n;
}

const char *update_transaction_current_step(const UpdateTransaction *tx) {
        UpdateStep steps[_UPDATE_STEP_MAX];
        size_t n = planned_steps(tx, steps);

        for (size_t i = 0; i < n; i++)
                if (!update_step_done(tx, steps[i]))
                        return update_step_to_string(steps[i]);
        return NULL;
}

unsigned update_transaction_percent(const UpdateTransaction *tx) {
        UpdateStep steps[_UPDATE_STEP_MAX];
        size_t n, done = 0;

        assert(tx);

        if (tx->phase == UPDATE_PHASE_SUCCEEDED)
                return 100;
        n = planned_steps(tx, steps);
        for (size_t i = 0; i < n; i++)
                if (tx->done & (UINT64_C(1) << steps[i]))
                        done++;
        return (unsigned) (done * 100 / n);
}

json_t *update_progress_json(const UpdateTransaction *tx, const char *step, uint64_t bytes_done,
                             uint64_t bytes_total, unsigned percent, uint64_t now_usec) {
        char ts[RFC3339_MAX];

        assert(tx);

        return json_pack("{s:s?, s:s, s:s?, s:I, s:I, s:i, s:s}", "transaction", tx->id, "phase",
                         update_phase_to_string(tx->phase), "step", step, "bytesDone",
                         (json_int_t) MIN(bytes_done, (uint64_t) INT64_MAX), "bytesTotal",
                         (json_int_t) MIN(bytes_total, (uint64_t) INT64_MAX), "percent",
                         (int) MIN(percent, 100u), "updated",
                         format_rfc3339(ts, now_usec, /* micro= */ false) ?: "1970-01-01T00:00:00Z");
}

json_t *update_failure_json(const UpdateTransaction *tx) {
        const UpdateFailure *f;

        assert(tx);

        f = &tx->failure;
        if (f->code < 0 || f->code >= _UPDATE_FAILURE_MAX)
                return NULL;
        return json_pack("{s:s, s:s, s:s?, s:i, s:s?, s:s?}", "code", update_failure_code_to_string(f->code),
                         "class",
                         update_failure_is_retriable(f->code, f->message) ? "retriable" : "terminal", "step",
                         f->step, "attempt", (int) f->attempt, "transaction", tx->id, "message", f->message);
}

static int plan_append(json_t *plan, json_t *entry) {
        if (!entry)
                return -ENOMEM;
        return json_array_append_new(plan, entry) < 0 ? -ENOMEM : 0;
}

json_t *update_plan_json(const UpdateTransaction *tx, const UpdateSettings *s, const json_t *osc_plan) {
        json_t *plan = json_array();
        int r = 0;

        assert(tx);
        assert(s);

        if (!plan)
                return NULL;
        if (tx->kubelet_to) {
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:s?, s:s}", "action", "kubelet", "from",
                                              tx->kubelet_from, "to", tx->kubelet_to));
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:s}", "action", "restart", "unit",
                                              strempty(s->kubelet_unit)));
        }
        if (tx->os_to) {
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:s?, s:s}", "action", "os", "from", tx->os_from, "to",
                                              tx->os_to));
                /* The command backend's script reboots by itself (docs/contract.md §8.8); it is still part
                 * of what will happen to the node. */
                if (s->backend == OS_UPDATE_BACKEND_COMMAND || s->reboot != REBOOT_METHOD_NONE)
                        r = r ?: plan_append(plan, json_pack("{s:s}", "action", "reboot"));
        }
        /* The OSC's own work (files, units, containerd), so the operator sees it before the drain. */
        if (tx->osc_apply && osc_plan)
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:O}", "action", "applyOSC", "changes", osc_plan));
        if (tx->rotation)
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:b, s:b}", "action", "credentialsRotation",
                                              "certificateAuthorities", update_rotates_ca(tx),
                                              "serviceAccountKey", update_rotates_sa(tx)));
        if (tx->blocked >= 0 && tx->blocked < _UPDATE_FAILURE_MAX)
                r = r ?:
                        plan_append(plan,
                                    json_pack("{s:s, s:s, s:s}", "action", "blocked", "code",
                                              update_failure_code_to_string(tx->blocked), "message",
                                              strempty(tx->blocked_message)));
        if (r < 0) {
                json_decref(plan);
                return NULL;
        }
        return plan;
}

bool progress_should_write(UpdatePhase last_phase, unsigned last_percent, uint64_t last_usec,
                           UpdatePhase phase, unsigned percent, uint64_t now_usec) {
        unsigned delta;

        if (last_phase != phase)
                return true;
        delta = percent > last_percent ? percent - last_percent : last_percent - percent;
        return now_usec >= last_usec + 10 * USEC_PER_SEC && delta >= 10;
}
