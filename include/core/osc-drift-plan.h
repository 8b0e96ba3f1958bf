/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Drift repaired the way an apply does it (docs/contract.md §9.8): the findings of core/osc-drift.h turned
 * into an OscChanges work list (core/osc-diff.h) for the same applier, in the apply's order
 * (docs/node-protocol.md §6.4): containerd config, files, registries, imageRef files, unit files (with their
 * enablement), one daemon-reload, the unit commands, the kubelet health check. Restarted are exactly the
 * affected units, each once: a unit whose file or drop-in drifted, a unit listing a drifted file in
 * filePaths (the diff's rule for a changed file), containerd when its config.toml drifted, and a unit the
 * OSC starts that is inactive; each gets its effective command (osc_unit_effective_command()). A unit whose
 * only drift is its enablement is enabled or disabled, not restarted.
 *
 * Never touched, reported in *ret_skipped instead ("<subject> (<why>)"): the agent's own unit
 * (restart.selfUnit; the agent runs from it) and files among the agent's own (core/osc-protected.h).
 * Replaced units and the kubelet binary never get here (the check leaves them out); neither does
 * anything the OSC does not name. A unit file is restored without touching the rest of its <name>.d
 * (the applier's restore mode), so an admin's own drop-in next to the OSC's stays.
 *
 * osc_drift_summary() is the one Warning Event of a round: what drifted (reason and subject, each
 * once), what was done or why nothing was, bounded to OSC_DRIFT_SUMMARY_MAX bytes with "(+N more)".
 *
 * Pure: no I/O (the protected check canonicalizes through the caller's callback), no logging. */

#include <stddef.h>

#include "core/osc-diff.h"
#include "core/osc-drift.h"
#include "core/osc-protected.h"

#define OSC_DRIFT_SUMMARY_MAX 1000

typedef struct OscDriftPlanParams {
        const OscModel *model;         /* the last-applied OSC the findings are about */
        const char *self_unit;         /* restart.selfUnit */
        char *const *replaced_units;   /* osc.replacedUnits: containerd is not restarted when replaced */
        const OscProtected *protected; /* the agent's own files; NULL: none */
        OscCanonicalize canonicalize;  /* where root+path would be written (see osc-protected.h) */
        void *userdata;
} OscDriftPlanParams;

/* *ret is NULL when nothing is to be done; *ret_skipped NULL when nothing was left out. -ENOMEM. */
int osc_drift_plan(const OscDriftPlanParams *p, const OscDrift *d, OscChanges **ret, char ***ret_skipped);

typedef enum OscDriftOutcome {
        OSC_DRIFT_REPAIRED,          /* every item of the plan done, but for units the unit guard
                                      * refused (items marked refused; `detail`: "<unit> (<why>); ...") */
        OSC_DRIFT_REPAIR_FAILED,     /* `detail` says why; items before the failing one are done */
        OSC_DRIFT_WARNED,            /* osc.driftRepair: warn: nothing touched */
        OSC_DRIFT_NOTHING_TO_REPAIR, /* only findings the agent may not or cannot restore */
        _OSC_DRIFT_OUTCOME_MAX,
        _OSC_DRIFT_OUTCOME_INVALID = -EINVAL,
} OscDriftOutcome;

/* The Event's reason for an outcome: OSCDriftRepaired, OSCDriftRepairFailed, OSCDriftDetected. */
const char *osc_drift_outcome_reason(OscDriftOutcome o);

/* "Drift from the last-applied OSC: FileMissing /etc/a, UnitFileMissing b.service. Repaired: write
 * file /etc/a (0644), write unit b.service (...), reload systemd, restart unit b.service. Not
 * repaired: ..." — `plan` (may be NULL) lists what was done (REPAIRED: all of it; REPAIR_FAILED: the
 * items marked done). A repair that left refused units out says "Repaired N of M: ...; refused:
 * <detail>". */
int osc_drift_summary(const OscDrift *d, const OscChanges *plan, char *const *skipped, OscDriftOutcome o,
                      const char *detail, char **ret);
