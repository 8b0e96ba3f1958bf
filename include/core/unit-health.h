/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The SystemdUnitsReady verdict (docs/node-protocol.md §8 item 3, upstream systemdunitcheck): from the units
 * the OSC manages (name and whether it should be enabled) and what systemd says about each, the Node
 * condition's status, reason and message. Pure: the caller reads systemd and writes the condition.
 *
 * Rules, per unit, as upstream:
 *   not loaded (LoadState other than "loaded")        unhealthy "<u>: not loaded"  (only if enabled)
 *   active while it should be disabled                unhealthy "<u>: active but should be disabled"
 *   failed while enabled                              unhealthy "<u>: failed"
 *   activating/deactivating (not auto-restart)        progressing "<u>: activating for 12s", or
 *                                                     unhealthy "<u>: stuck in activating for 5m0s"
 *                                                     once it lasted the stuck threshold
 *   inactive while enabled                            unhealthy "<u>: inactive but should be enabled",
 *                                                     unless dead and oneshot or triggered
 * Any unhealthy unit: False/UnhealthyUnits; else any progressing: True/ProgressingUnits; else
 * True/AllUnitsHealthy. Messages are joined with "; " in the order of the input. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/osc-model.h"
#include "util/macro.h"

#define UNIT_HEALTH_REASON_HEALTHY "AllUnitsHealthy"
#define UNIT_HEALTH_REASON_PROGRESSING "ProgressingUnits"
#define UNIT_HEALTH_REASON_UNHEALTHY "UnhealthyUnits"
#define UNIT_HEALTH_MESSAGE_HEALTHY \
        "All systemd units from the operating system config are running as expected."
#define UNIT_HEALTH_STUCK_USEC (5 * 60 * USEC_PER_SEC)
#define UNIT_HEALTH_UNITS_MAX 1024

/* What systemd says about one unit; strings borrowed, NULL when not read. */
typedef struct UnitHealthState {
        const char *name;
        bool enabled; /* the OSC wants it enabled */
        const char *load_state;
        const char *active_state;
        const char *sub_state;
        const char *service_type;    /* Service.Type; NULL for other unit types */
        bool triggered;              /* TriggeredBy is not empty */
        uint64_t state_change_usec;  /* StateChangeTimestampMonotonic (CLOCK_MONOTONIC) */
        const char *unit_file_state; /* UnitFileState ("enabled", "disabled", "static", ...); only the
                                      * drift check (core/osc-drift.h) reads it */
} UnitHealthState;

typedef struct UnitHealthVerdict {
        bool status;        /* the condition's status: True or False */
        const char *reason; /* static */
        char *message;      /* owned */
} UnitHealthVerdict;

void unit_health_verdict_done(UnitHealthVerdict *v);

/* "inactive" while it should run: not resting "inactive (dead)" between runs as a oneshot service
 * or a timer-, path- or socket-triggered unit does. */
bool unit_health_inactive_unexpected(const UnitHealthState *u);

/* `now_usec` on CLOCK_MONOTONIC; `stuck_usec` is the stuck threshold (UNIT_HEALTH_STUCK_USEC). */
int unit_health_evaluate(const UnitHealthState *units, size_t n, uint64_t now_usec, uint64_t stuck_usec,
                         UnitHealthVerdict *ret);

/* The units an applied OSC manages, as upstream's readManagedUnits: every merged unit except
 * `replaced` ones (docs/contract.md §9.4), sorted by name; one should be enabled when its `enable` says so,
 * else when it carries content or drop-ins. (Upstream judges a spec unit without `enable` before
 * merging in an extension unit's drop-ins; the merged model cannot tell, so such a unit counts as
 * enabled here.) `*ret_names` point into `m`; both arrays are the caller's to free; n may be 0. */
int unit_health_units_from_osc(const OscModel *m, char *const *replaced, const char ***ret_names,
                               bool **ret_enabled, size_t *ret_n);

/* Verification before an update is reported successful (docs/contract.md §8.9): whether a unit the
 * OSC starts runs. Active (a oneshot with RemainAfterExit: active (exited)), or resting "inactive
 * (dead)" as a finished oneshot or a triggered unit does: RUNNING. Activating, deactivating or
 * reloading (a Restart= loop's auto-restart included), or inactive while it should run: WAITING (it
 * may still come; the caller polls until its deadline). Not loaded or failed: NOT_RUNNING. *ret_why
 * (static) says which. */
typedef enum UnitRunning {
        UNIT_RUNNING,
        UNIT_WAITING,
        UNIT_NOT_RUNNING,
} UnitRunning;
UnitRunning unit_health_running(const UnitHealthState *u, const char **ret_why);

/* The units an applied OSC starts: those unit_health_units_from_osc() lists (replaced units left
 * out, sorted) that the applier starts, i.e. whose osc_unit_effective_command() is not stop (as the
 * drift check's UnitInactive). `*ret_names` point into `m` and are the caller's to free. */
int unit_health_units_started(const OscModel *m, char *const *replaced, const char ***ret_names,
                              size_t *ret_n);
