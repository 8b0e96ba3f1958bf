/* SPDX-License-Identifier: Apache-2.0 */
/* The model and explorer of update-model.h. Drives the real decider and the real feedback, exactly
 * as agent/update/executor.c does: decide, persist, run the batch one action at a time, feed each
 * result back, persist after each; the record goes through state-codec before every decision. */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/node-update.h"
#include "core/state-codec.h"
#include "update-model.h"
#include "util/string-util.h"
#include "util/strv.h"

#define T0_USEC (1740823200ULL * USEC_PER_SEC)
#define NO_WAKE UINT32_MAX

static const char *const kubelet_versions[] = { NULL, "1.31.4", "1.31.5", "1.32.1" };
static const char *const os_versions[] = { "1592.6", "1592.7" };

typedef struct OscSpec {
        const char *checksum;
        unsigned kubelet; /* index into kubelet_versions */
        unsigned os;      /* index into os_versions */
        bool work_gated;  /* its files carry an in-place flag */
        const char *ca_rotation;
} OscSpec;

static const OscSpec osc_specs[_OSC_MAX] = {
        [OSC_BASE] = { "c0", 1, 0, false, NULL },
        [OSC_KUBELET_PATCH] = { "c1", 2, 0, false, NULL },
        [OSC_KUBELET_MINOR] = { "c2", 3, 0, false, NULL },
        [OSC_OS_UPDATE] = { "c3", 1, 1, false, NULL },
        [OSC_FILES] = { "c4", 1, 0, false, NULL },
        [OSC_FILES_GATED] = { "c5", 1, 0, true, NULL },
        [OSC_ROTATION] = { "c6", 1, 0, false, "2025-03-01T09:00:00Z" },
};

static const char *const event_names[_EV_MAX] = {
        [EV_RUN] = "EV_RUN",           [EV_REBOOT] = "EV_REBOOT",
        [EV_NEW_OSC] = "EV_NEW_OSC",   [EV_CANDIDATE] = "EV_CANDIDATE",
        [EV_SELECTED] = "EV_SELECTED", [EV_READY] = "EV_READY",
        [EV_LEAVE] = "EV_LEAVE",       [EV_WAIT] = "EV_WAIT",
};
static const char *const run_names[] = {
        [RUN_OK] = "RUN_OK",
        [RUN_FAIL] = "RUN_FAIL",
        [RUN_CRASH_BEFORE] = "RUN_CRASH_BEFORE",
        [RUN_CRASH_AFTER] = "RUN_CRASH_AFTER",
        [RUN_OS_IN_PLACE] = "RUN_OS_IN_PLACE",
};
static const char *const osc_names[_OSC_MAX] = {
        "OSC_BASE",  "OSC_KUBELET_PATCH", "OSC_KUBELET_MINOR", "OSC_OS_UPDATE",
        "OSC_FILES", "OSC_FILES_GATED",   "OSC_ROTATION",
};

/* Everything but the record; zeroed as a whole so that it hashes byte for byte. */
typedef struct World {
        uint8_t desired;       /* ModelOsc */
        uint8_t committed;     /* ModelOsc last applied */
        uint8_t node_checksum; /* ModelOsc + 1 on the Node; 0: none */
        uint8_t result;        /* NodeUpdateResult label */
        uint8_t cond;          /* 0: no InPlaceUpdate condition, 1: ReadyForUpdate, 2: UpdateFailed */
        uint8_t ready_gen;     /* its lastTransitionTime */
        uint8_t candidate, selected;
        uint8_t marker; /* OS index + 1 of updating-operating-system-version; 0: none */
        uint8_t failed_reason;
        uint8_t kubelet; /* index into kubelet_versions (0: no binary) */
        uint8_t os;
        uint8_t staged_os; /* OS index + 1 the next boot comes up with; 0: none */
        uint8_t units_present, units_running, kubelet_unit, kubelet_running;
        uint8_t boot;
        uint32_t now_s;
        uint32_t wake_s;
        /* Bookkeeping for the invariants, about transaction `tx_id`. */
        uint8_t gate_seen; /* ReadyForUpdate or update-result=failed seen for `desired` */
        uint8_t gate_oscs; /* bit set of ModelOsc the gate was ever seen for: a desired state
                            * that comes back is the same one */
        uint8_t verified_units, verified_health;
        uint8_t tx_result;
        uint8_t tx_reported; /* its success was reported: the checksum completes that report */
        uint8_t os_runs;
        char tx_id;
} World;

