/* SPDX-License-Identifier: Apache-2.0 */
/* The update engine against a simulated node: a tiny executor runs the decided actions, applies their
 * effects to a fake Node/OS (labels, annotations, kubelet symlink, os-release, boot id), persists the
 * transaction through state-file after every step and re-reads it before every decision, exactly as
 * the manager will. Scenarios are docs/node-protocol.md §9 and docs/contract.md §5/§8, expressed as input ->
 * phases
 * + actions. */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/node-update.h"
#include "core/state-codec.h"
#include "tests.h"

#define T0 (1740823200ULL * USEC_PER_SEC) /* 2025-03-01T10:00:00Z */
#define LOG_MAX (256 * 1024)

typedef enum Outcome {
        OUTCOME_OK,
        OUTCOME_FAIL,
        OUTCOME_CRASH,       /* the agent dies during the action (reboot, self-restart) */
        OUTCOME_INTERRUPTED, /* the agent dies before the action completed (no effect, no feedback) */
        OUTCOME_DIED_AFTER,  /* the action completed, then the agent died before reporting it */
} Outcome;

typedef enum OsEffect {
        OS_EFFECT_NONE,       /* the command exits 0, nothing visible yet (it will reboot "later") */
        OS_EFFECT_IN_PLACE,   /* provider-local: os-release changes at once, no reboot */
        OS_EFFECT_REBOOT_NEW, /* the command reboots into the new version (agent killed) */
        OS_EFFECT_REBOOT_OLD, /* it reboots, but the OS rolls back */
} OsEffect;

typedef struct World World;
typedef Outcome (*Policy)(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg);

typedef struct Failing {
        UpdateActionType action;
        const char *kubelet_version; /* NULL: at any version */
        UpdateFailureCode code;
        const char *message;
} Failing;

struct World {
        NodeView *node;
        OscDesired *osc;
        char *os_version;
        char *kubelet_version;
        char *boot_id;
        char *staged_os;
        unsigned boots;
        UpdateSettings settings;
        uint64_t now;
        unsigned ids;
        Policy policy;
        Failing failing; /* for policy_failing (world_fails()) */
        OsEffect os_effect;
        bool crash_after_each_action; /* "kill the agent" after every single action */
        bool no_node;                 /* the Node does not exist (node_absent; w->node is not shown) */
        bool registers_at_apply;      /* the OSC's kubelet registers the Node when ApplyOSC starts it */
        bool osc_committed;           /* an OSC was committed as last applied: no first OSC any more */
        bool reboot_rolls_back;
        bool kubelet_unknown; /* with kubelet_version NULL: binaryPath exists, its version unknown */
        unsigned pods_deleted;
        char work[LOG_MAX];   /* actions other than reports, in order */
        char phases[LOG_MAX]; /* phases as published (progress/result) */
        char events[LOG_MAX]; /* Events emitted */
        char seen[LOG_MAX];   /* tracked actions, to catch repeats */
        UpdateDecision last;  /* the last decision (for status/wake checks) */
        char *saved;          /* the state.json document "on disk" */
        /* The OSC runner: work of `osc_work_checksum` until ApplyOSC commits it. */
        char *osc_work_checksum;
        OscWorkView osc_work;
        json_t *osc_plan;
};

static void set(char **field, const char *value) {
        free(*field);
        *field = value ? strdup(value) : NULL;
        if (value)
                assert_non_null(*field);
}

_printf_(2, 3) static void logf_(char *buf, const char *format, ...) {
        size_t n = strlen(buf);
        va_list ap;

        va_start(ap, format);
        vsnprintf(buf + n, LOG_MAX - n, format, ap);
        va_end(ap);
}

static World *world_new(void) {
        World *w = calloc(1, sizeof(World));

        assert_non_null(w);
        w->node = calloc(1, sizeof(NodeView));
        w->osc = calloc(1, sizeof(OscDesired));
        assert_non_null(w->node);
        assert_non_null(w->osc);
        set(&w->node->name, "node-1");
        set(&w->node->uid, "uid-1");
        set(&w->os_version, "1592.6");
        set(&w->kubelet_version, "1.31.4");
        set(&w->boot_id, "boot-0");
        w->settings = (UpdateSettings) {
                .backend = OS_UPDATE_BACKEND_COMMAND,
                .reboot = REBOOT_METHOD_LOGIN1,
                .kubelet_unit = "kubelet.service",
        };
        w->now = T0;
        return w;
}

static void world_free(World *w) {
        free(w->saved);
        node_view_free(w->node);
        osc_desired_free(w->osc);
        free(w->os_version);
        free(w->kubelet_version);
        free(w->boot_id);
        free(w->staged_os);
        free(w->osc_work_checksum);
        json_decref(w->osc_plan);
        update_decision_done(&w->last);
        free(w);
}

/* An in-place pool's OSC (docs/node-protocol.md §2.1), already applied on this node unless `fresh`. */
static void world_osc(World *w, const char *checksum, const char *os, const char *kubelet) {
        char image[128];

        set(&w->osc->checksum, checksum);
        w->osc->in_place = true;
        set(&w->osc->os_version, os);
        set(&w->osc->kubelet_version, kubelet);
        set(&w->osc->os_update_command, "/opt/gardener/bin/inplace-update.sh");
        strv_freep(&w->osc->os_update_args);
        w->osc->os_update_args = calloc(2, sizeof(char *));
        w->osc->os_update_args[0] = strdup(os ? os : "");
        w->osc->kubelet_file_found = true;
        snprintf(image, sizeof(image), "registry.example.com/hyperkube:v%s", kubelet);
        set(&w->osc->kubelet_image, image);
        set(&w->osc->kubelet_file_in_image, "/kubelet");
}

/* The current OSC has files/units work (osc_runner_prepare() found it not committed). */
static void world_osc_work(World *w, bool gated, bool restarts_kubelet) {
        set(&w->osc_work_checksum, w->osc->checksum);
        w->osc_work = (OscWorkView) { .pending = true,
                                      .gated = gated,
                                      .restarts_kubelet = restarts_kubelet,
                                      .error_code = _UPDATE_FAILURE_INVALID };
        json_decref(w->osc_plan);
        w->osc_plan = json_pack("{s:[s], s:[{s:s, s:s}]}", "inPlace", gated ? "kubeletConfig" : "x", "items",
                                "action", "write-file", "target", "/var/lib/kubelet/config/kubelet");
        w->osc_work.plan = w->osc_plan;
}

static void world_applied(World *w, const char *checksum) {
        set(&w->node->applied_checksum, checksum);
}

static void world_ready(World *w, const char *transition_time) {
        w->node->in_place_update.present = true;
        set(&w->node->in_place_update.status, "True");
        set(&w->node->in_place_update.reason, NODE_REASON_READY_FOR_UPDATE);
        set(&w->node->in_place_update.last_transition_time, transition_time);
}

/* "Disk" is the state.json encoding kept in memory: every decision goes through exactly what is
 * persisted (core/state-codec.c), without paying an fsync per step (test-state-file.c covers the
 * file itself). */
static UpdateTransaction *load_tx(World *w) {
        UpdateTransaction *tx = NULL;
        char *err = NULL;
        int r;

        if (!w->saved)
                return NULL;
        r = state_codec_decode(w->saved, strlen(w->saved), &tx, &err);
        if (r < 0)
                fail_msg("state_codec_decode: %d %s", r, strempty(err));
        return tx;
}

static void save_tx(World *w, const UpdateTransaction *tx) {
        free(w->saved);
        w->saved = NULL;
        assert_int_equal(state_codec_encode(tx, &w->saved), 0);
}

static UpdateTransaction *current_tx(World *w) {
        UpdateTransaction *tx = load_tx(w);
        assert_non_null(tx);
        return tx;
}

static UpdatePhase current_phase(World *w) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = load_tx(w);
        return tx ? tx->phase : UPDATE_PHASE_IDLE;
}

/* What must hold between the persisted record and any decision made from it. */
static void check_invariants(const UpdateTransaction *old, const UpdateDecision *d) {
        const UpdateTransaction *new = d->tx;
        bool old_active =
                old && old->id && old->phase != UPDATE_PHASE_IDLE && !update_phase_is_terminal(old->phase);

        if (old && old->id && streq_ptr(old->id, new->id)) {
                /* phases only move forward within a transaction */
                if (!(new->phase >= old->phase ||
                      (old->phase == UPDATE_PHASE_ROLLED_BACK && new->phase == UPDATE_PHASE_FAILED)))
                        fail_msg("%s went back from %s to %s", old->id, update_phase_to_string(old->phase),
                                 update_phase_to_string(new->phase));
        } else if (old_active && old->phase >= UPDATE_PHASE_APPLYING && !d->notice)
                /* (a transaction of a Node that was re-created is dropped, and says so) */
                fail_msg("%s was replaced in %s: two transactions at once", old->id,
                         update_phase_to_string(old->phase));
        /* a batch belongs to one transaction and one phase */
        for (size_t i = 0; i < d->n_actions; i++) {
                const UpdateAction *a = &d->actions[i];
                if (a->transaction) {
                        assert_string_equal(a->transaction, new->id);
                        assert_int_equal(a->phase, new->phase);
                }
        }
}

static void decide(World *w, UpdateDecision *d) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = load_tx(w);
        char id[32];
        UpdateInput in;

        snprintf(id, sizeof(id), "tx-%u", w->ids + 1);
        in = (UpdateInput) {
                .tx = tx,
                .node = w->no_node ? NULL : w->node,
                .node_absent = w->no_node,
                .first_osc = !w->osc_committed,
                .osc = w->osc,
                .os_version = w->os_version,
                .os_version_error = "unable to find version",
                .kubelet_version = w->kubelet_version,
                .kubelet_absent = !w->kubelet_version && !w->kubelet_unknown,
                .boot_id = w->boot_id,
                .new_transaction_id = id,
                .osc_work = { .error_code = _UPDATE_FAILURE_INVALID },
                .settings = w->settings,
                .now_usec = w->now,
        };
        /* Like the runner: work only for the OSC it was prepared for, until committed. */
        if (w->osc && streq_ptr(w->osc->checksum, w->osc_work_checksum) &&
            !streq_ptr(w->node->applied_checksum, w->osc->checksum))
                in.osc_work = w->osc_work;
        assert_int_equal(node_update_decide(&in, d), 0);
        assert_non_null(d->tx);
        assert_non_null(d->status);
        check_invariants(tx, d);
        if (d->tx->id && streq(d->tx->id, id))
                w->ids++;
}

static void reboot(World *w) {
        char b[32];

        snprintf(b, sizeof(b), "boot-%u", ++w->boots);
        set(&w->boot_id, b);
}

static const char *version_of(const UpdateAction *a) {
        return a->version ? a->version : a->unit ? a->unit : a->checksum ? a->checksum : "";
}

/* Applies what a successful action does to the world. Returns OUTCOME_CRASH when it kills us. */
static bool writes_node(UpdateActionType t) {
        return t == UPDATE_ACTION_PUBLISH_PLAN || t == UPDATE_ACTION_REPORT_PROGRESS ||
                t == UPDATE_ACTION_EMIT_EVENT || t == UPDATE_ACTION_SET_MARKER ||
                t == UPDATE_ACTION_DELETE_PODS || t == UPDATE_ACTION_REPORT_RESULT ||
                t == UPDATE_ACTION_SET_CHECKSUM;
}

static Outcome effects(World *w, const UpdateAction *a) {
        NodeView *n = w->node;

        if (w->no_node && writes_node(a->type))
                fail_msg("%s without a Node (work log: %s)", update_action_type_to_string(a->type), w->work);
        switch (a->type) {
        case UPDATE_ACTION_PUBLISH_PLAN: {
                char *s = json_dumps(a->json, JSON_COMPACT);
                set(&n->plan, s);
                free(s);
                break;
        }
        case UPDATE_ACTION_REPORT_PROGRESS:
                logf_(w->phases, "%s ", json_string_value(json_object_get(a->json, "phase")));
                break;
        case UPDATE_ACTION_EMIT_EVENT:
                logf_(w->events, "%s ", a->event_reason);
                break;
        case UPDATE_ACTION_SET_MARKER:
                set(&n->updating_os_version, a->version);
                break;
        case UPDATE_ACTION_SWITCH_KUBELET:
        case UPDATE_ACTION_ROLLBACK_KUBELET:
                set(&w->kubelet_version, a->version);
                break;
        case UPDATE_ACTION_RUN_OS_COMMAND:
                /* the fake command installs the version it is given (inplace-update.sh <version>) */
                switch (w->os_effect) {
                case OS_EFFECT_IN_PLACE:
                        set(&w->os_version, a->args ? a->args[0] : NULL);
                        break;
                case OS_EFFECT_REBOOT_NEW:
                        set(&w->os_version, a->args ? a->args[0] : NULL);
                        reboot(w);
                        return OUTCOME_CRASH;
                case OS_EFFECT_REBOOT_OLD:
                        reboot(w);
                        return OUTCOME_CRASH;
                default:
                        break;
                }
                break;
        case UPDATE_ACTION_INSTALL_OS_IMAGE:
                set(&w->staged_os, a->version);
                break;
        case UPDATE_ACTION_REBOOT:
                if (!w->reboot_rolls_back)
                        set(&w->os_version, w->staged_os);
                reboot(w);
                return OUTCOME_CRASH;
        case UPDATE_ACTION_DELETE_PODS:
                w->pods_deleted++;
                break;
        case UPDATE_ACTION_REPORT_RESULT: {
                logf_(w->phases, "%s ", json_string_value(json_object_get(a->json, "phase")));
                if (a->result == NODE_UPDATE_RESULT_SUCCESSFUL)
                        set(&n->update_result_value, "successful");
                else if (a->result == NODE_UPDATE_RESULT_FAILED)
                        set(&n->update_result_value, "failed");
                if (a->result != NODE_UPDATE_RESULT_NONE)
                        n->update_result = a->result;
                if (a->result == NODE_UPDATE_RESULT_FAILED && !a->keep_reason)
                        set(&n->update_failed_reason, a->reason);
                if (a->clear_marker) {
                        set(&n->updating_os_version, NULL);
                        set(&n->update_failed_reason, NULL);
                }
                if (a->failure) {
                        char *s = json_dumps(a->failure, JSON_COMPACT);
                        set(&n->failure, s);
                        free(s);
                } else
                        set(&n->failure, NULL);
                break;
        }
        case UPDATE_ACTION_APPLY_OSC:
                assert_string_equal(a->checksum, w->osc_work_checksum);
                w->osc_work.pending = false; /* committed as last applied */
                w->osc_committed = true;
                if (w->registers_at_apply)
                        w->no_node = false; /* its kubelet.service started the kubelet */
                break;
        case UPDATE_ACTION_SET_CHECKSUM:
                /* The promise: never a checksum whose files and units are not applied. */
                if (streq_ptr(a->checksum, w->osc_work_checksum) && w->osc_work.pending)
                        fail_msg("SetChecksum(%s) before its OSC work was applied", a->checksum);
                set(&n->applied_checksum, a->checksum);
                set(&n->kubernetes_version, a->version);
                break;
        default:
                break;
        }
        return OUTCOME_OK;
}

