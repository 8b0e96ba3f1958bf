/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The in-place update engine: the pure core that decides what the agent does (docs/contract.md §5, §6, §8).
 * No I/O, no clock (time is passed in), no logging. It owns nothing but the values it returns.
 *
 * Three layers, all pure:
 *   1. The phase machine: one UpdatePhase enum (exactly the phases of docs/contract.md §5), one UpdateEvent
 *      enum and ONE transition table; node_update_next() is the only way a phase ever changes.
 *   2. The decider: node_update_decide() takes the persisted transaction, the Node, the decoded OSC,
 *      the current OS and kubelet versions, settings and the time, and returns the transaction record
 *      to persist plus a batch of actions (an enum-tagged list) for the executor.
 *   3. Feedback: node_update_action_done()/node_update_action_failed() record what happened to one
 *      action in the transaction record (steps done, failures -> FAILED/UNHEALTHY events).
 *
 * How the executor (manager.c) drives it:
 *
 *      for (;;) {
 *              node_update_decide(&input, &d);                 // input.tx = the record from state.json
 *              state_file_save(dir, d.tx);                     // persist BEFORE any side effect
 *              for each action a in d.actions, in order:
 *                      r = run(a);                             // may take minutes (async on the loop)
 *                      if (r >= 0) node_update_action_done(d.tx, a, now);
 *                      else        node_update_action_failed(d.tx, a, code_for(r), message, now);
 *                      state_file_save(dir, d.tx);
 *                      if (r < 0 && !update_action_is_best_effort(a->type)) break;
 *              input.tx = d.tx;
 *              if (d.n_actions == 0) wait for a Node/Secret change or until d.wake_usec;
 *      }
 *
 * Rules the executor must keep:
 *   - Call node_update_decide() only when no action of the previous batch is still running. A batch
 *     belongs to exactly one phase of one transaction; feeding an action into a record whose
 *     transaction or phase has moved on is refused with -EBADR (out-of-order).
 *   - Persist d.tx before running the batch: "started" marks (the OS command's start time and boot
 *     id, the attempt marker we are about to set) are recorded by the decider, so a crash mid-command
 *     is detected after restart instead of the command being run twice. Every other action is
 *     idempotent and may run again after a crash that hit it before its feedback was saved.
 *   - Actions that end the process (RUN_OS_COMMAND that reboots, REBOOT) get no feedback; the next
 *     decision sees the new boot id / OS version and continues.
 *
 * What the decider does (docs/contract.md §5, §8; docs/node-protocol.md §1-§4, §7):
 *   - Nothing without an OSC; nothing while checksum/cloud-config-data already equals the Secret's
 *     checksum (two empty checksums do not count as equal). Nothing while the Node is not known yet.
 *   - No Node (UpdateInput.node_absent: it does not exist): only a fresh node's first OSC goes on
 *     (nothing ever applied: UpdateInput.first_osc, no applied checksum), as upstream applies it before
 *     the kubelet that registers the Node is even there: ungated, files, units, the kubelet staged and
 *     switched, health-checked. Every write to the Node (plan, progress, condition, Events, result,
 *     checksum) waits until the Node exists and is then made once, from the phase reached; the
 *     transaction is marked before_node. While the Node does not come, the status says so, and once
 *     settings.node_registration_timeout_usec passed after the apply, the decision's notice too.
 *     Anything else waits for the Node.
 *   - Plan = kubelet (desired from spec.inPlaceUpdates.kubelet, else the image tag; compared with the
 *     running version: patch = ungated, minor = gated, downgrade/minor skip = InvalidDesiredState),
 *     OS (current os-release version "=" desired with Gardener's rules; downgrade refused;
 *     minVersionForUpdate "current >= min" else MinVersionNotMet; command or image backend must be
 *     usable) and credentials rotation (against the rotation times last carried out; always gated, carried
 *     out in Applying by ROTATE_CREDENTIALS after the kubelet switch and before the OS change, and
 *     recorded as carried out at once, so that no later attempt repeats it; gardener PR #15704).
 *     The first apply on a node (no checksum ever) is never gated and leaves the OS alone
 *     (docs/node-protocol.md §2.3), unless MCM's gate is open: the success marking then needs the OS
 *     compared, history or not.
 *   - The OSC's own work (files, units, drop-ins, containerd; UpdateInput.osc_work, prepared by the
 *     executor) is part of the plan while its OSC is not committed as last applied: ApplyOSC runs in
 *     Applying after the kubelet switch and before the kubelet restart (which the OSC's own restart
 *     of the kubelet unit replaces), gated when its diff has an in-place flag (docs/node-protocol.md
 *     §1.2). The checksum is written only after it: checksum/cloud-config-data is a promise
 *     (docs/contract.md §9.2). A work list that cannot be computed blocks the plan with its code and
 *     message.
 *   - Ungated: Staging -> Applying -> Verifying -> Succeeded at once; failures report
 *     inplace-agent/failure, a Warning Event and the condition, never update-result (§8.4).
 *   - Gated: nothing until candidate-for-update, selected-for-update, ReadyForUpdate or
 *     update-result=failed. Candidate: publish the plan, pre-stage (Planned -> Staging -> Staged).
 *     Selected: WaitingForDrain, or Failed with update-result=failed if the plan cannot succeed.
 *     ReadyForUpdate or update-result=failed: Applying (kubelet switch, OSC work, kubelet restart, attempt
 * marker, OS command / image install), Rebooting, Verifying (the OSC's units running, kubelet health), then
 * delete Pods, report update-result=successful (marker and reason removed), set the checksum and
 * kubernetes-version.
 *   - After a reboot on the old OS: RolledBack with upstream's reason (docs/node-protocol.md §9 scenario
 * 20); a foreign marker naming the desired version does the same, or keeps an existing reason (scenario 21).
 *     An unhealthy new kubelet is switched back and restarted: RolledBack.
 *   - Failed/RolledBack are terminal for that desired state, except retriable failures (back-off 30 s
 *     doubling to 10 min, a new attempt) and an operator setting ReadyForUpdate again (a new
 *     lastTransitionTime, docs/node-protocol.md §7.3). Nothing to do for this agent but the node is drained:
 * upstream's success marking (Pods deleted, successful) still runs (scenario 23/24 rules), as a transaction
 *     that verifies (Verifying) like any other. After a failure, such a marking transaction for the
 *     same desired state (the node fixed by hand) starts no earlier than the retry back-off of the
 *     failed one, and a retry due with nothing to apply verifies too instead of writing the checksum
 *     alone: a failure is never followed by a success without a verification of its own.
 *   - A new desired state cancels a transaction that has not reached Applying; from Applying on, the
 *     running transaction finishes first (never two at once). Phases only move forward.
 *   - Best-effort actions (REPORT_PROGRESS, EMIT_EVENT) never stop a batch; a failing API write is
 *     retried by a later decision (with back-off via wake_usec); any other failure ends the batch and
 *     usually the transaction.
 *   - Intermediate byte progress during staging is the executor's: build it with
 *     update_progress_json() and rate-limit it with progress_should_write(). */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/artifact-failure.h"