typedef struct State {
        World w;
        char *saved; /* owned: state.json; NULL: nothing persisted */
} State;

typedef struct Ctx {
        const ModelOptions *o;
        OscDesired oscs[_OSC_MAX];
        char *violation; /* owned: the first broken invariant */
} Ctx;

_printf_(2, 3) static void violate(Ctx *c, const char *format, ...) {
        va_list ap;

        if (c->violation)
                return;
        va_start(ap, format);
        c->violation = strdup_vprintf(format, ap);
        va_end(ap);
        if (!c->violation)
                c->violation = strdup("out of memory");
}

static void ctx_init(Ctx *c, const ModelOptions *o) {
        static char *args[_OSC_MAX][2];

        *c = (Ctx) { .o = o };
        for (unsigned i = 0; i < _OSC_MAX; i++) {
                const OscSpec *s = &osc_specs[i];
                static char images[_OSC_MAX][96];

                snprintf(images[i], sizeof(images[i]), "registry.example.com/hyperkube:v%s",
                         kubelet_versions[s->kubelet]);
                args[i][0] = (char *) os_versions[s->os];
                c->oscs[i] = (OscDesired) {
                        .checksum = (char *) s->checksum,
                        .in_place = true,
                        .os_version = (char *) os_versions[s->os],
                        .kubelet_version = (char *) kubelet_versions[s->kubelet],
                        .has_rotation = s->ca_rotation,
                        .ca_rotation = (char *) s->ca_rotation,
                        .os_update_command = (char *) "/opt/gardener/bin/inplace-update.sh",
                        .os_update_args = args[i],
                        .kubelet_file_found = true,
                        .kubelet_image = images[i],
                        .kubelet_file_in_image = (char *) "/kubelet",
                };
        }
}

static int index_of(const char *const *l, size_t n, const char *s) {
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(l[i], s))
                        return (int) i;
        return -1;
}

static int osc_of(const char *checksum) {
        for (unsigned i = 0; i < _OSC_MAX; i++)
                if (streq_ptr(osc_specs[i].checksum, checksum))
                        return (int) i;
        return -1;
}

static void state_init(State *s) {
        memset(s, 0, sizeof(*s));
        s->w = (World) {
                .desired = OSC_BASE,
                .committed = OSC_BASE,
                .node_checksum = OSC_BASE + 1,
                .kubelet = 1,
                .os = 0,
                .units_present = 1,
                .units_running = 1,
                .kubelet_unit = 1,
                .kubelet_running = 1,
                .wake_s = NO_WAKE,
        };
}

static void state_copy(const State *from, State *to) {
        memcpy(&to->w, &from->w, sizeof(World));
        to->saved = from->saved ? strdup(from->saved) : NULL;
}

static void state_done(State *s) {
        free(s->saved);
        s->saved = NULL;
}

static uint64_t state_hash(const State *s) {
        const uint8_t *p = (const uint8_t *) &s->w;
        uint64_t h = 1469598103934665603ULL;

        for (size_t i = 0; i < sizeof(World); i++)
                h = (h ^ p[i]) * 1099511628211ULL;
        for (const char *q = s->saved; q && *q; q++)
                h = (h ^ (uint8_t) *q) * 1099511628211ULL;
        return h ?: 1;
}

/* ---- the decider's view of the world ---- */

typedef struct View {
        NodeView node;
        char since[32];
        char boot[16];
} View;

static void view_build(const World *w, View *v) {
        memset(v, 0, sizeof(*v));
        v->node.name = (char *) "node-1";
        v->node.uid = (char *) "uid-1";
        v->node.candidate = w->candidate;
        v->node.selected = w->selected;
        v->node.update_result = w->result;
        v->node.update_result_value = w->result == NODE_UPDATE_RESULT_SUCCESSFUL ? (char *) "successful" :
                w->result == NODE_UPDATE_RESULT_FAILED                           ? (char *) "failed" :
                                                                                   NULL;
        if (w->cond) {
                snprintf(v->since, sizeof(v->since), "2025-03-01T10:%02u:00Z", w->ready_gen % 60);
                v->node.in_place_update = (NodeCondition) {
                        .present = true,
                        .status = (char *) "True",
                        .reason = w->cond == 1 ? (char *) NODE_REASON_READY_FOR_UPDATE :
                                                 (char *) "UpdateFailed",
                        .last_transition_time = v->since,
                };
        }
        v->node.updating_os_version = w->marker ? (char *) os_versions[w->marker - 1] : NULL;
        v->node.applied_checksum =
                w->node_checksum ? (char *) osc_specs[w->node_checksum - 1].checksum : NULL;
        v->node.update_failed_reason = w->failed_reason ? (char *) "the model failed it" : NULL;
        snprintf(v->boot, sizeof(v->boot), "boot-%u", w->boot);
}

