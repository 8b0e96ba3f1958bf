/* SPDX-License-Identifier: Apache-2.0 */
/* The decider: inputs -> (transaction record, batch of actions). Pure; see node-update.h for the
 * executor contract. A batch always belongs to one phase: a decision moves through phases only while
 * the current phase has nothing left to do, and stops at the first phase with pending actions (its
 * progress report and Event are such actions, so every phase gets reported). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/version.h"
#include "node-update-internal.h"
#include "util/string-util.h"
#include "util/strv.h"
#include "util/time-util.h"

#define RETRY_BACKOFF_FIRST_USEC (30 * USEC_PER_SEC)
#define RETRY_BACKOFF_MAX_USEC (10 * 60 * USEC_PER_SEC)
#define DECIDE_TRANSITIONS_MAX 16
#define NODE_REGISTRATION_TIMEOUT_USEC (5 * 60 * USEC_PER_SEC)

typedef struct Builder {
        const UpdateInput *in; /* borrowed */
        UpdateTransaction *tx; /* owned: the record being decided */
        UpdateAction *actions; /* owned */
        size_t n_actions;
        size_t n_alloc;
        bool deferred; /* an API write waits for its back-off: emit nothing after it */
        bool no_node;  /* the Node does not exist: in->node is an empty view, and nothing
                        * is written to it or about it */
        uint64_t wake_usec;
        char *status; /* owned */
        char *notice; /* owned: UpdateDecision.notice */
        int error;    /* sticky -ENOMEM from helpers that return pointers */
} Builder;

typedef struct Plan {
        bool gated;
        char *kubelet_from;       /* owned */
        bool kubelet_none;        /* no kubelet at binaryPath: the way back is none */
        char *kubelet_to;         /* owned */
        char *kubernetes_version; /* owned */
        char *os_from;            /* owned */
        char *os_to;              /* owned */
        bool rotation;
        bool osc_work; /* the OSC's files/units/containerd work is part of it */
        bool refused;  /* the OSC itself cannot be used: fails at once, no MCM wait */
        UpdateFailureCode blocked;
        char *blocked_message; /* owned */
} Plan;

static void plan_done(Plan *p) {
        free(p->kubelet_from);
        free(p->kubelet_to);
        free(p->kubernetes_version);
        free(p->os_from);
        free(p->os_to);
        free(p->blocked_message);
}

static void builder_done(Builder *b) {
        for (size_t i = 0; i < b->n_actions; i++)
                update_action_done(&b->actions[i]);
        free(b->actions);
        update_transaction_free(b->tx);
        free(b->status);
        free(b->notice);
}

/* ---- small helpers ---- */

static char *b_strdup(Builder *b, const char *s) {
        char *c;

        if (!s)
                return NULL;
        c = strdup(s);
        if (!c)
                b->error = -ENOMEM;
        return c;
}

_printf_(2, 3) static char *b_printf(Builder *b, const char *format, ...) {
        va_list ap;
        char *s;

        va_start(ap, format);
        s = strdup_vprintf(format, ap);
        va_end(ap);
        if (!s)
                b->error = -ENOMEM;
        return s;
}

_printf_(2, 3) static int set_status(Builder *b, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = free_and_vprintf(&b->status, format, ap);
        va_end(ap);
        return r;
}

static void wake_at(Builder *b, uint64_t usec) {
        b->wake_usec = MIN(b->wake_usec, usec);
}

static bool done(const Builder *b, UpdateStep s) {
        return update_step_done(b->tx, s);
}

static bool has_failure_code(UpdateFailureCode c) {
        return c >= 0 && c < _UPDATE_FAILURE_MAX;
}

static const char *tx_id(const Builder *b) {
        return strempty(b->tx->id);
}

/* Appends an action. In a transaction it is bound to the transaction and its current phase. */
static UpdateAction *add(Builder *b, UpdateActionType type, UpdateStep step, bool in_transaction) {
        UpdateAction *a;

        /* Nothing to write to: the phase reached is reported once the Node exists. */
        if (b->no_node && update_action_needs_node(type))
                return NULL;
        if (b->n_actions == b->n_alloc) {
                size_t n = b->n_alloc ? b->n_alloc * 2 : 8;
                UpdateAction *na = reallocarray(b->actions, n, sizeof(UpdateAction));

                if (!na) {
                        b->error = -ENOMEM;
                        return NULL;
                }
                b->actions = na;
                b->n_alloc = n;
        }
        a = &b->actions[b->n_actions++];
        *a = (UpdateAction) {
                .type = type,
                .step = step,
                .phase = b->tx->phase,
                .result = NODE_UPDATE_RESULT_NONE,
        };
        if (in_transaction)
                a->transaction = b_strdup(b, b->tx->id);
        return a;
}

/* API writes respect the back-off after a failed write, and nothing follows a deferred one. */
static UpdateAction *add_api(Builder *b, UpdateActionType type, UpdateStep step, bool in_transaction) {
        if (b->deferred || b->no_node)
                return NULL;
        if (b->in->now_usec < b->tx->retry_usec) {
                b->deferred = true;
                wake_at(b, b->tx->retry_usec);
                return NULL;
        }
        return add(b, type, step, in_transaction);
}

/* Work actions never run after a deferred API write: they may depend on it. */
static UpdateAction *add_work(Builder *b, UpdateActionType type, UpdateStep step) {
        return b->deferred ? NULL : add(b, type, step, /* in_transaction= */ true);
}

static int transition(Builder *b, UpdateEvent e) {
        UpdatePhase next;
        int r;

        r = node_update_next(b->tx->phase, e, &next);
        if (r < 0)
                return r;
        b->tx->phase = next;
        b->tx->updated_usec = b->in->now_usec;
        return 1;
}

static int fail(Builder *b, UpdateEvent e, UpdateFailureCode code, const char *message, bool keep_reason) {
        int r;

        r = update_transaction_set_failure(b->tx, code, NULL, message,
                                           update_transaction_current_step(b->tx), b->in->now_usec);
        if (r < 0)
                return r;
        b->tx->failure.keep_reason = keep_reason;
        return transition(b, e);
}

/* Signals from MCM that make a doomed plan fail now, before the drain (docs/contract.md §5). */
static bool mcm_signal(const NodeView *n) {
        return n->selected || node_view_gate_open(n);
}

/* Upstream's success-marking condition (docs/node-protocol.md §6.4, performInPlaceUpdate). */
static bool marking_gate(const NodeView *n) {
        return (node_view_ready_for_update(n) && n->update_result != NODE_UPDATE_RESULT_SUCCESSFUL) ||
                n->update_result == NODE_UPDATE_RESULT_FAILED;
}

static bool tx_active(const UpdateTransaction *tx) {
        return tx->id && tx->phase != UPDATE_PHASE_IDLE && !update_phase_is_terminal(tx->phase);
}

static bool rebooted(const Builder *b) {
        return b->in->boot_id && b->tx->boot_id && !streq(b->in->boot_id, b->tx->boot_id);
}

static bool os_is_desired(const Builder *b) {
        return b->in->os_version && b->tx->os_to &&
                version_compare(b->in->os_version, VERSION_OP_EQ, b->tx->os_to, NULL) == 1;
}

static uint64_t retry_backoff(unsigned attempt) {
        uint64_t d = RETRY_BACKOFF_FIRST_USEC << MIN(attempt > 0 ? attempt - 1 : 0, 10u);
        return MIN(d, RETRY_BACKOFF_MAX_USEC);
}

/* ---- messages ---- */

static const char *phase_event_reason(UpdatePhase p, const char **ret_type) {
        *ret_type = "Normal";
        switch (p) {
        case UPDATE_PHASE_PLANNED:
                return "InPlaceUpdatePlanned";
        case UPDATE_PHASE_STAGED:
                return "InPlaceUpdateStaged";
        case UPDATE_PHASE_SUCCEEDED:
                return "InPlaceUpdateSucceeded";
        case UPDATE_PHASE_FAILED:
                *ret_type = "Warning";
                return "InPlaceUpdateFailed";
        case UPDATE_PHASE_ROLLED_BACK:
                *ret_type = "Warning";
                return "InPlaceUpdateRolledBack";
        default:
                return NULL;
        }
}

