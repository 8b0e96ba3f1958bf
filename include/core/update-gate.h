/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the duties ask of the update run: whether a unit may be restarted now, and the drift repair's
 * claim, run and release of the applier. The update run (update/executor.h executor_gate())
 * implements it; duties/ may not include update/, so the Manager hands this interface to each duty
 * that needs it at construction (docs/architecture.md). A type only: no code lives here. */

#include <stdbool.h>

#include "core/osc-diff.h"

/* error >= 0: every item of a repair done; else `message` names the path or unit and why. */
typedef void (*UpdateGateRepairDone)(int error, const char *message, void *userdata);

typedef struct UpdateGate {
        /* A unit restart (the restart annotation's, a health check's) must wait: an update step
         * restarts units itself, or a drift round holds the update run. */
        bool (*blocks_unit_restarts)(void *userdata);
        /* A drift round: 0 and decisions hold until drift_release(), or -EBUSY and *ret_why. */
        int (*drift_claim)(const char **ret_why, void *userdata);
        void (*drift_release)(void *userdata);
        /* Runs the repair work list `changes` (borrowed until `done`) while claimed. */
        int (*drift_run)(OscChanges *changes, UpdateGateRepairDone done, void *done_userdata,
                         void *userdata);
        void *userdata;
} UpdateGate;
