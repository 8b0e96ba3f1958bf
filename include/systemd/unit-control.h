/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Client of the systemd manager (org.freedesktop.systemd1) over an sd-bus connection the Manager owns:
 * start, stop, restart and reload units, and daemon-reload. Fully asynchronous on the sd_event loop the bus
 * is attached to; nothing here blocks. Also enables and disables unit files. Does not log above debug: every
 * outcome comes back as a UnitJobResult (-errno plus a human detail) for the caller to report.
 *
 * Why more than "call RestartUnit and wait": upstream waits 10 s for JobRemoved and then assumes success
 * (docs/node-protocol.md §6.1). Here:
 *  - the JobRemoved match is installed and Subscribe() called before any job is requested on a
 *    connection, so no fast job can finish unobserved;
 *  - every job has its own timeout (systemd.jobTimeout); a timeout is a failure, never a success;
 *  - job results map to -errno like systemd's bus-wait-for-jobs.c ("done"/"skipped" are success);
 *  - a restart reads the unit's InvocationID before and after and is confirmed only if it changed
 *    and the unit ended up active (or ran and exited); a unit that is "failed" afterwards is reported
 *    failed with its Service.Result ("exit-code", ...);
 *  - the way to systemd may break under a job: the bus connection closes (dbus.service restarted; the
 *    owner hands over the next connection with unit_control_set_bus()) or systemd leaves the bus and
 *    comes back (daemon-reexec: NameOwnerChanged). Jobs survive both, bounded by their own timeout:
 *    a request whose answer was lost is resumed, not blindly repeated (a restart must not run twice);
 *    on the new connection or instance the JobRemoved match and Subscribe() go out again, and every
 *    job that waited for a JobRemoved (which may have been sent to nobody meanwhile) re-reads its
 *    unit: a job still queued is waited for, one that ended is judged by the unit's state. The same
 *    re-read follows a daemon-reload (Reloading false). New requests while there is no way to
 *    systemd wait for one. */

#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-id128.h>

#include "util/macro.h"

typedef enum UnitAction {
        UNIT_ACTION_START,
        UNIT_ACTION_STOP,
        UNIT_ACTION_RESTART,
        UNIT_ACTION_RELOAD,
        UNIT_ACTION_DAEMON_RELOAD,
        UNIT_ACTION_ENABLE,  /* EnableUnitFiles([unit], runtime=false, force=true) */
        UNIT_ACTION_DISABLE, /* DisableUnitFiles([unit], runtime=false) */
        UNIT_ACTION_REACH,   /* nothing: done once systemd is reachable (unit_control_reach()) */
        _UNIT_ACTION_MAX,
        _UNIT_ACTION_INVALID = -EINVAL,
} UnitAction;

const char *unit_action_to_string(UnitAction a); /* "start", "stop", "restart", ... */
UnitAction unit_action_from_string(const char *s);

/* Maps a JobRemoved result string ("done", "failed", "timeout", ...) to 0 or -errno. */
int unit_job_result_to_errno(const char *result);

/* What happened. Every pointer is borrowed and valid only during the UnitJobDone callback. */
typedef struct UnitJobResult {
        UnitAction action;
        const char *unit;         /* NULL for daemon-reload */
        int error;                /* 0 on success, else -errno */
        const char *detail;       /* NULL on success; else a human reason: the D-Bus error
                                   * message, "job result: failed", "timed out after 5s", ... */
        const char *job_result;   /* JobRemoved result, NULL if no job finished */
        const char *active_state; /* after the job (NULL if not read) */
        const char *sub_state;
        const char *service_result;   /* Service.Result when the unit is failed, else NULL */
        sd_id128_t invocation_before; /* restart only; SD_ID128_NULL when the unit had none */
        sd_id128_t invocation_after;
        uint64_t duration_usec; /* from the request to the result */
} UnitJobResult;

typedef struct UnitControl UnitControl;
typedef struct UnitJob UnitJob;

