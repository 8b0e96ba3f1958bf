/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reads what systemd says about one unit, asynchronously: one Properties.GetAll over all of the
 * unit object's interfaces (Unit and, for services, Service), on the object path of the unit's
 * name, so that a unit that is not loaded is loaded for the answer and reports LoadState
 * "not-found" rather than an error. For the SystemdUnitsReady check (core/unit-health.h), the
 * health checks, the drift check (enablement, units that should run: core/osc-drift.h), and what
 * the OSC guard asks about the agent, the kubelet and containerd (apply/osc-guard.h: their slice and
 * dependencies). Logs nothing. */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

#include "util/macro.h"

/* The dependency lists read, by their D-Bus property names. */
typedef enum UnitDeps {
        UNIT_DEPS_REQUIRES,
        UNIT_DEPS_REQUISITE,
        UNIT_DEPS_BINDS_TO,
        UNIT_DEPS_PART_OF,
        UNIT_DEPS_STOP_PROPAGATED_FROM, /* systemd >= 249; empty before */
        UNIT_DEPS_CONFLICTS,
        UNIT_DEPS_CONFLICTED_BY,
        _UNIT_DEPS_MAX,
        _UNIT_DEPS_INVALID = -EINVAL,
} UnitDeps;

/* "Requires", "StopPropagatedFrom", ... (static). */
const char *unit_deps_to_string(UnitDeps d);
/* Reads the a{sv} of Properties.GetAll(): `reader` is called for each property with `m` at its
 * variant, which it must consume (sd_bus_message_skip(m, "v") for the ones it does not want). */
typedef int (*UnitPropertyReader)(sd_bus_message *m, const char *name, void *userdata);
int unit_properties_parse(sd_bus_message *m, UnitPropertyReader reader, void *userdata) _warn_unused_result_;
UnitDeps unit_deps_from_string(const char *s);

typedef struct UnitState {
        const char *load_state; /* "loaded", "not-found", "masked", ... */
        const char *active_state;
        const char *sub_state;
        const char *service_type;    /* Service.Type; NULL for other unit types */
        const char *unit_file_state; /* "enabled", "disabled", "static", ...; "" when not loaded */
        bool triggered;              /* TriggeredBy is not empty */
        uint64_t state_change_usec;  /* StateChangeTimestampMonotonic */
        const char *slice;           /* Slice= of a service, socket, scope, ...; NULL otherwise */
        char **deps[_UNIT_DEPS_MAX]; /* NULL-terminated or NULL (empty) */
} UnitState;

/* `state` and its strings are valid only during the call; NULL when error < 0. Not called after
 * the slot was unreferenced. */
typedef void (*UnitStateDone)(int error, const UnitState *state, void *userdata);

/* `*ret_slot` is the caller's: unreferencing it cancels the read. */
int unit_state_read(sd_bus *bus, const char *unit, UnitStateDone done, void *userdata,
                    sd_bus_slot **ret_slot) _warn_unused_result_;