static void log_action(World *w, const UpdateAction *a, Outcome o) {
        char key[256];

        if (!update_action_is_best_effort(a->type)) {
                if (a->type == UPDATE_ACTION_REPORT_RESULT)
                        logf_(w->work, "ReportResult(%s) ", node_update_result_to_string(a->result));
                else if (a->type == UPDATE_ACTION_SET_CHECKSUM)
                        logf_(w->work, "SetChecksum(%s) ", a->checksum);
                else if (a->type == UPDATE_ACTION_ROTATE_CREDENTIALS)
                        logf_(w->work, "RotateCredentials(%s%s%s) ", a->rotate_ca ? "ca" : "",
                              a->rotate_ca && a->rotate_sa ? "," : "", a->rotate_sa ? "sa" : "");
                else if (a->type == UPDATE_ACTION_SET_MARKER || a->type == UPDATE_ACTION_STAGE_KUBELET ||
                         a->type == UPDATE_ACTION_SWITCH_KUBELET ||
                         a->type == UPDATE_ACTION_ROLLBACK_KUBELET ||
                         a->type == UPDATE_ACTION_RESTART_UNIT || a->type == UPDATE_ACTION_STOP_UNIT ||
                         a->type == UPDATE_ACTION_STAGE_OS_IMAGE ||
                         a->type == UPDATE_ACTION_INSTALL_OS_IMAGE)
                        logf_(w->work, "%s(%s) ", update_action_type_to_string(a->type), version_of(a));
                else
                        logf_(w->work, "%s ", update_action_type_to_string(a->type));
                if (o == OUTCOME_FAIL)
                        logf_(w->work, "! ");
        }

        /* A tracked action must never run twice (a failed API write is retried on purpose, and an
         * interrupted idempotent one is run again, a reboot request included; starting the OS change
         * never is). */
        if (o == OUTCOME_FAIL && !update_action_is_best_effort(a->type))
                return;
        if ((o == OUTCOME_INTERRUPTED || o == OUTCOME_DIED_AFTER) &&
            a->type != UPDATE_ACTION_RUN_OS_COMMAND && a->type != UPDATE_ACTION_INSTALL_OS_IMAGE)
                return;
        snprintf(key, sizeof(key), "|%s/%s/%s/%s|", strempty(a->transaction), update_step_to_string(a->step),
                 a->step == UPDATE_STEP_PROGRESS || a->step == UPDATE_STEP_EVENT ?
                         update_phase_to_string(a->phase) :
                         "",
                 a->transaction ? "" : strempty(a->checksum));
        if (strstr(w->seen, key))
                fail_msg("action repeated: %s (work log: %s)", key, w->work);
        logf_(w->seen, "%s", key);
}

static Outcome policy_ok(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg) {
        return OUTCOME_OK;
}

static Outcome policy_failing(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg) {
        const Failing *f = &w->failing;

        if (a->type != f->action ||
            (f->kubelet_version && !streq_ptr(w->kubelet_version, f->kubelet_version)))
                return OUTCOME_OK;
        *code = f->code;
        *msg = f->message;
        return OUTCOME_FAIL;
}

/* The common failure: every run of one action (while the kubelet is at kubelet_version, when given) fails
 * with this code (_UPDATE_FAILURE_INVALID: the executor passes none) and message. */
static void world_fails(World *w, UpdateActionType action, const char *kubelet_version,
                        UpdateFailureCode code, const char *message) {
        w->failing = (Failing) { action, kubelet_version, code, message };
        w->policy = policy_failing;
}

/* Runs decisions and their actions until nothing is left to do (or the budget runs out). */
static void run(World *w) {
        for (unsigned cycle = 0; cycle < 200; cycle++) {
                UpdateDecision d = {};
                bool stop = false;

                w->now += USEC_PER_SEC;
                decide(w, &d);
                save_tx(w, d.tx);
                if (d.n_actions == 0) {
                        update_decision_done(&w->last);
                        w->last = d;
                        return;
                }
                for (size_t i = 0; i < d.n_actions && !stop; i++) {
                        const UpdateAction *a = &d.actions[i];
                        UpdateFailureCode code = _UPDATE_FAILURE_INVALID;
                        const char *msg = NULL;
                        Outcome o = (w->policy ?: policy_ok)(w, a, &code, &msg);

                        w->now += USEC_PER_SEC;
                        if (o == OUTCOME_OK)
                                o = effects(w, a);
                        else if (o == OUTCOME_DIED_AFTER)
                                (void) effects(w, a);
                        log_action(w, a, o);
                        switch (o) {
                        case OUTCOME_CRASH:
                        case OUTCOME_INTERRUPTED:
                        case OUTCOME_DIED_AFTER:
                                stop = true; /* nothing is reported; the state on disk is what survives */
                                break;
                        case OUTCOME_OK:
                                assert_int_equal(node_update_action_done(d.tx, a, w->now), 0);
                                save_tx(w, d.tx);
                                break;
                        case OUTCOME_FAIL:
                                assert_int_equal(node_update_action_failed(d.tx, a, code, msg, w->now), 0);
                                save_tx(w, d.tx);
                                stop = !update_action_is_best_effort(a->type);
                                break;
                        }
                        if (w->crash_after_each_action)
                                stop = true;
                }
                update_decision_done(&d);
        }
        fail_msg("no quiescence; work log: %s", w->work);
}

static void assert_log(const char *what, const char *got, const char *expected) {
        if (!streq(got, expected))
                fail_msg("%s:\n  got      \"%s\"\n  expected \"%s\"", what, got, expected);
}

static void clear_logs(World *w) {
        w->work[0] = w->phases[0] = w->events[0] = '\0';
}

/* ---------------------------------------------------------------------------------------------- */

static void test_names(void **state) {
        for (UpdatePhase p = 0; p < _UPDATE_PHASE_MAX; p++) {
                assert_non_null(update_phase_to_string(p));
                assert_int_equal(update_phase_from_string(update_phase_to_string(p)), p);
        }
        for (UpdateEvent e = 0; e < _UPDATE_EVENT_MAX; e++) {
                assert_non_null(update_event_to_string(e));
                assert_int_equal(update_event_from_string(update_event_to_string(e)), e);
        }
        for (UpdateStep s = 0; s < _UPDATE_STEP_MAX; s++) {
                assert_non_null(update_step_to_string(s));
                assert_int_equal(update_step_from_string(update_step_to_string(s)), s);
        }
        for (UpdateActionType t = 0; t < _UPDATE_ACTION_MAX; t++)
                assert_non_null(update_action_type_to_string(t));
        for (UpdateFailureCode c = 0; c < _UPDATE_FAILURE_MAX; c++) {
                assert_non_null(update_failure_code_to_string(c));
                assert_int_equal(update_failure_code_from_string(update_failure_code_to_string(c)), c);
        }
        /* docs/contract.md §5 and §8.9 spell these exactly. */
        assert_string_equal(update_phase_to_string(UPDATE_PHASE_WAITING_FOR_DRAIN), "WaitingForDrain");
        assert_string_equal(update_phase_to_string(UPDATE_PHASE_ROLLED_BACK), "RolledBack");
        assert_string_equal(update_failure_code_to_string(UPDATE_FAILURE_OS_ROLLED_BACK), "OSRolledBack");
        assert_string_equal(update_failure_code_to_string(UPDATE_FAILURE_MIN_VERSION_NOT_MET),
                            "MinVersionNotMet");
        assert_string_equal(update_failure_code_to_string(UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED),
                            "CredentialsRotationFailed");
        assert_string_equal(update_failure_code_to_string(UPDATE_FAILURE_BOOTSTRAP_FAILED),
                            "BootstrapFailed");
        assert_int_equal(update_failure_code_from_string("BootstrapFailed"),
                         UPDATE_FAILURE_BOOTSTRAP_FAILED);
        assert_null(update_phase_to_string(_UPDATE_PHASE_MAX));
        assert_null(update_phase_to_string(_UPDATE_PHASE_INVALID));
        assert_int_equal(update_phase_from_string("idle"), -EINVAL);
}

static void test_transition_table(void **state) {
        static const UpdateEvent happy_gated[] = {
                UPDATE_EVENT_PLAN,  UPDATE_EVENT_STAGE,  UPDATE_EVENT_STAGED,   UPDATE_EVENT_SELECTED,
                UPDATE_EVENT_READY, UPDATE_EVENT_REBOOT, UPDATE_EVENT_REBOOTED, UPDATE_EVENT_HEALTHY,
        };
        static const UpdatePhase happy_phases[] = {
                UPDATE_PHASE_PLANNED,           UPDATE_PHASE_STAGING,   UPDATE_PHASE_STAGED,
                UPDATE_PHASE_WAITING_FOR_DRAIN, UPDATE_PHASE_APPLYING,  UPDATE_PHASE_REBOOTING,
                UPDATE_PHASE_VERIFYING,         UPDATE_PHASE_SUCCEEDED,
        };
        UpdatePhase p = UPDATE_PHASE_IDLE;

        for (size_t i = 0; i < ELEMENTSOF(happy_gated); i++) {
                assert_int_equal(node_update_next(p, happy_gated[i], &p), 0);
                assert_int_equal(p, happy_phases[i]);
        }

        /* the ungated path: Staging -> Applying -> Verifying -> Succeeded */
        p = UPDATE_PHASE_IDLE;
        assert_int_equal(node_update_next(p, UPDATE_EVENT_BEGIN, &p), 0);
        assert_int_equal(p, UPDATE_PHASE_STAGING);
        assert_int_equal(node_update_next(p, UPDATE_EVENT_READY, &p), 0);
        assert_int_equal(node_update_next(p, UPDATE_EVENT_APPLIED, &p), 0);
        assert_int_equal(node_update_next(p, UPDATE_EVENT_HEALTHY, &p), 0);
        assert_int_equal(p, UPDATE_PHASE_SUCCEEDED);

        /* out-of-order events are rejected and leave *ret alone */
        p = UPDATE_PHASE_STAGING;
        assert_int_equal(node_update_next(UPDATE_PHASE_IDLE, UPDATE_EVENT_HEALTHY, &p), -EBADR);
        assert_int_equal(node_update_next(UPDATE_PHASE_STAGED, UPDATE_EVENT_REBOOTED, &p), -EBADR);
        assert_int_equal(node_update_next(UPDATE_PHASE_PLANNED, UPDATE_EVENT_READY, &p), -EBADR);
        assert_int_equal(p, UPDATE_PHASE_STAGING);

        /* terminal phases accept nothing but "the rollback itself failed" and "a success not reported
         * yet failed its verification again after a reboot"; nothing moves backwards */
        for (UpdatePhase t = UPDATE_PHASE_SUCCEEDED; t < _UPDATE_PHASE_MAX; t++)
                for (UpdateEvent e = 0; e < _UPDATE_EVENT_MAX; e++) {
                        UpdatePhase n;
                        int r = node_update_next(t, e, &n);
                        if ((t == UPDATE_PHASE_ROLLED_BACK && e == UPDATE_EVENT_FAILED) ||
                            (t == UPDATE_PHASE_SUCCEEDED && e == UPDATE_EVENT_UNVERIFIED))
                                assert_int_equal(r, 0);
                        else
                                assert_int_equal(r, -EBADR);
                }
        for (UpdatePhase f = 0; f < _UPDATE_PHASE_MAX; f++)
                for (UpdateEvent e = 0; e < _UPDATE_EVENT_MAX; e++) {
                        UpdatePhase n;
                        /* RolledBack -> Failed: both terminal, the rollback itself failed */
                        if (node_update_next(f, e, &n) == 0 && e != UPDATE_EVENT_CANCEL)
                                assert_true(n > f ||
                                            (f == UPDATE_PHASE_ROLLED_BACK && n == UPDATE_PHASE_FAILED));
                }
        /* CANCEL only before anything was applied */
        assert_int_equal(node_update_next(UPDATE_PHASE_APPLYING, UPDATE_EVENT_CANCEL, &p), -EBADR);
        assert_int_equal(node_update_next(UPDATE_PHASE_WAITING_FOR_DRAIN, UPDATE_EVENT_CANCEL, &p), 0);
        assert_int_equal(p, UPDATE_PHASE_IDLE);
}

