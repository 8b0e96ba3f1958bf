/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Helpers shared by node-update.c (machine, records, feedback) and node-update-decide.c (decider).
 * Not part of the public interface. */

#include "core/node-update.h"

/* Sets tx->failure: message sanitised and bounded, prefixed with `prefix` (may be NULL). */
int update_transaction_set_failure(UpdateTransaction *tx, UpdateFailureCode code, const char *prefix,
                                   const char *message, const char *step, uint64_t now_usec);

/* The action writes to the Node or about it (its annotations, labels, condition, Pods, an Event with
 * the Node as involvedObject): without a Node there is nothing to write to. */
bool update_action_needs_node(UpdateActionType t);

/* Name of the first planned step not done yet, or NULL when all are done. */
const char *update_transaction_current_step(const UpdateTransaction *tx);

static inline bool update_step_done(const UpdateTransaction *tx, UpdateStep s) {
        return tx->done & (UINT64_C(1) << s);
}
