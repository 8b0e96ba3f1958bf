/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Drift repaired, not only reported (docs/contract.md §9.8; upstream reports once at start, gardener#13678,
 * and users found configuration silently gone, gardener#10819, #11194; a wipe-based OS update erases
 * /etc after the agent applied it). A round compares the node with the last-applied OSC
 * (duties/applied-osc.h, decoded as the applier decodes it) and, with osc.driftRepair: repair (the
 * default), restores what drifted the way an apply does it:
 *   1. claim: the executor holds its decisions for the round, or says why not (an update step runs,
 *      a restart request is carried out, an OSC change is on its way or prepared, an in-place update
 *      waits for the drain): then the round is postponed ("Drift round postponed: <why>", debug) and
 *      asked again after min(interval, 30 s);
 *   2. the disk pass (core/osc-drift.h), then what systemd says about each of the OSC's units
 *      (systemd/unit-state.h: enablement, units that should run);
 *   3. the findings into a work list (core/osc-drift-plan.h), run by the executor's OSC runner (the
 *      OSC guard, the applier, a secretRef file's Secret fetched, an imageRef file pulled again);
 *   4. one Warning Event (OSCDriftRepaired, OSCDriftRepairFailed, OSCDriftDetected) naming what drifted
 *      and what was done, one journal line per finding with upstream's reason and message, release.
 * With osc.driftRepair: warn steps 3 is left out and the Event says nothing was touched. An Event
 * that says the same as the round before (drift left alone, a repair failing the same way) is not
 * sent again; a repair always is. Without systemd the round reports and tries again after the short
 * delay.
 *
 * Rounds: the first at drift_repair_start() — called before the executor's first decision, so after
 * every boot the node is repaired before anything else runs, whatever MCM does — then every
 * osc.driftInterval, jittered uniformly within ±10 % (a fleet does not check in step). Nothing is
 * persisted: a repair cut short by a crash is found again by the round at the next start.
 *
 * Owns its timer, the round's model, findings, unit reads and work list; borrows the event loop, the
 * AppliedOsc, the reporter, the gate, the UnitControl, the ReplacedUnits and the option strings (the
 * configuration and the executor outlive it). Logs (duties log what they do): the postponed and finished
 * rounds at debug, drift and repairs at warning/notice. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/osc-diff.h"
#include "core/osc-model.h"
#include "core/osc-protected.h"
#include "core/update-gate.h"
#include "duties/applied-osc.h"
#include "duties/replaced-units.h"
#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct DriftRepair DriftRepair;

typedef struct DriftRepairOptions {
        const char *root_directory;           /* osc.rootDirectory */
        const char *unit_directory;           /* systemd.unitDirectory */
        char *const *replaced_units;          /* osc.replacedUnits */
        const char *self_unit;                /* restart.selfUnit */
        const char *kubelet_binary;           /* kubelet.binaryPath: the kubelet store's */
        DriftRepairMode mode;                 /* osc.driftRepair */
        uint64_t interval_usec;               /* osc.driftInterval */
        const OscModelOptions *model_options; /* as the OSC runner decodes */
        const OscProtected *own_files;        /* the agent's own files */
} DriftRepairOptions;

/* `gate` is the executor's side (update/executor.h executor_gate(): claim, run, release). */
int drift_repair_new(sd_event *event, const DriftRepairOptions *opts, AppliedOsc *applied,
                     Reporter *reporter, const UpdateGate *gate, DriftRepair **ret) _warn_unused_result_;
DriftRepair *drift_repair_free(DriftRepair *d);
DEFINE_CLEANUP_FUNC(DriftRepair, drift_repair_free);

/* The UnitControl and the replaced units' keeper (kicked after each round: a repair may have brought
 * a replaced unit's file back), once the system bus was first up (NULL before). */
void drift_repair_set_units(DriftRepair *d, UnitControl *uc, ReplacedUnits *replaced);

/* The first round now, then every interval. -errno when the timer cannot be set up. */
int drift_repair_start(DriftRepair *d) _warn_unused_result_;