#include "core/config.h"
#include "core/node-view.h"
#include "core/osc.h"
#include "util/macro.h"

typedef enum UpdatePhase {
        UPDATE_PHASE_IDLE,
        UPDATE_PHASE_PLANNED,
        UPDATE_PHASE_STAGING,
        UPDATE_PHASE_STAGED,
        UPDATE_PHASE_WAITING_FOR_DRAIN,
        UPDATE_PHASE_APPLYING,
        UPDATE_PHASE_REBOOTING,
        UPDATE_PHASE_VERIFYING,
        UPDATE_PHASE_SUCCEEDED,
        UPDATE_PHASE_FAILED,
        UPDATE_PHASE_ROLLED_BACK,
        _UPDATE_PHASE_MAX,
        _UPDATE_PHASE_INVALID = -EINVAL,
} UpdatePhase;

typedef enum UpdateEvent {
        UPDATE_EVENT_BEGIN,       /* ungated work found: Idle -> Staging */
        UPDATE_EVENT_PLAN,        /* gated work and an MCM signal: Idle -> Planned */
        UPDATE_EVENT_STAGE,       /* plan published, nothing blocks: Planned -> Staging */
        UPDATE_EVENT_STAGED,      /* every artifact verified, gate still closed: Staging -> Staged */
        UPDATE_EVENT_SELECTED,    /* selected-for-update: Staged -> WaitingForDrain */
        UPDATE_EVENT_READY,       /* gate open (or ungated): Staging|Staged|WaitingForDrain -> Applying */
        UPDATE_EVENT_APPLIED,     /* applied, nothing waits for a reboot: Applying -> Verifying */
        UPDATE_EVENT_REBOOT,      /* the OS change needs a reboot: Applying -> Rebooting */
        UPDATE_EVENT_REBOOTED,    /* up on the desired OS version: Rebooting -> Verifying */
        UPDATE_EVENT_HEALTHY,     /* verification passed: Verifying -> Succeeded */
        UPDATE_EVENT_UNHEALTHY,   /* new kubelet failed: Applying|Verifying -> RolledBack */
        UPDATE_EVENT_ROLLED_BACK, /* OS came back on the old version: Applying|Rebooting -> RolledBack */
        UPDATE_EVENT_FAILED,      /* anything else: active phases -> Failed; RolledBack -> Failed */
        UPDATE_EVENT_CANCEL,      /* desired state changed before anything was applied: -> Idle */
        UPDATE_EVENT_UNVERIFIED,  /* a success not reported yet fails its verification after a
                                   * reboot: Succeeded -> Failed */
        _UPDATE_EVENT_MAX,
        _UPDATE_EVENT_INVALID = -EINVAL,
} UpdateEvent;