static void test_progress_budget(void **state) {
        const UpdatePhase S = UPDATE_PHASE_STAGING;

        assert_true(progress_should_write(_UPDATE_PHASE_INVALID, 0, 0, S, 0, T0));     /* first write */
        assert_true(progress_should_write(S, 50, T0, UPDATE_PHASE_STAGED, 50, T0));    /* phase change */
        assert_false(progress_should_write(S, 10, T0, S, 90, T0 + 9 * USEC_PER_SEC));  /* < 10 s */
        assert_false(progress_should_write(S, 10, T0, S, 19, T0 + 60 * USEC_PER_SEC)); /* < 10 % */
        assert_true(progress_should_write(S, 10, T0, S, 20, T0 + 10 * USEC_PER_SEC));
        assert_true(progress_should_write(S, 90, T0, S, 80, T0 + 10 * USEC_PER_SEC)); /* either direction */
}

static void test_failure_classes(void **state) {
        assert_true(update_failure_is_retriable(UPDATE_FAILURE_ARTIFACT_UNAVAILABLE, NULL));
        assert_true(update_failure_is_retriable(UPDATE_FAILURE_DISK_SPACE, "x"));
        assert_true(update_failure_is_retriable(
                UPDATE_FAILURE_OS_COMMAND_FAILED,
                "retriable error detected: exit status 3, output: Network Problems"));
        assert_false(update_failure_is_retriable(UPDATE_FAILURE_OS_COMMAND_FAILED, "system failure"));
        assert_false(update_failure_is_retriable(UPDATE_FAILURE_OS_COMMAND_FAILED, NULL));
        assert_false(update_failure_is_retriable(UPDATE_FAILURE_DIGEST_MISMATCH, "network problems"));
        assert_false(update_failure_is_retriable(UPDATE_FAILURE_MIN_VERSION_NOT_MET, NULL));
        assert_false(update_failure_is_retriable(_UPDATE_FAILURE_INVALID, NULL));
}

static void test_json_formats(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        UpdateSettings s = { .backend = OS_UPDATE_BACKEND_COMMAND, .kubelet_unit = "kubelet.service" };
        char *plan, *progress, *failure;
        json_t *j;

        assert_int_equal(update_transaction_new(&tx), 0);
        tx->id = strdup("tx-7");
        tx->phase = UPDATE_PHASE_STAGING;
        tx->kubelet_from = strdup("1.31.4");
        tx->kubelet_to = strdup("1.32.1");
        tx->os_from = strdup("1592.6");
        tx->os_to = strdup("1592.7");
        tx->checksum = strdup("c");
        tx->gated = true;

        j = update_plan_json(tx, &s, NULL);
        plan = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        assert_string_equal(plan,
                            "[{\"action\":\"kubelet\",\"from\":\"1.31.4\",\"to\":\"1.32.1\"},"
                            "{\"action\":\"restart\",\"unit\":\"kubelet.service\"},"
                            "{\"action\":\"os\",\"from\":\"1592.6\",\"to\":\"1592.7\"},"
                            "{\"action\":\"reboot\"}]");
        free(plan);

        j = update_progress_json(tx, "stage-kubelet", 1024, 4096, 25, T0);
        progress = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        assert_string_equal(progress,
                            "{\"transaction\":\"tx-7\",\"phase\":\"Staging\",\"step\":\"stage-kubelet\","
                            "\"bytesDone\":1024,\"bytesTotal\":4096,\"percent\":25,"
                            "\"updated\":\"2025-03-01T10:00:00Z\"}");
        free(progress);

        assert_null(update_failure_json(tx));
        tx->attempt = 2;
        tx->failure = (UpdateFailure) { .code = UPDATE_FAILURE_ARTIFACT_UNAVAILABLE,
                                        .message = strdup("registry said 503"),
                                        .step = strdup("stage-kubelet"),
                                        .attempt = 2 };
        j = update_failure_json(tx);
        failure = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        assert_string_equal(failure,
                            "{\"code\":\"ArtifactUnavailable\",\"class\":\"retriable\",\"step\":"
                            "\"stage-kubelet\",\"attempt\":2,\"transaction\":\"tx-7\",\"message\":"
                            "\"registry said 503\"}");
        free(failure);

        /* percentage: plan + stage + switch + restart + marker + os + units + health + pods + result +
         * checksum */
        assert_int_equal(update_transaction_percent(tx), 0);
        tx->done = (UINT64_C(1) << UPDATE_STEP_PLAN) | (UINT64_C(1) << UPDATE_STEP_STAGE_KUBELET);
        assert_int_equal(update_transaction_percent(tx), 18);
        tx->phase = UPDATE_PHASE_SUCCEEDED;
        assert_int_equal(update_transaction_percent(tx), 100);
}

/* docs/contract.md §5 row 1: a kubelet patch needs no gate: Staging -> Applying -> (Verifying) -> Succeeded,
 * and (docs/contract.md §8.4) never touches update-result. */
static void test_ungated_kubelet_patch(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.5");
        world_applied(w, "c0");
        run(w);

        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.31.5) SwitchKubelet(1.31.5) "
                   "RestartUnit(kubelet.service) CheckOSCUnits CheckKubeletHealth "
                   "ReportResult(none) SetChecksum(c1) ");
        assert_log("phases", w->phases, "Staging Applying Verifying Succeeded ");
        assert_log("events", w->events, "InPlaceUpdateSucceeded ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_null(w->node->update_result_value);
        assert_int_equal(w->pods_deleted, 0);
        assert_string_equal(w->node->applied_checksum, "c1");
        assert_string_equal(w->node->kubernetes_version, "1.31.5");
        assert_string_equal(w->kubelet_version, "1.31.5");
        assert_string_equal(w->node->plan,
                            "[{\"action\":\"kubelet\",\"from\":\"1.31.4\",\"to\":\"1.31.5\"},"
                            "{\"action\":\"restart\",\"unit\":\"kubelet.service\"}]");

        /* Once done, the checksum shortcut keeps the node quiet (docs/contract.md §8.13). */
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_log("phases", w->phases, "");
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 7: in-place work pending but no MCM signal: nothing at all happens.
 * Scenario 34: no Secret: nothing either. */
static void test_gated_work_waits(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.32.1");
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, "");
        assert_log("phases", w->phases, "");
        assert_null(w->node->update_result_value);
        assert_string_equal(w->node->applied_checksum, "c0");
        assert_non_null(strstr(w->last.status, "candidate-for-update"));
        {
                _cleanup_(update_transaction_freep) UpdateTransaction *tx = current_tx(w);
                assert_null(tx->id); /* the record holds no transaction */
        }

        osc_desired_free(w->osc);
        w->osc = NULL;
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(strstr(w->last.status, "OSC"));
        w->osc = calloc(1, sizeof(OscDesired));
        world_free(w);
}

/* docs/contract.md §5 rows 2-4 with docs/node-protocol.md §9 scenario 11: candidate -> plan + pre-stage;
 * selected
 * -> wait for the
 * drain; ReadyForUpdate -> apply, reboot, verify, delete Pods, report successful, set checksum. */