/* "kubelet 1.31.4 -> 1.32.1, os 1592.6 -> 1592.7" */
static char *summary(Builder *b) {
        const UpdateTransaction *tx = b->tx;
        _cleanup_free_ char *s = NULL;
        int r = 0;

        if (tx->kubelet_to)
                r = strextendf_with_separator(&s, ", ", "kubelet %s -> %s", tx->kubelet_from ?: "unknown",
                                              tx->kubelet_to);
        if (r >= 0 && tx->os_to)
                r = strextendf_with_separator(&s, ", ", "os %s -> %s", strempty(tx->os_from), tx->os_to);
        if (r >= 0 && s && tx->osc_apply)
                r = strextendf_with_separator(&s, ", ", "files and units of the OSC");
        if (r < 0) {
                b->error = r;
                return NULL;
        }
        if (!s)
                return b_strdup(b,
                                tx->rotation          ? "credentials rotation" :
                                        tx->osc_apply ? "files and units of the OSC" :
                                                        "no in-place changes for this agent");
        return TAKE_PTR(s);
}

static char *phase_message(Builder *b) {
        const UpdateTransaction *tx = b->tx;
        _cleanup_free_ char *s = NULL;

        switch (tx->phase) {
        case UPDATE_PHASE_PLANNED:
                s = summary(b);
                if (has_failure_code(tx->blocked))
                        return b_printf(b, "In-place update %s (%s) is blocked: %s.", tx_id(b), strempty(s),
                                        strempty(tx->blocked_message));
                return b_printf(b, "In-place update %s is planned: %s.", tx_id(b), strempty(s));
        case UPDATE_PHASE_STAGING:
                return b_printf(b, "Downloading and verifying the artifacts of in-place update %s.",
                                tx_id(b));
        case UPDATE_PHASE_STAGED:
                return b_printf(b,
                                "The artifacts of in-place update %s are staged; waiting for the node to be "
                                "selected.",
                                tx_id(b));
        case UPDATE_PHASE_WAITING_FOR_DRAIN:
                return b_printf(
                        b,
                        "Waiting for machine-controller-manager to drain the node for in-place update "
                        "%s.",
                        tx_id(b));
        case UPDATE_PHASE_APPLYING:
                s = summary(b);
                return b_printf(b, "Applying in-place update %s: %s.", tx_id(b), strempty(s));
        case UPDATE_PHASE_REBOOTING:
                return b_printf(b, "Waiting for the reboot into OS version %s.", strempty(tx->os_to));
        case UPDATE_PHASE_VERIFYING:
                return b_printf(b, "Verifying the node after in-place update %s.", tx_id(b));
        case UPDATE_PHASE_SUCCEEDED:
                s = summary(b);
                return b_printf(b, "In-place update %s succeeded: %s.", tx_id(b), strempty(s));
        case UPDATE_PHASE_FAILED:
                return b_printf(b, "In-place update %s failed: %s: %s", tx_id(b),
                                strempty(update_failure_code_to_string(tx->failure.code)),
                                strempty(tx->failure.message));
        case UPDATE_PHASE_ROLLED_BACK:
                return b_printf(b, "In-place update %s was rolled back: %s: %s", tx_id(b),
                                strempty(update_failure_code_to_string(tx->failure.code)),
                                strempty(tx->failure.message));
        default:
                return b_strdup(b, "No in-place update in progress.");
        }
}

static json_t *progress_now(Builder *b) {
        const UpdateTransaction *tx = b->tx;
        const char *step =
                update_phase_is_terminal(tx->phase) ? tx->failure.step : update_transaction_current_step(tx);
        json_t *j = update_progress_json(tx, tx->phase == UPDATE_PHASE_SUCCEEDED ? NULL : step, 0, 0,
                                         update_transaction_percent(tx), b->in->now_usec);

        if (!j)
                b->error = -ENOMEM;
        return j;
}

/* The phase's progress (non-terminal phases; terminal ones report with the result) and Event. */
static void add_reports(Builder *b) {
        UpdateTransaction *tx = b->tx;
        const char *type, *reason;
        UpdateAction *a;

        if (tx->progress_phase != tx->phase && !update_phase_is_terminal(tx->phase)) {
                a = add(b, UPDATE_ACTION_REPORT_PROGRESS, UPDATE_STEP_PROGRESS, /* in_transaction= */ true);
                if (a) {
                        a->json = progress_now(b);
                        a->condition_status = true;
                        a->condition_reason = update_phase_to_string(tx->phase);
                        a->message = phase_message(b);
                }
        }
        reason = phase_event_reason(tx->phase, &type);
        if (reason && tx->event_phase != tx->phase) {
                a = add(b, UPDATE_ACTION_EMIT_EVENT, UPDATE_STEP_EVENT, /* in_transaction= */ true);
                if (a) {
                        a->event_reason = reason;
                        a->event_type = type;
                        a->message = phase_message(b);
                }
        }
}

/* ---- planning ---- */

_printf_(4, 5) static int block(Builder *b, Plan *p, UpdateFailureCode code, const char *format, ...) {
        va_list ap;

        if (has_failure_code(p->blocked))
                return 0; /* the first reason is the one reported */
        va_start(ap, format);
        p->blocked_message = strdup_vprintf(format, ap);
        va_end(ap);
        if (!p->blocked_message)
                return -ENOMEM;
        p->blocked = code;
        return 0;
}

static int plan_kubelet(Builder *b, Plan *p, bool in_place) {
        const OscDesired *osc = b->in->osc;
        const char *running = b->in->kubelet_version;
        _cleanup_free_ char *desired = NULL, *error = NULL;
        KubeletChange change = KUBELET_CHANGE_MINOR; /* unknown running version: treat as gated */
        int r;

        r = osc_kubelet_version(osc, &desired, &error);
        if (r == -ENODATA)
                return 0;
        if (r == -EINVAL || (r >= 0 && osc_check_kubelet_file_in_image(osc, &error) < 0)) {
                /* Terminal: the desired state itself is wrong, no retry can fix it. */
                p->gated = p->gated || in_place;
                return block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE, "%s",
                             error ?: "the desired kubelet version is not valid");
        }
        if (r < 0)
                return r;
        p->kubernetes_version = strdup(desired);
        if (!p->kubernetes_version)
                return -ENOMEM;

        if (running && version_classify_kubelet(running, desired, &change, NULL) < 0)
                change = KUBELET_CHANGE_MINOR;

        switch (change) {
        case KUBELET_CHANGE_NONE:
                return 0;
        case KUBELET_CHANGE_DOWNGRADE:
                p->gated = p->gated || in_place;
                return block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                             "kubelet downgrade from %s to %s is not supported", running, desired);
        case KUBELET_CHANGE_SKIP:
                if (in_place) {
                        p->gated = true;
                        return block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                                     "kubelet update from %s to %s skips a minor version", running, desired);
                }
                break;
        case KUBELET_CHANGE_MINOR:
                p->gated = p->gated || in_place;
                break;
        default:
                break; /* a patch update: never gated (docs/node-protocol.md §2.3) */
        }

        if (!osc->kubelet_image) {
                r = block(
                        b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                        "the OSC has no image for the kubelet (no files[] entry for it with content.imageRef)");
                if (r < 0)
                        return r;
        }
        p->kubelet_to = TAKE_PTR(desired);
        p->kubelet_none = !running && b->in->kubelet_absent;
        return free_and_strdup(&p->kubelet_from, running);
}