/* docs/contract.md §8.9. */
typedef enum UpdateFailureCode {
        UPDATE_FAILURE_MIN_VERSION_NOT_MET,
        UPDATE_FAILURE_INVALID_DESIRED_STATE,
        UPDATE_FAILURE_ARTIFACT_UNAVAILABLE,
        UPDATE_FAILURE_DIGEST_MISMATCH,
        UPDATE_FAILURE_UNSAFE_ARCHIVE,
        UPDATE_FAILURE_DISK_SPACE,
        UPDATE_FAILURE_KUBELET_UNHEALTHY,
        UPDATE_FAILURE_OS_COMMAND_FAILED,
        UPDATE_FAILURE_OS_COMMAND_TIMEOUT,
        UPDATE_FAILURE_OS_ROLLED_BACK,
        UPDATE_FAILURE_UNSUPPORTED_ROTATION, /* no longer produced (rotations are done in place): kept so
                                              * that state.json records of older versions decode; such a
                                              * failure is retried (update_failure_is_retriable()) */
        UPDATE_FAILURE_UNIT_RESTART_FAILED,
        UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED, /* CA / SA-key rotation in place (docs/contract.md §9.7)
                                                     */
        UPDATE_FAILURE_BOOTSTRAP_FAILED,  /* no client certificate could be obtained (docs/contract.md §9.6)
                                           */
        UPDATE_FAILURE_FILE_APPLY_FAILED, /* an OSC file could not be written or removed (§9.2) */
        UPDATE_FAILURE_UNIT_APPLY_FAILED, /* an OSC unit could not be written, enabled, reloaded, ... */
        UPDATE_FAILURE_UNSUPPORTED_CHANGE,    /* an OSC change this agent cannot apply (names the field) */
        UPDATE_FAILURE_OSC_UNITS_NOT_RUNNING, /* a unit the OSC starts is not running at verification
                                               * (names the units); retried with back-off */
        _UPDATE_FAILURE_MAX,
        _UPDATE_FAILURE_INVALID = -EINVAL, /* also: "no failure" */
} UpdateFailureCode;

/* What the executor reports done. Each tracked step is done at most once per transaction. */
typedef enum UpdateStep {
        UPDATE_STEP_PLAN, /* inplace-agent/plan written */
        UPDATE_STEP_STAGE_KUBELET,
        UPDATE_STEP_STAGE_OS,
        UPDATE_STEP_SWITCH_KUBELET,
        UPDATE_STEP_RESTART_KUBELET,
        UPDATE_STEP_MARKER,   /* updating-operating-system-version set */
        UPDATE_STEP_OS_APPLY, /* OS command finished / OS image installed */
        UPDATE_STEP_REBOOT,   /* reboot requested */
        UPDATE_STEP_HEALTH,   /* kubelet healthy */
        UPDATE_STEP_ROLLBACK_KUBELET,
        UPDATE_STEP_ROLLBACK_RESTART,
        UPDATE_STEP_DELETE_PODS,
        UPDATE_STEP_RESULT,           /* final report (and update-result label on the gated path) */
        UPDATE_STEP_CHECKSUM,         /* checksum/cloud-config-data written */
        UPDATE_STEP_PROGRESS,         /* progress of UpdateAction.phase written */
        UPDATE_STEP_EVENT,            /* Event of UpdateAction.phase emitted */
        UPDATE_STEP_COLLECT_KUBELETS, /* kubelet versions beyond keepVersions removed */
        UPDATE_STEP_APPLY_OSC, /* every file/unit/containerd change of the OSC applied and committed */
        UPDATE_STEP_ROTATE_CREDENTIALS, /* CA / service-account-key rotation carried out */
        UPDATE_STEP_CHECK_UNITS,        /* every unit the OSC starts found running (Verifying) */
        _UPDATE_STEP_MAX,
        _UPDATE_STEP_INVALID = -EINVAL,
} UpdateStep;