static UpdateTransaction *load(Ctx *c, const State *s) {
        UpdateTransaction *tx = NULL;
        char *err = NULL;
        int r;

        if (!s->saved)
                return NULL;
        r = state_codec_decode(s->saved, strlen(s->saved), &tx, &err);
        if (r < 0)
                violate(c, "INTERNAL: the persisted record does not decode: %s", strempty(err));
        free(err);
        return tx;
}

static void save(Ctx *c, State *s, const UpdateTransaction *tx) {
        char *text = NULL;

        if (state_codec_encode(tx, &text) < 0) {
                violate(c, "INTERNAL: the record does not encode");
                return;
        }
        free(s->saved);
        s->saved = text;
        /* A new transaction: its checks are yet to be made. */
        if (tx->id && tx->id[strlen(tx->id) - 1] != s->w.tx_id) {
                s->w.tx_id = tx->id[strlen(tx->id) - 1];
                s->w.verified_units = s->w.verified_health = 0;
                s->w.tx_result = s->w.tx_reported = 0;
                s->w.os_runs = 0;
        }
}

static int decide(Ctx *c, const State *s, UpdateDecision *d) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = load(c, s);
        const World *w = &s->w;
        View v;
        UpdateInput in;
        int r;

        if (c->violation)
                return -EINVAL;
        view_build(w, &v);
        in = (UpdateInput) {
                .tx = tx,
                .node = &v.node,
                .osc = &c->oscs[w->desired],
                .os_version = os_versions[w->os],
                .kubelet_version = kubelet_versions[w->kubelet],
                .kubelet_absent = w->kubelet == 0,
                .boot_id = v.boot,
                .new_transaction_id = tx && streq_ptr(tx->id, "tx-a") ? "tx-b" : "tx-a",
                .osc_work = { .error_code = _UPDATE_FAILURE_INVALID },
                .settings = {
                        .backend = c->o->os_image ? OS_UPDATE_BACKEND_IMAGE : OS_UPDATE_BACKEND_COMMAND,
                        .reboot = REBOOT_METHOD_LOGIN1,
                        .kubelet_unit = "kubelet.service",
                        .os_image_configured = c->o->os_image,
                },
                .now_usec = T0_USEC + (uint64_t) w->now_s * USEC_PER_SEC,
        };
        /* As the OSC runner: work for the desired OSC until it is committed (none while the Node
         * already carries its checksum). */
        if (w->committed != w->desired && w->node_checksum != w->desired + 1)
                in.osc_work = (OscWorkView) { .pending = true,
                                              .gated = osc_specs[w->desired].work_gated,
                                              .error_code = _UPDATE_FAILURE_INVALID };
        r = node_update_decide(&in, d);
        if (r < 0)
                violate(c, "INTERNAL: node_update_decide() failed: %s", strerror(-r));
        return r;
}

/* ---- effects ---- */

static bool can_succeed(const World *w, const UpdateAction *a) {
        switch (a->type) {
        case UPDATE_ACTION_CHECK_OSC_UNITS:
                return w->units_present && w->units_running;
        case UPDATE_ACTION_CHECK_KUBELET_HEALTH:
                return w->kubelet_unit && w->kubelet_running && w->kubelet;
        case UPDATE_ACTION_RESTART_UNIT:
                return w->kubelet_unit;
        default:
                return true;
        }
}

static bool can_fail(const World *w, const UpdateAction *a) {
        switch (a->type) {
        case UPDATE_ACTION_CHECK_OSC_UNITS: /* systemd answers what is true */
                return !can_succeed(w, a);
        case UPDATE_ACTION_SWITCH_KUBELET:
        case UPDATE_ACTION_ROLLBACK_KUBELET:
        case UPDATE_ACTION_STOP_UNIT:
                return false;
        default:
                return !update_action_is_best_effort(a->type);
        }
}

/* A transaction that reached Applying finishes even when the desired state moves on: its gate is
 * the one seen for its own desired state. */
