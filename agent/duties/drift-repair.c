/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>
#include <unistd.h>

#include "core/osc-drift-plan.h"
#include "core/osc-drift.h"
#include "duties/drift-repair.h"
#include "systemd/unit-state.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/in-root.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/random-util.h"
#include "util/strv.h"
#include "util/time-util.h"

/* A postponed round asks again after this at most (or after the interval, when shorter). */
#define DRIFT_RETRY_MAX_USEC (30 * USEC_PER_SEC)

/* The OS's own unit directories, below osc.rootDirectory, where a unit the OSC only adds drop-ins
 * to lives (upstream's resolveUnitPath). */
static const char *const os_unit_dirs[] = { "/usr/lib/systemd/system", "/lib/systemd/system" };

/* What systemd said about one of the OSC's units in this round (copies). */
typedef struct UnitRead {
        DriftRepair *owner; /* borrowed */
        const char *name;   /* borrowed from the round's model */
        sd_bus_slot *slot;  /* owned: the read in flight */
        int error;
        char *load_state, *active_state, *sub_state, *service_type, *unit_file_state;
        bool triggered;
} UnitRead;

typedef enum RoundState {
        ROUND_IDLE,
        ROUND_READING_UNITS,
        ROUND_REPAIRING,
} RoundState;

struct DriftRepair {
        sd_event *event;         /* borrowed */
        DriftRepairOptions opts; /* strings and pointers borrowed */
        AppliedOsc *applied;     /* borrowed */
        Reporter *reporter;      /* borrowed */
        UnitControl *uc;         /* borrowed; NULL until the bus was up */
        const UpdateGate *gate;  /* borrowed: the executor's */
        ReplacedUnits *replaced; /* borrowed; NULL until the bus was up */
        sd_event_source *timer;  /* owned */
        LogOnce last_report;     /* the last Event text that was no repair, not repeated */

        /* The round in flight (ROUND_IDLE: none). */
        RoundState state;
        OscModel *model; /* owned */
        char *path;      /* owned: where the model was read */
        OscDrift drift;  /* owned */
        UnitRead *reads; /* owned */
        size_t n_reads, pending;
        OscChanges *plan; /* owned */
        char **skipped;   /* owned */
        int root_fd;      /* owned: osc.rootDirectory, for the protected check */
};

/* ---- the disk ------------------------------------------------------------------------------------ */

static bool masked(const char *path) {
        char target[sizeof("/dev/null")];
        ssize_t n = readlink(path, target, sizeof(target));

        return n == (ssize_t) strlen("/dev/null") && memcmp(target, "/dev/null", (size_t) n) == 0;
}