typedef enum UpdateActionType {
        UPDATE_ACTION_PUBLISH_PLAN,         /* annotation inplace-agent/plan := json */
        UPDATE_ACTION_REPORT_PROGRESS,      /* annotation inplace-agent/progress := json; condition
                                             * InPlaceUpdateAgent := condition_* (best effort) */
        UPDATE_ACTION_EMIT_EVENT,           /* core/v1 Event event_type/event_reason/message (best effort) */
        UPDATE_ACTION_STAGE_KUBELET,        /* fetch image, extract path_in_image, verify, store as
                                             * <stateDirectory>/kubelet/<version>/kubelet; not active */
        UPDATE_ACTION_STAGE_OS_IMAGE,       /* fetch + verify the OS image of `version` into staging */
        UPDATE_ACTION_SET_MARKER,           /* annotation updating-operating-system-version := version */
        UPDATE_ACTION_SWITCH_KUBELET,       /* kubelet.binaryPath -> store/<version>, atomically */
        UPDATE_ACTION_RESTART_UNIT,         /* RestartUnit(unit, "replace"), wait for the job */
        UPDATE_ACTION_STOP_UNIT,            /* StopUnit(unit, "replace"), wait for the job */
        UPDATE_ACTION_RUN_OS_COMMAND,       /* exec command args (no shell) under osUpdate.timeout */
        UPDATE_ACTION_INSTALL_OS_IMAGE,     /* install the staged image of `version` */
        UPDATE_ACTION_REBOOT,               /* reboot per osUpdate.reboot */
        UPDATE_ACTION_CHECK_KUBELET_HEALTH, /* poll kubelet.healthzURL until 200 or healthTimeout */
        UPDATE_ACTION_ROLLBACK_KUBELET,     /* kubelet.binaryPath -> store/<version> (the previous one);
                                             * without a version (none before) binaryPath is removed */
        UPDATE_ACTION_DELETE_PODS,          /* delete every Pod with spec.nodeName = this node */
        UPDATE_ACTION_REPORT_RESULT,        /* ONE Node patch: progress json, failure (NULL: remove
                                             * inplace-agent/failure), update-result label when result
                                             * != NONE, update-failed-reason := reason (unless
                                             * keep_reason), clear_marker removes
                                             * updating-operating-system-version and update-failed-reason;
                                             * plus condition_* on /status */
        UPDATE_ACTION_SET_CHECKSUM,         /* annotation checksum/cloud-config-data := checksum, and
                                             * (if set) label worker.gardener.cloud/kubernetes-version
                                             * := version */
        UPDATE_ACTION_COLLECT_KUBELETS,     /* keepVersions: remove older kubelets from the store, never
                                             * `version` (running) or `previous_version` (rollback);
                                             * best effort */
        UPDATE_ACTION_APPLY_OSC,            /* apply the remaining work of the OSC `checksum` (files,
                                             * units, drop-ins, containerd, registries; apply/osc-apply)
                                             * and commit it as last applied */
        UPDATE_ACTION_ROTATE_CREDENTIALS, /* docs/contract.md §9.7, docs/node-protocol.md §6.4: rotate_ca:
                                           * renew our certificate, re-bootstrap the kubelet (restart, health
                                           * check); rotate_sa: resync every token; resumable after a kill */
        UPDATE_ACTION_CHECK_OSC_UNITS,    /* every unit the last-applied OSC `checksum` starts is
                                           * active (a oneshot: finished), polled until
                                           * kubelet.healthTimeout; fails OSCUnitsNotRunning naming
                                           * the others */
        _UPDATE_ACTION_MAX,
        _UPDATE_ACTION_INVALID = -EINVAL,
} UpdateActionType;

