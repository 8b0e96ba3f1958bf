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
 * over. Logs (it is part of the manager layer): one journal line per action and per phase change,
 * with INPLACE_TRANSACTION/INPLACE_PHASE and the catalog MESSAGE_IDs. */

#include <jansson.h>
#include <stdbool.h>

#include "core/osc.h"
#include "util/macro.h"

typedef struct Manager Manager;
typedef struct Executor Executor;

/* `m` is borrowed and outlives the executor. Loads <stateDirectory>/state.json. */
int executor_new(Manager *m, Executor **ret);
Executor *executor_free(Executor *e);
DEFINE_CLEANUP_FUNC(Executor, executor_free);

/* Starts deciding (after the kubelet binary was adopted if needed). */
int executor_start(Executor *e);

/* New input. `node` is borrowed (NULL: absent); `osc` is taken (NULL: no usable OSC Secret). */
void executor_set_node(Executor *e, const json_t *node);
void executor_set_osc(Executor *e, OscDesired *osc);

/* The restart annotation must wait while the transaction is in a phase that restarts units itself. */
bool executor_blocks_unit_restarts(const Executor *e);
/* An action is running. */
bool executor_is_busy(const Executor *e);
/* Something outside changed (e.g. the restart handler finished): decide again soon. */
void executor_kick(Executor *e);
