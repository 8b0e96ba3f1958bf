/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apply/osc-state.h"
#include "core/osc.h"
#include "core/unit-health.h"
#include "systemd/unit-state.h"
#include "update/osc-units-verify.h"
#include "util/error-message.h"
#include "util/event-util.h"
#include "util/string-util.h"
#include "util/time-util.h"

typedef struct CheckedUnit {
        OscUnitsVerify *owner; /* borrowed */
        char *name;            /* owned */
        sd_bus_slot *slot;     /* owned: the read in flight */
        UnitRunning running;
        char *why; /* owned: its state, for the message */
} CheckedUnit;

struct OscUnitsVerify {
        sd_event *event;      /* borrowed */
        UnitControl *control; /* borrowed; NULL: no systemd */
        CheckedUnit *units;   /* owned */
        size_t n_units;
        size_t pending;         /* reads of this round in flight */
        uint64_t deadline_usec; /* CLOCK_MONOTONIC */
        uint64_t interval_usec;
        uint64_t timeout_usec;
        int error;              /* the outcome, once known */
        char *message;          /* owned */
        sd_event_source *timer; /* owned: the next round, or the outcome from the loop */
        OscUnitsVerifyDone done;
        void *userdata;
};

OscUnitsVerify *osc_units_verify_free(OscUnitsVerify *v) {
        if (!v)
                return NULL;
        for (size_t i = 0; i < v->n_units; i++) {
                sd_bus_slot_unref(v->units[i].slot);
                free(v->units[i].name);
                free(v->units[i].why);
        }
        free(v->units);
        free(v->message);
        sd_event_source_disable_unref(v->timer);
        free(v);
        return NULL;
}

/* The units the last-applied OSC starts: ours, else gardener-node-agent's; none: -ENOENT. */
static int load_units(OscUnitsVerify *v, const OscUnitsVerifyParams *p, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ char *path = NULL;
        size_t n;
        int r;

        r = osc_state_read_applied(p->state_directory, p->root_directory, p->model_options, &m, &path,
                                   ret_error);
        if (r < 0)
                return r;
        r = unit_health_units_started(m, p->replaced_units, &names, &n);
        if (r < 0)
                return r;
        v->units = calloc(n ?: 1, sizeof(CheckedUnit));
        if (!v->units)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                v->units[i] =
                        (CheckedUnit) { .owner = v, .name = strdup(names[i]), .running = UNIT_WAITING };
                v->n_units++;
                if (!v->units[i].name)
                        return -ENOMEM;
        }
        return 0;
}

/* "a.service (failed), b.service (activating)": the units that do not run. */
static char *not_running(const OscUnitsVerify *v) {
        _cleanup_free_ char *s = NULL;

        for (size_t i = 0; i < v->n_units; i++)
                if (v->units[i].running != UNIT_RUNNING &&
                    strextendf_with_separator(&s, ", ", "%s (%s)", v->units[i].name,
                                              strempty(v->units[i].why)) < 0)
                        return NULL;
        return TAKE_PTR(s);
}

static int on_outcome(sd_event_source *s, uint64_t usec, void *userdata) {
        OscUnitsVerify *v = userdata;

        v->timer = sd_event_source_disable_unref(v->timer);
        v->done(v, v->error, v->message, v->userdata);
        return 0;
}

/* The outcome goes to `done` from the loop. */
static void finish(OscUnitsVerify *v, int error, char *message) {
        int r;

        v->error = error;
        free(v->message);
        v->message = message;
        v->timer = sd_event_source_disable_unref(v->timer);
        r = sd_event_add_time_relative(v->event, &v->timer, CLOCK_MONOTONIC, 0, 0, on_outcome, v);
        if (r < 0) {
                /* Without a timer the outcome cannot be delivered from the loop: deliver it now. */
                v->done(v, error, message, v->userdata);
        }
}

static void round_start(OscUnitsVerify *v);