static void test_gated_os_and_kubelet_minor(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan StageKubelet(1.32.1) ");
        assert_log("phases", w->phases, "Planned Staging Staged ");
        assert_log("events", w->events, "InPlaceUpdatePlanned InPlaceUpdateStaged ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_STAGED);
        assert_string_equal(w->kubelet_version, "1.31.4"); /* staged, not active */
        assert_null(w->node->update_result_value);

        clear_logs(w);
        w->node->selected = true;
        run(w);
        assert_log("work", w->work, "");
        assert_log("phases", w->phases, "WaitingForDrain ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_WAITING_FOR_DRAIN);

        /* MCM drained: the command reboots into the new version. */
        clear_logs(w);
        world_ready(w, "2025-03-01T10:04:00Z");
        w->os_effect = OS_EFFECT_REBOOT_NEW;
        run(w);
        assert_log("work", w->work,
                   "SwitchKubelet(1.32.1) RestartUnit(kubelet.service) SetMarker(1592.7) "
                   "RunOsCommand CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        /* After the reboot "Rebooting" is history: the next report is Verifying. */
        assert_log("phases", w->phases, "Applying Verifying Succeeded ");
        assert_log("events", w->events, "InPlaceUpdateSucceeded ");
        assert_int_equal(w->pods_deleted, 1);
        assert_string_equal(w->node->update_result_value, "successful");
        assert_null(w->node->updating_os_version); /* the success patch removes the marker */
        assert_string_equal(w->node->applied_checksum, "c1");
        assert_string_equal(w->node->kubernetes_version, "1.32.1");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 22: the command exits 0 but the node did not reboot yet: wait, no
 * success label, no Pod deletion; scenario 11's provider-local variant: os-release changes at once. */
static void test_command_without_reboot(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work, "PublishPlan SetMarker(1592.7) RunOsCommand ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_REBOOTING);
        assert_int_equal(w->pods_deleted, 0);
        assert_null(w->node->update_result_value);
        assert_string_equal(w->last.status,
                            "stopping reconciliation until gardener-node-agent is restarted after "
                            "the OS update. Current version: \"1592.6\", Desired version: \"1592.7\"");

        /* Deciding again changes nothing (no command re-run). */
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");

        /* The node comes back on the new version. */
        set(&w->os_version, "1592.7");
        reboot(w);
        run(w);
        assert_log("work", w->work,
                   "CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        w->os_effect = OS_EFFECT_IN_PLACE;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_log("phases", w->phases, "Planned Staging Applying Verifying Succeeded ");
        world_free(w);
}

static unsigned command_failures;
static const char *command_message;

static Outcome policy_command_fails(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                    const char **msg) {
        if (a->type != UPDATE_ACTION_RUN_OS_COMMAND || command_failures == 0)
                return OUTCOME_OK;
        command_failures--;
        *code = UPDATE_FAILURE_OS_COMMAND_FAILED;
        *msg = command_message;
        return OUTCOME_FAIL;
}

/* docs/node-protocol.md §9 scenarios 16/17: a failing OS command. Upstream's reason; "network problems" is
 * retriable and
 * retried after a back-off (our own marker does not count as a foreign attempt); anything else is
 * terminal. */
static void test_os_command_failures(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->policy = policy_command_fails;
        w->os_effect = OS_EFFECT_IN_PLACE;
        command_failures = 1;
        command_message = "non-retriable error detected: exit status 1, output: system failure";
        run(w);
        assert_log("work", w->work, "PublishPlan SetMarker(1592.7) RunOsCommand ! ReportResult(failed) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->update_failed_reason,
                            "failed to execute OS update command: non-retriable error "
                            "detected: exit status 1, output: system failure");
        assert_string_equal(w->node->updating_os_version, "1592.7");
        assert_non_null(strstr(w->node->failure, "\"code\":\"OSCommandFailed\",\"class\":\"terminal\""));
        assert_int_equal(w->last.wake_usec, USEC_INFINITY);
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->policy = policy_command_fails;
        w->os_effect = OS_EFFECT_IN_PLACE;
        command_failures = 1;
        command_message = "retriable error detected: exit status 3, output: network problems";
        run(w);
        assert_non_null(strstr(w->node->failure, "\"class\":\"retriable\""));
        assert_string_equal(w->node->update_result_value, "failed");
        w->now = w->last.wake_usec;
        clear_logs(w);
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_string_equal(w->node->update_result_value, "successful");
        world_free(w);
}

static Outcome command_death;

static Outcome policy_command_dies(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                   const char **msg) {
        if (a->type != UPDATE_ACTION_RUN_OS_COMMAND)
                return OUTCOME_OK;
        w->policy = NULL; /* once */
        return command_death;
}

/* Issue 16: the agent dies while the OS command runs (same boot). Never run it again: still on the
 * old OS, the update failed ("interrupted"); the command already got the OS to the desired version
 * (then died, or we did before its exit was recorded), verify and succeed. */
static void test_os_command_killed(void **state) {
        static const struct {
                Outcome death;
                const char *work;
                UpdatePhase phase;
        } cases[] = {
                { OUTCOME_INTERRUPTED, "PublishPlan SetMarker(1592.7) RunOsCommand ReportResult(failed) ",
                  UPDATE_PHASE_FAILED },
                { OUTCOME_DIED_AFTER,
                  "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                  "DeletePods "
                  "ReportResult(successful) SetChecksum(c1) ",
                  UPDATE_PHASE_SUCCEEDED },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                World *w = world_new();

                world_osc(w, "c1", "1592.7", "1.31.4");
                world_applied(w, "c0");
                world_ready(w, "t1");
                w->os_effect = OS_EFFECT_IN_PLACE;
                w->policy = policy_command_dies;
                command_death = cases[i].death;
                run(w);
                assert_log("work", w->work, cases[i].work);
                assert_int_equal(current_phase(w), cases[i].phase);
                if (cases[i].phase == UPDATE_PHASE_FAILED)
                        assert_non_null(strstr(w->node->update_failed_reason, "interrupted"));
                world_free(w);
        }
}

/* docs/node-protocol.md §9 scenario 20: after the reboot the OS is still old: RolledBack,
 * update-result=failed with upstream's reason, terminal (no retry even though update-result=failed opens the
 * gate). */
static void test_os_rollback_after_reboot(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1.2.4", "1.31.4");
        set(&w->os_version, "1.2.3");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        w->os_effect = OS_EFFECT_REBOOT_OLD;
        run(w);
        assert_log("work", w->work, "PublishPlan SetMarker(1.2.4) RunOsCommand ReportResult(failed) ");
        assert_log("events", w->events, "InPlaceUpdatePlanned InPlaceUpdateRolledBack ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(
                w->node->update_failed_reason,
                "OS update might have failed and rolled back to the previous version. Desired version: "
                "\"1.2.4\", Current version: \"1.2.3\"");
        assert_non_null(strstr(w->node->failure, "\"code\":\"OSRolledBack\",\"class\":\"terminal\""));
        assert_int_equal(w->pods_deleted, 0);

        clear_logs(w);
        w->now += 3600 * USEC_PER_SEC;
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(strstr(w->last.status, "terminal"));
        world_free(w);
}

static Outcome policy_die_after_marker(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                       const char **msg) {
        if (a->type != UPDATE_ACTION_SET_MARKER)
                return OUTCOME_OK;
        w->policy = NULL; /* once */
        return OUTCOME_DIED_AFTER;
}

static Outcome policy_node_recreated(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                     const char **msg) {
        if (a->type != UPDATE_ACTION_SWITCH_KUBELET)
                return OUTCOME_OK;
        /* Deleted and registered again while we apply: a new uid, none of MCM's labels or conditions. */
        w->policy = NULL;
        set(&w->node->uid, "uid-2");
        w->node->candidate = w->node->selected = false;
        w->node->in_place_update.present = false;
        return OUTCOME_OK;
}

/* Issue 16 finding 6: results belong to the Node uid the transaction started on. */
static void test_node_recreated_during_apply(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->policy = policy_node_recreated;
        run(w);
        assert_null(w->node->update_result_value);
        assert_null(strstr(w->work, "ReportResult(successful)"));
        tx = current_tx(w);
        assert_true(!tx->id || streq_ptr(tx->node_uid, "uid-2"));
        world_free(w);
}

/* The marker patch lands, then the agent dies before recording it: after the restart the marker is
 * recognised as ours (not docs/node-protocol.md §9 scenario 20), the patch is repeated harmlessly, the
 * update goes on. */
static void test_died_after_marker_patch(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->os_effect = OS_EFFECT_REBOOT_NEW;
        w->policy = policy_die_after_marker;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) SetMarker(1592.7) RunOsCommand CheckOSCUnits "
                   "CheckKubeletHealth "
                   "DeletePods ReportResult(successful) SetChecksum(c1) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);
}

/* docs/node-protocol.md §9 scenarios 20/21 on a node this agent did not update: a foreign marker that names
 * the desired version. Without a reason annotation: upstream's rollback reason; with one: kept, terminal. */
static void test_foreign_marker(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1.2.4", "1.31.4");
        set(&w->os_version, "1.2.3");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        set(&w->node->updating_os_version, "1.2.4");
        run(w);
        assert_log("work", w->work, "PublishPlan ReportResult(failed) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_string_equal(
                w->node->update_failed_reason,
                "OS update might have failed and rolled back to the previous version. Desired version: "
                "\"1.2.4\", Current version: \"1.2.3\"");
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1.2.4", "1.31.4");
        set(&w->os_version, "1.2.3");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        set(&w->node->updating_os_version, "v1.2.4"); /* compared with Gardener's semantics */
        set(&w->node->update_failed_reason, "previous error");
        run(w);
        assert_log("work", w->work, "PublishPlan ReportResult(failed) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->update_failed_reason, "previous error");
        {
                _cleanup_(update_transaction_freep) UpdateTransaction *tx = current_tx(w);
                assert_string_equal(tx->failure.message, "OS update has failed with error: previous error");
                assert_true(tx->failure.keep_reason);
        }
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 23: the retry path. update-result=failed (from an earlier agent), no
 * ReadyForUpdate:
 * the gate is open, everything succeeds: Pods deleted, label successful, marker and reason removed. */
static void test_retry_path_failed_label(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        set(&w->node->update_result_value, "failed");
        w->node->update_result = NODE_UPDATE_RESULT_FAILED;
        set(&w->node->update_failed_reason, "kubelet is not healthy after in-place update: timeout");
        w->os_effect = OS_EFFECT_IN_PLACE;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_string_equal(w->node->update_result_value, "successful");
        assert_null(w->node->update_failed_reason);
        assert_null(w->node->updating_os_version);
        world_free(w);
}

/* The decision after the final batch may see a Node from before the agent's own result and checksum
 * patches (their watch events are on the way). It must not take that for a node still waiting for
 * its success marking: no second Pod deletion, no second result. */
static void test_stale_node_view_after_success(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = w->node->selected = true;
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) RestartUnit(kubelet.service) "
                   "CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");

        /* The Node as it was before those patches. */
        world_applied(w, "c0");
        w->node->update_result = NODE_UPDATE_RESULT_NONE;
        set(&w->node->update_result_value, NULL);
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_int_equal(w->pods_deleted, 1);
        assert_non_null(strstr(w->last.status, "waiting for the Node to show"));
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 24: ReadyForUpdate and successful, nothing for this agent to do: no Pods
 * deleted, no
 * result patch; the checksum is recorded only once MCM is done with the node. Without ReadyForUpdate
 * and without the failed label: no Pods, no label either. */
static void test_already_successful(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_applied(w, "c0");
        w->node->candidate = w->node->selected = true;
        world_ready(w, "2025-03-01T10:04:00Z");
        set(&w->node->update_result_value, "successful");
        w->node->update_result = NODE_UPDATE_RESULT_SUCCESSFUL;
        run(w);
        assert_log("work", w->work, "");
        assert_int_equal(w->pods_deleted, 0);

        /* MCM transferred the machine: labels gone; only the checksum is recorded. */
        w->node->candidate = w->node->selected = false;
        w->node->in_place_update.present = false;
        w->node->update_result = NODE_UPDATE_RESULT_NONE;
        set(&w->node->update_result_value, NULL);
        run(w);
        assert_log("work", w->work, "SetChecksum(c1) ");
        assert_int_equal(w->pods_deleted, 0);
        assert_null(w->node->update_result_value);
        assert_int_equal(current_phase(w), UPDATE_PHASE_IDLE);
        world_free(w);
}

/* Nothing for us to do, but MCM drained the node for something we do not handle (e.g. a kubelet
 * config change): upstream's success marking still reports the node successful. */
static void test_no_work_marking(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_string_equal(w->node->update_result_value, "successful");
        assert_string_equal(w->node->plan, "[]");
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 6: a fresh node (no checksum ever applied): nothing is gated, the OS is
 * left alone. */
static void test_fresh_node(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.32.1");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) "
                   "RestartUnit(kubelet.service) CheckOSCUnits CheckKubeletHealth "
                   "ReportResult(none) SetChecksum(c1) ");
        assert_null(w->node->update_result_value);
        assert_string_equal(w->os_version, "1592.6");
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);

        /* fresh and already matching: only the checksum */
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        run(w);
        assert_log("work", w->work, "SetChecksum(c1) ");
        world_free(w);
}

/* The no-false-success report against upstream (fundament-oss/fundament#369): a node without any
 * history (no record, no checksum on the Node: e.g. its disk wiped by a reinstall) that MCM drained
 * for an in-place update was marked successful without a look at the OS. The success marking states
 * that the node runs the desired OS, so at ReadyForUpdate the OS is compared with or without history:
 * a mismatch runs the update, or fails naming both versions; only a match is successful. */
static void test_fresh_node_ready_for_update_checks_os(void **state) {
        World *w = world_new();

        /* OS behind: the update runs (the first apply's files and kubelet go with it, gated). */
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_ready(w, "t1");
        w->os_effect = OS_EFFECT_IN_PLACE;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_string_equal(w->os_version, "1592.7");
        world_free(w);

        /* The attempt before the wipe came back on the old OS (its marker is all that is left). */
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_ready(w, "t1");
        set(&w->node->updating_os_version, "1592.7");
        run(w);
        assert_log("work", w->work, "PublishPlan ReportResult(failed) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->update_failed_reason,
                            "OS update might have failed and rolled back to the "
                            "previous version. Desired version: \"1592.7\", Current "
                            "version: \"1592.6\"");
        assert_null(w->node->applied_checksum);
        world_free(w);

        /* A downgrade cannot be run: failed, naming both versions. */
        w = world_new();
        world_osc(w, "c1", "1592.5", "1.31.4");
        world_ready(w, "t1");
        run(w);
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->update_failed_reason,
                            "OS downgrade from \"1592.6\" to \"1592.5\" is not "
                            "supported");
        world_free(w);

        /* The OS unknown: no result at all, the status says why. */
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_ready(w, "t1");
        set(&w->os_version, NULL);
        run(w);
        assert_log("work", w->work, "");
        assert_null(w->node->update_result_value);
        assert_non_null(strstr(w->last.status, "unable to find version"));
        world_free(w);

        /* Matching: the success marking, as before. */
        w = world_new();
        world_osc(w, "c1", "1592.6", "1.31.4");
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        world_free(w);
}

/* ---- a fresh node's first OSC before its Node exists (issue 22) ---------------------------------- */

/* A real fresh node: no kubelet, no Node; the OSC brings kubelet.service (its start is the OSC's
 * work) and the kubelet, which registers the Node. */
static World *world_fresh_without_node(void) {
        World *w = world_new();

        set(&w->kubelet_version, NULL);
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ true);
        w->no_node = true;
        return w;
}

static void assert_status_has(const World *w, const char *what) {
        if (!strstr(w->last.status, what))
                fail_msg("status \"%s\" does not say \"%s\"", w->last.status, what);
}

/* Applied whole without the Node, ungated (no MCM gate on a node without workloads), the OS left
 * alone; nothing written until the Node exists, then the result, the checksum and the Event once. */
static void test_first_osc_before_node(void **state) {
        World *w = world_fresh_without_node();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        uint64_t applied;

        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth ");
        assert_log("phases", w->phases, "");
        assert_log("events", w->events, "");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_string_equal(w->kubelet_version, "1.31.4");
        assert_string_equal(w->os_version, "1592.6");
        assert_status_has(w, "The first OSC c1 is applied; waiting for the kubelet to register the Node");
        assert_null(w->last.notice);
        tx = current_tx(w);
        assert_true(tx->before_node);
        assert_false(tx->gated);
        assert_null(tx->node_uid);
        applied = tx->updated_usec;
        assert_int_equal(w->last.wake_usec, applied + 5 * 60 * USEC_PER_SEC);

        /* The same again (another Node-less input): nothing new. */
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");

        /* The kubelet registers it: written once, from the phase reached. */
        w->no_node = false;
        run(w);
        assert_log("work", w->work, "ReportResult(none) SetChecksum(c1) ");
        assert_log("phases", w->phases, "Succeeded ");
        assert_log("events", w->events, "InPlaceUpdateSucceeded ");
        assert_string_equal(w->node->applied_checksum, "c1");
        assert_string_equal(w->node->kubernetes_version, "1.31.4");
        assert_null(w->node->update_result_value);
        update_transaction_free(tx);
        tx = current_tx(w);
        assert_string_equal(tx->node_uid, "uid-1"); /* its Node from now on */
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_status_has(w, "Up to date");
        world_free(w);
}

/* A fresh node's first kubelet never gets healthy. There was no kubelet before, so the way back is
 * none: binaryPath removed, not left at the broken version (where a retry or the next OSC would take
 * it for the running kubelet and check nothing). The state says so across a restart. Where
 * binaryPath existed but its version was unknown, there is nothing known to go back to: left as is. */
static void test_first_kubelet_unhealthy_goes_again(void **state) {
        World *w = world_fresh_without_node();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_fails(w, UPDATE_ACTION_CHECK_KUBELET_HEALTH, NULL, _UPDATE_FAILURE_INVALID,
                    "healthz returned 500");
        w->crash_after_each_action = true;
        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth ! "
                   "RollbackKubelet() StopUnit(kubelet.service) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_null(w->kubelet_version);
        tx = current_tx(w);
        assert_true(tx->kubelet_none);
        assert_int_equal(tx->failure.code, UPDATE_FAILURE_KUBELET_UNHEALTHY);
        assert_null(strstr(tx->failure.message, "rolling back the kubelet failed"));
        world_free(w);

        w = world_fresh_without_node();
        w->kubelet_unknown = true;
        world_fails(w, UPDATE_ACTION_CHECK_KUBELET_HEALTH, NULL, _UPDATE_FAILURE_INVALID,
                    "healthz returned 500");
        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth ! ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->kubelet_version, "1.31.4");
        world_free(w);
}

/* The usual order on a real node: the kubelet the OSC starts registers the Node while the
 * transaction still runs (here: during Applying); from then on it reports as always. Killed after
 * every action, the same. */
static void test_first_osc_node_registers_midway(void **state) {
        World *a = world_fresh_without_node(), *b = world_fresh_without_node();

        a->registers_at_apply = b->registers_at_apply = true;
        b->crash_after_each_action = true;
        run(a);
        run(b);
        assert_log("work", a->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth "
                   "ReportResult(none) SetChecksum(c1) ");
        assert_log("phases", a->phases, "Applying Verifying Succeeded ");
        assert_log("events", a->events, "InPlaceUpdateSucceeded ");
        assert_log("crashing agent", b->work, a->work);
        assert_log("phases", b->phases, a->phases);
        assert_log("events", b->events, a->events);
        assert_string_equal(b->node->applied_checksum, "c1");
        world_free(a);
        world_free(b);
}

/* Killed after every action with the Node appearing only at the end: resumes exactly once. */
static void test_first_osc_killed_before_node(void **state) {
        World *w = world_fresh_without_node();

        w->crash_after_each_action = true;
        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth ");
        assert_int_equal(w->ids, 1);
        w->no_node = false;
        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC CheckOSCUnits "
                   "CheckKubeletHealth "
                   "ReportResult(none) SetChecksum(c1) ");
        assert_int_equal(w->ids, 1);
        world_free(w);
}

/* The kubelet never registers the Node: said (status, and a notice for the journal) once the
 * registration timeout passed, instead of a silent wait. */
static void test_first_osc_node_never_registers(void **state) {
        World *w = world_fresh_without_node();

        w->settings.node_registration_timeout_usec = 60 * USEC_PER_SEC;
        run(w);
        assert_null(w->last.notice);
        w->now = w->last.wake_usec;
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(w->last.notice);
        assert_status_has(w, "The first OSC c1 is applied, but the Node is still not registered 1m later");
        assert_status_has(w, "kubelet.service");
        assert_int_equal(w->last.wake_usec, USEC_INFINITY);
        world_free(w);
}