static void check_gate(Ctx *c, const World *w, const UpdateTransaction *tx, const UpdateAction *a) {
        if (osc_of(tx->checksum) < 0 || !(w->gate_oscs & (1u << osc_of(tx->checksum))))
                violate(c, "GATE: %s before ReadyForUpdate was seen for the desired state %s",
                        update_action_type_to_string(a->type), strempty(tx->checksum));
}

/* The success rule, against the world and the transaction's own checks. */
static void check_success(Ctx *c, const World *w, const UpdateTransaction *tx, const char *what) {
        int kubelet = index_of(kubelet_versions, ELEMENTSOF(kubelet_versions), tx->kubernetes_version);
        int os = osc_of(tx->checksum) >= 0 ? (int) osc_specs[osc_of(tx->checksum)].os : -1;

        if (!w->units_present || !w->units_running)
                violate(c, "SUCCESS: %s of %s while the OSC's units do not run", what, strempty(tx->id));
        else if (update_checks_kubelet(tx) && (!w->kubelet_unit || !w->kubelet_running))
                violate(c, "SUCCESS: %s of %s while the kubelet does not run", what, strempty(tx->id));
        else if (update_checks_kubelet(tx) && kubelet > 0 && w->kubelet != kubelet)
                violate(c, "SUCCESS: %s of %s with kubelet %s, not the desired %s", what, strempty(tx->id),
                        strempty(kubelet_versions[w->kubelet]), tx->kubernetes_version);
        else if (tx->os_to && !streq(os_versions[w->os], tx->os_to))
                violate(c, "SUCCESS: %s of %s on OS %s, not its target %s", what, strempty(tx->id),
                        os_versions[w->os], tx->os_to);
        else if (tx->gated && os >= 0 && w->os != os)
                violate(c, "SUCCESS: %s of gated %s on OS %s, not the desired %s", what, strempty(tx->id),
                        os_versions[w->os], os_versions[os]);
        else if (!c->o->truth_only && !w->verified_units)
                violate(c, "SUCCESS: %s of %s without CheckOSCUnits passing in this boot", what,
                        strempty(tx->id));
        else if (!c->o->truth_only && update_checks_kubelet(tx) && !w->verified_health)
                violate(c, "SUCCESS: %s of %s without CheckKubeletHealth passing in this boot", what,
                        strempty(tx->id));
}

typedef enum Effect { EFFECT_DONE, EFFECT_DIES } Effect;