typedef struct UpdateAction {
        UpdateActionType type;
        UpdateStep step;              /* what node_update_action_done() records */
        UpdatePhase phase;            /* phase of the transaction this belongs to */
        char *transaction;            /* owned: its id; NULL for actions outside a transaction */
        char *unit;                   /* owned: RESTART_UNIT */
        char *version;                /* owned: STAGE_*, SWITCH/ROLLBACK_KUBELET, INSTALL_OS_IMAGE,
                                       * SET_MARKER, SET_CHECKSUM (kubernetes-version label),
                                       * COLLECT_KUBELETS */
        char *previous_version;       /* owned: COLLECT_KUBELETS: the rollback version, kept */
        char *image;                  /* owned: STAGE_KUBELET */
        char *path_in_image;          /* owned: STAGE_KUBELET */
        char *command;                /* owned: RUN_OS_COMMAND */
        char **args;                  /* owned: RUN_OS_COMMAND, NULL-terminated */
        char *checksum;               /* owned: SET_CHECKSUM, APPLY_OSC, CHECK_OSC_UNITS */
        char *ca_rotation;            /* owned: SET_CHECKSUM: rotation times now applied */
        char *sa_rotation;            /* owned */
        bool rotate_ca;               /* ROTATE_CREDENTIALS: certificateAuthorities rotation */
        bool rotate_sa;               /* ROTATE_CREDENTIALS: serviceAccountKey rotation */
        NodeUpdateResult result;      /* REPORT_RESULT: label to write; NONE: leave the label alone */
        char *reason;                 /* owned: REPORT_RESULT: update-failed-reason */
        bool keep_reason;             /* REPORT_RESULT: an existing update-failed-reason stays */
        bool clear_marker;            /* REPORT_RESULT */
        json_t *json;                 /* ref held: plan (PUBLISH_PLAN) or progress (REPORT_*) */
        json_t *failure;              /* ref held: REPORT_RESULT: inplace-agent/failure, NULL: remove */
        bool condition_status;        /* REPORT_*: InPlaceUpdateAgent status (True/False) */
        const char *condition_reason; /* static: REPORT_*: the phase name */
        char *message;                /* owned: condition message, Event message */
        const char *event_reason;     /* static: EMIT_EVENT */
        const char *event_type;       /* static: EMIT_EVENT: "Normal" or "Warning" */
} UpdateAction;

typedef struct UpdateFailure {
        UpdateFailureCode code; /* _UPDATE_FAILURE_INVALID: none */
        char *message;          /* owned: the human text; also update-failed-reason */
        char *step;             /* owned: the step that failed */
        unsigned attempt;
        uint64_t usec;
        bool keep_reason; /* docs/node-protocol.md §9 scenario 21: the node already carries a reason */
} UpdateFailure;

/* The persisted state (<stateDirectory>/state.json): the current or last transaction, plus what the
 * node remembers across transactions. */