/* Called exactly once per job that was started successfully, never from inside the call that
 * started it, never after unit_job_cancel() or unit_control_free(); it may come from inside
 * unit_control_set_bus() (a job that cannot go on over the new connection). It may start and cancel
 * jobs; it must not free the UnitControl. */
typedef void (*UnitJobDone)(const UnitJobResult *result, void *userdata);

/* `bus` must be connected to systemd (a bus where org.freedesktop.systemd1 is, or a direct connection
 * to it) and attached to an event loop; a reference is taken on both. job_timeout_usec bounds every
 * job from the request to the final result (> 0). Installs the signal matches and subscribes (on a
 * bus once systemd's name has an owner; requests wait for that). */
int unit_control_new(sd_bus *bus, uint64_t job_timeout_usec, UnitControl **ret) _warn_unused_result_;
/* The connection to use from now on: NULL when the last one closed, or the next one (attached to the
 * same event loop, else -EXDEV). Jobs in flight carry on over it (see above). */
int unit_control_set_bus(UnitControl *uc, sd_bus *bus) _warn_unused_result_;
/* The connection while systemd is reachable over it, else NULL: for reads of unit state (unit-state.h)
 * that should not wait. Borrowed until the next unit_control_set_bus(). */
sd_bus *unit_control_get_bus(const UnitControl *uc);
/* A request that does nothing but wait, within the job timeout, until systemd is reachable: for a
 * reader of unit state (unit-state.h, apply/osc-guard) that must not run without it. 1 when systemd is
 * reachable now (no job, no callback); else 0 and `on_done` comes once it is (error 0), or with
 * -ETIMEDOUT naming what is missing. */
int unit_control_reach(UnitControl *uc, UnitJobDone on_done, void *userdata,
                       UnitJob **ret_job) _warn_unused_result_;
/* Drops every pending job without calling back. Jobs already queued in systemd keep running. */
UnitControl *unit_control_free(UnitControl *uc);
DEFINE_CLEANUP_FUNC(UnitControl, unit_control_free);

/* Generic form. `unit` is a canonical unit name (NULL for UNIT_ACTION_DAEMON_RELOAD); `mode` is the
 * job mode, NULL meaning "replace". On success the job is owned by `uc`; *ret_job (optional) is a
 * borrowed handle, valid until the callback runs or unit_job_cancel(). Returns -errno without
 * calling back if the request could not be sent. */
int unit_control_run(UnitControl *uc, UnitAction action, const char *unit, const char *mode,
                     UnitJobDone on_done, void *userdata, UnitJob **ret_job) _warn_unused_result_;

static inline int unit_control_start_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                          void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_START, unit, NULL, on_done, userdata, ret_job);
}
static inline int unit_control_stop_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                         void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_STOP, unit, NULL, on_done, userdata, ret_job);
}
static inline int unit_control_restart_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                            void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_RESTART, unit, NULL, on_done, userdata, ret_job);
}
static inline int unit_control_reload_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                           void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_RELOAD, unit, NULL, on_done, userdata, ret_job);
}
static inline int unit_control_daemon_reload(UnitControl *uc, UnitJobDone on_done, void *userdata,
                                             UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_DAEMON_RELOAD, NULL, NULL, on_done, userdata, ret_job);
}

/* Enable/disable a unit file (docs/node-protocol.md §6.1/§6.2). No job: the method reply is the result. */
static inline int unit_control_enable_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                           void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_ENABLE, unit, NULL, on_done, userdata, ret_job);
}
static inline int unit_control_disable_unit(UnitControl *uc, const char *unit, UnitJobDone on_done,
                                            void *userdata, UnitJob **ret_job) {
        return unit_control_run(uc, UNIT_ACTION_DISABLE, unit, NULL, on_done, userdata, ret_job);
}

/* Forgets the job: no callback. The systemd job itself is left alone (systemd's own timeouts
 * apply). Returns NULL. */
UnitJob *unit_job_cancel(UnitJob *j);

/* Number of jobs in flight (for tests and for a clean shutdown). */
size_t unit_control_n_jobs(const UnitControl *uc);