static unsigned stage_failures;
static Outcome policy_flaky_registry(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                     const char **msg);

/* A first OSC that fails without the Node is retried without it (nothing was applied yet). */
static void test_first_osc_retried_before_node(void **state) {
        World *w = world_fresh_without_node();

        w->policy = policy_flaky_registry;
        stage_failures = 1;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_status_has(w, "retrying with back-off");
        assert_log("phases", w->phases, "");
        w->now = w->last.wake_usec;
        run(w);
        assert_log("work", w->work,
                   "StageKubelet(1.31.4) ! StageKubelet(1.31.4) SwitchKubelet(1.31.4) ApplyOSC "
                   "CheckOSCUnits CheckKubeletHealth ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_int_equal(w->ids, 2);
        world_free(w);
}

/* Without a Node nothing else goes on: a node that applied an OSC before (a Node deleted, or taken
 * over from gardener-node-agent), a second OSC after the first, a transaction of a Node that is gone,
 * and a Node not known yet. */
static void test_no_node_waits(void **state) {
        World *w = world_fresh_without_node();

        /* not known yet (no LIST answered) */
        w->no_node = false;
        {
                UpdateDecision d = {};
                UpdateInput in = { .osc = w->osc,
                                   .first_osc = true,
                                   .new_transaction_id = "x",
                                   .settings = w->settings,
                                   .now_usec = w->now };

                assert_int_equal(node_update_decide(&in, &d), 0);
                assert_int_equal(d.n_actions, 0);
                assert_string_equal(d.status, "Waiting for the Node object.");
                update_decision_done(&d);
        }

        /* an OSC was applied here before */
        w->no_node = true;
        w->osc_committed = true;
        run(w);
        assert_log("work", w->work, "");
        assert_status_has(w, "Waiting for the Node to be registered");

        /* no OSC Secret yet */
        osc_desired_free(w->osc);
        w->osc = NULL;
        run(w);
        assert_status_has(w, "Waiting for the OSC secret; the Node is not registered yet");
        world_free(w);

        /* the first OSC applied, a second one comes before the Node: it waits for the Node */
        w = world_fresh_without_node();
        run(w);
        world_osc(w, "c2", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_status_has(w, "The first OSC c1 is applied");
        w->no_node = false;
        run(w);
        assert_log("work", w->work,
                   "ReportResult(none) SetChecksum(c1) PublishPlan ApplyOSC CheckOSCUnits "
                   "ReportResult(none) "
                   "SetChecksum(c2) ");
        world_free(w);

        /* a gated transaction of a Node that was deleted meanwhile */
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = w->node->selected = true;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_WAITING_FOR_DRAIN);
        w->no_node = true;
        w->osc_committed = true;
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        assert_status_has(w, "waits for the Node, which does not exist");
        world_free(w);
}

/* docs/contract.md §8.5: minVersionForUpdate. Before selection the plan shows the update as blocked; once
 * selected it fails before the drain with the exact reason and code; nothing is staged. */
static void test_min_version_not_met(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        set(&w->osc->min_version_for_update, "1592.7");
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_PLANNED);
        assert_string_equal(
                w->node->plan,
                "[{\"action\":\"os\",\"from\":\"1592.6\",\"to\":\"1592.7\"},{\"action\":\"reboot\"},"
                "{\"action\":\"blocked\",\"code\":\"MinVersionNotMet\",\"message\":\"minVersionForUpdate "
                "1592.7 is not met by the current OS version 1592.6\"}]");
        assert_null(w->node->update_result_value);

        clear_logs(w);
        w->node->selected = true;
        run(w);
        assert_log("work", w->work, "ReportResult(failed) ");
        assert_log("events", w->events, "InPlaceUpdateFailed ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->update_failed_reason,
                            "minVersionForUpdate 1592.7 is not met by the current OS version 1592.6");
        assert_non_null(strstr(w->node->failure, "\"code\":\"MinVersionNotMet\",\"class\":\"terminal\""));

        /* min <= current: allowed */
        world_free(w);
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        set(&w->osc->min_version_for_update, "1592.6");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->os_effect = OS_EFFECT_IN_PLACE;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);
}

/* A world at c0 (the baseline, no rotation) and then c1 carrying a rotation, nothing else changed. */
static World *world_rotation(const char *ca, const char *sa) {
        World *w = world_new();

        world_osc(w, "c0", "1592.6", "1.31.4");
        world_applied(w, "c0");
        run(w); /* adopts c0 (no rotation) as the baseline */
        assert_log("work", w->work, "");
        world_osc(w, "c1", "1592.6", "1.31.4");
        w->osc->has_rotation = true;
        set(&w->osc->ca_rotation, ca);
        set(&w->osc->sa_rotation, sa);
        return w;
}

/* Issue 14: a CA rotation is in-place work done in Applying: gated like any other (nothing before
 * ReadyForUpdate), then RotateCredentials(ca) before the success marking; the checksum only after. */
static void test_ca_rotation(void **state) {
        World *w = world_rotation("2025-03-01T11:00:00Z", NULL);
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        run(w);
        assert_log("work", w->work, ""); /* gated: waits for MCM */
        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan ");
        assert_non_null(strstr(w->node->plan,
                               "{\"action\":\"credentialsRotation\",\"certificateAuthorities\":true,"
                               "\"serviceAccountKey\":false}"));
        assert_null(strstr(w->node->plan, "blocked"));

        clear_logs(w);
        w->node->selected = true;
        run(w);
        assert_log("work", w->work, "");
        assert_int_equal(current_phase(w), UPDATE_PHASE_WAITING_FOR_DRAIN);
        assert_string_equal(w->node->applied_checksum, "c0");

        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work,
                   "RotateCredentials(ca) CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_string_equal(w->node->update_result_value, "successful");
        assert_string_equal(w->node->applied_checksum, "c1");
        tx = current_tx(w);
        assert_string_equal(tx->applied.ca_rotation, "2025-03-01T11:00:00Z");

        /* Done once: the same rotation time is not rotated again. */
        clear_logs(w);
        run(w);
        assert_log("work", w->work, "");
        world_free(w);
}

/* Both rotations at once, with a kubelet patch: one RotateCredentials(ca,sa) after the kubelet switch. */
static void test_sa_rotation(void **state) {
        World *w = world_rotation("2025-03-01T11:00:00Z", "2025-03-01T11:00:00Z");

        set(&w->osc->sa_rotation, "2025-03-02T08:00:00Z");
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan RotateCredentials(ca,sa) CheckOSCUnits CheckKubeletHealth "
                   "DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");

        /* Later only the service-account key. */
        world_osc(w, "c2", "1592.6", "1.31.4");
        w->osc->has_rotation = true;
        set(&w->osc->ca_rotation, "2025-03-01T11:00:00Z");
        set(&w->osc->sa_rotation, "2025-04-01T00:00:00Z");
        world_ready(w, "t2");
        clear_logs(w);
        run(w);
        assert_log("work", w->work,
                   "PublishPlan RotateCredentials(sa) CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) "
                   "SetChecksum(c2) ");
        world_free(w);
}

/* A failed rotation is CredentialsRotationFailed (terminal), update-result=failed, no checksum; the
 * default code comes from the action when the executor passes none. */
static void test_rotation_fails(void **state) {
        World *w = world_rotation("2025-03-01T11:00:00Z", NULL);
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_ready(w, "t1");
        world_fails(w, UPDATE_ACTION_ROTATE_CREDENTIALS, NULL, _UPDATE_FAILURE_INVALID,
                    "CertificateSigningRequest node-agent-csr-x was denied");
        run(w);
        assert_log("work", w->work, "PublishPlan RotateCredentials(ca) ! ReportResult(failed) ");
        tx = current_tx(w);
        assert_int_equal(tx->failure.code, UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED);
        assert_string_equal(w->node->update_failed_reason,
                            "CertificateSigningRequest node-agent-csr-x was denied");
        assert_string_equal(w->node->applied_checksum, "c0");
        assert_false(update_failure_is_retriable(UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED, NULL));
        world_free(w);
}

/* A kill in the middle of the rotation runs the (resumable) action again, never skips it. */
static Outcome policy_rotation_interrupted_once(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                                const char **msg) {
        static unsigned n;

        if (a->type != UPDATE_ACTION_ROTATE_CREDENTIALS)
                return OUTCOME_OK;
        return n++ == 0 ? OUTCOME_INTERRUPTED : OUTCOME_OK;
}

static void test_rotation_resumes_after_kill(void **state) {
        World *w = world_rotation("2025-03-01T11:00:00Z", NULL);

        world_ready(w, "t1");
        w->policy = policy_rotation_interrupted_once;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan RotateCredentials(ca) RotateCredentials(ca) CheckOSCUnits "
                   "CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);
}

/* The rotation of world_rotation() plus an OS update 1592.6 -> 1592.7 in the same desired state. */
static World *world_rotation_and_os(const char *ca) {
        World *w = world_rotation(ca, NULL);

        set(&w->osc->os_version, "1592.7");
        set(&w->osc->os_update_args[0], "1592.7");
        world_ready(w, "t1");
        return w;
}

/* gardener PR #15704: the rotations run before the OS update, which may reboot into a system whose
 * bookkeeping was wiped; killed after every single action, each step still runs exactly once (the
 * harness fails on a repeat) and in the same order, across the reboot. */
static void test_rotation_before_os_update(void **state) {
        World *a = world_rotation_and_os("2025-03-01T11:00:00Z"),
              *b = world_rotation_and_os("2025-03-01T11:00:00Z");

        a->os_effect = b->os_effect = OS_EFFECT_REBOOT_NEW;
        b->crash_after_each_action = true;
        run(a);
        run(b);
        assert_log("work", a->work,
                   "PublishPlan RotateCredentials(ca) SetMarker(1592.7) RunOsCommand "
                   "CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        assert_log("crashing agent", b->work, a->work);
        assert_int_equal(current_phase(b), UPDATE_PHASE_SUCCEEDED);
        assert_string_equal(b->node->applied_checksum, "c1");
        world_free(a);
        world_free(b);
}

/* A rotation done before an OS update that then fails is done on the node: the retry (a new
 * transaction of the same desired state) updates the OS without rotating a second time. */
static void test_rotation_not_repeated_by_retry(void **state) {
        World *w = world_rotation_and_os("2025-03-01T11:00:00Z");
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        w->os_effect = OS_EFFECT_IN_PLACE;
        w->policy = policy_command_fails;
        command_failures = 1;
        command_message = "retriable error detected: exit status 3, output: network problems";
        run(w);
        assert_log("work", w->work,
                   "PublishPlan RotateCredentials(ca) SetMarker(1592.7) RunOsCommand ! "
                   "ReportResult(failed) ");
        tx = current_tx(w);
        assert_string_equal(tx->applied.checksum, "c0"); /* the OSC is not applied yet ... */
        assert_true(streq_ptr(tx->applied.ca_rotation, "2025-03-01T11:00:00Z")); /* ... the rotation is */

        w->now = w->last.wake_usec;
        clear_logs(w);
        run(w);
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_null(strstr(w->node->plan, "credentialsRotation"));
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        world_free(w);
}

/* A record of an older version that failed with UnsupportedRotation still decodes, and is retried: the
 * rotation is supported now. */
static void test_old_unsupported_rotation_retried(void **state) {
        World *w = world_rotation("2025-03-01T11:00:00Z", NULL);
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        char *p;

        world_ready(w, "t1");
        world_fails(w, UPDATE_ACTION_ROTATE_CREDENTIALS, NULL, _UPDATE_FAILURE_INVALID,
                    "CertificateSigningRequest node-agent-csr-x was denied");
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        /* rewrite the record "on disk" as the old version wrote it */
        p = strstr(w->saved, "CredentialsRotationFailed");
        assert_non_null(p);
        assert_true(update_failure_code_from_string("UnsupportedRotation") ==
                    UPDATE_FAILURE_UNSUPPORTED_ROTATION);
        memmove(p + strlen("UnsupportedRotation"), p + strlen("CredentialsRotationFailed"),
                strlen(p + strlen("CredentialsRotationFailed")) + 1);
        memcpy(p, "UnsupportedRotation", strlen("UnsupportedRotation"));
        tx = current_tx(w);
        assert_int_equal(tx->failure.code, UPDATE_FAILURE_UNSUPPORTED_ROTATION);

        w->policy = NULL;
        w->now += 11 * 60 * USEC_PER_SEC; /* past any back-off */
        clear_logs(w);
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);
}

/* Issue 16: hostile kubelet fields of the OSC fail the gated update as terminal InvalidDesiredState
 * naming the field, before anything is pulled. */