typedef struct UpdateTransaction {
        char *id; /* owned; NULL: no transaction yet */
        UpdatePhase phase;
        char *checksum;              /* owned: OSC checksum/data-script this transaction applies */
        char *node_uid;              /* owned: uid of the Node it started on; results go to it only */
        bool gated;                  /* in-place work: waits for the MCM gate, reports update-result */
        char *os_from;               /* owned */
        char *os_to;                 /* owned; NULL: no OS change */
        char *kubelet_from;          /* owned; NULL: running version unknown, or none (kubelet_none) */
        bool kubelet_none;           /* binaryPath did not exist when it started: going back is
                                      * removing it */
        char *kubelet_to;            /* owned; NULL: no kubelet change */
        char *kubernetes_version;    /* owned: desired kubelet version, for the label; may be NULL */
        char *kubelet_image;         /* owned */
        char *kubelet_path_in_image; /* owned */
        OsUpdateBackend os_backend;  /* backend chosen when the transaction started */
        char *os_command;            /* owned: snapshot of status.inPlaceUpdates.osUpdate */
        char **os_args;              /* owned, NULL-terminated, may be NULL */
        char *ca_rotation;           /* owned: rotation times of the desired state */
        char *sa_rotation;           /* owned */
        bool osc_apply;              /* the OSC's files/units/containerd work is applied in Applying */
        bool osc_restarts_kubelet;   /* that work restarts the kubelet unit: no separate restart */
        bool rotation;               /* a credentials rotation was requested (done in Applying) */
        bool before_node;            /* started before its Node existed (a fresh node's first OSC): it
                                      * runs without the Node, its reports wait for it */
        UpdateFailureCode blocked;   /* why the plan cannot proceed; _INVALID: it can */
        char *blocked_message;       /* owned */
        unsigned attempt;            /* 1 for the first attempt at a checksum */
        uint64_t done;               /* bit (1 << UpdateStep) per completed step */
        UpdatePhase progress_phase;  /* phase whose progress is published; _INVALID: none */
        UpdatePhase event_phase;     /* phase whose Event was emitted; _INVALID: none */
        char *boot_id;               /* owned: boot id when the OS change started */
        uint64_t os_started_usec;    /* when the OS command / install was started; 0: not yet */
        char *verified_boot_id;      /* owned: the boot Verifying's checks ran in: a success not
                                      * reported yet is verified again after a reboot */
        char *ready_since;           /* owned: lastTransitionTime of the ReadyForUpdate this saw */
        bool ready_left;             /* after a failure, InPlaceUpdate left ReadyForUpdate (UpdateFailed) */
        uint64_t started_usec;
        uint64_t updated_usec;
        uint64_t retry_usec;   /* an API write failed: not again before this */
        unsigned api_failures; /* consecutive API write failures */
        UpdateFailure failure;

        /* Node-level memory, carried from one transaction to the next. */
        struct {
                bool valid;
                char *checksum;    /* owned: last OSC checksum fully applied */
                char *ca_rotation; /* owned: the rotation times carried out on the node: set when
                                    * the rotation is done (before the OS step), else with the
                                    * checksum */
                char *sa_rotation; /* owned */
        } applied;
        char *marker; /* owned: updating-operating-system-version we set (or are setting)
                       * and did not clear */
} UpdateTransaction;

/* The one list of UpdateTransaction's fields: free, copy (node-update.c) and the state.json
 * encoding (core/state-codec.c) all walk it, so a new field is added in one place. `key` is the
 * state.json key, "<object>.<key>" for one level of nesting. A field marked `gate` decides whether
 * its object is written at all: when it is empty (no code, false) the object is null. */
typedef enum TxFieldType {
        TX_FIELD_STRING,  /* char * */
        TX_FIELD_STRV,    /* char **, NULL-terminated, at most OSC_ARGS_MAX */
        TX_FIELD_BOOL,    /* bool */
        TX_FIELD_UINT,    /* unsigned */
        TX_FIELD_U64,     /* uint64_t */
        TX_FIELD_PHASE,   /* UpdatePhase, by name; _INVALID: null */
        TX_FIELD_CODE,    /* UpdateFailureCode, by name; _INVALID: null */
        TX_FIELD_BACKEND, /* OsUpdateBackend, by name */
        TX_FIELD_STEPS,   /* uint64_t bit set of UpdateStep, as a list of names */
        TX_FIELD_PRESENT, /* bool: the object exists (gate only) */
} TxFieldType;

typedef struct TxField {
        const char *key;
        TxFieldType type;
        size_t offset;
        bool gate;
} TxField;

extern const TxField update_transaction_fields[];
extern const size_t update_transaction_n_fields;

/* What the decider needs from the configuration. */
typedef struct UpdateSettings {
        OsUpdateBackend backend;
        RebootMethod reboot;
        const char *kubelet_unit;                /* borrowed */
        bool os_image_configured;                /* osUpdate.image.reference is set */
        const char *min_version_for_update;      /* borrowed: osUpdate.minVersionForUpdate; NULL if none */
        uint64_t node_registration_timeout_usec; /* a fresh node's first OSC was applied this long ago
                                                  * and its Node is still not there: say so; 0: 5 min */
} UpdateSettings;

/* What applying the OSC itself means, from the executor's prepared work list (apply/osc-state):
 * only meaningful for the OSC's current checksum. */
