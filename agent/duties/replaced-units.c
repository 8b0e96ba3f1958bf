/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "duties/replaced-units.h"
#include "systemd/unit-state.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/strv.h"

#define DROP_IN_READ_MAX 4096

struct ReplacedUnits {
        UnitControl *units;      /* borrowed */
        Reporter *reporter;      /* borrowed */
        char **names;            /* owned */
        char *runtime_directory; /* owned */
        uint64_t period_usec;
        sd_event_source *timer; /* owned */
        LogOnce last_error;
        char *event; /* owned: a stop's Event the reporter could not send yet (no Node) */

        /* The round in flight: `busy`, unit `next` being read or stopped. */
        bool busy, again;
        size_t next;
        sd_bus_slot *read; /* owned */
        UnitJob *job;      /* borrowed handle: the reload or the stop in flight */
};

int replaced_units_drop_in_text(const char *path, char **ret) {
        return asprintf(
                       ret,
                       "# Written by inplace-agent, which runs in place of this unit (osc.replacedUnits): two node\n"
                       "# agents on one node would both act on an in-place update. The condition fails while this\n"
                       "# file exists; drop-ins are merged wherever the unit file is.\n"
                       "[Unit]\n"
                       "ConditionPathExists=!%s\n",
                       path) < 0 ?
                -ENOMEM :
                0;
}

static void failed(ReplacedUnits *k, int error, const char *what, const char *unit, const char *detail) {
        _cleanup_free_ char *m = NULL;

        if (asprintf(&m, "Cannot keep %s from running beside the agent: %s: %s", unit, what,
                     detail ?: strerror(-error)) < 0)
                return (void) log_oom();
        if (log_once_check(&k->last_error, error, m))
                log_warning("%s", m);
}

/* 1 when the drop-in was written (systemd must reload), 0 when it was there, -errno. */
static int ensure_drop_in(ReplacedUnits *k, const char *unit) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *want = NULL, *have = NULL;
        int r;

        if (asprintf(&dir, "%s/%s.d", k->runtime_directory, unit) < 0 ||
            asprintf(&path, "%s/%s", dir, REPLACED_UNITS_DROP_IN) < 0)
                return -ENOMEM;
        r = replaced_units_drop_in_text(path, &want);
        if (r < 0)
                return r;
        if (read_full_file(path, DROP_IN_READ_MAX, &have, NULL) >= 0 && streq(have, want))
                return 0;
        /* Only the unit's .d is made: the runtime unit directory is systemd's, and where it is missing
         * (no systemd manages this machine) there is nothing to hold back. */
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                r = -errno;
        else
                r = write_file_atomic(path, want, strlen(want), 0644);
        if (r < 0) {
                failed(k, r, path, unit, NULL);
                return r;
        }
        log_info("Wrote %s: %s does not start beside the agent.", path, unit);
        return 1;
}

static void round_end(ReplacedUnits *k) {
        k->busy = false;
        k->read = sd_bus_slot_unref(k->read);
        if (k->again) {
                k->again = false;
                (void) event_timer_arm(k->timer, 0);
        }
}

static void check_next(ReplacedUnits *k);

/* At start the Node may not be known yet: the Event goes out with a later round. */
static void send_event(ReplacedUnits *k) {
        int r;

        if (!k->event)
                return;
        r = reporter_emit_event(k->reporter, "Warning", "ReplacedUnitStopped", k->event);
        if (r == -ENODEV)
                return;
        if (r < 0)
                log_debug_errno(r, "Cannot send the ReplacedUnitStopped Event: %m");
        k->event = mfree(k->event);
}

static void on_stopped(const UnitJobResult *res, void *userdata) {
        ReplacedUnits *k = userdata;
        _cleanup_free_ char *m = NULL;
        const char *unit = k->names[k->next];

        k->job = NULL;
        if (res->error < 0)
                failed(k, res->error, "stopping it failed", unit, res->detail);
        else if (asprintf(&m,
                          "%s was running beside the agent, which runs in place of it (osc.replacedUnits): "
                          "stopped; a drop-in in %s keeps it from starting again.",
                          unit, k->runtime_directory) >= 0) {
                log_notice("%s", m);
                free(k->event);
                k->event = TAKE_PTR(m);
                send_event(k);
        } else
                log_oom();
        k->next++;
        check_next(k);
}