/* Returns 1 when planned, 0 when the current OS version is unknown (status set). */
static int plan_os(Builder *b, Plan *p) {
        const OscDesired *osc = b->in->osc;
        const char *cur = b->in->os_version, *want = osc->os_version, *why = NULL;
        int r;

        if (!want) {
                p->gated = true;
                r = block(
                        b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                        "operating system version is not provided in OSC, cannot proceed with in-place update");
                return r < 0 ? r : 1;
        }
        if (!cur) {
                r = set_status(b, "Cannot plan the in-place update: %s.",
                               b->in->os_version_error ?: "the current OS version is unknown");
                return r < 0 ? r : 0;
        }

        r = version_compare(cur, VERSION_OP_EQ, want, &why);
        if (r == 1)
                return 1;
        p->gated = true;
        if (r < 0)
                r = block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                          "failed comparing current OS version \"%s\" with desired version \"%s\": %s", cur,
                          want, strempty(why));
        else if (version_compare(want, VERSION_OP_LT, cur, NULL) == 1)
                r = block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                          "OS downgrade from \"%s\" to \"%s\" is not supported", cur, want);
        else {
                p->os_from = strdup(cur);
                p->os_to = strdup(want);
                if (!p->os_from || !p->os_to)
                        return -ENOMEM;
                /* docs/contract.md §8.5; a comparison error counts as "not met", as in upstream's admission.
                 */
                const char *min = update_min_version_for_update(osc, b->in->node, &b->in->settings);

                if (min && version_compare(cur, VERSION_OP_GE, min, NULL) != 1)
                        r = block(b, p, UPDATE_FAILURE_MIN_VERSION_NOT_MET,
                                  "minVersionForUpdate %s is not met by the current OS version %s", min,
                                  cur);
                else if (b->in->settings.backend == OS_UPDATE_BACKEND_COMMAND && !osc->os_update_command)
                        r = block(
                                b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                                "update command is not provided in OSC, cannot proceed with in-place update");
                else if (b->in->settings.backend == OS_UPDATE_BACKEND_IMAGE &&
                         !b->in->settings.os_image_configured)
                        r = block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                                  "osUpdate.image.reference is not configured, cannot install OS version %s",
                                  want);
                else if (b->in->settings.backend == OS_UPDATE_BACKEND_IMAGE && !version_is_safe_name(want))
                        /* it names the staging directory and the boot entry */
                        r = block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE,
                                  "OS version \"%s\" cannot name a boot image", want);
                else
                        r = 0;
        }
        return r < 0 ? r : 1;
}

/* Rotations are detected against what was applied last; without that record (a node this agent
 * took over) there is nothing to compare with, like upstream's first apply (docs/node-protocol.md §2.3 step
 * 2). A rotation is in-place work: gated, carried out in Applying (on_applying()). */
static void plan_rotation(Builder *b, Plan *p) {
        const OscDesired *osc = b->in->osc;
        const UpdateTransaction *tx = b->tx;

        if (!tx->applied.valid)
                return;
        if ((osc->ca_rotation && !streq_ptr(osc->ca_rotation, tx->applied.ca_rotation)) ||
            (osc->sa_rotation && !streq_ptr(osc->sa_rotation, tx->applied.sa_rotation)))
                p->rotation = p->gated = true;
}

/* Returns 1 with *p filled, 0 if nothing can be planned right now (status set). */
/* The OSC's own work (docs/contract.md §9.2): files, units and containerd change with every checksum that is
 * not committed yet; an in-place flag of its diff (kubelet config, cpuManagerPolicy, rotations) gates
 * it behind ReadyForUpdate, as upstream gates its whole reconcile (docs/node-protocol.md §1.2). */
static int plan_osc_work(Builder *b, Plan *p, bool in_place) {
        const OscWorkView *w = &b->in->osc_work;
        int r;

        if (w->error && w->retry_usec > 0) {
                /* Not the desired state's fault (a full or unreadable state directory): nothing can be
                 * planned without the work list, and the runner computes it again then. */
                wake_at(b, w->retry_usec);
                r = set_status(b, "Cannot compute the changes of OSC %s yet, retrying with back-off: %s",
                               b->in->osc->checksum, w->error);
                return r < 0 ? r : 0;
        }
        if (w->error) {
                p->gated = p->gated || in_place;
                p->refused = true;
                r = block(b, p,
                          has_failure_code(w->error_code) ? w->error_code :
                                                            UPDATE_FAILURE_INVALID_DESIRED_STATE,
                          "%s", w->error);
                return r < 0 ? r : 1;
        }
        p->osc_work = w->pending;
        p->gated = p->gated || (w->pending && w->gated && in_place);
        return 1;
}

static int compute_plan(Builder *b, Plan *p) {
        const OscDesired *osc = b->in->osc;
        /* docs/node-protocol.md §2.3 step 2: the very first apply on a node is never gated and never updates
         * the OS. */
        bool fresh = !b->tx->applied.valid && isempty(b->in->node->applied_checksum);
        bool in_place = osc->in_place && !fresh;
        /* Except once MCM has drained the node for an in-place update: the success marking that would
         * follow says the node runs the desired OS, so the OS is compared with or without history
         * (upstream marks a node without a last-applied OSC successful unchecked: the report in
         * fundament-oss/fundament#369). A mismatch plans the OS update, with its marker check. */
        bool check_os = in_place || (osc->in_place && marking_gate(b->in->node));
        int r;

        *p = (Plan) { .blocked = _UPDATE_FAILURE_INVALID };

        /* A Secret the agent refuses (osc.h): nothing of it is planned. Gated, because whether it
         * was meant in place is unknown: the update-result for MCM follows only once MCM acts. */
        if (osc->refused) {
                p->refused = p->gated = true;
                r = block(b, p, UPDATE_FAILURE_INVALID_DESIRED_STATE, "%s", osc->refused);
                return r < 0 ? r : 1;
        }
        r = plan_osc_work(b, p, in_place);
        if (r <= 0)
                return r;
        r = plan_kubelet(b, p, in_place);
        if (r < 0)
                return r;
        if (!check_os)
                return 1;
        r = plan_os(b, p);
        if (r <= 0)
                return r;
        plan_rotation(b, p);
        return 1;
}

static bool plan_empty(const Plan *p) {
        return !p->kubelet_to && !p->os_to && !p->rotation && !p->osc_work && !has_failure_code(p->blocked);
}

/* ---- phases ---- */

static void add_plan(Builder *b) {
        UpdateAction *a;

        if (done(b, UPDATE_STEP_PLAN))
                return;
        a = add_api(b, UPDATE_ACTION_PUBLISH_PLAN, UPDATE_STEP_PLAN, /* in_transaction= */ true);
        if (!a)
                return;
        a->json = update_plan_json(b->tx, &b->in->settings, b->in->osc_work.plan);
        if (!a->json)
                b->error = -ENOMEM;
}

static int enter_applying(Builder *b) {
        if (node_view_ready_for_update(b->in->node)) {
                int r = free_and_strdup(&b->tx->ready_since, node_view_ready_since(b->in->node));
                if (r < 0)
                        return r;
        }
        return transition(b, UPDATE_EVENT_READY);
}

static int on_planned(Builder *b) {
        UpdateTransaction *tx = b->tx;

        add_plan(b);
        add_reports(b);
        if (b->n_actions > 0 || b->deferred)
                return 0;
        if (has_failure_code(tx->blocked)) {
                if (mcm_signal(b->in->node))
                        return fail(b, UPDATE_EVENT_FAILED, tx->blocked, tx->blocked_message,
                                    /* keep_reason= */ false);
                return set_status(b,
                                  "In-place update %s is blocked: %s. It fails once the node is selected.",
                                  tx_id(b), strempty(tx->blocked_message));
        }
        return transition(b, UPDATE_EVENT_STAGE);
}