typedef struct OscWorkView {
        bool pending; /* this OSC is not committed as last applied yet */
        bool gated;   /* an in-place flag (docs/node-protocol.md §1.2) is set: wait for ReadyForUpdate */
        bool restarts_kubelet;        /* the work restarts the kubelet unit itself */
        const json_t *plan;           /* borrowed: osc_changes_plan_json(); NULL: none */
        UpdateFailureCode error_code; /* the work could not be computed: why (blocks the update) */
        const char *error;            /* borrowed: names the field or file; NULL: no error */
        uint64_t retry_usec;          /* error is retriable (not the desired state's fault): the
                                       * work list is computed again at this time; 0: not retried */
} OscWorkView;

typedef struct UpdateInput {
        const UpdateTransaction *tx;    /* borrowed: as loaded; NULL: nothing persisted */
        const NodeView *node;           /* borrowed; NULL: no Node (see node_absent) */
        bool node_absent;               /* with node NULL: the Node does not exist (its LIST answered
                                         * without it, or it was deleted); false: not known yet -> nothing
                                         * to do */
        bool first_osc;                 /* no OSC was ever applied on this node: no last-applied OSC,
                                         * ours or gardener-node-agent's (a fresh node) */
        const OscDesired *osc;          /* borrowed; NULL: no OSC Secret -> nothing to do */
        const char *os_version;         /* borrowed: from osRelease (os-release.h); NULL: unknown */
        const char *os_version_error;   /* borrowed: why it is unknown (for the status line) */
        const char *kubelet_version;    /* borrowed: version binaryPath points at, no 'v'; NULL: unknown */
        bool kubelet_absent;            /* with kubelet_version NULL: binaryPath does not exist */
        const char *boot_id;            /* borrowed: /proc/sys/kernel/random/boot_id; NULL: unknown */
        const char *new_transaction_id; /* borrowed: the id to use if a transaction starts now */
        OscWorkView osc_work;           /* about `osc`; all false: nothing to apply */
        UpdateSettings settings;
        uint64_t now_usec;
} UpdateInput;

typedef struct UpdateDecision {
        UpdateTransaction *tx; /* owned: the record to persist before running the actions */
        UpdateAction *actions; /* owned array */
        size_t n_actions;
        uint64_t wake_usec; /* decide again at this time even without new input;
                             * USEC_INFINITY: only on new input */
        char *status;       /* owned: one sentence on what happens or what we wait for */
        char *notice;       /* owned: something that happened and deserves a journal line
                             * (e.g. a transaction dropped); NULL: nothing */
} UpdateDecision;

/* Names (docs/contract.md §5 phases, §8.9 codes). to_string returns NULL for out-of-range values. */
const char *update_phase_to_string(UpdatePhase p);
UpdatePhase update_phase_from_string(const char *s);
const char *update_event_to_string(UpdateEvent e);
UpdateEvent update_event_from_string(const char *s);
const char *update_step_to_string(UpdateStep s);
UpdateStep update_step_from_string(const char *s);
const char *update_action_type_to_string(UpdateActionType t);
const char *update_failure_code_to_string(UpdateFailureCode c);
UpdateFailureCode update_failure_code_from_string(const char *s);

/* The update's code for an artifact layer's failure; _UPDATE_FAILURE_INVALID for NONE. */
UpdateFailureCode update_failure_from_artifact(ArtifactFailure f);

bool update_phase_is_terminal(UpdatePhase p); /* Succeeded, Failed, RolledBack */

/* The kubelet before the transaction is known: a version (ROLLBACK_KUBELET points binaryPath back at
 * it) or none at all (a fresh node: ROLLBACK_KUBELET without a version removes binaryPath). */
bool update_kubelet_can_roll_back(const UpdateTransaction *tx);

/* The success rule (docs/contract.md §8.9): Verifying checks every unit the OSC starts
 * (CHECK_OSC_UNITS) in every transaction, and the kubelet's health in a gated one and in one that
 * changes the kubelet or the OS (a file-only ungated transaction, as upstream, does not). */
bool update_checks_kubelet(const UpdateTransaction *tx);

/* The restart annotation (worker.gardener.cloud/restart-systemd-services) is carried out by
 * restart-handler.h, not by this engine. While a transaction is changing units (Applying, Rebooting,
 * Verifying) those restarts must wait: the manager holds restart_handler_submit() back while this
 * returns true, and does not start a decided batch while restart_handler_is_busy(). */
