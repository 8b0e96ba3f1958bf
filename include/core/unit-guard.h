/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What an OSC must never stop or restart (README, "What an OSC may not stop or restart"): the node's
 * lifelines are the agent's own unit (restart.selfUnit), the units it replaces (osc.replacedUnits),
 * the kubelet and containerd.
 *
 * Refused, whatever the OSC says:
 *  - the agent's own unit stopped or removed (restarting it is the agent restarting itself: the
 *    applier does that last, once, with the item marked done first), a replaced unit in any way;
 *  - -.slice, system.slice, init.scope;
 *  - a slice that contains the agent, the kubelet or containerd: its own Slice= or one above it
 *    by name (a-b.slice contains a-b-c.slice, -.slice contains every slice);
 *  - a unit whose stop or restart reaches the agent (the agent's Requires=, Requisite=, BindsTo=,
 *    PartOf=, StopPropagatedFrom=, followed through the units named there), and a slice or target
 *    that reaches the kubelet or containerd that way (their own services may depend on each other:
 *    restarting containerd may restart the kubelet, as intended);
 *  - a unit whose start stops one of the three (Conflicts=, ConflictedBy=), for a restart.
 * Unit files for new slices stay allowed.
 *
 * The facts come from systemd itself (apply/osc-guard.c reads them over D-Bus before the OSC's
 * first item runs) and from the OSC's own unit texts, which systemd sees only once they are
 * written: a protected unit's new Slice=, dependencies and conflicts, and another unit's
 * Conflicts=, PropagatesStopTo= or RequiredBy= naming a protected unit or a slice containing it.
 *
 * Pure: no I/O, no logging. The UnitGuard owns every string in it. */

#include <stdbool.h>
#include <stddef.h>

#include "core/osc-diff.h"

typedef enum UnitGuardRole {
        UNIT_GUARD_AGENT,
        UNIT_GUARD_KUBELET,
        UNIT_GUARD_CONTAINERD,
        _UNIT_GUARD_ROLE_MAX,
        _UNIT_GUARD_ROLE_INVALID = -EINVAL,
} UnitGuardRole;

typedef enum UnitGuardEdgeKind {
        UNIT_GUARD_REACHES,   /* stopping or restarting `unit` stops or restarts the protected one */
        UNIT_GUARD_CONFLICTS, /* starting `unit` stops the protected one */
        _UNIT_GUARD_EDGE_KIND_MAX,
        _UNIT_GUARD_EDGE_KIND_INVALID = -EINVAL,
} UnitGuardEdgeKind;

/* Why a unit reaches a protected one: `declared_by` has `property`=`named` ("inplace-agent.service
 * has Requires=basic.target"). */
typedef struct UnitGuardEdge {
        UnitGuardEdgeKind kind;
        char *unit;           /* owned */
        char *declared_by;    /* owned */
        char *named;          /* owned */
        const char *property; /* static: "Requires", "Conflicts", ... */
} UnitGuardEdge;

typedef struct UnitGuardUnit {
        char *name;           /* owned; NULL: nothing to protect in this role */
        char *slice;          /* owned: its Slice=; NULL while unknown */
        UnitGuardEdge *edges; /* owned */
        size_t n_edges;
} UnitGuardUnit;

typedef struct UnitGuard {
        char **replaced_units; /* owned, NULL-terminated or NULL */
        UnitGuardUnit units[_UNIT_GUARD_ROLE_MAX];
} UnitGuard;

#define UNIT_GUARD_EDGES_MAX 1024 /* bound per protected unit: a node has tens */

/* `self_unit`, `kubelet_unit`, `containerd_unit` may be NULL (that role protects nothing). */
int unit_guard_init(UnitGuard *g, const char *self_unit, char *const *replaced_units,
                    const char *kubelet_unit, const char *containerd_unit);
void unit_guard_done(UnitGuard *g);

int unit_guard_set_slice(UnitGuard *g, UnitGuardRole role, const char *slice);
/* Records that `declared_by` has `property`=`named`, by which `unit` reaches the protected unit of
 * `role`. `property` must be a static string. Beyond UNIT_GUARD_EDGES_MAX: -E2BIG. */
int unit_guard_add_edge(UnitGuard *g, UnitGuardRole role, UnitGuardEdgeKind kind, const char *unit,
                        const char *declared_by, const char *property, const char *named);

/* Adds what the OSC's unit texts will declare once written (the write-unit items of `c`). */
int unit_guard_learn_osc(UnitGuard *g, const OscChanges *c);

/* Whether `slice` is `inner` or above it: "-.slice" contains every slice, "a.slice" "a-b.slice". */
bool unit_guard_slice_contains(const char *slice, const char *inner);

/* The first unit item of `c` not done yet that must not run: 1 with *ret_index and *ret_why (a
 * sentence naming what it would stop and why), 0 when every one may run, -ENOMEM. */
int unit_guard_check_changes(const UnitGuard *g, const OscChanges *c, size_t *ret_index, char **ret_why);

/* Whether the item is the agent restarting itself (a restart command of the agent's own unit):
 * the applier marks it done before it runs. */
bool unit_guard_is_self_restart(const char *self_unit, const OscWork *w);