static int on_staging(Builder *b) {
        UpdateTransaction *tx = b->tx;
        UpdateAction *a;

        add_plan(b);
        add_reports(b);
        if (!has_failure_code(tx->blocked)) {
                if (tx->kubelet_to && !done(b, UPDATE_STEP_STAGE_KUBELET)) {
                        a = add_work(b, UPDATE_ACTION_STAGE_KUBELET, UPDATE_STEP_STAGE_KUBELET);
                        if (a) {
                                a->version = b_strdup(b, tx->kubelet_to);
                                a->image = b_strdup(b, tx->kubelet_image);
                                a->path_in_image = b_strdup(b, tx->kubelet_path_in_image);
                        }
                }
                if (tx->os_to && tx->os_backend == OS_UPDATE_BACKEND_IMAGE &&
                    !done(b, UPDATE_STEP_STAGE_OS)) {
                        a = add_work(b, UPDATE_ACTION_STAGE_OS_IMAGE, UPDATE_STEP_STAGE_OS);
                        if (a)
                                a->version = b_strdup(b, tx->os_to);
                }
        }
        if (b->n_actions > 0 || b->deferred)
                return 0;
        if (has_failure_code(tx->blocked)) /* only the ungated path gets here blocked */
                return fail(b, UPDATE_EVENT_FAILED, tx->blocked, tx->blocked_message,
                            /* keep_reason= */ false);
        if (!tx->gated || node_view_gate_open(b->in->node))
                return enter_applying(b);
        return transition(b, UPDATE_EVENT_STAGED);
}

static int on_staged(Builder *b) {
        add_reports(b);
        if (b->n_actions > 0)
                return 0;
        if (node_view_gate_open(b->in->node))
                return enter_applying(b);
        if (b->in->node->selected)
                return transition(b, UPDATE_EVENT_SELECTED);
        return set_status(b, "In-place update %s is staged; waiting for %s.", tx_id(b), NODE_LABEL_SELECTED);
}

static int on_waiting_for_drain(Builder *b) {
        add_reports(b);
        if (b->n_actions > 0)
                return 0;
        if (node_view_gate_open(b->in->node))
                return enter_applying(b);
        return set_status(b, "In-place update %s waits for the drain (condition %s reason %s).", tx_id(b),
                          NODE_CONDITION_IN_PLACE_UPDATE, NODE_REASON_READY_FOR_UPDATE);
}

static int rolled_back_os(Builder *b) {
        _cleanup_free_ char *m =
                b_printf(b,
                         "OS update might have failed and rolled back to the previous version. "
                         "Desired version: \"%s\", Current version: \"%s\"",
                         strempty(b->tx->os_to), b->in->os_version ?: "unknown");
        if (!m)
                return -ENOMEM;
        return fail(b, UPDATE_EVENT_ROLLED_BACK, UPDATE_FAILURE_OS_ROLLED_BACK, m, /* keep_reason= */ false);
}

/* docs/node-protocol.md §4.2 step 1: a marker we did not set that names the desired version means an earlier
 * attempt (another agent's, or ours before its state was lost) already ran and the OS is still old. */
static int check_foreign_marker(Builder *b) {
        const NodeView *n = b->in->node;
        const UpdateTransaction *tx = b->tx;
        _cleanup_free_ char *m = NULL;

        if (!tx->os_to || done(b, UPDATE_STEP_MARKER) || !n->updating_os_version ||
            streq_ptr(n->updating_os_version, tx->marker) ||
            version_compare(n->updating_os_version, VERSION_OP_EQ, tx->os_to, NULL) != 1)
                return 0;

        if (!n->update_failed_reason)
                return rolled_back_os(b);
        m = b_printf(b, "OS update has failed with error: %s", n->update_failed_reason);
        if (!m)
                return -ENOMEM;
        return fail(b, UPDATE_EVENT_FAILED, UPDATE_FAILURE_OS_COMMAND_FAILED, m, /* keep_reason= */ true);
}

static void add_os_apply(Builder *b) {
        UpdateTransaction *tx = b->tx;
        UpdateAction *a;

        if (tx->os_backend == OS_UPDATE_BACKEND_IMAGE) {
                a = add_work(b, UPDATE_ACTION_INSTALL_OS_IMAGE, UPDATE_STEP_OS_APPLY);
                if (a)
                        a->version = b_strdup(b, tx->os_to);
        } else {
                a = add_work(b, UPDATE_ACTION_RUN_OS_COMMAND, UPDATE_STEP_OS_APPLY);
                if (a) {
                        a->command = b_strdup(b, tx->os_command);
                        if (strv_copy(tx->os_args, &a->args) < 0)
                                b->error = -ENOMEM;
                }
        }
        if (!a)
                return;
        /* Recorded before it runs (the executor persists this record first): after a crash we know the
         * OS change was started and never run it a second time blindly. */
        tx->os_started_usec = b->in->now_usec;
        if (free_and_strdup(&tx->boot_id, b->in->boot_id) < 0)
                b->error = -ENOMEM;
}

/* After a restart the Secret may come after the Node: the OSC's work waits for it, and so does
 * everything that must follow it (the kubelet restart, the rotations, the OS). */
static bool osc_waits_for_secret(const Builder *b) {
        return b->tx->osc_apply && !done(b, UPDATE_STEP_APPLY_OSC) && !b->in->osc;
}

/* The new kubelet binary goes in first, then the OSC's files and units (its kubelet config and
 * unit among them), then one kubelet restart: the OSC's own when its work restarts the kubelet
 * unit, else ours. Never the new binary with the old configuration, never two restarts. */
static void add_kubelet_and_osc_apply(Builder *b) {
        UpdateTransaction *tx = b->tx;
        bool osc_waits = osc_waits_for_secret(b);
        UpdateAction *a;

        if (tx->kubelet_to && !done(b, UPDATE_STEP_SWITCH_KUBELET)) {
                a = add_work(b, UPDATE_ACTION_SWITCH_KUBELET, UPDATE_STEP_SWITCH_KUBELET);
                if (a)
                        a->version = b_strdup(b, tx->kubelet_to);
        }
        if (osc_waits)
                return;
        if (tx->osc_apply && !done(b, UPDATE_STEP_APPLY_OSC)) {
                a = add_work(b, UPDATE_ACTION_APPLY_OSC, UPDATE_STEP_APPLY_OSC);
                if (a)
                        a->checksum = b_strdup(b, tx->checksum);
        }
        if (tx->kubelet_to && !tx->osc_restarts_kubelet && !done(b, UPDATE_STEP_RESTART_KUBELET)) {
                a = add_work(b, UPDATE_ACTION_RESTART_UNIT, UPDATE_STEP_RESTART_KUBELET);
                if (a)
                        a->unit = b_strdup(b, b->in->settings.kubelet_unit);
        }
}

/* docs/node-protocol.md §6.4: the rotations happen inside performInPlaceUpdate; here after the kubelet
 * switch and the OSC's files (the new CA bundle among them) and before the OS change, as upstream since
 * gardener PR #15704: the OS change may end this boot in a system whose bookkeeping was wiped (Garden
 * Linux's wipe-based update), and a rotation still pending then would be lost. Its feedback records it as
 * carried out (node_update_action_done()) before the OS step starts. */
static void add_rotation(Builder *b) {
        UpdateTransaction *tx = b->tx;
        UpdateAction *a;

        if (!tx->rotation || done(b, UPDATE_STEP_ROTATE_CREDENTIALS))
                return;
        a = add_work(b, UPDATE_ACTION_ROTATE_CREDENTIALS, UPDATE_STEP_ROTATE_CREDENTIALS);
        if (a) {
                a->rotate_ca = update_rotates_ca(tx);
                a->rotate_sa = update_rotates_sa(tx);
        }
}

