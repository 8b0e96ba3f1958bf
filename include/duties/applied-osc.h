/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The last-applied OSC as GNA's quieter duties read it (docs/node-protocol.md §8 items 3 and 7): the file is
 * <stateDirectory>/last-applied-osc.yaml (apply/osc-state.h), or, while this agent has applied
 * nothing yet, gardener-node-agent's <root>/var/lib/gardener-node-agent/last-applied-osc.yaml.
 *   - SystemdUnitsReady: its units (core/unit-health.h unit_health_units_from_osc(), replaced units
 *     left out) are handed to the UnitsCheck at start and whenever the file is replaced: an inotify
 *     watch on the state directory sees osc_state_commit()'s rename, so the applier needs no hook.
 *     Without the file the UnitsCheck has no units and writes nothing.
 *   - The drift repair (duties/drift-repair.h) reads it with applied_osc_load().
 * Reads are small and blocking (local files, at start and once per apply). Owns its inotify source;
 * borrows the event loop, the UnitsCheck (may be NULL) and the option strings (the
 * configuration outlives it). Logs a file it cannot read or decode, once per distinct message
 * (warning): its callers do not say it again. */

#include <systemd/sd-event.h>

#include "core/osc-model.h"
#include "duties/units-check.h"
#include "util/macro.h"

typedef struct AppliedOscOptions {
        const char *state_directory;
        const char *root_directory;  /* osc.rootDirectory: where GNA's last-applied OSC is */
        char *const *replaced_units; /* osc.replacedUnits (NULL: none) */
} AppliedOscOptions;

typedef struct AppliedOsc AppliedOsc;

/* Loads the units at once (see above). */
int applied_osc_new(sd_event *event, const AppliedOscOptions *opts, UnitsCheck *units_check,
                    AppliedOsc **ret) _warn_unused_result_;
AppliedOsc *applied_osc_free(AppliedOsc *a);
/* The UnitsCheck, when the system bus was first up only after start (`units_check` was NULL); loads
 * the units into it. */
void applied_osc_set_units_check(AppliedOsc *a, UnitsCheck *units_check);
DEFINE_CLEANUP_FUNC(AppliedOsc, applied_osc_free);

/* Re-reads the file and hands its units to the UnitsCheck (the inotify watch calls it; callable
 * after an apply where inotify is unavailable). A file that cannot be read or decoded is logged
 * once per distinct error and leaves the list as it was. */
void applied_osc_reload(AppliedOsc *a);

/* The last-applied OSC decoded with `opts` (NULL: no host name, nothing injected) and the path it
 * was read from: 0, -ENOENT when there is none, another -errno when it cannot be read or decoded
 * (logged once per distinct error, as for the units check). */
int applied_osc_load(AppliedOsc *a, const OscModelOptions *opts, OscModel **ret,
                     char **ret_path) _warn_unused_result_;