static void test_hostile_kubelet_fields_fail_terminally(void **state) {
        static const struct {
                const char *version, *in_image, *field;
        } table[] = {
                { "99999999999999999999.0.0", "/kubelet", "spec.inPlaceUpdates.kubelet: " },
                { "../../../../tmp/x", "/kubelet", "spec.inPlaceUpdates.kubelet: " },
                { "1.32.1-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                  "/kubelet", "spec.inPlaceUpdates.kubelet: " },
                { "1.32.1", "../../../../etc/shadow", "spec.files[0].content.imageRef.filePathInImage: " },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
                World *w = world_new();

                world_osc(w, "c1", "1592.6", "1.32.1");
                set(&w->osc->kubelet_version, table[i].version);
                set(&w->osc->kubelet_file_in_image, table[i].in_image);
                set(&w->osc->kubelet_file_field, "spec.files[0]");
                world_applied(w, "c0");
                world_ready(w, "t1");
                run(w);
                assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
                assert_null(strstr(w->work, "StageKubelet"));
                tx = current_tx(w);
                assert_int_equal(tx->failure.code, UPDATE_FAILURE_INVALID_DESIRED_STATE);
                assert_false(update_failure_is_retriable(tx->failure.code, tx->failure.message));
                if (!tx->failure.message ||
                    strncmp(tx->failure.message, table[i].field, strlen(table[i].field)) != 0)
                        fail_msg("%zu: %s", i, strempty(tx->failure.message));
                world_free(w);
        }
}

/* docs/contract.md §5 row 3: a plan that cannot succeed is reported failed when the node is selected, before
 * the drain; before that only inplace-agent/failure shows it. */
static void test_staging_failure_fails_before_drain(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = true;
        world_fails(w, UPDATE_ACTION_STAGE_KUBELET, NULL, UPDATE_FAILURE_DIGEST_MISMATCH,
                    "sha256:aaaa expected, got sha256:bbbb");
        run(w);
        assert_log("work", w->work, "PublishPlan StageKubelet(1.32.1) ! ReportResult(none) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_null(w->node->update_result_value);
        assert_non_null(strstr(w->node->failure, "\"code\":\"DigestMismatch\""));

        clear_logs(w);
        w->node->selected = true;
        run(w);
        assert_log("work", w->work, "ReportResult(failed) ");
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->update_failed_reason, "sha256:aaaa expected, got sha256:bbbb");
        assert_string_equal(w->kubelet_version, "1.31.4");
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 25 / docs/contract.md §8.9 KubeletUnhealthy: the new kubelet does not
 * get healthy: switch back, restart the previous one, report failed with upstream's reason. */
static void test_kubelet_unhealthy_rolls_back(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        world_ready(w, "t1");
        world_fails(w, UPDATE_ACTION_CHECK_KUBELET_HEALTH, "1.32.1", _UPDATE_FAILURE_INVALID,
                    "retry failed with context deadline exceeded");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) RestartUnit(kubelet.service) "
                   "CheckOSCUnits CheckKubeletHealth ! RollbackKubelet(1.31.4) "
                   "RestartUnit(kubelet.service) "
                   "ReportResult(failed) ");
        assert_log("events", w->events, "InPlaceUpdatePlanned InPlaceUpdateRolledBack ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_string_equal(w->kubelet_version, "1.31.4");
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->update_failed_reason,
                            "kubelet is not healthy after in-place update: retry failed "
                            "with context deadline exceeded");
        assert_string_equal(w->node->applied_checksum, "c0");
        world_free(w);

        /* The ungated path (§8.4): same rollback, but no update-result. */
        w = world_new();
        world_osc(w, "c1", "1592.6", "1.31.5");
        world_applied(w, "c0");
        world_fails(w, UPDATE_ACTION_CHECK_KUBELET_HEALTH, "1.31.5", _UPDATE_FAILURE_INVALID,
                    "healthz returned 500");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.31.5) SwitchKubelet(1.31.5) RestartUnit(kubelet.service) "
                   "CheckOSCUnits CheckKubeletHealth ! RollbackKubelet(1.31.4) "
                   "RestartUnit(kubelet.service) "
                   "ReportResult(none) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_null(w->node->update_result_value);
        assert_null(w->node->update_failed_reason);
        assert_non_null(strstr(w->node->failure, "\"code\":\"KubeletUnhealthy\""));
        assert_string_equal(w->node->applied_checksum, "c0");
        world_free(w);
}

static unsigned stage_failures;

static Outcome policy_flaky_registry(World *w, const UpdateAction *a, UpdateFailureCode *code,
                                     const char **msg) {
        if (a->type != UPDATE_ACTION_STAGE_KUBELET || stage_failures == 0)
                return OUTCOME_OK;
        stage_failures--;
        *code = UPDATE_FAILURE_ARTIFACT_UNAVAILABLE;
        *msg = "registry.example.com: 503 Service Unavailable";
        return OUTCOME_FAIL;
}

/* A retriable failure is retried with back-off, as a new attempt of the same desired state. */
static void test_retriable_failure_retries(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_osc(w, "c1", "1592.6", "1.31.5");
        world_applied(w, "c0");
        w->policy = policy_flaky_registry;
        stage_failures = 1;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_non_null(strstr(w->node->failure, "\"class\":\"retriable\""));
        assert_true(w->last.wake_usec > w->now && w->last.wake_usec <= w->now + 30 * USEC_PER_SEC);

        clear_logs(w);
        run(w); /* too early: nothing */
        assert_log("work", w->work, "");

        w->now = w->last.wake_usec;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.31.5) SwitchKubelet(1.31.5) "
                   "RestartUnit(kubelet.service) CheckOSCUnits CheckKubeletHealth "
                   "ReportResult(none) SetChecksum(c1) ");
        tx = current_tx(w);
        assert_string_equal(tx->id, "tx-2");
        assert_int_equal(tx->attempt, 2);
        assert_int_equal(tx->phase, UPDATE_PHASE_SUCCEEDED);
        assert_null(w->node->failure); /* success removes the stale failure */
        world_free(w);
}

/* ---- the OSC's own work (issue 13): the checksum is a promise ---------------------------------- */

/* A file or unit change only: applied at once (no gate), the checksum after it, never before. */
static void test_osc_work_ungated(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan ApplyOSC CheckOSCUnits ReportResult(none) SetChecksum(c1) ");
        assert_log("phases", w->phases, "Staging Applying Verifying Succeeded ");
        assert_string_equal(w->node->applied_checksum, "c1");
        assert_null(w->node->update_result_value);
        assert_int_equal(w->pods_deleted, 0);
        assert_non_null(strstr(w->node->plan, "\"action\":\"applyOSC\""));
        world_free(w);
}

static unsigned osc_failures;

static Outcome policy_osc_fails(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg) {
        if (a->type != UPDATE_ACTION_APPLY_OSC || osc_failures == 0)
                return OUTCOME_OK;
        osc_failures--;
        *code = UPDATE_FAILURE_UNIT_APPLY_FAILED;
        *msg = "enable foo.service: Unit file foo.service does not exist.";
        return OUTCOME_FAIL;
}

/* A unit that cannot be applied: the old checksum stays, the failure names the unit, and the retry
 * (back-off) applies it once it can be. */
static void test_osc_work_failure_keeps_checksum(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        world_applied(w, "c0");
        w->policy = policy_osc_fails;
        osc_failures = 1;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->applied_checksum, "c0");
        assert_non_null(strstr(w->node->failure, "\"code\":\"UnitApplyFailed\""));
        assert_non_null(strstr(w->node->failure, "foo.service"));
        assert_non_null(strstr(w->node->failure, "\"class\":\"retriable\""));

        clear_logs(w);
        w->now = w->last.wake_usec;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan ApplyOSC CheckOSCUnits ReportResult(none) SetChecksum(c1) ");
        tx = current_tx(w);
        assert_int_equal(tx->attempt, 2);
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);
}

/* A kubelet config change (an in-place flag) waits for MCM like any in-place update: plan with the
 * OSC's items at candidate, the apply after ReadyForUpdate, then Pods, successful, checksum. */
static void test_osc_work_gated(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ true, /* restarts_kubelet= */ true);
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(strstr(w->last.status, "candidate-for-update"));

        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan ");
        assert_non_null(strstr(w->node->plan, "kubeletConfig"));
        assert_non_null(strstr(w->node->plan, "/var/lib/kubelet/config/kubelet"));

        clear_logs(w);
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work,
                   "ApplyOSC CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        assert_string_equal(w->node->update_result_value, "successful");
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);
}

/* Right after a restart the Node can be read before the OSC Secret: a transaction with OSC work
 * must not reach ApplyOSC then (the runner has nothing prepared and would fail it as "the OSC
 * changed", a false update-result=failed for MCM); it waits for the Secret. Found by SIGKILLing the
 * real agent (tests/integration/test_crash_consistency.py). */
static void test_osc_work_waits_for_the_secret_after_restart(void **state) {
        World *w = world_new();
        OscDesired *osc;

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ true, /* restarts_kubelet= */ true);
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan ");

        clear_logs(w);
        osc = TAKE_PTR(w->osc);
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(strstr(w->last.status, "waits for the OSC Secret"));
        assert_null(w->node->update_result_value);

        w->osc = osc;
        run(w);
        assert_log("work", w->work,
                   "ApplyOSC CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);
}

/* New kubelet binary, then the OSC's files and units, and one kubelet restart: the OSC's own. */
static void test_osc_work_with_kubelet_minor(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_osc_work(w, /* gated= */ true, /* restarts_kubelet= */ true);
        world_applied(w, "c0");
        w->node->candidate = true;
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) ApplyOSC "
                   "CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");

        /* Without a kubelet restart among the OSC's work, ours follows it. */
        world_free(w);
        w = world_new();
        world_osc(w, "c1", "1592.6", "1.32.1");
        world_osc_work(w, /* gated= */ true, /* restarts_kubelet= */ false);
        world_applied(w, "c0");
        w->node->candidate = true;
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) ApplyOSC "
                   "RestartUnit(kubelet.service) CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        world_free(w);
}

/* After a restart the Node can come before the Secret: the OSC's work (and the kubelet restart that
 * follows it) waits for the Secret instead of failing. */
static void test_osc_work_waits_for_the_secret(void **state) {
        World *w = world_new();
        OscDesired *osc;

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_osc_work(w, /* gated= */ true, /* restarts_kubelet= */ false);
        world_applied(w, "c0");
        w->node->candidate = true;
        w->node->selected = true;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_WAITING_FOR_DRAIN);

        clear_logs(w);
        osc = TAKE_PTR(w->osc);
        world_ready(w, "2025-03-01T10:04:00Z");
        run(w);
        assert_log("work", w->work, "SwitchKubelet(1.32.1) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_APPLYING);
        assert_non_null(strstr(w->last.status, "waits for the OSC Secret"));

        clear_logs(w);
        w->osc = osc;
        run(w);
        assert_log("work", w->work,
                   "ApplyOSC RestartUnit(kubelet.service) CheckOSCUnits CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        world_free(w);
}

/* The OSC's work fails after the new kubelet went in: the binary is rolled back. */
static void test_osc_work_failure_rolls_kubelet_back(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.31.5");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ true);
        world_applied(w, "c0");
        w->policy = policy_osc_fails;
        osc_failures = 1;
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.31.5) SwitchKubelet(1.31.5) ApplyOSC ! "
                   "RollbackKubelet(1.31.4) RestartUnit(kubelet.service) ReportResult(none) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_string_equal(w->kubelet_version, "1.31.4");
        assert_string_equal(w->node->applied_checksum, "c0");
        world_free(w);
}

/* An OSC whose work cannot even be computed (an unknown file codec): terminal, the field named; on
 * an in-place pool once MCM selects the node, like any other plan that cannot succeed. */
/* Issue 23, finding 7: an OSC whose work cannot be computed fails at once, on the Node (failure, a
 * Warning Event, the condition) and in STATUS=, instead of "pending" until MCM picks the node; MCM
 * gets update-result=failed once it does; nothing is applied, the checksum stays. */
static void test_osc_work_error_fails_at_once(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        w->osc_work =
                (OscWorkView) { .error_code = UPDATE_FAILURE_INVALID_DESIRED_STATE,
                                .error = "spec.files[2].content.inline.encoding: invalid file codec id" };
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, "ReportResult(none) ");
        assert_log("events", w->events, "InPlaceUpdateFailed ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        tx = current_tx(w);
        assert_int_equal(tx->failure.code, UPDATE_FAILURE_INVALID_DESIRED_STATE);
        assert_non_null(strstr(tx->failure.message, "invalid file codec id"));
        assert_non_null(strstr(w->node->failure, "InvalidDesiredState"));
        assert_non_null(
                strstr(w->last.status, "InvalidDesiredState: spec.files[2].content.inline.encoding"));
        assert_null(w->node->update_result_value);
        w->node->selected = true;
        run(w);
        assert_string_equal(w->node->update_result_value, "failed");
        assert_string_equal(w->node->applied_checksum, "c0");
        world_free(w);
}

/* A Secret the agent refuses as a whole (osc.h: only the checksum and why): the same, and nothing
 * of it is planned; the next good OSC is applied. */
static void test_refused_osc_fails_then_next_applies(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_applied(w, "c0");
        w->osc = osc_desired_free(w->osc);
        assert_int_equal(osc_desired_new_refused(
                                 "c1", "file \"etc/x\": path must be absolute without . or ..", &w->osc),
                         0);
        run(w);
        assert_log("work", w->work, "ReportResult(none) ");
        assert_log("events", w->events, "InPlaceUpdateFailed ");
        tx = current_tx(w);
        assert_int_equal(tx->phase, UPDATE_PHASE_FAILED);
        assert_int_equal(tx->failure.code, UPDATE_FAILURE_INVALID_DESIRED_STATE);
        assert_string_equal(tx->failure.message, "file \"etc/x\": path must be absolute without . or ..");
        assert_non_null(strstr(w->last.status, "failed: InvalidDesiredState: file \"etc/x\""));
        assert_false(tx->applied.valid); /* a refused OSC is no baseline */
        /* Decided again (a Node update): nothing more is written. */
        run(w);
        assert_log("work", w->work, "ReportResult(none) ");
        assert_log("events", w->events, "InPlaceUpdateFailed ");

        /* A refused Secret without a usable checksum (or a bad label): the same. */
        w->osc = osc_desired_free(w->osc);
        assert_int_equal(osc_desired_new_refused(
                                 NULL, "Node label x: \"../y\" is not a valid DNS-1123 subdomain", &w->osc),
                         0);
        run(w);
        assert_log("events", w->events, "InPlaceUpdateFailed InPlaceUpdateFailed ");

        /* The next good OSC: no in-place changes, its checksum recorded. */
        w->osc = osc_desired_free(w->osc);
        w->osc = calloc(1, sizeof(OscDesired));
        assert_non_null(w->osc);
        world_osc(w, "c2", "1592.6", "1.31.4");
        run(w);
        assert_string_equal(w->node->applied_checksum, "c2");
        world_free(w);
}