static int on_applying(Builder *b) {
        UpdateTransaction *tx = b->tx;
        bool before_os_done;
        UpdateAction *a;
        int r;

        r = check_foreign_marker(b);
        if (r != 0)
                return r;

        add_reports(b);
        add_kubelet_and_osc_apply(b);
        if (!osc_waits_for_secret(b))
                add_rotation(b);
        before_os_done = (!tx->kubelet_to ||
                          (done(b, UPDATE_STEP_SWITCH_KUBELET) &&
                           (tx->osc_restarts_kubelet || done(b, UPDATE_STEP_RESTART_KUBELET)))) &&
                (!tx->osc_apply || done(b, UPDATE_STEP_APPLY_OSC)) &&
                (!tx->rotation || done(b, UPDATE_STEP_ROTATE_CREDENTIALS));
        if (tx->os_to && !done(b, UPDATE_STEP_MARKER)) {
                a = add_api(b, UPDATE_ACTION_SET_MARKER, UPDATE_STEP_MARKER, /* in_transaction= */ true);
                if (a) {
                        a->version = b_strdup(b, tx->os_to);
                        /* Ours from the moment we ask for it: if we die after the patch landed but
                         * before it was recorded, the marker must not look like someone else's. */
                        if (free_and_strdup(&tx->marker, tx->os_to) < 0)
                                b->error = -ENOMEM;
                }
        } else if (tx->os_to && !tx->os_started_usec && before_os_done)
                add_os_apply(b);
        if (b->n_actions > 0 || b->deferred)
                return 0;
        if (!before_os_done)
                return set_status(
                        b, "In-place update %s waits for the OSC Secret to apply its files and units.",
                        tx_id(b));

        if (!tx->os_to)
                return transition(b, UPDATE_EVENT_APPLIED);
        if (!done(b, UPDATE_STEP_OS_APPLY)) {
                /* Started, not finished, and we are not running it (decide() is never called while an
                 * action runs): either it rebooted the node, or the agent died while it ran. */
                if (rebooted(b))
                        return transition(b, UPDATE_EVENT_REBOOT);
                /* It got the OS to the desired version before we died (provider-local's kind changes
                 * os-release in place): done, as upstream counts a node already on the desired version
                 * (docs/node-protocol.md §2). Failing here would report failed for a node that runs the new
                 * OS. */
                if (os_is_desired(b))
                        return transition(b, UPDATE_EVENT_APPLIED);
                return fail(
                        b, UPDATE_EVENT_FAILED, UPDATE_FAILURE_OS_COMMAND_FAILED,
                        "the OS update was interrupted before it finished (the agent restarted while it ran); "
                        "not starting it again",
                        /* keep_reason= */ false);
        }
        if (os_is_desired(b))
                return transition(b, UPDATE_EVENT_APPLIED);
        return transition(b, UPDATE_EVENT_REBOOT);
}

static int on_rebooting(Builder *b) {
        UpdateTransaction *tx = b->tx;
        const UpdateSettings *s = &b->in->settings;

        if (os_is_desired(b))
                return transition(b, UPDATE_EVENT_REBOOTED);
        if (rebooted(b))
                return rolled_back_os(b);

        add_reports(b);
        if (tx->os_backend == OS_UPDATE_BACKEND_IMAGE && s->reboot != REBOOT_METHOD_NONE &&
            !done(b, UPDATE_STEP_REBOOT))
                (void) add_work(b, UPDATE_ACTION_REBOOT, UPDATE_STEP_REBOOT);
        if (tx->os_backend == OS_UPDATE_BACKEND_COMMAND)
                /* docs/node-protocol.md §9 scenario 22: the command succeeded but the node has not come back
                 * yet. */
                return set_status(
                        b,
                        "stopping reconciliation until gardener-node-agent is restarted after the OS "
                        "update. Current version: \"%s\", Desired version: \"%s\"",
                        b->in->os_version ?: "unknown", strempty(tx->os_to));
        return set_status(b, "Waiting for the reboot into OS version %s.", strempty(tx->os_to));
}

/* Verifying's checks, all in the boot the success is reported in: those done in a boot before
 * run again. */
static void add_checks(Builder *b) {
        UpdateTransaction *tx = b->tx;
        size_t n = b->n_actions;

        if (tx->verified_boot_id && b->in->boot_id && !streq(b->in->boot_id, tx->verified_boot_id))
                tx->done &=
                        ~((UINT64_C(1) << UPDATE_STEP_CHECK_UNITS) | (UINT64_C(1) << UPDATE_STEP_HEALTH));

        if (!done(b, UPDATE_STEP_CHECK_UNITS)) {
                UpdateAction *a = add_work(b, UPDATE_ACTION_CHECK_OSC_UNITS, UPDATE_STEP_CHECK_UNITS);

                if (a)
                        a->checksum = b_strdup(b, tx->checksum);
        }
        if (update_checks_kubelet(tx) && !done(b, UPDATE_STEP_HEALTH))
                (void) add_work(b, UPDATE_ACTION_CHECK_KUBELET_HEALTH, UPDATE_STEP_HEALTH);
        if (b->n_actions > n && free_and_strdup(&tx->verified_boot_id, b->in->boot_id) < 0)
                b->error = -ENOMEM;
}

/* The node rebooted between the checks and the report of the success (or the agent died in between
 * and the checks were started again): what was verified was the boot before. The checks run again
 * (in Succeeded: nothing reported it yet) before the result. */
static void reverify_after_reboot(Builder *b) {
        UpdateTransaction *tx = b->tx;

        /* A result that landed before the agent died (its feedback lost) was the report: the Node
         * shows it, and a later failure would contradict it. */
        if (done(b, UPDATE_STEP_RESULT) || !tx->verified_boot_id ||
            (tx->gated && b->in->node->update_result == NODE_UPDATE_RESULT_SUCCESSFUL))
                return;
        add_checks(b);
}

static int on_verifying(Builder *b) {
        add_reports(b);
        /* The success rule: nothing is reported successful, and no checksum is written, before the
         * units the OSC starts were found running and (gated, kubelet or OS changed) the kubelet
         * answered healthy, in this transaction. */
        add_checks(b);
        if (b->n_actions > 0)
                return 0;
        return transition(b, UPDATE_EVENT_HEALTHY);
}

/* ---- terminal phases: make the node reflect the outcome ---- */

static UpdateAction *add_result(Builder *b, NodeUpdateResult label) {
        UpdateTransaction *tx = b->tx;
        bool ok = tx->phase == UPDATE_PHASE_SUCCEEDED;
        UpdateAction *a;

        a = add_api(b, UPDATE_ACTION_REPORT_RESULT,
                    label != NODE_UPDATE_RESULT_NONE || ok ? UPDATE_STEP_RESULT : UPDATE_STEP_PROGRESS,
                    /* in_transaction= */ true);
        if (!a)
                return NULL;
        a->result = label;
        a->json = progress_now(b);
        a->condition_status = ok;
        a->condition_reason = update_phase_to_string(tx->phase);
        a->message = phase_message(b);
        if (ok)
                a->clear_marker = label == NODE_UPDATE_RESULT_SUCCESSFUL;
        else {
                a->failure = update_failure_json(tx);
                a->reason = b_strdup(b, tx->failure.message);
                a->keep_reason = tx->failure.keep_reason;
        }
        return a;
}

static void add_final_event(Builder *b) {
        const char *type, *reason = phase_event_reason(b->tx->phase, &type);
        UpdateAction *a;

        if (!reason || b->tx->event_phase == b->tx->phase)
                return;
        a = add(b, UPDATE_ACTION_EMIT_EVENT, UPDATE_STEP_EVENT, /* in_transaction= */ true);
        if (a) {
                a->event_reason = reason;
                a->event_type = type;
                a->message = phase_message(b);
        }
}

static void add_set_checksum(Builder *b, bool in_transaction, const char *checksum, const char *version,
                             const char *ca, const char *sa) {
        UpdateAction *a = add_api(b, UPDATE_ACTION_SET_CHECKSUM, UPDATE_STEP_CHECKSUM, in_transaction);

        if (!a)
                return;
        a->checksum = b_strdup(b, checksum);
        a->version = b_strdup(b, version);
        a->ca_rotation = b_strdup(b, ca);
        a->sa_rotation = b_strdup(b, sa);
}

