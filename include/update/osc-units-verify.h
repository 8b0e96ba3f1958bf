/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The CHECK_OSC_UNITS action (docs/contract.md §8.9, the success rule): every unit the last-applied
 * OSC starts (core/unit-health.h unit_health_units_started(): replaced units left out) runs. Each
 * round reads every unit's state with one Properties.GetAll (systemd/unit-state.h) and judges it with
 * unit_health_running(); rounds repeat every `interval_usec` while a unit is activating or inactive,
 * until `timeout_usec` (kubelet.healthTimeout: the same bound as the kubelet's health check). A unit
 * that is not loaded or failed ends the check at once. The failure names every unit that does not
 * run and its state ("kubelet.service (not-found), valitail.service (failed)").
 *
 * The OSC is our <stateDirectory>/last-applied-osc.yaml, or gardener-node-agent's below
 * osc.rootDirectory while we have applied none (as duties/applied-osc). Without one, or with one that
 * starts no unit, there is nothing to verify: it passes. The bus is asked for at each round: while
 * systemd cannot be reached (the agent just started, the connection is coming back) the units count as
 * not known yet and the rounds go on until the deadline, which then fails naming them ("no connection
 * to systemd"): what cannot be checked is never reported running, and a bus that comes up late is no
 * failure.
 *
 * Owns its timer and the reads in flight; borrows the loop and the UnitControl (may be NULL: no
 * systemd). Logs nothing: the executor logs the outcome. */

#include <systemd/sd-event.h>

#include "core/osc-model.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct OscUnitsVerify OscUnitsVerify;

typedef struct OscUnitsVerifyParams {
        const char *state_directory;
        const char *root_directory;
        char *const *replaced_units;
        const OscModelOptions *model_options; /* how the runner decodes an OSC */
        uint64_t timeout_usec;
        uint64_t interval_usec;
} OscUnitsVerifyParams;

/* error >= 0: every unit runs (`message`: how many were checked); else `message` says which do not. */
typedef void (*OscUnitsVerifyDone)(OscUnitsVerify *v, int error, const char *message, void *userdata);

/* `done` comes from the loop, never from inside. -errno when it cannot start. */
int osc_units_verify_start(sd_event *event, UnitControl *units, const OscUnitsVerifyParams *p,
                           OscUnitsVerifyDone done, void *userdata,
                           OscUnitsVerify **ret) _warn_unused_result_;
OscUnitsVerify *osc_units_verify_free(OscUnitsVerify *v);
DEFINE_CLEANUP_FUNC(OscUnitsVerify, osc_units_verify_free);