static bool running(const char *active_state) {
        return streq_ptr(active_state, "active") || streq_ptr(active_state, "activating") ||
                streq_ptr(active_state, "reloading");
}

static void on_state(int error, const UnitState *st, void *userdata) {
        ReplacedUnits *k = userdata;
        const char *unit = k->names[k->next];
        int r;

        k->read = sd_bus_slot_unref(k->read);
        if (error >= 0 && running(st->active_state)) {
                r = unit_control_stop_unit(k->units, unit, on_stopped, k, &k->job);
                if (r >= 0)
                        return;
                failed(k, r, "cannot ask systemd to stop it", unit, NULL);
        } else if (error < 0 && error != -ENOENT)
                failed(k, error, "cannot read its state", unit, NULL);
        k->next++;
        check_next(k);
}

static void check_next(ReplacedUnits *k) {
        sd_bus *bus = unit_control_get_bus(k->units);
        int r;

        for (; k->names[k->next]; k->next++) {
                if (!bus)
                        break; /* systemd away: the next round asks again */
                r = unit_state_read(bus, k->names[k->next], on_state, k, &k->read);
                if (r >= 0)
                        return;
                failed(k, r, "cannot read its state", k->names[k->next], NULL);
        }
        round_end(k);
}

static void on_reloaded(const UnitJobResult *res, void *userdata) {
        ReplacedUnits *k = userdata;

        k->job = NULL;
        if (res->error < 0)
                failed(k, res->error, "reloading systemd failed", "the replaced units", res->detail);
        check_next(k);
}

static void round_begin(ReplacedUnits *k) {
        bool written = false;
        int r;

        k->busy = true;
        k->next = 0;
        send_event(k);
        if (!unit_control_get_bus(k->units))
                return round_end(k); /* no systemd reachable: neither a unit to stop nor one to hold */
        for (char **name = k->names; *name; name++)
                written |= ensure_drop_in(k, *name) > 0;
        if (written) {
                r = unit_control_run(k->units, UNIT_ACTION_DAEMON_RELOAD, NULL, NULL, on_reloaded, k,
                                     &k->job);
                if (r >= 0)
                        return;
                failed(k, r, "cannot ask systemd to reload", "the replaced units", NULL);
        }
        check_next(k);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        ReplacedUnits *k = userdata;

        if (event_timer_arm(s, k->period_usec) < 0)
                log_warning("Cannot re-arm the replaced units' check.");
        if (k->busy)
                k->again = true;
        else
                round_begin(k);
        return 0;
}

void replaced_units_kick(ReplacedUnits *k) {
        if (k && k->timer && event_timer_arm(k->timer, 0) < 0)
                log_warning("Cannot arm the replaced units' check.");
}

int replaced_units_new(sd_event *event, UnitControl *units, Reporter *reporter, char *const *names,
                       const char *runtime_directory, uint64_t period_usec, ReplacedUnits **ret) {
        _cleanup_(replaced_units_freep) ReplacedUnits *k = NULL;
        int r;

        assert(event && units && reporter && runtime_directory && ret);
        k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        *k = (ReplacedUnits) { .units = units, .reporter = reporter, .period_usec = period_usec };
        if (strv_copy(names, &k->names) < 0 || !(k->runtime_directory = strdup(runtime_directory)))
                return -ENOMEM;
        if (!k->names || !k->names[0]) {
                *ret = TAKE_PTR(k); /* nothing replaced: no timer, kicks do nothing */
                return 0;
        }
        r = sd_event_add_time_relative(event, &k->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC, on_timer, k);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(k->timer, "replaced-units");
        *ret = TAKE_PTR(k);
        return 0;
}

ReplacedUnits *replaced_units_free(ReplacedUnits *k) {
        if (!k)
                return NULL;
        if (k->job)
                unit_job_cancel(k->job);
        sd_bus_slot_unref(k->read);
        sd_event_source_disable_unref(k->timer);
        log_once_done(&k->last_error);
        free(k->event);
        strv_free(k->names);
        free(k->runtime_directory);
        free(k);
        return NULL;
}