static Effect apply(Ctx *c, State *s, const UpdateTransaction *tx, const UpdateAction *a, ModelRun run) {
        World *w = &s->w;
        int i;

        switch (a->type) {
        case UPDATE_ACTION_SET_MARKER:
                w->marker = index_of(os_versions, ELEMENTSOF(os_versions), a->version) + 1;
                break;
        case UPDATE_ACTION_SWITCH_KUBELET:
        case UPDATE_ACTION_ROLLBACK_KUBELET:
                if (a->type == UPDATE_ACTION_SWITCH_KUBELET && tx->gated)
                        check_gate(c, w, tx, a);
                i = index_of(kubelet_versions, ELEMENTSOF(kubelet_versions), a->version);
                w->kubelet = i < 0 ? 0 : i;
                if (!w->kubelet)
                        w->kubelet_running = 0;
                break;
        case UPDATE_ACTION_RESTART_UNIT:
                w->kubelet_running = w->kubelet != 0;
                break;
        case UPDATE_ACTION_STOP_UNIT:
                w->kubelet_running = 0;
                break;
        case UPDATE_ACTION_RUN_OS_COMMAND:
                check_gate(c, w, tx, a);
                if (++w->os_runs > 1)
                        violate(c, "CRASH: the OS command of %s started a second time", strempty(tx->id));
                i = index_of(os_versions, ELEMENTSOF(os_versions), a->args ? a->args[0] : NULL);
                if (run == RUN_OS_IN_PLACE) {
                        w->os = i < 0 ? w->os : i;
                        break;
                }
                w->staged_os = i + 1;
                return EFFECT_DIES; /* the script reboots the node */
        case UPDATE_ACTION_INSTALL_OS_IMAGE:
                check_gate(c, w, tx, a);
                if (++w->os_runs > 1)
                        violate(c, "CRASH: the OS image of %s installed a second time", strempty(tx->id));
                w->staged_os = index_of(os_versions, ELEMENTSOF(os_versions), a->version) + 1;
                break;
        case UPDATE_ACTION_REBOOT:
                return EFFECT_DIES; /* EV_REBOOT completes it */
        case UPDATE_ACTION_APPLY_OSC:
                if (tx->gated && osc_specs[w->desired].work_gated)
                        check_gate(c, w, tx, a);
                i = osc_of(a->checksum);
                w->committed = i < 0 ? w->committed : i;
                w->units_present = w->units_running = w->kubelet_unit = 1;
                w->kubelet_running = w->kubelet != 0;
                break;
        case UPDATE_ACTION_CHECK_OSC_UNITS:
                w->verified_units = 1;
                break;
        case UPDATE_ACTION_CHECK_KUBELET_HEALTH:
                w->verified_health = 1;
                break;
        case UPDATE_ACTION_REPORT_RESULT:
                /* Judged when it first lands; its repetition (feedback lost in a crash) says nothing new. */
                if (tx->phase == UPDATE_PHASE_SUCCEEDED && !w->tx_reported) {
                        check_success(c, w, tx,
                                      a->result == NODE_UPDATE_RESULT_SUCCESSFUL ?
                                              "update-result=successful" :
                                              "the success report");
                        w->tx_reported = 1;
                }
                if (a->result == NODE_UPDATE_RESULT_SUCCESSFUL) {
                        if (!streq_ptr(tx->checksum, osc_specs[w->desired].checksum))
                                violate(c, "ONE_RESULT: successful for %s (checksum %s) while %s is desired",
                                        strempty(tx->id), strempty(tx->checksum),
                                        osc_specs[w->desired].checksum);
                }
                if (a->result != NODE_UPDATE_RESULT_NONE) {
                        if (w->tx_result && w->tx_result != a->result)
                                violate(c, "ONE_RESULT: %s reported %s after %s", strempty(tx->id),
                                        node_update_result_to_string(a->result),
                                        node_update_result_to_string(w->tx_result));
                        w->tx_result = a->result;
                        w->result = a->result;
                        if (a->result == NODE_UPDATE_RESULT_FAILED) {
                                w->gate_seen = 1;
                                w->gate_oscs |= 1u << w->desired;
                                if (!a->keep_reason)
                                        w->failed_reason = 1;
                        }
                }
                if (a->clear_marker)
                        w->marker = w->failed_reason = 0;
                break;
        case UPDATE_ACTION_SET_CHECKSUM:
                i = osc_of(a->checksum);
                if (i != w->committed)
                        violate(c, "CHECKSUM: %s written while %s is the committed OSC", a->checksum,
                                osc_specs[w->committed].checksum);
                else if (a->transaction && !w->tx_reported)
                        check_success(c, w, tx, "the checksum");
                else if (tx && streq_ptr(tx->checksum, a->checksum) &&
                         (tx->phase == UPDATE_PHASE_FAILED || tx->phase == UPDATE_PHASE_ROLLED_BACK))
                        violate(c, "CHECKSUM: %s written alone after %s failed for it", a->checksum,
                                strempty(tx->id));
                w->node_checksum = i + 1;
                break;
        default:
                break;
        }
        return EFFECT_DONE;
}

/* The agent starts (after a crash or a boot); its drift repair at start restores the committed
 * OSC's units unless `repair_fails` or the transaction holds the repair. */
static void agent_start(Ctx *c, State *s, bool repair_fails) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = load(c, s);
        World *w = &s->w;

        if (repair_fails || node_update_holds_drift_repair(tx))
                return;
        w->units_present = w->units_running = w->kubelet_unit = 1;
        w->kubelet_running = w->kubelet != 0;
}

static bool something_missing(const World *w) {
        return !w->units_present || !w->units_running || !w->kubelet_unit ||
                (w->kubelet && !w->kubelet_running);
}