static int on_next_round(sd_event_source *s, uint64_t usec, void *userdata) {
        OscUnitsVerify *v = userdata;

        v->timer = sd_event_source_disable_unref(v->timer);
        round_start(v);
        return 0;
}

static void round_end(OscUnitsVerify *v) {
        bool waiting = false, failed = false;
        char d[DURATION_MAX_STR];
        char *list, *m = NULL;

        for (size_t i = 0; i < v->n_units; i++) {
                waiting = waiting || v->units[i].running == UNIT_WAITING;
                failed = failed || v->units[i].running == UNIT_NOT_RUNNING;
        }
        if (!waiting && !failed) {
                if (asprintf(&m, "all %zu units of the OSC run", v->n_units) < 0)
                        m = NULL;
                finish(v, 0, m);
                return;
        }
        if (!failed && event_now_usec(v->event) < v->deadline_usec) {
                if (sd_event_add_time_relative(v->event, &v->timer, CLOCK_MONOTONIC, v->interval_usec,
                                               USEC_PER_MSEC, on_next_round, v) >= 0)
                        return;
        }
        list = not_running(v);
        if (list &&
            asprintf(&m, "units of the OSC not running%s%s: %s", failed ? "" : " after ",
                     failed ? "" : format_duration(d, sizeof(d), v->timeout_usec), list) < 0)
                m = NULL;
        free(list);
        finish(v, failed ? -ESRCH : -ETIMEDOUT, m);
}

static void on_state(int error, const UnitState *st, void *userdata) {
        CheckedUnit *u = userdata;
        OscUnitsVerify *v = u->owner;
        const char *why = NULL;

        u->slot = sd_bus_slot_unref(u->slot);
        if (error < 0) {
                /* Not knowing is not running yet: asked again until the deadline. */
                u->running = UNIT_WAITING;
                why = "state unknown";
        } else {
                UnitHealthState h = {
                        .name = u->name,
                        .enabled = true,
                        .load_state = st->load_state,
                        .active_state = st->active_state,
                        .sub_state = st->sub_state,
                        .service_type = st->service_type,
                        .triggered = st->triggered,
                };
                u->running = unit_health_running(&h, &why);
        }
        (void) free_and_strdup(&u->why, why);
        if (--v->pending == 0)
                round_end(v);
}

static void round_start(OscUnitsVerify *v) {
        sd_bus *bus = v->control ? unit_control_get_bus(v->control) : NULL;

        for (size_t i = 0; i < v->n_units; i++) {
                CheckedUnit *u = &v->units[i];

                if (!bus || unit_state_read(bus, u->name, on_state, u, &u->slot) < 0) {
                        u->running = UNIT_WAITING;
                        (void) free_and_strdup(&u->why, bus ? "state unknown" : "no connection to systemd");
                        continue;
                }
                v->pending++;
        }
        if (v->pending == 0)
                round_end(v);
}

int osc_units_verify_start(sd_event *event, UnitControl *units, const OscUnitsVerifyParams *p,
                           OscUnitsVerifyDone done, void *userdata, OscUnitsVerify **ret) {
        _cleanup_(osc_units_verify_freep) OscUnitsVerify *v = NULL;
        _cleanup_free_ char *error = NULL, *m = NULL;
        int r;

        assert(event && p && done && ret);
        v = calloc(1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        *v = (OscUnitsVerify) {
                .event = event,
                .control = units,
                .interval_usec = p->interval_usec ?: USEC_PER_SEC,
                .timeout_usec = p->timeout_usec,
                .deadline_usec = event_now_usec(event) + p->timeout_usec,
                .done = done,
                .userdata = userdata,
        };
        r = load_units(v, p, &error);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT || (r >= 0 && v->n_units == 0))
                finish(v, 0, strdup("the OSC starts no unit"));
        else if (r < 0)
                finish(v, r, error ? TAKE_PTR(error) : strdup("cannot read the last-applied OSC"));
        else
                round_start(v);
        *ret = TAKE_PTR(v);
        return 0;
}