/* A refused OSC whose checksum the Node already shows is up to date, not a failure. */
static void test_refused_osc_already_applied(void **state) {
        World *w = world_new();

        world_applied(w, "c1");
        w->osc = osc_desired_free(w->osc);
        assert_int_equal(osc_desired_new_refused("c1", "file \"x\": bad", &w->osc), 0);
        run(w);
        assert_log("work", w->work, "");
        assert_log("events", w->events, "");
        assert_non_null(strstr(w->last.status, "Up to date"));
        world_free(w);
}

/* A work list that cannot be computed for a reason that can go away (the state directory full):
 * nothing starts, the decision wakes when the runner computes again, and once it can the OSC
 * applies without any other input. */
static void test_osc_work_retriable_error_retried(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        uint64_t retry = w->now + 4 * USEC_PER_SEC;

        world_osc(w, "c1", "1592.6", "1.31.4");
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        w->osc_work = (OscWorkView) {
                .error_code = UPDATE_FAILURE_FILE_APPLY_FAILED,
                .error = "cannot save the work list in /var/lib/inplace-agent: No space left on device",
                .retry_usec = retry
        };
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, "");
        tx = load_tx(w);
        assert_true(!tx || !tx->id);
        assert_int_equal(w->last.wake_usec, retry);
        assert_non_null(strstr(w->last.status, "No space left on device"));

        /* The space is back: the runner's next computation succeeds. */
        w->now = w->last.wake_usec;
        world_osc_work(w, /* gated= */ false, /* restarts_kubelet= */ false);
        run(w);
        assert_string_equal(w->node->applied_checksum, "c1");
        world_free(w);
}

static unsigned result_failures;

static Outcome policy_api_down(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg) {
        if (a->type != UPDATE_ACTION_REPORT_RESULT || result_failures == 0)
                return OUTCOME_OK;
        result_failures--;
        *msg = "connection refused";
        return OUTCOME_FAIL;
}

/* docs/node-protocol.md §9 scenario 35: the success patch fails; Pods are not deleted again, the patch is
 * retried with back-off until it lands. */
static void test_api_down_during_success_patch(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        w->os_effect = OS_EFFECT_IN_PLACE;
        w->policy = policy_api_down;
        result_failures = 2;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_null(w->node->update_result_value);
        assert_true(w->last.wake_usec != USEC_INFINITY); /* retry the patch after a back-off */
        for (unsigned i = 0; i < 5 && !w->node->update_result_value; i++) {
                w->now = MAX(w->now, w->last.wake_usec);
                run(w);
        }
        assert_log("work", w->work,
                   "PublishPlan SetMarker(1592.7) RunOsCommand CheckOSCUnits CheckKubeletHealth "
                   "DeletePods "
                   "ReportResult(successful) ! ReportResult(successful) ! ReportResult(successful) "
                   "SetChecksum(c1) ");
        assert_int_equal(w->pods_deleted, 1);
        assert_string_equal(w->node->update_result_value, "successful");
        world_free(w);
}

/* The image backend: pre-stage the OS image at candidate time, install and reboot at the gate. */
static void test_image_backend(void **state) {
        World *w = world_new();

        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        w->settings.os_image_configured = true;
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        assert_log("work", w->work, "PublishPlan StageOsImage(1592.7) ");
        assert_int_equal(current_phase(w), UPDATE_PHASE_STAGED);

        clear_logs(w);
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work,
                   "SetMarker(1592.7) InstallOsImage(1592.7) Reboot CheckOSCUnits "
                   "CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_log("phases", w->phases, "Applying Rebooting Verifying Succeeded ");
        assert_string_equal(w->os_version, "1592.7");
        world_free(w);

        /* the boot loader fell back: the image is installed, but the node comes up on the old OS */
        w = world_new();
        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        w->settings.os_image_configured = true;
        w->reboot_rolls_back = true;
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);
        assert_non_null(strstr(w->node->update_failed_reason, "rolled back to the previous version"));
        world_free(w);

        /* a version that compares fine but cannot name a file: refused before anything is staged */
        w = world_new();
        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        w->settings.os_image_configured = true;
        world_osc(w, "c1", "1592.7+a/../b", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work, "PublishPlan ReportResult(failed) ");
        assert_string_equal(w->node->update_failed_reason,
                            "OS version \"1592.7+a/../b\" cannot name a boot image");
        world_free(w);

        /* no image reference configured: blocked as InvalidDesiredState */
        w = world_new();
        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        world_osc(w, "c1", "1592.7", "1.31.4");
        world_applied(w, "c0");
        world_ready(w, "t1");
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_non_null(strstr(w->node->failure, "InvalidDesiredState"));
        world_free(w);
}

/* docs/node-protocol.md §9 scenario 33 and "kill at every boundary": the same scenario run with an agent
 * that dies after every single action (and re-reads state.json) performs exactly the same actions, in the
 * same order, none twice, and ends in the same state. */
static void run_gated_scenario(World *w) {
        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        w->settings.os_image_configured = true;
        world_osc(w, "c1", "1592.7", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        w->node->selected = true;
        run(w);
        world_ready(w, "t1");
        run(w);
}

static void test_kill_at_every_boundary(void **state) {
        World *a = world_new(), *b = world_new();

        run_gated_scenario(a);
        b->crash_after_each_action = true;
        run_gated_scenario(b);

        assert_log("work", a->work,
                   "PublishPlan StageKubelet(1.32.1) "
                   "StageOsImage(1592.7) SwitchKubelet(1.32.1) RestartUnit(kubelet.service) "
                   "SetMarker(1592.7) InstallOsImage(1592.7) Reboot CheckOSCUnits "
                   "CheckKubeletHealth DeletePods "
                   "ReportResult(successful) SetChecksum(c1) ");
        assert_log("crashing agent", b->work, a->work);
        assert_log("phases", b->phases, a->phases);
        assert_log("events", b->events, a->events);
        assert_log("phases", a->phases,
                   "Planned Staging Staged WaitingForDrain Applying Rebooting Verifying Succeeded ");
        assert_int_equal(current_phase(a), UPDATE_PHASE_SUCCEEDED);
        assert_int_equal(current_phase(b), UPDATE_PHASE_SUCCEEDED);
        assert_int_equal(b->pods_deleted, 1);
        world_free(a);
        world_free(b);
}

/* Save the record at every phase, reload, decide twice: the same next action both times. */
static void test_resume_is_deterministic(void **state) {
        World *w = world_new();
        UpdatePhase last = _UPDATE_PHASE_INVALID;
        unsigned phases_seen = 0;

        w->settings.backend = OS_UPDATE_BACKEND_IMAGE;
        w->settings.os_image_configured = true;
        world_osc(w, "c1", "1592.7", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = w->node->selected = true;
        world_ready(w, "t1");
        w->crash_after_each_action = true;

        for (unsigned i = 0; i < 100; i++) {
                UpdateDecision d1 = {}, d2 = {};
                UpdatePhase p = current_phase(w);

                decide(w, &d1);
                decide(w, &d2); /* a second agent instance, same disk, same world */
                assert_int_equal(d1.n_actions, d2.n_actions);
                assert_int_equal(d1.tx->phase, d2.tx->phase);
                for (size_t k = 0; k < d1.n_actions; k++) {
                        assert_int_equal(d1.actions[k].type, d2.actions[k].type);
                        assert_int_equal(d1.actions[k].step, d2.actions[k].step);
                }
                if (p != last) {
                        phases_seen++;
                        last = p;
                }
                update_decision_done(&d1);
                update_decision_done(&d2);
                if (p == UPDATE_PHASE_SUCCEEDED && w->node->applied_checksum &&
                    streq(w->node->applied_checksum, "c1"))
                        break;
                /* run exactly one action, then "die" */
                {
                        UpdateDecision d = {};
                        decide(w, &d);
                        save_tx(w, d.tx);
                        if (d.n_actions > 0) {
                                Outcome o = effects(w, &d.actions[0]);
                                if (o == OUTCOME_OK) {
                                        assert_int_equal(
                                                node_update_action_done(d.tx, &d.actions[0], w->now), 0);
                                        save_tx(w, d.tx);
                                }
                        }
                        update_decision_done(&d);
                        w->now += USEC_PER_SEC;
                }
        }
        assert_int_equal(current_phase(w), UPDATE_PHASE_SUCCEEDED);
        assert_true(phases_seen >= 6);
        world_free(w);
}

/* Feedback for an action of another phase or transaction is refused (out of order). */
static void test_stale_feedback(void **state) {
        World *w = world_new();
        UpdateDecision d = {};
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        UpdateAction stale;

        world_osc(w, "c1", "1592.6", "1.31.5");
        world_applied(w, "c0");
        decide(w, &d);
        assert_int_equal(d.tx->phase, UPDATE_PHASE_STAGING);
        assert_true(d.n_actions >= 2);
        assert_int_equal(d.actions[0].type, UPDATE_ACTION_PUBLISH_PLAN);

        assert_int_equal(update_transaction_copy(d.tx, &tx), 0);
        stale = d.actions[0];
        stale.phase = UPDATE_PHASE_APPLYING;
        assert_int_equal(node_update_action_done(tx, &stale, w->now), -EBADR);
        stale.phase = d.actions[0].phase;
        stale.transaction = (char *) "tx-other";
        assert_int_equal(node_update_action_failed(tx, &stale, UPDATE_FAILURE_DISK_SPACE, "x", w->now),
                         -EBADR);
        assert_int_equal(tx->done, 0);
        assert_int_equal(tx->phase, UPDATE_PHASE_STAGING);

        assert_int_equal(node_update_action_done(tx, &d.actions[0], w->now), 0);
        assert_true(tx->done & (UINT64_C(1) << UPDATE_STEP_PLAN));
        update_decision_done(&d);
        world_free(w);
}

/* The desired state changes before anything was applied: the transaction is cancelled and the new one
 * starts; after that point the running transaction finishes first (never two at once). */
static void test_desired_state_changes(void **state) {
        World *w = world_new();
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        w->node->candidate = true;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_STAGED);

        clear_logs(w);
        world_osc(w, "c2", "1592.6", "1.32.2");
        run(w);
        assert_log("work", w->work, "PublishPlan StageKubelet(1.32.2) ");
        tx = current_tx(w);
        assert_string_equal(tx->id, "tx-2");
        assert_string_equal(tx->checksum, "c2");
        assert_int_equal(tx->phase, UPDATE_PHASE_STAGED);
        world_free(w);
}

/* docs/node-protocol.md §9 scenarios 27/28 at the engine level: an unknown OS version plans nothing;
 * versions that are equal by Gardener's rules need no OS update. */
static void test_os_version_rules(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1.2.0", "1.31.4");
        set(&w->os_version, "1.2");
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, "SetChecksum(c1) ");
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1.2.0", "1.31.4");
        set(&w->os_version, NULL);
        world_applied(w, "c0");
        world_ready(w, "t1");
        run(w);
        assert_log("work", w->work, "");
        assert_non_null(strstr(w->last.status, "unable to find version"));
        world_free(w);

        /* an unparsable desired version: InvalidDesiredState, failed once selected */
        w = world_new();
        world_osc(w, "c1", "invalid", "1.31.4");
        world_applied(w, "c0");
        w->node->selected = true;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_non_null(strstr(w->node->update_failed_reason, "failed comparing current OS version"));
        world_free(w);

        /* no command in the OSC (scenario 18) */
        w = world_new();
        world_osc(w, "c1", "1592.7", "1.31.4");
        set(&w->osc->os_update_command, NULL);
        world_applied(w, "c0");
        world_ready(w, "t1");
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->update_failed_reason,
                            "update command is not provided in OSC, cannot proceed with in-place update");
        world_free(w);
}

/* Kubelet downgrades and minor skips are refused; an unknown running version is treated as gated. */
static void test_kubelet_version_rules(void **state) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.30.9");
        world_applied(w, "c0");
        w->node->selected = true;
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_FAILED);
        assert_string_equal(w->node->update_failed_reason,
                            "kubelet downgrade from 1.31.4 to 1.30.9 is not supported");
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1592.6", "1.33.0");
        world_applied(w, "c0");
        w->node->selected = true;
        run(w);
        assert_string_equal(w->node->update_failed_reason,
                            "kubelet update from 1.31.4 to 1.33.0 skips a minor version");
        world_free(w);

        w = world_new();
        world_osc(w, "c1", "1592.6", "1.31.5");
        set(&w->kubelet_version, "adopted");
        world_applied(w, "c0");
        run(w);
        assert_log("work", w->work, ""); /* gated: waits for MCM */
        world_free(w);
}

static void check_manual_retry(const char *time, const char *position, bool left);

/* A failed transaction stays terminal until ReadyForUpdate is set again (docs/node-protocol.md §7.3): a new
 * lastTransitionTime, or (docs/contract.md §9.9) an appended InPlaceUpdate entry without one, which the
 * decoder identifies by its position, or the same one after UpdateFailed was seen in between (the
 * time has a resolution of one second: a retry of a fast failure can carry the first one's). */
static void test_manual_retry(void **state) {
        static const struct {
                const char *time, *position;
                bool left;
        } retry[] = {
                { "t2", "status.conditions[2]", false },
                { NULL, "status.conditions[3]", false },
                { "t1", "status.conditions[2]", true },
        };

        for (size_t i = 0; i < ELEMENTSOF(retry); i++)
                check_manual_retry(retry[i].time, retry[i].position, retry[i].left);
}