/* The desired state moved on while this transaction finished (from Applying on it does): MCM's
 * update-result is about the desired state it acts on now, so this one's is not written. */
static bool superseded(const Builder *b) {
        return b->in->osc && !streq_ptr(b->tx->checksum, b->in->osc->checksum);
}

static void succeeded_chores(Builder *b) {
        UpdateTransaction *tx = b->tx;

        reverify_after_reboot(b);
        /* docs/node-protocol.md §6.4: Pods are deleted before the node is marked successful, never after. */
        if (tx->gated && !done(b, UPDATE_STEP_DELETE_PODS))
                (void) add_api(b, UPDATE_ACTION_DELETE_PODS, UPDATE_STEP_DELETE_PODS,
                               /* in_transaction= */ true);
        if (!done(b, UPDATE_STEP_RESULT))
                (void) add_result(b,
                                  tx->gated && !superseded(b) ? NODE_UPDATE_RESULT_SUCCESSFUL :
                                                                NODE_UPDATE_RESULT_NONE);
        if (tx->checksum && !done(b, UPDATE_STEP_CHECKSUM))
                add_set_checksum(b, /* in_transaction= */ true, tx->checksum, tx->kubernetes_version,
                                 tx->ca_rotation, tx->sa_rotation);
        if (!b->deferred)
                add_final_event(b);
        /* keepVersions: once the new kubelet is reported good, older ones go (never the rollback one). */
        if (tx->kubelet_to && !done(b, UPDATE_STEP_COLLECT_KUBELETS)) {
                UpdateAction *a = add_work(b, UPDATE_ACTION_COLLECT_KUBELETS, UPDATE_STEP_COLLECT_KUBELETS);

                if (a) {
                        a->version = b_strdup(b, tx->kubelet_to);
                        a->previous_version = b_strdup(b, tx->kubelet_from);
                }
        }
}

/* The kubelet is switched back and restarted, or, with none before, removed and its unit stopped. */
static bool kubelet_rollback_due(const Builder *b) {
        const UpdateTransaction *tx = b->tx;

        return tx->phase == UPDATE_PHASE_ROLLED_BACK && tx->failure.code != UPDATE_FAILURE_OS_ROLLED_BACK &&
                update_kubelet_can_roll_back(tx) && done(b, UPDATE_STEP_SWITCH_KUBELET);
}

static void failed_chores(Builder *b) {
        UpdateTransaction *tx = b->tx;
        UpdateAction *a;
        /* docs/contract.md §8.4: update-result belongs to the gated path; there only once MCM acts on the
         * node. */
        NodeUpdateResult label = tx->gated && mcm_signal(b->in->node) && !superseded(b) ?
                NODE_UPDATE_RESULT_FAILED :
                NODE_UPDATE_RESULT_NONE;

        if (kubelet_rollback_due(b)) {
                if (!done(b, UPDATE_STEP_ROLLBACK_KUBELET)) {
                        a = add_work(b, UPDATE_ACTION_ROLLBACK_KUBELET, UPDATE_STEP_ROLLBACK_KUBELET);
                        if (a) /* NULL with kubelet_none: binaryPath goes */
                                a->version = b_strdup(b, tx->kubelet_from);
                }
                if (!done(b, UPDATE_STEP_ROLLBACK_RESTART)) {
                        /* Back to no kubelet: nothing is left for the unit to run, so it is stopped
                         * (a restart could only fail with 203/EXEC and call the way back failed). */
                        a = add_work(b,
                                     tx->kubelet_none ? UPDATE_ACTION_STOP_UNIT : UPDATE_ACTION_RESTART_UNIT,
                                     UPDATE_STEP_ROLLBACK_RESTART);
                        if (a)
                                a->unit = b_strdup(b, b->in->settings.kubelet_unit);
                }
        }
        if (!done(b, UPDATE_STEP_RESULT) &&
            (label == NODE_UPDATE_RESULT_FAILED || tx->progress_phase != tx->phase))
                (void) add_result(b, label);
        if (!b->deferred)
                add_final_event(b);
}

static void terminal_chores(Builder *b) {
        if (b->tx->phase == UPDATE_PHASE_SUCCEEDED)
                succeeded_chores(b);
        else
                failed_chores(b);
}

/* ---- the main loop ---- */

static int on_idle(Builder *b) {
        return transition(b, b->tx->gated ? UPDATE_EVENT_PLAN : UPDATE_EVENT_BEGIN);
}

/* What each phase that is not over does: > 0 it moved on (look again), 0 it waits, -errno. The
 * terminal phases have none: their chores end the decision. */
static int (*const phase_handlers[_UPDATE_PHASE_MAX])(Builder *b) = {
        [UPDATE_PHASE_IDLE] = on_idle,
        [UPDATE_PHASE_PLANNED] = on_planned,
        [UPDATE_PHASE_STAGING] = on_staging,
        [UPDATE_PHASE_STAGED] = on_staged,
        [UPDATE_PHASE_WAITING_FOR_DRAIN] = on_waiting_for_drain,
        [UPDATE_PHASE_APPLYING] = on_applying,
        [UPDATE_PHASE_REBOOTING] = on_rebooting,
        [UPDATE_PHASE_VERIFYING] = on_verifying,
};

static int resume(Builder *b) {
        for (unsigned i = 0; i < DECIDE_TRANSITIONS_MAX; i++) {
                UpdatePhase phase = b->tx->phase;
                int r;

                if (phase < 0 || phase >= _UPDATE_PHASE_MAX || !phase_handlers[phase]) {
                        terminal_chores(b);
                        return 0;
                }
                r = phase_handlers[phase](b);
                if (r <= 0)
                        return r;
        }
        return -ELOOP; /* the table only moves forward: cannot happen */
}

/* Drops the per-transaction part of the record, keeping the node-level memory. */
static int reset_transaction(UpdateTransaction *tx) {
        _cleanup_(update_transaction_freep) UpdateTransaction *fresh = NULL;
        int r;

        r = update_transaction_new(&fresh);
        if (r < 0)
                return r;
        fresh->applied = tx->applied;
        fresh->marker = tx->marker;
        tx->applied.checksum = tx->applied.ca_rotation = tx->applied.sa_rotation = NULL;
        tx->marker = NULL;

        /* Swap contents: *tx becomes the fresh record, the old one is freed with `fresh`. */
        UpdateTransaction tmp = *tx;
        *tx = *fresh;
        *fresh = tmp;
        return 0;
}

static int start_transaction(Builder *b, Plan *p, unsigned attempt) {
        const UpdateInput *in = b->in;
        const OscDesired *osc = in->osc;
        UpdateTransaction *tx = b->tx;
        int r;

        if (isempty(in->new_transaction_id))
                return -EINVAL;
        r = reset_transaction(tx);
        if (r < 0)
                return r;

        tx->id = b_strdup(b, in->new_transaction_id);
        tx->node_uid = b_strdup(b, in->node->uid);
        tx->before_node = b->no_node;
        tx->checksum = b_strdup(b, osc->checksum);
        tx->gated = p->gated;
        tx->os_from = TAKE_PTR(p->os_from);
        tx->os_to = TAKE_PTR(p->os_to);
        tx->kubelet_from = TAKE_PTR(p->kubelet_from);
        tx->kubelet_none = p->kubelet_none;
        tx->kubelet_to = TAKE_PTR(p->kubelet_to);
        tx->kubernetes_version = TAKE_PTR(p->kubernetes_version);
        tx->kubelet_image = b_strdup(b, osc->kubelet_image);
        tx->kubelet_path_in_image = b_strdup(b, osc->kubelet_file_in_image);
        tx->os_backend = in->settings.backend;
        tx->os_command = b_strdup(b, osc->os_update_command);
        if (strv_copy(osc->os_update_args, &tx->os_args) < 0)
                return -ENOMEM;
        tx->ca_rotation = b_strdup(b, osc->ca_rotation);
        tx->sa_rotation = b_strdup(b, osc->sa_rotation);
        tx->rotation = p->rotation;
        tx->osc_apply = p->osc_work;
        tx->osc_restarts_kubelet = p->osc_work && in->osc_work.restarts_kubelet;
        tx->blocked = p->blocked;
        tx->blocked_message = TAKE_PTR(p->blocked_message);
        tx->attempt = attempt;
        tx->started_usec = tx->updated_usec = in->now_usec;
        if (node_view_ready_for_update(in->node))
                tx->ready_since = b_strdup(b, node_view_ready_since(in->node));
        if (b->error)
                return b->error;
        if (p->refused) {
                /* An OSC that cannot be used waits for nothing: it fails now, visible on the Node and in
                 * STATUS=, instead of "pending" until MCM picks the node (docs/node-protocol.md §2.2). */
                r = transition(b, tx->gated ? UPDATE_EVENT_PLAN : UPDATE_EVENT_BEGIN);
                if (r >= 0)
                        r = fail(b, UPDATE_EVENT_FAILED, tx->blocked, tx->blocked_message,
                                 /* keep_reason= */ false);
                if (r < 0)
                        return r;
        }
        return resume(b);
}

