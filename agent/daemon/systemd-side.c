/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "daemon/status.h"
#include "daemon/systemd-side.h"
#include "duties/hostname-check.h"
#include "duties/node-health.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/time-util.h"

#define RESTART_STATE_FILE "restart-request.json"
#define BUS_DOWN_NOTE "system bus down, reconnecting"

struct SystemdSide {
        sd_event *event;          /* borrowed */
        const Config *config;     /* borrowed */
        const KubeTuning *tuning; /* borrowed */
        Http *http;               /* borrowed */
        Reporter *reporter;       /* borrowed */
        Executor *executor;       /* borrowed; set by systemd_side_start() */
        AppliedOsc *applied;      /* borrowed; NULL until attached */
        DriftRepair *drift;       /* borrowed; NULL until attached */

        SystemBus *bus;     /* owned: the system bus (DBUS_SYSTEM_BUS_ADDRESS), reopened when it closes */
        UnitControl *units; /* owned; NULL until the bus was first up, then kept across reconnects */
        RestartAnnotation *restarts; /* owned; NULL until the bus was first up */
        UnitsCheck *units_check;     /* owned: SystemdUnitsReady; NULL likewise */
        NodeHealth *health;          /* owned: kubelet/containerd health checks; NULL likewise */
        HostnameCheck *hostname;     /* owned: restarts us on a hostname change; NULL likewise */
        ReplacedUnits *replaced;     /* owned: keeps osc.replacedUnits from running; NULL likewise */
        bool started;                /* systemd_side_start() returned: a bus up now came late */
        int error;                   /* < 0: the objects could not be set up in systemd_side_start() */
        char *why;                   /* owned: and why */
        LogOnce duties_error;        /* the Node's duties could not start, said once */
        bool node_present;
        const NodeView *view; /* borrowed: the latest Node; NULL while unknown or absent */
};

/* For `inplace-agent status`: what containerd last said it is. The journal has it already (the duty's
 * line); a state directory that cannot take it loses only this. */
static void on_containerd_version(const ContainerdVersion *v, void *userdata) {
        SystemdSide *s = userdata;
        int r;

        r = status_containerd_save(s->config->state_directory, v->version, v->revision,
                                   clock_now_usec(CLOCK_REALTIME));
        if (r < 0)
                log_warning_errno(r, "Cannot save containerd's version for 'inplace-agent status' in %s: %m",
                                  s->config->state_directory);
}

static int setup_health(SystemdSide *s) {
        _cleanup_free_ char *socket = NULL;

        if (path_below_root(s->config->osc.root_directory, CONTAINERD_SOCKET, &socket) < 0)
                return -ENOMEM;
        return node_health_new(s->event, s->http, s->units, s->reporter,
                               &(NodeHealthOptions) {
                                       .kubelet_unit = s->config->kubelet.unit,
                                       .kubelet_healthz_url = s->config->kubelet.healthz_url,
                                       .containerd_unit = CONTAINERD_UNIT,
                                       .containerd_socket = socket,
                                       .period_usec = s->tuning->health_check_usec,
                                       .grace_usec = s->tuning->health_grace_usec,
                                       .gate = executor_gate(s->executor),
                                       .on_containerd_version = on_containerd_version,
                                       .userdata = s,
                               },
                               &s->health);
}

/* Everything that talks to systemd, once the bus is first up. SystemdUnitsReady judges the units of
 * the last-applied OSC, which duties/applied-osc hands over; without one there is nothing to judge
 * and nothing is written (upstream's readManagedUnits skips the check until an OSC was applied: a
 * new node's kubelet is "not loaded" before its first OSC). */
static int setup(SystemdSide *s, sd_bus *bus, char **ret_error) {
        const Config *c = s->config;
        _cleanup_free_ char *state = NULL;
        int r;

        r = unit_control_new(bus, c->systemd.job_timeout_usec, &s->units);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the systemd client: %s", strerror(-r));
        if (asprintf(&state, "%s/%s", c->state_directory, RESTART_STATE_FILE) < 0)
                return -ENOMEM;
        r = restart_annotation_new(s->event, s->units, s->reporter, s->executor,
                                   &(RestartAnnotationOptions) { .self_unit = c->restart.self_unit,
                                                                 .state_path = state,
                                                                 .replaced_units = c->osc.replaced_units },
                                   &s->restarts);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the restart handler: %s", strerror(-r));
        r = units_check_new(s->event, s->units, s->reporter, s->tuning->units_check_usec,
                            s->tuning->units_stuck_usec, &s->units_check);
        if (r >= 0)
                r = setup_health(s);
        if (r >= 0)
                r = replaced_units_new(s->event, s->units, s->reporter, c->osc.replaced_units,
                                       c->systemd.runtime_unit_directory, s->tuning->units_check_usec,
                                       &s->replaced);
        if (r >= 0 &&
            hostname_check_new(s->event, s->units, c->restart.self_unit, s->tuning->health_check_usec,
                               &s->hostname) < 0)
                log_warning("Cannot read the hostname; the hostname check is off.");
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the unit check: %s", strerror(-r));
        return 0;
}