static int read_path(const char *path, bool unit, char **ret, size_t *ret_size, uint32_t *ret_mode) {
        struct stat st;

        if (unit && masked(path))
                return OSC_DRIFT_MASKED;
        if (stat(path, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (ret_mode)
                *ret_mode = st.st_mode & 07777;
        return ret ? read_full_file(path, OSC_DRIFT_READ_MAX, ret, ret_size) : 0;
}

static char *below_root(const DriftRepair *d, const char *path) {
        char *p = NULL;

        (void) path_below_root(d->opts.root_directory ?: "/", path, &p);
        return p;
}

static int drift_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                      uint32_t *ret_mode, void *userdata) {
        DriftRepair *d = userdata;
        _cleanup_free_ char *path = NULL;
        bool unit = place != OSC_DRIFT_NODE_FILE;
        int r;

        if (!unit)
                path = below_root(d, name);
        else if (asprintf(&path, "%s/%s", d->opts.unit_directory, name) < 0)
                path = NULL;
        if (!path)
                return -ENOMEM;
        r = read_path(path, unit, ret, ret_size, ret_mode);
        for (size_t i = 0; r == -ENOENT && fallback && i < ELEMENTSOF(os_unit_dirs); i++) {
                _cleanup_free_ char *dir = below_root(d, os_unit_dirs[i]), *os_path = NULL;

                if (!dir || asprintf(&os_path, "%s/%s", dir, name) < 0)
                        return -ENOMEM;
                r = read_path(os_path, unit, ret, ret_size, ret_mode);
        }
        return r;
}

static int drift_canonical(const char *path, char **ret, void *userdata) {
        DriftRepair *d = userdata;

        return d->root_fd < 0 ? d->root_fd : path_in_root_canonical(d->root_fd, path, ret);
}

/* ---- rounds -------------------------------------------------------------------------------------- */

static void unit_read_clear(UnitRead *u) {
        u->slot = sd_bus_slot_unref(u->slot);
        u->load_state = mfree(u->load_state);
        u->active_state = mfree(u->active_state);
        u->sub_state = mfree(u->sub_state);
        u->service_type = mfree(u->service_type);
        u->unit_file_state = mfree(u->unit_file_state);
}

static void round_clear(DriftRepair *d) {
        for (size_t i = 0; i < d->n_reads; i++)
                unit_read_clear(&d->reads[i]);
        d->reads = mfree(d->reads);
        d->n_reads = d->pending = 0;
        d->model = osc_model_free(d->model);
        d->path = mfree(d->path);
        osc_drift_done(&d->drift);
        d->plan = osc_changes_free(d->plan);
        d->skipped = strv_free(d->skipped);
        if (d->root_fd >= 0)
                (void) close(d->root_fd);
        d->root_fd = -EBADF;
        d->state = ROUND_IDLE;
}

static void schedule(DriftRepair *d, uint64_t delay_usec) {
        int r = event_timer_arm(d->timer, delay_usec);

        if (r < 0)
                log_warning_errno(
                        r,
                        "Cannot arm the drift check's timer; drift is checked again at the next start: %m");
}

/* The interval, jittered uniformly within ±10 %. */
static uint64_t next_delay(const DriftRepair *d) {
        uint64_t i = d->opts.interval_usec;

        return i - i / 10 + random_below(i / 5 + 1);
}

static uint64_t retry_delay(const DriftRepair *d) {
        return MIN(d->opts.interval_usec, DRIFT_RETRY_MAX_USEC);
}

static void round_end(DriftRepair *d, uint64_t next_usec) {
        log_debug("Drift round done%s%s.", d->path ? " against " : "", strempty(d->path));
        round_clear(d);
        d->gate->drift_release(d->gate->userdata);
        replaced_units_kick(d->replaced); /* a repair may have brought a replaced unit's file back */
        schedule(d, next_usec);
}

static void log_findings(const DriftRepair *d) {
        for (size_t i = 0; i < d->drift.n_items; i++)
                log_warning("Drift from %s: %s: %s", d->path, d->drift.items[i].reason,
                            d->drift.items[i].message);
}

/* The round's one Event and its journal lines. A text the last round sent too (drift left alone, a
 * repair failing the same way) is not sent again; a repair is news every time. */
static void report(DriftRepair *d, OscDriftOutcome o, const char *detail) {
        _cleanup_free_ char *msg = NULL;
        int r;

        r = osc_drift_summary(&d->drift, d->plan, d->skipped, o, detail, &msg);
        if (r < 0) {
                log_oom();
                return;
        }
        if (o == OSC_DRIFT_REPAIRED)
                log_once_clear(&d->last_report);
        else if (!log_once_check(&d->last_report, 0, msg)) {
                log_debug("Drift as before: %s", msg);
                return;
        }
        if (o != OSC_DRIFT_REPAIRED && o != OSC_DRIFT_REPAIR_FAILED)
                log_findings(d); /* a repair's were logged before it ran */
        log_full(o == OSC_DRIFT_REPAIRED ? LOG_NOTICE : LOG_WARNING, "%s", msg);
        r = reporter_emit_event(d->reporter, "Warning", osc_drift_outcome_reason(o), msg);
        if (r < 0 && r != -ENODEV)
                log_debug_errno(r, "Cannot send the drift Event: %m");
}

static void on_repaired(int error, const char *message, void *userdata) {
        DriftRepair *d = userdata;

        report(d, error < 0 ? OSC_DRIFT_REPAIR_FAILED : OSC_DRIFT_REPAIRED, message);
        round_end(d, next_delay(d));
}

static void repair(DriftRepair *d) {
        _cleanup_free_ char *detail = NULL;
        int r;

        d->root_fd = open(d->opts.root_directory ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d->root_fd < 0)
                d->root_fd = -errno;
        r = osc_drift_plan(&(OscDriftPlanParams) { .model = d->model,
                                                   .self_unit = d->opts.self_unit,
                                                   .replaced_units = d->opts.replaced_units,
                                                   .protected = d->opts.own_files,
                                                   .canonicalize = drift_canonical,
                                                   .userdata = d },
                           &d->drift, &d->plan, &d->skipped);
        if (r < 0) {
                log_oom();
                return round_end(d, next_delay(d));
        }
        if (!d->plan) {
                report(d, OSC_DRIFT_NOTHING_TO_REPAIR, NULL);
                return round_end(d, next_delay(d));
        }
        log_findings(d);
        log_info("Repairing the drift from %s: %zu item(s).", d->path, d->plan->n_items);
        r = d->gate->drift_run(d->plan, on_repaired, d, d->gate->userdata);
        if (r >= 0) {
                d->state = ROUND_REPAIRING;
                return;
        }
        if (asprintf(&detail, "%s", r == -ENOTCONN ? "no connection to systemd" : strerror(-r)) < 0)
                detail = NULL;
        report(d, OSC_DRIFT_REPAIR_FAILED, detail);
        round_end(d, r == -ENOTCONN ? retry_delay(d) : next_delay(d));
}

/* Every unit read answered (or none was sent): the units pass, then the verdict. */
static void units_read(DriftRepair *d) {
        _cleanup_free_ UnitHealthState *states = calloc(d->n_reads + 1, sizeof(UnitHealthState));
        OscDriftParams p = { .model = d->model,
                             .skip_units = d->opts.replaced_units,
                             .skip_file = d->opts.kubelet_binary };
        size_t n = 0;

        if (!states) {
                log_oom();
                return round_end(d, next_delay(d));
        }
        for (size_t i = 0; i < d->n_reads; i++) {
                const UnitRead *u = &d->reads[i];

                /* Not knowing is no finding: an answer lost to the bus is asked again next round. */
                if (u->error < 0)
                        continue;
                states[n++] = (UnitHealthState) { .name = u->name,
                                                  .load_state = u->load_state,
                                                  .active_state = u->active_state,
                                                  .sub_state = u->sub_state,
                                                  .service_type = u->service_type,
                                                  .triggered = u->triggered,
                                                  .unit_file_state = u->unit_file_state };
        }
        if (osc_drift_check_units(&p, states, n, &d->drift) < 0) {
                log_oom();
                return round_end(d, next_delay(d));
        }
        if (d->drift.n_items == 0) {
                log_once_clear(&d->last_report);
                return round_end(d, next_delay(d));
        }
        if (d->opts.mode == DRIFT_REPAIR_WARN) {
                report(d, OSC_DRIFT_WARNED, NULL);
                return round_end(d, next_delay(d));
        }
        repair(d);
}

static int dup_state(char **field, const char *value) {
        return value ? free_and_strdup(field, value) : 0;
}

static void on_unit_state(int error, const UnitState *st, void *userdata) {
        UnitRead *u = userdata;
        DriftRepair *d = u->owner;

        u->error = error;
        if (st) {
                u->triggered = st->triggered;
                if (dup_state(&u->load_state, st->load_state) < 0 ||
                    dup_state(&u->active_state, st->active_state) < 0 ||
                    dup_state(&u->sub_state, st->sub_state) < 0 ||
                    dup_state(&u->service_type, st->service_type) < 0 ||
                    dup_state(&u->unit_file_state, st->unit_file_state) < 0)
                        u->error = -ENOMEM;
        }
        if (--d->pending == 0)
                units_read(d);
}

/* What systemd says about each of the OSC's units, all asked at once; without systemd, nothing. */
static int read_units(DriftRepair *d) {
        OscDriftParams p = { .model = d->model, .skip_units = d->opts.replaced_units };
        sd_bus *bus = d->uc ? unit_control_get_bus(d->uc) : NULL;

        d->reads = calloc(d->model->n_units + 1, sizeof(UnitRead));
        if (!d->reads)
                return -ENOMEM;
        for (size_t i = 0; bus && i < d->model->n_units; i++) {
                UnitRead *u = &d->reads[d->n_reads];
                int r;

                if (osc_drift_skips_unit(&p, d->model->units[i].name))
                        continue;
                *u = (UnitRead) { .owner = d, .name = d->model->units[i].name };
                d->n_reads++;
                r = unit_state_read(bus, u->name, on_unit_state, u, &u->slot);
                if (r < 0)
                        u->error = r;
                else
                        d->pending++;
        }
        return 0;
}

static void round_begin(DriftRepair *d) {
        OscDriftParams p = { .model = NULL,
                             .skip_units = d->opts.replaced_units,
                             .skip_file = d->opts.kubelet_binary };
        const char *why = NULL;
        int r;

        assert(d->state == ROUND_IDLE);
        r = d->gate->drift_claim(&why, d->gate->userdata);
        if (r < 0) {
                log_debug("Drift round postponed: %s.", strempty(why));
                return schedule(d, retry_delay(d));
        }
        r = applied_osc_load(d->applied, d->opts.model_options, &d->model, &d->path);
        if (r < 0)
                return round_end(d, next_delay(d)); /* none yet, or logged there */
        p.model = d->model;
        r = osc_drift_check_disk(&p, drift_read, d, &d->drift);
        if (r >= 0)
                r = read_units(d);
        if (r < 0) {
                log_oom();
                return round_end(d, next_delay(d));
        }
        d->state = ROUND_READING_UNITS;
        if (d->pending == 0)
                units_read(d);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        DriftRepair *d = userdata;

        if (d->state == ROUND_IDLE)
                round_begin(d);
        return 0;
}

/* ---- lifecycle ----------------------------------------------------------------------------------- */

int drift_repair_new(sd_event *event, const DriftRepairOptions *opts, AppliedOsc *applied,
                     Reporter *reporter, const UpdateGate *gate, DriftRepair **ret) {
        _cleanup_(drift_repair_freep) DriftRepair *d = NULL;
        int r;

        assert(event && opts && applied && reporter && gate && ret);
        assert(opts->unit_directory && opts->interval_usec > 0);
        assert(gate->drift_claim && gate->drift_release && gate->drift_run);
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (DriftRepair) { .event = event,
                             .opts = *opts,
                             .applied = applied,
                             .reporter = reporter,
                             .gate = gate,
                             .root_fd = -EBADF };
        r = sd_event_add_time_relative(event, &d->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC, on_timer, d);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(d->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(d->timer, "drift-repair");
        *ret = TAKE_PTR(d);
        return 0;
}

DriftRepair *drift_repair_free(DriftRepair *d) {
        if (!d)
                return NULL;
        /* A repair in flight is the executor's to cancel (it is freed right after us, with nothing
         * dispatched in between); its runner never reads the freed work list again. */
        round_clear(d);
        sd_event_source_disable_unref(d->timer);
        log_once_done(&d->last_report);
        free(d);
        return NULL;
}

void drift_repair_set_units(DriftRepair *d, UnitControl *uc, ReplacedUnits *replaced) {
        d->uc = uc;
        d->replaced = replaced;
}

int drift_repair_start(DriftRepair *d) {
        char boot[SD_ID128_STRING_MAX] = "", interval[DURATION_MAX_STR];
        sd_id128_t id;

        assert(d);
        /* The round at start is the one after a boot: say which, for who checks a reboot repaired. */
        if (sd_id128_get_boot(&id) >= 0)
                sd_id128_to_string(id, boot);
        log_info("Checking the node against the last-applied OSC at start (boot %s), then every %s (%s).",
                 boot[0] ? boot : "unknown",
                 format_duration(interval, sizeof(interval), d->opts.interval_usec),
                 drift_repair_mode_to_string(d->opts.mode));
        if (d->state == ROUND_IDLE)
                round_begin(d);
        return 0;
}
