/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reads what systemd says about one unit, asynchronously: one Properties.GetAll over all of the
 * unit object's interfaces (Unit and, for services, Service), on the object path of the unit's
 * name, so that a unit that is not loaded is loaded for the answer and reports LoadState
 * "not-found" rather than an error. For the SystemdUnitsReady check (core/unit-health.h) and the
 * health checks. Logs nothing. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

typedef struct UnitState {
        const char *load_state;         /* "loaded", "not-found", "masked", ... */
        const char *active_state;
        const char *sub_state;
        const char *service_type;       /* Service.Type; NULL for other unit types */
        bool triggered;                 /* TriggeredBy is not empty */
        uint64_t state_change_usec;     /* StateChangeTimestampMonotonic */
} UnitState;

/* `state` and its strings are valid only during the call; NULL when error < 0. Not called after
 * the slot was unreferenced. */
typedef void (*UnitStateDone)(int error, const UnitState *state, void *userdata);

/* `*ret_slot` is the caller's: unreferencing it cancels the read. */
int unit_state_read(sd_bus *bus, const char *unit, UnitStateDone done, void *userdata, sd_bus_slot **ret_slot);