/* The bus came up for the first time only after start: hand the new objects to those who were
 * created without them, and start the duties the Node's first sight would have started. */
static void came_late(SystemdSide *s) {
        if (s->applied)
                applied_osc_set_units_check(s->applied, s->units_check);
        if (s->drift)
                drift_repair_set_units(s->drift, s->units, s->replaced);
        if (s->node_present) {
                systemd_side_start_node_duties(s);
                node_health_set_node(s->health, s->view);
        }
        restart_annotation_sync(s->restarts, s->view);
}

static void on_bus(SystemBus *sb, bool up, int error, void *userdata) {
        SystemdSide *s = userdata;
        _cleanup_free_ char *why = NULL;
        int r;

        if (!up) {
                if (s->units) {
                        log_warning_errno(
                                error,
                                "Lost the connection to the system bus (%m); unit jobs wait for it, "
                                "reconnecting.");
                        IGNORE_RESULT(unit_control_set_bus(s->units, NULL)); /* NULL cannot fail */
                } else
                        log_warning_errno(error,
                                          "Cannot connect to the system bus, retrying; unit restarts and "
                                          "reboots wait for it: %m");
                reporter_set_status_note(s->reporter, REPORTER_NOTE_BUS, BUS_DOWN_NOTE);
                return;
        }
        reporter_set_status_note(s->reporter, REPORTER_NOTE_BUS, NULL);
        if (s->units) {
                r = unit_control_set_bus(s->units, system_bus_get(sb));
                if (r < 0) {
                        /* Unit jobs could never finish: end the loop, systemd restarts us. */
                        log_error_errno(r, "Cannot use the new system bus connection: %m");
                        (void) sd_event_exit(s->event, r);
                } else
                        log_info("Reconnected to the system bus.");
                return;
        }
        r = setup(s, system_bus_get(sb), &why);
        if (r < 0) {
                if (!s->started) { /* in systemd_side_start(): it fails with this */
                        s->error = r;
                        free(s->why);
                        s->why = TAKE_PTR(why);
                        return;
                }
                log_error_errno(r, "%s", why ? why : "Cannot set up the systemd client: %m");
                (void) sd_event_exit(s->event, r);
                return;
        }
        executor_set_units(s->executor, s->units);
        if (s->started) {
                log_info("Connected to the system bus.");
                came_late(s);
        }
}

int systemd_side_new(sd_event *event, const Config *config, const KubeTuning *tuning, Http *http,
                     Reporter *reporter, SystemdSide **ret) {
        _cleanup_(systemd_side_freep) SystemdSide *s = NULL;
        int r;

        assert(event && config && tuning && http && reporter && ret);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (SystemdSide) {
                .event = event, .config = config, .tuning = tuning, .http = http, .reporter = reporter
        };
        r = system_bus_new(event, NULL, on_bus, s, &s->bus);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

/* After the executor (it borrows the UnitControl and the bus, and calls the restart annotation back
 * until freed) and the last-applied OSC's watcher (it borrows the units check). */
SystemdSide *systemd_side_free(SystemdSide *s) {
        if (!s)
                return NULL;
        restart_annotation_free(s->restarts);
        units_check_free(s->units_check);
        node_health_free(s->health);
        hostname_check_free(s->hostname);
        replaced_units_free(s->replaced);
        unit_control_free(s->units);
        system_bus_free(s->bus);
        free(s->why);
        log_once_done(&s->duties_error);
        free(s);
        return NULL;
}

SystemBus *systemd_side_bus(const SystemdSide *s) {
        return s->bus;
}

int systemd_side_start(SystemdSide *s, Executor *executor, char **ret_error) {
        int r;

        assert(s && executor);
        s->executor = executor;
        r = system_bus_start(s->bus);
        s->started = true;
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the system bus connection: %s", strerror(-r));
        if (s->error < 0)
                return error_setf(ret_error, s->error, "%s", s->why ?: "cannot set up the systemd client");
        return 0;
}

void systemd_side_attach(SystemdSide *s, AppliedOsc *applied, DriftRepair *drift) {
        s->applied = applied;
        s->drift = drift;
}

UnitControl *systemd_side_units(const SystemdSide *s) {
        return s->units;
}

UnitsCheck *systemd_side_units_check(const SystemdSide *s) {
        return s->units_check;
}

ReplacedUnits *systemd_side_replaced(const SystemdSide *s) {
        return s->replaced;
}

RestartAnnotation *systemd_side_restarts(const SystemdSide *s) {
        return s->restarts;
}

void systemd_side_set_node(SystemdSide *s, bool present, const NodeView *view) {
        s->node_present = present;
        s->view = view;
        if (s->health)
                node_health_set_node(s->health, view);
}

void systemd_side_start_node_duties(SystemdSide *s) {
        int r = 0, k;

        if (s->units_check)
                r = units_check_start(s->units_check);
        if (s->health) {
                k = node_health_start(s->health);
                r = r < 0 ? r : k;
        }
        if (r >= 0)
                log_once_clear(&s->duties_error);
        else if (log_once_check(&s->duties_error, r, NULL))
                log_warning_errno(r,
                                  "Cannot start the units check or the health checks, trying again with the "
                                  "next Node event: %m");
}
