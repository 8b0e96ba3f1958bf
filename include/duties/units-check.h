/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The SystemdUnitsReady condition (docs/node-protocol.md §8 item 3, docs/contract.md §9.8): every period (1
 * min; the first at start) the state of each unit the OSC manages is read over D-Bus (systemd/unit-state.h),
 * judged by core/unit-health.h and handed to the reporter, which writes the condition only when it changed.
 * The list of units is an input: duties/applied-osc sets the units of the last-applied OSC (replaced units,
 * e.g. gardener-node-agent.service, left out) at start and after every apply. Until it does, the list is
 * empty, and an empty list writes nothing (as upstream without a last-applied OSC).
 *
 * While systemd cannot be reached (the bus restarting, systemd re-executing) a round is skipped, and
 * an answer lost on the way is no verdict: the condition stays as it is, never turned False for it.
 *
 * Owns its unit list, timer and D-Bus calls; borrows the event loop, the UnitControl (whose
 * connection it reads over) and the reporter. Logs a round it cannot read, once per distinct error
 * (a bus that went away only at debug: the Manager says that). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct UnitsCheck UnitsCheck;

int units_check_new(sd_event *event, UnitControl *units, Reporter *reporter, uint64_t period_usec,
                    uint64_t stuck_usec, UnitsCheck **ret) _warn_unused_result_;
UnitsCheck *units_check_free(UnitsCheck *c);
DEFINE_CLEANUP_FUNC(UnitsCheck, units_check_free);

/* Replaces the list (copied): `names[i]` should be enabled when `enabled[i]`. Once started, the
 * next round runs at once. */
int units_check_set_units(UnitsCheck *c, const char *const *names, const bool *enabled,
                          size_t n) _warn_unused_result_;

/* The first round at once, then every period; a no-op when already running. */
int units_check_start(UnitsCheck *c) _warn_unused_result_;