/* EV_RUN: one decision and its batch, as the executor runs it. */
static void run_batch(Ctx *c, State *s, int at, ModelRun run) {
        _cleanup_(update_decision_done) UpdateDecision d = {};
        uint64_t now = T0_USEC + (uint64_t) s->w.now_s * USEC_PER_SEC;
        size_t i;
        int r;

        if (decide(c, s, &d) < 0)
                return;
        save(c, s, d.tx);
        s->w.wake_s = d.wake_usec == USEC_INFINITY || d.wake_usec <= now ?
                NO_WAKE :
                (uint32_t) ((d.wake_usec - T0_USEC) / USEC_PER_SEC + 1);
        for (i = 0; i < d.n_actions && !c->violation; i++) {
                const UpdateAction *a = &d.actions[i];
                bool fail = (run == RUN_FAIL && (int) i == at) || !can_succeed(&s->w, a);

                if (run == RUN_CRASH_BEFORE && (int) i == at)
                        return;
                if (!fail) {
                        Effect e = apply(c, s, d.tx, a, (int) i == at ? run : RUN_OK);

                        if (e == EFFECT_DIES || (run == RUN_CRASH_AFTER && (int) i == at))
                                return;
                        r = node_update_action_done(d.tx, a, now);
                } else
                        r = node_update_action_failed(d.tx, a, _UPDATE_FAILURE_INVALID,
                                                      "the model failed it", now);
                if (r < 0) {
                        violate(c, "INTERNAL: feedback of %s refused: %s",
                                update_action_type_to_string(a->type), strerror(-r));
                        return;
                }
                save(c, s, d.tx);
                if (fail && !update_action_is_best_effort(a->type))
                        break;
        }
}

static void reboot(Ctx *c, State *s, int bits) {
        World *w = &s->w;

        w->boot++;
        if (w->staged_os) {
                w->os = w->staged_os - 1;
                w->staged_os = 0;
        }
        if (bits & REBOOT_ETC_RESET)
                w->units_present = w->kubelet_unit = 0;
        w->units_running = w->units_present;
        w->kubelet_running = w->kubelet_unit && w->kubelet;
        w->verified_units = w->verified_health = 0;
        agent_start(c, s, bits & REBOOT_REPAIR_FAILS);
}

static void step(Ctx *c, State *s, const ModelEvent *e) {
        World *w = &s->w;

        switch (e->kind) {
        case EV_RUN:
                run_batch(c, s, e->arg, e->run);
                if (e->run == RUN_CRASH_BEFORE || e->run == RUN_CRASH_AFTER)
                        agent_start(c, s, /* repair_fails= */ true); /* a crash loses nothing of the node */
                break;
        case EV_REBOOT:
                reboot(c, s, e->arg);
                break;
        case EV_NEW_OSC:
                /* MCM starts a new rollout from scratch. */
                w->desired = e->arg;
                w->candidate = w->selected = 0;
                w->cond = 0;
                w->result = 0;
                w->gate_seen = 0;
                break;
        case EV_CANDIDATE:
                w->candidate = 1;
                break;
        case EV_SELECTED:
                w->candidate = w->selected = 1;
                break;
        case EV_READY:
                w->cond = 1;
                w->ready_gen++;
                w->gate_seen = 1;
                w->gate_oscs |= 1u << w->desired;
                break;
        case EV_LEAVE:
                w->cond = 2;
                break;
        case EV_WAIT:
                w->now_s = w->wake_s;
                w->wake_s = NO_WAKE;
                break;
        default:
                break;
        }
}

/* ---- successors ---- */

typedef struct Events {
        ModelEvent *e;
        size_t n, alloc;
} Events;

static void push(Events *l, ModelEventKind kind, int arg, ModelRun run) {
        if (l->n == l->alloc) {
                l->alloc = l->alloc ? l->alloc * 2 : 32;
                l->e = realloc(l->e, l->alloc * sizeof(ModelEvent));
                assert(l->e);
        }
        l->e[l->n++] = (ModelEvent) { kind, arg, run };
}

static void successors(Ctx *c, const State *s, Events *l) {
        _cleanup_(update_decision_done) UpdateDecision d = {};
        const World *w = &s->w;

        l->n = 0;
        if (decide(c, s, &d) >= 0) {
                push(l, EV_RUN, -1, RUN_OK);
                for (size_t i = 0; i < d.n_actions; i++) {
                        const UpdateAction *a = &d.actions[i];

                        if (update_action_is_best_effort(a->type))
                                continue;
                        if (can_fail(w, a))
                                push(l, EV_RUN, (int) i, RUN_FAIL);
                        push(l, EV_RUN, (int) i, RUN_CRASH_BEFORE);
                        if (can_succeed(w, a))
                                push(l, EV_RUN, (int) i, RUN_CRASH_AFTER);
                        if (a->type == UPDATE_ACTION_RUN_OS_COMMAND)
                                push(l, EV_RUN, (int) i, RUN_OS_IN_PLACE);
                }
        }
        push(l, EV_REBOOT, 0, RUN_OK);
        push(l, EV_REBOOT, REBOOT_ETC_RESET, RUN_OK);
        push(l, EV_REBOOT, REBOOT_ETC_RESET | REBOOT_REPAIR_FAILS, RUN_OK);
        if (something_missing(w))
                push(l, EV_REBOOT, REBOOT_REPAIR_FAILS, RUN_OK);
        for (unsigned i = 0; i < _OSC_MAX; i++)
                if (i != w->desired && (c->o->oscs & (1u << i)))
                        push(l, EV_NEW_OSC, (int) i, RUN_OK);
        if (!w->candidate)
                push(l, EV_CANDIDATE, 0, RUN_OK);
        if (!w->selected)
                push(l, EV_SELECTED, 0, RUN_OK);
        if (w->cond != 1)
                push(l, EV_READY, 0, RUN_OK);
        else
                push(l, EV_LEAVE, 0, RUN_OK);
        if (w->wake_s != NO_WAKE && w->wake_s > w->now_s)
                push(l, EV_WAIT, 0, RUN_OK);
}

