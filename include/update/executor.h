/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The update executor: the one place that performs the side effects the pure update engine
 * (node-update.h) decides. It owns the persisted transaction (state.json), the current batch of
 * actions and the objects that carry out the action in flight (kubelet staging, unit restarts, the OS
 * command, the OS image install, the reboot request, the health check, pod deletion, Node writes).
 *
 * Loop: decide → persist → run the batch's actions one at a time (each async on the sd_event loop) →
 * feed each result back (persisting after every one) → decide again. Never decides while an action
 * runs. New input (Node, OSC Secret) only marks the executor dirty; it is looked at once the batch is
 * over. Logs (it is part of the daemon layer): one journal line per action and per phase change,
 * with INPLACE_TRANSACTION/INPLACE_PHASE and the catalog MESSAGE_IDs. */

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/node-view.h"
#include "core/osc-component-config.h"
#include "core/osc-diff.h"
#include "core/osc-protected.h"
#include "core/osc.h"
#include "core/update-gate.h"
#include "identity/identity.h"
#include "identity/token-sync.h"
#include "kube/kube-client.h"
#include "net/http.h"
#include "report/reporter.h"
#include "systemd/system-bus.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct Executor Executor;

/* What the executor works with; all borrowed from the Manager and outliving the executor. `units` is
 * NULL until the system bus was first up (then executor_set_units()); the connection itself is read
 * from `bus` when needed (it is replaced when the bus daemon restarts). */
typedef struct ExecutorDeps {
        sd_event *event;
        const Config *config;
        Http *http;
        SystemBus *bus;
        UnitControl *units;
        Reporter *reporter;
        /* The Manager's slots, read when a credentials rotation runs (it creates and replaces these). */
        Identity *const *identity;            /* our client certificate; *identity NULL: not managed */
        TokenSync *const *tokens;             /* *tokens NULL: no token sync configured */
        OscComponentConfig *const *component; /* GNA's component config of the OSC; may be NULL */
        uint64_t node_registration_usec;      /* a fresh node's first OSC was applied this long ago
                                               * and still no Node: say so (0: the engine's default) */
} ExecutorDeps;

/* Loads <stateDirectory>/state.json. Logs what it resumes (info) and a corrupt record it starts afresh
 * from (error); any failure it returns is not logged: -errno and *ret_error (may be NULL) say why,
 * for the caller to log once. */
int executor_new(const ExecutorDeps *deps, Executor **ret, char **ret_error);
Executor *executor_free(Executor *e);
DEFINE_CLEANUP_FUNC(Executor, executor_free);

/* Starts deciding (after the kubelet binary was adopted if needed). */
int executor_start(Executor *e);

/* New input. `node` is borrowed until the next call (NULL: absent; before the first call the Node is
 * not known, and only a known one is decided on); `osc` is taken (NULL: no usable
 * OSC Secret); `kube` is borrowed (NULL: no API client yet); `busy`: the restart annotation is being
 * carried out, so no batch starts meanwhile. */
void executor_set_node(Executor *e, const NodeView *node);
void executor_set_osc(Executor *e, OscDesired *osc);
void executor_set_kube(Executor *e, KubeClient *kube);
/* The UnitControl, when the system bus was first up only after start (deps.units was NULL). */
void executor_set_units(Executor *e, UnitControl *units);
void executor_set_restarts_busy(Executor *e, bool busy);

/* The daemon's one identity callback forwards its events here (a CA rotation waits for them). */
void executor_identity_event(Executor *e, IdentityEvent ev);
/* The Manager's component config (deps.component) was replaced: a rotation waiting for it goes on. */
void executor_component_changed(Executor *e);

/* The restart annotation and the health checks' restarts must wait while the transaction is in a
 * phase that restarts units itself, or while a drift round holds the executor. */
bool executor_blocks_unit_restarts(const Executor *e);

/* The drift repair (duties/drift-repair.h) runs alone: one owner of the applier. A round starts with
 * executor_drift_claim(): 0 when it may go now — no action runs, no restart request is being carried
 * out, no transaction is between its plan and its applied OSC (an in-place update waiting for the
 * drain included: node_update_holds_drift_repair()), no OSC work is prepared or saved — and from then
 * on no decision starts until executor_drift_release(); else -EBUSY with *ret_why saying what the
 * round waits for (ask again later). Claiming before executor_start() puts the check at start ahead
 * of the first decision. */
int executor_drift_claim(Executor *e, const char **ret_why);
/* Ends the round: a repair still running is cancelled (no callback), decisions go on, and then the
 * released callback is called. */
void executor_drift_release(Executor *e);
/* Told at the end of executor_drift_release(): what waited for the round (a restart request,
 * daemon/restart-annotation.h) may go now. One listener; NULL: none. */
typedef void (*ExecutorReleased)(void *userdata);
void executor_set_released_callback(Executor *e, ExecutorReleased cb, void *userdata);

/* error >= 0: every item of the repair done; else `message` names the path or unit and why. */
typedef UpdateGateRepairDone ExecutorDriftDone;
/* Runs the repair work list `changes` (borrowed until `done`; items done are marked in it) through
 * the OSC runner (osc_runner_repair()) while claimed. `done` comes from the loop, never from inside.
 * -ENOTCONN without systemd, -errno when it cannot start. */
int executor_drift_repair(Executor *e, OscChanges *changes, ExecutorDriftDone done, void *userdata);
/* The functions above as the duties' interface (core/update-gate.h), built once: valid while the
 * executor lives. */
const UpdateGate *executor_gate(const Executor *e);
/* What the drift repair plans with, as the OSC runner applies: valid while the executor lives. */
const OscModelOptions *executor_osc_model_options(const Executor *e);
const OscProtected *executor_own_files(const Executor *e);
/* An action is running. */
bool executor_is_busy(const Executor *e);