/* The failed attempt's back-off is over (else the wake-up is set for its end). */
static bool backoff_over(Builder *b) {
        uint64_t due = b->tx->failure.usec + retry_backoff(b->tx->attempt);

        if (b->in->now_usec >= due)
                return true;
        wake_at(b, due);
        return false;
}

/* A retriable failure is retried with back-off: a new attempt of the same desired state. */
static bool retry_due(Builder *b) {
        const UpdateFailure *f = &b->tx->failure;

        return update_failure_is_retriable(f->code, f->message) && backoff_over(b);
}

/* docs/node-protocol.md §7.3: an operator retries a failed node by setting ReadyForUpdate again. The first
 * ReadyForUpdate after a failure before the drain is MCM moving on, not a retry: remember it. Seen to leave
 * ReadyForUpdate (MCM's UpdateFailed) and come back, it is a retry whatever its lastTransitionTime says:
 * that has a resolution of one second, and a failure that comes fast is retried within the same second. */
static int manual_retry(Builder *b) {
        const NodeView *n = b->in->node;
        const char *since = node_view_ready_since(n);

        if (!node_view_ready_for_update(n)) {
                if (b->tx->ready_since && !b->no_node)
                        b->tx->ready_left = true;
                return 0;
        }
        if (!since)
                return 0;
        if (!b->tx->ready_since)
                return free_and_strdup(&b->tx->ready_since, since) < 0 ? -ENOMEM : 0;
        return b->tx->ready_left || !streq(since, b->tx->ready_since);
}

static int set_checksum_only(Builder *b, const Plan *p) {
        const OscDesired *osc = b->in->osc;

        if (isempty(osc->checksum))
                return set_status(b, "Nothing to do: the node matches the desired state.");
        add_set_checksum(b, /* in_transaction= */ false, osc->checksum, p->kubernetes_version,
                         osc->ca_rotation, osc->sa_rotation);
        return set_status(b, "No in-place changes; recording checksum %s.", osc->checksum);
}

static int failed_status(Builder *b) {
        const UpdateTransaction *tx = b->tx;

        return set_status(
                b, "In-place update %s %s: %s: %s%s", tx_id(b),
                tx->phase == UPDATE_PHASE_ROLLED_BACK ? "was rolled back" : "failed",
                strempty(update_failure_code_to_string(tx->failure.code)), strempty(tx->failure.message),
                update_failure_is_retriable(tx->failure.code, tx->failure.message) ?
                        " (retrying with back-off)" :
                        " (terminal until the desired state changes or ReadyForUpdate is set again)");
}

static int start(Builder *b) {
        const NodeView *node = b->in->node;
        const OscDesired *osc = b->in->osc;
        UpdateTransaction *tx = b->tx;
        _cleanup_(plan_done) Plan p = {};
        bool after_failure = tx->id && streq_ptr(tx->checksum, osc->checksum) &&
                (tx->phase == UPDATE_PHASE_FAILED || tx->phase == UPDATE_PHASE_ROLLED_BACK);
        unsigned attempt = 1;
        int r;

        if (after_failure) {
                r = retry_due(b) ? 1 : manual_retry(b);
                if (r < 0)
                        return r;
                if (r == 0) {
                        /* Fixed by hand meanwhile? Then the success marking may still run, after a
                         * verification of its own, and not more often than the back-off says: a node
                         * that stays broken is not re-verified in a loop. */
                        r = compute_plan(b, &p);
                        if (r < 0)
                                return r;
                        if (r > 0 && plan_empty(&p) && marking_gate(node) && backoff_over(b)) {
                                p.gated = true;
                                return start_transaction(b, &p, tx->attempt + 1);
                        }
                        return failed_status(b);
                }
                attempt = tx->attempt + 1;
        }

        /* docs/node-protocol.md §2.2: the node already carries this checksum. (Unlike upstream, two empty
         * checksums do not count as equal: a Secret without the annotation must not freeze the node.) */
        if (!isempty(osc->checksum) && streq_ptr(node->applied_checksum, osc->checksum))
                return set_status(b, "Up to date (%s %s).", NODE_ANNOTATION_CHECKSUM, osc->checksum);
        /* We wrote that checksum ourselves: a Node without it is older than our own patches (the watch
         * event is on its way). Taken at its word it would start the success marking again: the
         * Pods deleted a second time, a second result. */
        if (!isempty(osc->checksum) && tx->applied.valid && streq_ptr(tx->applied.checksum, osc->checksum))
                return set_status(b, "Up to date; waiting for the Node to show %s.",
                                  NODE_ANNOTATION_CHECKSUM);

        r = compute_plan(b, &p);
        if (r <= 0)
                return r;

        if (plan_empty(&p)) {
                if (marking_gate(node)) {
                        p.gated = true;
                        return start_transaction(b, &p, attempt);
                }
                if (node->candidate || node->selected)
                        return set_status(b,
                                          "No in-place changes for this agent; waiting for %s to report the "
                                          "result.",
                                          NODE_REASON_READY_FOR_UPDATE);
                /* The retry of a failed verification: the checksum alone would be a success that
                 * nothing verified. */
                if (after_failure)
                        return start_transaction(b, &p, attempt);
                return set_checksum_only(b, &p);
        }
        /* docs/node-protocol.md §9 scenario 7: gated work waits, untouched, until MCM picks the node. */
        if (p.gated && !p.refused && !node->candidate && !mcm_signal(node))
                return set_status(
                        b,
                        "In-place update pending; waiting for machine-controller-manager to mark the "
                        "node %s.",
                        NODE_LABEL_CANDIDATE);
        return start_transaction(b, &p, attempt);
}

static void adopt_baseline(Builder *b) {
        const OscDesired *osc = b->in->osc;
        UpdateTransaction *tx = b->tx;

        /* A refused OSC carries no rotation times to take as the baseline. */
        if (tx->applied.valid || !osc || osc->refused || isempty(osc->checksum) ||
            !streq_ptr(b->in->node->applied_checksum, osc->checksum))
                return;
        tx->applied.checksum = b_strdup(b, osc->checksum);
        tx->applied.ca_rotation = b_strdup(b, osc->ca_rotation);
        tx->applied.sa_rotation = b_strdup(b, osc->sa_rotation);
        tx->applied.valid = true;
}

/* Results belong to the Node a transaction started on: a Node deleted and re-created meanwhile (a
 * new uid) was never gated by MCM for it, so it must not receive that transaction's update-result or
 * marker. The record is dropped (the node-level memory stays): what was applied to the machine is
 * running, and the next decision starts from that, against the new Node. */