/* ---- the search ---- */

typedef struct Trail {
        uint32_t parent; /* index into the trail; UINT32_MAX: the initial state */
        ModelEvent e;
} Trail;

typedef struct Visited {
        uint64_t *h;
        size_t n, size; /* size: a power of two */
} Visited;

/* True when it was new. */
static bool visited_add(Visited *v, uint64_t h) {
        if (2 * (v->n + 1) > v->size) {
                Visited bigger = { .size = v->size ? v->size * 2 : 1 << 16 };

                bigger.h = calloc(bigger.size, sizeof(uint64_t));
                assert(bigger.h);
                for (size_t i = 0; i < v->size; i++)
                        if (v->h[i])
                                (void) visited_add(&bigger, v->h[i]);
                free(v->h);
                *v = bigger;
        }
        for (size_t i = h & (v->size - 1);; i = (i + 1) & (v->size - 1)) {
                if (v->h[i] == h)
                        return false;
                if (!v->h[i]) {
                        v->h[i] = h;
                        v->n++;
                        return true;
                }
        }
}

typedef struct Frontier {
        State *s;
        uint32_t *trail; /* each state's index into the trail */
        size_t n, alloc;
} Frontier;

static void frontier_push(Frontier *f, State *s, uint32_t t) {
        if (f->n == f->alloc) {
                f->alloc = f->alloc ? f->alloc * 2 : 1024;
                f->s = realloc(f->s, f->alloc * sizeof(State));
                f->trail = realloc(f->trail, f->alloc * sizeof(uint32_t));
                assert(f->s && f->trail);
        }
        f->s[f->n] = *s;
        f->trail[f->n++] = t;
}

static void frontier_clear(Frontier *f) {
        for (size_t i = 0; i < f->n; i++)
                state_done(&f->s[i]);
        f->n = 0;
}

void model_result_done(ModelResult *r) {
        free(r->violation);
        free(r->trace);
        *r = (ModelResult) {};
}

static void found(ModelResult *ret, Ctx *c, const Trail *trail, uint32_t t, const ModelEvent *last) {
        size_t n = 1;

        for (uint32_t i = t; i != UINT32_MAX; i = trail[i].parent)
                n++;
        ret->trace = calloc(n, sizeof(ModelEvent));
        assert(ret->trace);
        ret->n_trace = n;
        ret->trace[--n] = *last;
        for (uint32_t i = t; i != UINT32_MAX; i = trail[i].parent)
                ret->trace[--n] = trail[i].e;
        ret->violated = true;
        ret->violation = TAKE_PTR(c->violation);
}