static void check_manual_retry(const char *time, const char *position, bool left) {
        World *w = world_new();

        world_osc(w, "c1", "1592.6", "1.32.1");
        world_applied(w, "c0");
        world_ready(w, "t1");
        snprintf(w->node->in_place_update.position, sizeof(w->node->in_place_update.position),
                 "status.conditions[2]");
        world_fails(w, UPDATE_ACTION_CHECK_KUBELET_HEALTH, "1.32.1", _UPDATE_FAILURE_INVALID,
                    "retry failed with context deadline exceeded");
        run(w);
        assert_int_equal(current_phase(w), UPDATE_PHASE_ROLLED_BACK);

        clear_logs(w);
        w->policy = NULL;
        run(w); /* same condition: nothing */
        assert_log("work", w->work, "");

        if (left) { /* MCM reports the failure */
                set(&w->node->in_place_update.reason, "UpdateFailed");
                run(w);
                assert_log("work", w->work, "");
        }
        world_ready(w, time); /* an operator set ReadyForUpdate again */
        snprintf(w->node->in_place_update.position, sizeof(w->node->in_place_update.position), "%s",
                 position);
        run(w);
        assert_log("work", w->work,
                   "PublishPlan StageKubelet(1.32.1) SwitchKubelet(1.32.1) RestartUnit(kubelet.service) "
                   "CheckOSCUnits CheckKubeletHealth DeletePods ReportResult(successful) "
                   "SetChecksum(c1) ");
        {
                _cleanup_(update_transaction_freep) UpdateTransaction *tx = current_tx(w);
                assert_int_equal(tx->attempt, 2);
        }
        world_free(w);
}

/* The restart annotation (restart-handler.h) waits while units are being changed. */
static void test_blocks_unit_restarts(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        assert_false(node_update_blocks_unit_restarts(NULL));
        assert_int_equal(update_transaction_new(&tx), 0);
        assert_false(node_update_blocks_unit_restarts(tx));
        tx->id = strdup("tx-1");
        for (UpdatePhase p = 0; p < _UPDATE_PHASE_MAX; p++) {
                tx->phase = p;
                assert_int_equal(node_update_blocks_unit_restarts(tx),
                                 p == UPDATE_PHASE_APPLYING || p == UPDATE_PHASE_REBOOTING ||
                                         p == UPDATE_PHASE_VERIFYING);
        }
}

/* The drift repair waits while an OSC is on its way (planned, staged, waiting for the drain, applied). */
static void test_holds_drift_repair(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;

        assert_false(node_update_holds_drift_repair(NULL));
        assert_int_equal(update_transaction_new(&tx), 0);
        assert_false(node_update_holds_drift_repair(tx));
        tx->id = strdup("tx-1");
        for (UpdatePhase p = 0; p < _UPDATE_PHASE_MAX; p++) {
                tx->phase = p;
                assert_int_equal(node_update_holds_drift_repair(tx),
                                 p == UPDATE_PHASE_PLANNED || p == UPDATE_PHASE_STAGING ||
                                         p == UPDATE_PHASE_STAGED || p == UPDATE_PHASE_WAITING_FOR_DRAIN ||
                                         p == UPDATE_PHASE_APPLYING);
        }
        /* The OS step started (the agent came up after it, in the new OS): the OSC is committed, and the
         * node is restored before it is verified (Garden Linux resets /etc with a new version). */
        tx->phase = UPDATE_PHASE_APPLYING;
        tx->os_started_usec = T0;
        assert_false(node_update_holds_drift_repair(tx));
}

/* Decisions without a Node, and without a transaction id when one would start. */
static void test_input_edges(void **state) {
        UpdateDecision d = {};
        UpdateInput in = { .now_usec = T0 };
        World *w = world_new();

        assert_int_equal(node_update_decide(&in, &d), 0);
        assert_int_equal(d.n_actions, 0);
        assert_int_equal(d.tx->phase, UPDATE_PHASE_IDLE);
        assert_int_equal(d.wake_usec, USEC_INFINITY);
        update_decision_done(&d);

        world_osc(w, "c1", "1592.6", "1.31.5");
        world_applied(w, "c0");
        in = (UpdateInput) { .node = w->node,
                             .osc = w->osc,
                             .os_version = "1592.6",
                             .kubelet_version = "1.31.4",
                             .settings = w->settings,
                             .now_usec = T0 };
        assert_int_equal(node_update_decide(&in, &d), -EINVAL);
        world_free(w);
}

static uint64_t rng_state;

static unsigned rnd(unsigned n) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return (unsigned) (rng_state % n);
}

static Outcome policy_random(World *w, const UpdateAction *a, UpdateFailureCode *code, const char **msg) {
        static const char *const messages[] = { "boom", "exit status 3, output: network problems", "" };

        if (rnd(8) == 0) {
                *code = rnd(4) == 0 ? _UPDATE_FAILURE_INVALID : (UpdateFailureCode) rnd(_UPDATE_FAILURE_MAX);
                *msg = messages[rnd(ELEMENTSOF(messages))];
                return OUTCOME_FAIL;
        }
        switch (rnd(12)) {
        case 0:
                return OUTCOME_INTERRUPTED;
        case 1:
                return OUTCOME_DIED_AFTER;
        default:
                return OUTCOME_OK;
        }
}

static void random_change(World *w, unsigned step) {
        static const char *const oses[] = { "1592.6", "1592.7", "1592.8", "1592.7", "invalid" };
        static const char *const kubelets[] = { "1.31.4", "1.31.5", "1.32.1", "1.32.2", "1.30.0" };
        unsigned c = rnd(20);
        char buf[32];

        if (c <= 2)
                w->node->candidate = !w->node->candidate;
        else if (c <= 4)
                w->node->selected = !w->node->selected;
        else if (c <= 7) {
                if (w->node->in_place_update.present)
                        w->node->in_place_update.present = false;
                else {
                        snprintf(buf, sizeof(buf), "t%u", step);
                        world_ready(w, buf);
                }
        } else if (c <= 11) {
                /* one rnd() per statement: argument evaluation order differs between compilers */
                const char *os = oses[rnd(ELEMENTSOF(oses))];
                const char *kubelet = kubelets[rnd(ELEMENTSOF(kubelets))];

                snprintf(buf, sizeof(buf), "c%u", step);
                if (!w->osc)
                        w->osc = calloc(1, sizeof(OscDesired));
                world_osc(w, buf, os, kubelet);
                set(&w->osc->min_version_for_update, rnd(5) == 0 ? "1592.7" : NULL);
        } else if (c == 12) {
                bool failed = w->node->update_result == NODE_UPDATE_RESULT_FAILED;
                w->node->update_result = failed ? NODE_UPDATE_RESULT_NONE : NODE_UPDATE_RESULT_FAILED;
                set(&w->node->update_result_value, failed ? NULL : "failed");
        } else if (c == 13 || c == 14)
                w->now += rnd(20) * 60 * USEC_PER_SEC;
        else if (c == 15)
                reboot(w);
        else if (c == 16)
                w->os_effect = (OsEffect) rnd(4);
        else if (c == 17) {
                w->settings.backend = rnd(2) ? OS_UPDATE_BACKEND_IMAGE : OS_UPDATE_BACKEND_COMMAND;
                w->settings.os_image_configured = rnd(4) != 0;
                w->settings.reboot = rnd(3) == 0 ? REBOOT_METHOD_NONE : REBOOT_METHOD_LOGIN1;
        } else if (c == 18 && w->osc && rnd(4) == 0) {
                osc_desired_free(w->osc);
                w->osc = NULL;
        } else if (c == 19)
                w->reboot_rolls_back = !w->reboot_rolls_back;
}

/* Random worlds, random failures, random deaths: the invariants (checked in decide() and run()) hold,
 * every run reaches quiescence, and a quiet decision stays quiet when asked again. */
static void test_random_walks(void **state) {
        /* TEST_WALKS=<n> soaks with more walks than the default run. */
        const char *soak = getenv("TEST_WALKS");
        unsigned walks = soak ? (unsigned) strtoul(soak, NULL, 10) : 60;

        for (unsigned walk = 0; walk < walks; walk++) {
                World *w = world_new();

                rng_state = 0x9e3779b97f4a7c15ULL * (walk + 1);
                w->policy = policy_random;
                w->crash_after_each_action = walk % 3 == 0;
                world_osc(w, "c0", "1592.6", "1.31.4");
                if (walk % 2)
                        world_applied(w, "c0");

                for (unsigned step = 0; step < 40; step++) {
                        UpdateDecision again = {};

                        random_change(w, step);
                        run(w);
                        /* idle means idle (docs/contract.md §8.13): same input, no new actions */
                        if (getenv("TEST_VERBOSE"))
                                fprintf(stderr, "walk %u step %u: %s | %s\n", walk, step, w->phases,
                                        w->last.status);
                        w->work[0] = w->phases[0] = w->events[0] = '\0';
                        decide(w, &again);
                        if (again.n_actions > 0)
                                fail_msg("walk %u step %u: not quiescent: %s", walk, step,
                                         update_action_type_to_string(again.actions[0].type));
                        update_decision_done(&again);
                }
                if (!w->osc)
                        w->osc = calloc(1, sizeof(OscDesired));
                world_free(w);
        }
}

/* docs/contract.md §9.10: the OSC field, then the Node annotation, then the configuration. */
static void test_min_version_sources(void **state) {
        OscDesired osc = { .min_version_for_update = (char *) "1.0" }, bare = {};
        NodeView node = { .min_version_for_update = (char *) "2.0" }, plain = {};
        UpdateSettings s = { .min_version_for_update = "3.0" }, none = {};

        assert_string_equal(update_min_version_for_update(&osc, &node, &s), "1.0");
        assert_string_equal(update_min_version_for_update(&bare, &node, &s), "2.0");
        assert_string_equal(update_min_version_for_update(&bare, &plain, &s), "3.0");
        assert_string_equal(update_min_version_for_update(NULL, NULL, &s), "3.0");
        assert_null(update_min_version_for_update(&bare, &plain, &none));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_transition_table),
                cmocka_unit_test(test_progress_budget),
                cmocka_unit_test(test_failure_classes),
                cmocka_unit_test(test_json_formats),
                cmocka_unit_test(test_ungated_kubelet_patch),
                cmocka_unit_test(test_gated_work_waits),
                cmocka_unit_test(test_gated_os_and_kubelet_minor),
                cmocka_unit_test(test_command_without_reboot),
                cmocka_unit_test(test_os_command_failures),
                cmocka_unit_test(test_os_command_killed),
                cmocka_unit_test(test_os_rollback_after_reboot),
                cmocka_unit_test(test_foreign_marker),
                cmocka_unit_test(test_died_after_marker_patch),
                cmocka_unit_test(test_node_recreated_during_apply),
                cmocka_unit_test(test_retry_path_failed_label),
                cmocka_unit_test(test_already_successful),
                cmocka_unit_test(test_stale_node_view_after_success),
                cmocka_unit_test(test_no_work_marking),
                cmocka_unit_test(test_fresh_node),
                cmocka_unit_test(test_fresh_node_ready_for_update_checks_os),
                cmocka_unit_test(test_first_osc_before_node),
                cmocka_unit_test(test_first_osc_node_registers_midway),
                cmocka_unit_test(test_first_osc_killed_before_node),
                cmocka_unit_test(test_first_osc_node_never_registers),
                cmocka_unit_test(test_first_osc_retried_before_node),
                cmocka_unit_test(test_no_node_waits),
                cmocka_unit_test(test_min_version_not_met),
                cmocka_unit_test(test_ca_rotation),
                cmocka_unit_test(test_sa_rotation),
                cmocka_unit_test(test_rotation_fails),
                cmocka_unit_test(test_rotation_resumes_after_kill),
                cmocka_unit_test(test_old_unsupported_rotation_retried),
                cmocka_unit_test(test_rotation_before_os_update),
                cmocka_unit_test(test_rotation_not_repeated_by_retry),
                cmocka_unit_test(test_staging_failure_fails_before_drain),
                cmocka_unit_test(test_kubelet_unhealthy_rolls_back),
                cmocka_unit_test(test_retriable_failure_retries),
                cmocka_unit_test(test_api_down_during_success_patch),
                cmocka_unit_test(test_image_backend),
                cmocka_unit_test(test_kill_at_every_boundary),
                cmocka_unit_test(test_resume_is_deterministic),
                cmocka_unit_test(test_stale_feedback),
                cmocka_unit_test(test_desired_state_changes),
                cmocka_unit_test(test_os_version_rules),
                cmocka_unit_test(test_kubelet_version_rules),
                cmocka_unit_test(test_manual_retry),
                cmocka_unit_test(test_hostile_kubelet_fields_fail_terminally),
                cmocka_unit_test(test_blocks_unit_restarts),
                cmocka_unit_test(test_holds_drift_repair),
                cmocka_unit_test(test_input_edges),
                cmocka_unit_test(test_random_walks),
                cmocka_unit_test(test_min_version_sources),
                cmocka_unit_test(test_osc_work_ungated),
                cmocka_unit_test(test_osc_work_failure_keeps_checksum),
                cmocka_unit_test(test_osc_work_gated),
                cmocka_unit_test(test_osc_work_waits_for_the_secret_after_restart),
                cmocka_unit_test(test_osc_work_with_kubelet_minor),
                cmocka_unit_test(test_osc_work_failure_rolls_kubelet_back),
                cmocka_unit_test(test_first_kubelet_unhealthy_goes_again),
                cmocka_unit_test(test_osc_work_waits_for_the_secret),
                cmocka_unit_test(test_osc_work_error_fails_at_once),
                cmocka_unit_test(test_refused_osc_fails_then_next_applies),
                cmocka_unit_test(test_refused_osc_already_applied),
                cmocka_unit_test(test_osc_work_retriable_error_retried),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
