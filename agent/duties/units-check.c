/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "core/node-view.h"
#include "core/unit-health.h"
#include "duties/units-check.h"
#include "systemd/unit-state.h"
#include "util/event-util.h"
#include "util/log-once.h"
#include "util/log.h"

/* One unit of the list and, during a round, what systemd said about it (copies). */
typedef struct UnitsCheck UnitsCheck;
typedef struct CheckedUnit {
        UnitsCheck *owner; /* borrowed: the list's owner */
        char *name;
        bool enabled;
        sd_bus_slot *slot; /* owned: the read in flight */
        bool answered;
        int error;
        char *load_state, *active_state, *sub_state, *service_type;
        bool triggered;
        uint64_t state_change_usec;
} CheckedUnit;

struct UnitsCheck {
        sd_event *event;    /* borrowed */
        UnitControl *uc;    /* borrowed: the way to systemd */
        Reporter *reporter; /* borrowed */
        uint64_t period_usec, stuck_usec;
        sd_event_source *timer; /* owned */
        CheckedUnit *units;     /* owned */
        size_t n_units;
        size_t pending;     /* reads of this round still in flight */
        LogOnce read_error; /* of the last round, to log each distinct failure once */
};

static void checked_unit_reset(CheckedUnit *u) {
        u->slot = sd_bus_slot_unref(u->slot);
        u->answered = false;
        u->error = 0;
        free(u->load_state);
        free(u->active_state);
        free(u->sub_state);
        free(u->service_type);
        u->load_state = u->active_state = u->sub_state = u->service_type = NULL;
}

static void units_clear(UnitsCheck *c) {
        for (size_t i = 0; i < c->n_units; i++) {
                checked_unit_reset(&c->units[i]);
                free(c->units[i].name);
        }
        free(c->units);
        c->units = NULL;
        c->n_units = c->pending = 0;
}

int units_check_new(sd_event *event, UnitControl *units, Reporter *reporter, uint64_t period_usec,
                    uint64_t stuck_usec, UnitsCheck **ret) {
        UnitsCheck *c;

        assert(event);
        assert(units);
        assert(reporter);
        assert(period_usec > 0);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (UnitsCheck) { .event = event,
                            .uc = units,
                            .reporter = reporter,
                            .period_usec = period_usec,
                            .stuck_usec = stuck_usec };
        *ret = c;
        return 0;
}

UnitsCheck *units_check_free(UnitsCheck *c) {
        if (!c)
                return NULL;
        units_clear(c);
        sd_event_source_disable_unref(c->timer);
        log_once_done(&c->read_error);
        free(c);
        return NULL;
}

int units_check_set_units(UnitsCheck *c, const char *const *names, const bool *enabled, size_t n) {
        CheckedUnit *units;

        assert(c);
        assert(names || n == 0);
        if (n > UNIT_HEALTH_UNITS_MAX)
                return -E2BIG;
        units = calloc(n ?: 1, sizeof(*units));
        if (!units)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                units[i].name = strdup(names[i]);
                units[i].enabled = enabled[i];
                if (!units[i].name) {
                        while (i > 0)
                                free(units[--i].name);
                        free(units);
                        return -ENOMEM;
                }
        }
        units_clear(c); /* a round in flight is dropped */
        c->units = units;
        c->n_units = n;
        /* A new list (an OSC was applied) is judged at once, as upstream's check runs on the Node
         * update that the checksum is. */
        if (c->timer && event_timer_arm(c->timer, 0) < 0)
                log_warning("Cannot re-arm the %s timer; the new units are judged with the next round.",
                            NODE_CONDITION_UNITS_READY);
        return 0;
}

