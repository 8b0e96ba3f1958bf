/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Before an OSC's unit items run: asks systemd what the agent's own unit, the kubelet and
 * containerd hang on (each one's Slice=, its Requires=, Requisite=, BindsTo=, PartOf= and
 * StopPropagatedFrom= followed through the units they name, its Conflicts= and ConflictedBy=),
 * adds what the OSC's unit texts will declare, and judges every unit item not done yet with
 * core/unit-guard. A refused item stops the run before anything of the OSC is written, so a bad
 * OSC is held whole.
 *
 * Reads one unit at a time over D-Bus (a few dozen on a node; at most OSC_GUARD_UNITS_MAX per
 * protected unit). Logs nothing: the verdict goes to the owner. The OscGuard borrows the OscChanges
 * (which must outlive it) and holds a reference on the bus. */

#include <stdbool.h>
#include <systemd/sd-bus.h>

#include "core/osc-diff.h"
#include "util/macro.h"

#define OSC_GUARD_UNITS_MAX 64

typedef struct OscGuard OscGuard;

typedef struct OscGuardParams {
        const char *self_unit;       /* restart.selfUnit */
        char *const *replaced_units; /* osc.replacedUnits */
        const char *kubelet_unit;    /* kubelet.unit */
        const char *containerd_unit;
} OscGuardParams;

/* error 0: every unit item may run. -EPERM: the item on `unit` is refused, `why` says what it
 * would stop. Else systemd could not be read about `unit` (`why`: the D-Bus error). Borrowed
 * strings; the guard may be freed from here (touch nothing of it after). */
typedef void (*OscGuardDone)(OscGuard *g, int error, const char *unit, const char *why, void *userdata);

/* Whether `c` has a unit item (write, delete, command) not done yet: only then is there anything
 * to judge. */
bool osc_guard_needed(const OscChanges *c);

/* Starts the reads; `done` comes later from the bus, never from inside this call. */
int osc_guard_start(sd_bus *bus, const OscGuardParams *p, const OscChanges *c, OscGuardDone done,
                    void *userdata, OscGuard **ret);
OscGuard *osc_guard_free(OscGuard *g);
DEFINE_CLEANUP_FUNC(OscGuard, osc_guard_free);