int model_explore(const ModelOptions *o, ModelResult *ret) {
        Frontier cur = {}, next = {};
        Trail *trail = NULL;
        size_t n_trail = 0, trail_alloc = 0;
        Visited visited = {};
        Events ev = {};
        State init;
        Ctx c;

        ctx_init(&c, o);
        *ret = (ModelResult) {};
        state_init(&init);
        (void) visited_add(&visited, state_hash(&init));
        frontier_push(&cur, &init, UINT32_MAX);
        ret->states = 1;

        for (unsigned depth = 0; depth < o->depth && cur.n > 0 && !ret->violated && !ret->truncated;
             depth++) {
                for (size_t k = 0; k < cur.n && !ret->violated && !ret->truncated; k++) {
                        successors(&c, &cur.s[k], &ev);
                        for (size_t j = 0; j < ev.n && !ret->violated; j++) {
                                State s;

                                state_copy(&cur.s[k], &s);
                                step(&c, &s, &ev.e[j]);
                                ret->transitions++;
                                if (c.violation) {
                                        found(ret, &c, trail, cur.trail[k], &ev.e[j]);
                                        state_done(&s);
                                        break;
                                }
                                if (!visited_add(&visited, state_hash(&s))) {
                                        state_done(&s);
                                        continue;
                                }
                                if (n_trail == trail_alloc) {
                                        trail_alloc = trail_alloc ? trail_alloc * 2 : 4096;
                                        trail = realloc(trail, trail_alloc * sizeof(Trail));
                                        assert(trail);
                                }
                                trail[n_trail] = (Trail) { cur.trail[k], ev.e[j] };
                                frontier_push(&next, &s, (uint32_t) n_trail++);
                                ret->states++;
                                if (o->max_states && ret->states >= o->max_states)
                                        ret->truncated = true;
                        }
                }
                if (!ret->violated && !ret->truncated)
                        ret->depth = depth + 1;
                frontier_clear(&cur);
                Frontier t = cur;
                cur = next;
                next = t;
        }
        frontier_clear(&cur);
        frontier_clear(&next);
        free(cur.s);
        free(cur.trail);
        free(next.s);
        free(next.trail);
        free(trail);
        free(visited.h);
        free(ev.e);
        free(c.violation);
        return 0;
}

int model_replay(const ModelOptions *o, const ModelEvent *events, size_t n, char **ret_violation) {
        State s;
        Ctx c;

        ctx_init(&c, o);
        state_init(&s);
        for (size_t i = 0; i < n && !c.violation; i++)
                step(&c, &s, &events[i]);
        state_done(&s);
        if (!c.violation)
                return 0;
        *ret_violation = c.violation;
        return 1;
}

/* What action `e` (an EV_RUN) names, replayed from the start. */
static const char *action_name(const ModelOptions *o, const ModelEvent *events, size_t upto) {
        _cleanup_(update_decision_done) UpdateDecision d = {};
        const char *name = "";
        State s;
        Ctx c;

        ctx_init(&c, o);
        state_init(&s);
        for (size_t i = 0; i < upto && !c.violation; i++)
                step(&c, &s, &events[i]);
        if (events[upto].arg >= 0 && decide(&c, &s, &d) >= 0 && (size_t) events[upto].arg < d.n_actions)
                name = update_action_type_to_string(d.actions[events[upto].arg].type);
        state_done(&s);
        free(c.violation);
        return name;
}

char *model_format_test(const char *name, const ModelOptions *o, const ModelResult *r) {
        _cleanup_free_ char *s = NULL;

        if (strextendf_with_separator(&s, NULL,
                                      "/* %s */\nstatic void %s(void **state) {\n"
                                      "        static const ModelEvent events[] = {\n",
                                      strempty(r->violation), name) < 0)
                return NULL;
        for (size_t i = 0; i < r->n_trace; i++) {
                const ModelEvent *e = &r->trace[i];
                int k;

                if (e->kind == EV_RUN)
                        k = strextendf_with_separator(
                                &s, NULL, "                { EV_RUN, %d, %s },%s%s%s\n", e->arg,
                                run_names[e->run], e->arg >= 0 ? " /* " : "",
                                e->arg >= 0 ? action_name(o, r->trace, i) : "", e->arg >= 0 ? " */" : "");
                else if (e->kind == EV_NEW_OSC)
                        k = strextendf_with_separator(&s, NULL,
                                                      "                { EV_NEW_OSC, %s, RUN_OK },\n",
                                                      osc_names[e->arg]);
                else if (e->kind == EV_REBOOT)
                        k = strextendf_with_separator(
                                &s, NULL, "                { EV_REBOOT, %s, RUN_OK },\n",
                                e->arg == 0 ? "0" :
                                        e->arg == REBOOT_ETC_RESET ?
                                              "REBOOT_ETC_RESET" :
                                        e->arg == REBOOT_REPAIR_FAILS ?
                                              "REBOOT_REPAIR_FAILS" :
                                              "REBOOT_ETC_RESET | REBOOT_REPAIR_FAILS");
                else
                        k = strextendf_with_separator(&s, NULL, "                { %s, 0, RUN_OK },\n",
                                                      event_names[e->kind]);
                if (k < 0)
                        return NULL;
        }
        if (strextendf_with_separator(
                    &s, NULL,
                    "        };\n\n        expect_no_violation(events, ELEMENTSOF(events));\n}\n") < 0)
                return NULL;
        return TAKE_PTR(s);
}