static void units_check_finish(UnitsCheck *c) {
        _cleanup_free_ UnitHealthState *states = calloc(c->n_units ?: 1, sizeof(UnitHealthState));
        _cleanup_(unit_health_verdict_done) UnitHealthVerdict v = {};
        uint64_t mono = 0, real = 0;
        int r = 0;

        if (!states) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < c->n_units; i++) {
                CheckedUnit *u = &c->units[i];

                if (u->error < 0 && r == 0)
                        r = u->error;
                states[i] = (UnitHealthState) {
                        .name = u->name,
                        .enabled = u->enabled,
                        .load_state = u->load_state,
                        .active_state = u->active_state,
                        .sub_state = u->sub_state,
                        .service_type = u->service_type,
                        .triggered = u->triggered,
                        .state_change_usec = u->state_change_usec,
                };
        }
        if (r < 0) {
                /* Not knowing is not a verdict: the condition stays as it is until a round works. An
                 * answer lost with the bus or systemd going is not worth a line: the Manager logs that. */
                if (!unit_control_get_bus(c->uc)) {
                        log_debug_errno(r, "Lost the state of the OSC's units with the way to systemd: %m");
                        return;
                }
                if (log_once_check(&c->read_error, r, NULL))
                        log_warning_errno(
                                r, "Cannot read the state of the OSC's units, keeping %s as it is: %m",
                                NODE_CONDITION_UNITS_READY);
                return;
        }
        log_once_clear(&c->read_error);
        (void) sd_event_now(c->event, CLOCK_MONOTONIC, &mono);
        (void) sd_event_now(c->event, CLOCK_REALTIME, &real);
        r = unit_health_evaluate(states, c->n_units, mono, c->stuck_usec, &v);
        if (r < 0) {
                log_oom();
                return;
        }
        log_debug("%s: %s/%s: %s", NODE_CONDITION_UNITS_READY, v.status ? "True" : "False", v.reason,
                  v.message);
        r = reporter_set_condition(c->reporter, NODE_CONDITION_UNITS_READY, v.status, v.reason, v.message,
                                   real);
        if (r < 0 && r != -ENODEV)
                log_debug_errno(r, "Cannot write %s: %m", NODE_CONDITION_UNITS_READY);
}

static int dup_state(char **field, const char *value) {
        return value ? free_and_strdup(field, value) : 0;
}

static void units_check_on_state(int error, const UnitState *st, void *userdata) {
        CheckedUnit *u = userdata;
        UnitsCheck *c = u->owner;

        u->answered = true;
        u->error = error;
        if (st) {
                u->triggered = st->triggered;
                u->state_change_usec = st->state_change_usec;
                if (dup_state(&u->load_state, st->load_state) < 0 ||
                    dup_state(&u->active_state, st->active_state) < 0 ||
                    dup_state(&u->sub_state, st->sub_state) < 0 ||
                    dup_state(&u->service_type, st->service_type) < 0)
                        u->error = -ENOMEM;
        }
        if (--c->pending == 0)
                units_check_finish(c);
}

/* One round: every unit's state read at once; the verdict when the last answer is in. */
static void units_check_round(UnitsCheck *c) {
        sd_bus *bus = unit_control_get_bus(c->uc);

        if (c->pending > 0)
                return; /* the last round is still waiting for systemd */
        if (!bus)
                return; /* systemd out of reach: nothing to judge, the condition stays */
        for (size_t i = 0; i < c->n_units; i++) {
                CheckedUnit *u = &c->units[i];
                int r;

                checked_unit_reset(u);
                u->owner = c;
                r = unit_state_read(bus, u->name, units_check_on_state, u, &u->slot);
                if (r < 0) {
                        u->answered = true;
                        u->error = r;
                        continue;
                }
                c->pending++;
        }
        if (c->pending == 0 && c->n_units > 0)
                units_check_finish(c); /* nothing could even be asked: report why */
}

static int units_check_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        UnitsCheck *c = userdata;

        units_check_round(c);
        if (event_timer_arm(s, c->period_usec) < 0)
                log_warning("Cannot re-arm the %s timer; the condition is no longer refreshed.",
                            NODE_CONDITION_UNITS_READY);
        return 0;
}

int units_check_start(UnitsCheck *c) {
        int r;

        assert(c);
        if (c->timer)
                return 0;
        r = sd_event_add_time_relative(c->event, &c->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC,
                                       units_check_on_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->timer, "units-check");
        return 0;
}
