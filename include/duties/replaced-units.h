/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The units the agent runs in place of (osc.replacedUnits, gardener-node-agent.service by default,
 * docs/contract.md §9.4) never run beside it: two node agents on one node would both act on
 * ReadyForUpdate and both write the Node. On a node handed over from gardener-node-agent its binary
 * is still there, and an /etc reset (Garden Linux at every OS version change) or an OS extension's
 * boot hook that writes every OSC unit again (os-gardenlinux PR #379) brings its unit file and
 * .wants link back.
 *
 * So at start, then every period, and when kicked (after a drift repair), each replaced unit gets a
 * drop-in in the runtime unit directory (systemd.runtimeUnitDirectory, /run/systemd/system) whose
 * condition fails while the drop-in exists: drop-ins are merged whichever directory the unit file
 * is in, so neither a reset of /etc nor a rewritten unit file undoes it (a runtime mask would lose to
 * a unit file in /etc). A written drop-in is followed by a daemon-reload; then a unit that is active
 * anyway is stopped. The package ships the same drop-in below /usr/lib for gardener-node-agent.service,
 * which holds from the first boot on, before the agent runs. The agent never starts a replaced unit.
 *
 * Owns its timer, round and jobs; borrows the loop, the UnitControl and the reporter. Logs each
 * stop (notice) with one Event (ReplacedUnitStopped), and a failure once per distinct message. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

/* The drop-in's file name in <runtime unit directory>/<unit>.d/. */
#define REPLACED_UNITS_DROP_IN "50-inplace-agent-replaced.conf"

typedef struct ReplacedUnits ReplacedUnits;

/* `names` (NULL-terminated; NULL or empty: nothing to do) and `runtime_directory` are copied. */
int replaced_units_new(sd_event *event, UnitControl *units, Reporter *reporter, char *const *names,
                       const char *runtime_directory, uint64_t period_usec,
                       ReplacedUnits **ret) _warn_unused_result_;
ReplacedUnits *replaced_units_free(ReplacedUnits *k);
DEFINE_CLEANUP_FUNC(ReplacedUnits, replaced_units_free);

/* The drop-in's text for `path` (its own path: the condition fails while it exists). */
int replaced_units_drop_in_text(const char *path, char **ret) _warn_unused_result_;

/* A round now (or right after the one in flight), then every period. */
void replaced_units_kick(ReplacedUnits *k);