static int drop_if_node_replaced(Builder *b) {
        UpdateTransaction *tx = b->tx;
        const char *uid = b->in->node->uid;
        _cleanup_free_ char *old_id = NULL, *old_uid = NULL;
        int r;

        if (!tx->id || !tx->node_uid || !uid || streq(tx->node_uid, uid))
                return 0;
        old_id = strdup(tx->id);
        old_uid = strdup(tx->node_uid);
        if (!old_id || !old_uid)
                return -ENOMEM;
        r = reset_transaction(tx);
        if (r < 0)
                return r;
        free(tx->marker); /* set on the old Node object, not on this one */
        tx->marker = NULL;
        free(b->notice);
        if (asprintf(&b->notice,
                     "Node was re-created (uid %s, was %s); in-place update %s dropped without "
                     "reporting on the new Node.",
                     uid, old_uid, old_id) < 0) {
                b->notice = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* A transaction of a fresh node's first OSC started before its Node: the Node that appeared is its
 * Node from now on (its results go there, and a re-creation of it drops the transaction). */
static int adopt_node(Builder *b) {
        UpdateTransaction *tx = b->tx;

        if (!tx->before_node || tx->node_uid || b->no_node || !b->in->node->uid)
                return 0;
        return free_and_strdup(&tx->node_uid, b->in->node->uid) < 0 ? -ENOMEM : 0;
}

/* Upstream applies a fresh node's first OSC before the Node exists: the kubelet that registers it
 * comes with that OSC (docs/node-protocol.md §2.3). So without a Node only that goes on: the transaction it
 * started until applied (retried while it fails), or a new one while nothing was ever applied here.
 * Anything else (a Node deleted, a later OSC) waits for the Node. */
static bool acts_without_node(const Builder *b) {
        const UpdateTransaction *tx = b->tx;

        if (tx_active(tx))
                return tx->before_node;
        /* The way back is the node's own work; only its report waits for the Node. */
        if (tx->id && tx->before_node && kubelet_rollback_due(b) &&
            !(done(b, UPDATE_STEP_ROLLBACK_KUBELET) && done(b, UPDATE_STEP_ROLLBACK_RESTART)))
                return true;
        if (tx->id && tx->before_node && tx->phase == UPDATE_PHASE_SUCCEEDED)
                return false; /* applied: what is left is for the Node */
        return b->in->osc && b->in->first_osc && !tx->applied.valid;
}

/* The first OSC ran without the Node: its result, checksum and Event wait for the Node, which the
 * OSC's kubelet registers. One that does not come is said, not waited for in silence. */
static int first_osc_waits(Builder *b) {
        const UpdateTransaction *tx = b->tx;
        uint64_t timeout = b->in->settings.node_registration_timeout_usec ?: NODE_REGISTRATION_TIMEOUT_USEC;
        _cleanup_free_ char *what = NULL;
        char d[DURATION_MAX_STR];

        if (tx->phase == UPDATE_PHASE_SUCCEEDED)
                what = b_printf(b, "The first OSC %s is applied", strempty(tx->checksum));
        else
                what = b_printf(b, "The first OSC %s %s (%s: %s)", strempty(tx->checksum),
                                tx->phase == UPDATE_PHASE_ROLLED_BACK ? "was rolled back" : "failed",
                                strempty(update_failure_code_to_string(tx->failure.code)),
                                strempty(tx->failure.message));
        if (!what)
                return -ENOMEM;
        if (b->in->now_usec < tx->updated_usec + timeout) {
                wake_at(b, tx->updated_usec + timeout);
                return set_status(b,
                                  "%s; waiting for the kubelet to register the Node (%s and the result are "
                                  "written to it then).",
                                  what, NODE_ANNOTATION_CHECKSUM);
        }
        free(b->notice);
        b->notice = b_printf(b,
                             "%s, but the Node is still not registered %s later: the kubelet does not "
                             "register it (see %s: its bootstrap kubeconfig, the API server).",
                             what, format_duration(d, sizeof(d), timeout),
                             strempty(b->in->settings.kubelet_unit));
        return b->notice ? set_status(b, "%s", b->notice) : -ENOMEM;
}

static int wait_for_node(Builder *b) {
        const UpdateTransaction *tx = b->tx;

        if (tx->id && tx->before_node && update_phase_is_terminal(tx->phase) && !done(b, UPDATE_STEP_RESULT))
                return first_osc_waits(b);
        if (tx_active(tx))
                return set_status(b, "In-place update %s (%s) waits for the Node, which does not exist.",
                                  tx_id(b), update_phase_to_string(tx->phase));
        if (!b->in->osc)
                return set_status(b, "Waiting for the OSC secret; the Node is not registered yet.");
        return set_status(b,
                          "Waiting for the Node to be registered (without it, only a fresh node's first OSC "
                          "is applied).");
}

static int decide(Builder *b) {
        const UpdateInput *in = b->in;
        UpdateTransaction *tx = b->tx;
        int r;

        if (!in->node)
                return set_status(b, "Waiting for the Node object.");
        if (b->no_node && !acts_without_node(b))
                return wait_for_node(b);
        r = drop_if_node_replaced(b);
        if (r >= 0)
                r = adopt_node(b);
        if (r < 0)
                return r;
        adopt_baseline(b);

        if (tx_active(tx)) {
                /* Nothing applied yet and the desired state moved: start over from the new one. */
                if (in->osc && !streq_ptr(tx->checksum, in->osc->checksum) &&
                    tx->phase < UPDATE_PHASE_APPLYING) {
                        r = transition(b, UPDATE_EVENT_CANCEL);
                        if (r < 0)
                                return r;
                        r = reset_transaction(tx);
                        if (r < 0)
                                return r;
                } else
                        return resume(b);
        }
        if (!in->osc)
                return set_status(b, "Waiting for the OSC secret.");

        if (tx->id && update_phase_is_terminal(tx->phase)) {
                terminal_chores(b);
                if (b->n_actions > 0 || b->deferred)
                        return 0;
                if (tx->phase == UPDATE_PHASE_FAILED &&
                    update_failure_is_retriable(tx->failure.code, tx->failure.message))
                        (void) retry_due(b); /* sets the wake-up */
        }
        return start(b);
}

static int default_status(Builder *b) {
        const UpdateAction *first = NULL;

        if (b->status)
                return 0;
        for (size_t i = 0; i < b->n_actions && !first; i++)
                if (!update_action_is_best_effort(b->actions[i].type))
                        first = &b->actions[i];
        if (b->tx->id && b->n_actions > 0)
                return set_status(b, "%s: in-place update %s, %s.", update_phase_to_string(b->tx->phase),
                                  tx_id(b),
                                  update_action_type_to_string(first ? first->type : b->actions[0].type));
        return set_status(b, "%s.", b->tx->id ? update_phase_to_string(b->tx->phase) : "Idle");
}

int node_update_decide(const UpdateInput *in, UpdateDecision *ret) {
        static const NodeView no_node = {};
        _cleanup_(builder_done) Builder b = { .in = in, .wake_usec = USEC_INFINITY };
        UpdateInput without_node;
        int r;

        assert(in);
        assert(ret);

        /* No Node: every reader sees an empty one (no labels, no gate, no checksum), nothing writes. */
        if (!in->node && in->node_absent) {
                without_node = *in;
                without_node.node = &no_node;
                b.in = &without_node;
                b.no_node = true;
        }

        r = in->tx ? update_transaction_copy(in->tx, &b.tx) : update_transaction_new(&b.tx);
        if (r < 0)
                return r;

        r = decide(&b);
        if (r < 0)
                return r;
        if (b.error < 0)
                return b.error;
        r = default_status(&b);
        if (r < 0)
                return r;

        *ret = (UpdateDecision) {
                .tx = TAKE_PTR(b.tx),
                .actions = TAKE_PTR(b.actions),
                .n_actions = b.n_actions,
                .wake_usec = b.wake_usec,
                .status = TAKE_PTR(b.status),
                .notice = TAKE_PTR(b.notice),
        };
        b.n_actions = 0;
        return 0;
}