bool node_update_blocks_unit_restarts(const UpdateTransaction *tx);
/* The drift repair (duties/drift-repair.h) compares the node with the last-applied OSC and restores
 * it: not while a transaction is between its plan and its applied OSC (Planned up to Applying: an
 * in-place update waiting for the drain included), where the OSC on the way may already have written
 * part of itself. Once the OS step started (Applying with os_started_usec) and from Rebooting on the
 * OSC is committed, and a repair after the reboot is welcome: it re-establishes a node whose /etc the
 * new OS version reset before the transaction verifies it. */
bool node_update_holds_drift_repair(const UpdateTransaction *tx);
bool update_action_is_best_effort(UpdateActionType t);

/* docs/contract.md §8.9: ArtifactUnavailable, DiskSpace, FileApplyFailed, UnitApplyFailed,
 * OSCUnitsNotRunning, and OSCommandFailed whose message says "network problems" (case-insensitive,
 * upstream's regex) are retriable; so is UnsupportedRotation of a record an older version wrote;
 * everything else is terminal. */
bool update_failure_is_retriable(UpdateFailureCode code, const char *message);

/* The rotations a transaction carries out: its desired rotation time is set and differs from the one
 * last applied (tx->applied), and a rotation was planned at all. */
bool update_rotates_ca(const UpdateTransaction *tx);
bool update_rotates_sa(const UpdateTransaction *tx);

/* The transition table. 0 and *ret set, or -EBADR (event not valid in this phase; *ret untouched). */
int node_update_next(UpdatePhase phase, UpdateEvent event, UpdatePhase *ret);

/* docs/contract.md §9.10: minVersionForUpdate, the first found of the OSC field, the Node annotation
 * inplace-agent/min-version-for-update, the config key osUpdate.minVersionForUpdate; NULL: none. */
const char *update_min_version_for_update(const OscDesired *osc, const NodeView *node,
                                          const UpdateSettings *s);

void update_settings_from_config(const Config *c, UpdateSettings *ret);

int update_transaction_new(UpdateTransaction **ret);
UpdateTransaction *update_transaction_free(UpdateTransaction *t);
DEFINE_CLEANUP_FUNC(UpdateTransaction, update_transaction_free);
int update_transaction_copy(const UpdateTransaction *t, UpdateTransaction **ret);

void update_action_done(UpdateAction *a);     /* frees the members, not `a` */
void update_decision_done(UpdateDecision *d); /* frees the members, not `d` */

/* The decider. Returns 0 and fills *ret (which the caller releases with update_decision_done()),
 * -EINVAL if a transaction would start without in->new_transaction_id, or -ENOMEM. */
int node_update_decide(const UpdateInput *in, UpdateDecision *ret);

/* Feedback for one action of a decision. -EBADR: the action belongs to another transaction or phase
 * (stale or out of order); tx is left untouched then. */
int node_update_action_done(UpdateTransaction *tx, const UpdateAction *a, uint64_t now_usec);
/* code _UPDATE_FAILURE_INVALID picks the action's default code (e.g. ArtifactUnavailable for staging,
 * KubeletUnhealthy for the health check). message: human text, sanitised and bounded here. */
int node_update_action_failed(UpdateTransaction *tx, const UpdateAction *a, UpdateFailureCode code,
                              const char *message, uint64_t now_usec);

/* docs/contract.md §8.10: the plan as a JSON array (new reference). */
json_t *update_plan_json(const UpdateTransaction *tx, const UpdateSettings *s, const json_t *osc_plan);
/* docs/contract.md §6: {"transaction","phase","step","bytesDone","bytesTotal","percent","updated"} (new
 * ref). */
json_t *update_progress_json(const UpdateTransaction *tx, const char *step, uint64_t bytes_done,
                             uint64_t bytes_total, unsigned percent, uint64_t now_usec);
/* docs/contract.md §6/§8.9: {"code","class","step","attempt","transaction","message"}; NULL if no failure.
 */
json_t *update_failure_json(const UpdateTransaction *tx);
/* Percent of the transaction's steps done, 100 once Succeeded. */
unsigned update_transaction_percent(const UpdateTransaction *tx);

/* The progress write budget (docs/contract.md §6, §8.12): write on every phase change, otherwise only when
 * at least 10 s passed AND the percentage moved by at least 10 points since the last write. last_phase
 * _UPDATE_PHASE_INVALID means nothing was written yet. */
bool progress_should_write(UpdatePhase last_phase, unsigned last_percent, uint64_t last_usec,
                           UpdatePhase phase, unsigned percent, uint64_t now_usec);
