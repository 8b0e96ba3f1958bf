/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "systemd/unit-control.h"
#include "systemd/unit-state.h"
#include "util/log.h"
#include "util/time-util.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
#define SYSTEMD_UNIT "org.freedesktop.systemd1.Unit"
#define SYSTEMD_SERVICE "org.freedesktop.systemd1.Service"
#define UNIT_PATH_PREFIX "/org/freedesktop/systemd1/unit"

#define DBUS_DEST "org.freedesktop.DBus"
#define DBUS_PATH "/org/freedesktop/DBus"
#define OWNER_CHANGED_MATCH                                                                    \
        "type='signal',sender='" DBUS_DEST "',path='" DBUS_PATH "',interface='" DBUS_DEST "'," \
        "member='NameOwnerChanged',arg0='" SYSTEMD_DEST "'"

/* Where a job is. Each step has at most one call in flight (UnitJob.slot). */
typedef enum UnitJobStep {
        STEP_BEFORE,         /* restart: reading InvocationID before */
        STEP_CALL,           /* waiting for the method reply (job path) */
        STEP_WAIT,           /* waiting for JobRemoved */
        STEP_RECHECK,        /* reading the unit (its Job among it) after a signal may have been lost */
        STEP_AFTER,          /* reading ActiveState/SubState/InvocationID after */
        STEP_SERVICE_RESULT, /* the unit is failed: reading Service.Result for the report */
        STEP_REACH,          /* unit_control_reach(): done as soon as it resumes */
} UnitJobStep;

/* How far the way to systemd reaches. Requests wait (bounded by their own timeout) until READY. */
typedef enum UnitControlLink {
        LINK_DETACHED, /* no bus connection */
        LINK_WAITING,  /* on a bus where systemd has no name (yet, or again: a re-exec) */
        LINK_READY,    /* systemd is there and Subscribe() went out */
} UnitControlLink;

struct UnitControl {
        sd_bus *bus;     /* ref held; NULL while detached */
        sd_event *event; /* ref held: the loop every bus is attached to */
        uint64_t job_timeout_usec;
        UnitControlLink link;
        char *owner;                     /* owned: systemd's unique name while READY on a bus */
        sd_bus_slot *slot_subscribe;     /* owned: pending Subscribe() */
        sd_bus_slot *slot_job_removed;   /* owned: JobRemoved match */
        sd_bus_slot *slot_reloading;     /* owned: Reloading match */
        sd_bus_slot *slot_owner_changed; /* owned: NameOwnerChanged(systemd1) match, on a bus */
        sd_bus_slot *slot_get_owner;     /* owned: pending GetNameOwner(systemd1) */
        int subscribe_error;             /* < 0 once Subscribe() failed: no job could ever finish */
        UnitJob *jobs;                   /* owned: doubly linked list */
};

struct UnitJob {
        UnitControl *uc;      /* borrowed: owns us */
        UnitJob *prev, *next; /* borrowed: list links */
        UnitAction action;
        UnitJobStep step;
        char *unit;           /* owned; NULL for daemon-reload */
        char *unit_path;      /* owned: the unit's object path */
        char *mode;           /* owned */
        char *job_path;       /* owned: set once systemd queued the job */
        char *job_result;     /* owned */
        char *active_state;   /* owned */
        char *sub_state;      /* owned */
        char *service_result; /* owned */
        char *unit_job;       /* owned: the unit's pending job as last read; NULL: none */
        sd_id128_t invocation_before;
        sd_id128_t invocation_after;
        uint64_t start_usec;    /* CLOCK_MONOTONIC */
        sd_bus_slot *slot;      /* owned: the call in flight */
        bool sent;              /* the request (StartUnit, ...) went out: its answer may be lost */
        bool parked;            /* to be resumed (resent or re-read) once systemd is reachable */
        bool vanished;          /* the job ended unseen: judged by the unit's state alone */
        sd_event_source *timer; /* owned: the job timeout */
        UnitJobDone on_done;
        void *userdata; /* borrowed */
};

static const char *const unit_action_table[_UNIT_ACTION_MAX] = {
        [UNIT_ACTION_START] = "start",
        [UNIT_ACTION_STOP] = "stop",
        [UNIT_ACTION_RESTART] = "restart",
        [UNIT_ACTION_RELOAD] = "reload",
        [UNIT_ACTION_DAEMON_RELOAD] = "daemon-reload",
        [UNIT_ACTION_ENABLE] = "enable",
        [UNIT_ACTION_DISABLE] = "disable",
        [UNIT_ACTION_REACH] = "reach",
};

static const char *const unit_action_method[_UNIT_ACTION_MAX] = {
        [UNIT_ACTION_START] = "StartUnit",          [UNIT_ACTION_STOP] = "StopUnit",
        [UNIT_ACTION_RESTART] = "RestartUnit",      [UNIT_ACTION_RELOAD] = "ReloadUnit",
        [UNIT_ACTION_DAEMON_RELOAD] = "Reload",     [UNIT_ACTION_ENABLE] = "EnableUnitFiles",
        [UNIT_ACTION_DISABLE] = "DisableUnitFiles",
};

DEFINE_STRING_TABLE_LOOKUP(unit_action, UnitAction, unit_action_table);

/* Actions whose method reply is the whole result: no job, no JobRemoved. */
static bool unit_action_is_call(UnitAction a) {
        return a == UNIT_ACTION_DAEMON_RELOAD || a == UNIT_ACTION_ENABLE || a == UNIT_ACTION_DISABLE;
}

int unit_job_result_to_errno(const char *result) {
        /* The same mapping as systemd's bus-wait-for-jobs.c, so errors read the same way. */
        static const struct {
                const char *result;
                int error;
        } table[] = {
                { "done", 0 },
                { "skipped", 0 },
                { "canceled", -ECANCELED },
                { "timeout", -ETIME },
                { "dependency", -EIO },
                { "invalid", -ENOEXEC },
                { "assert", -EPROTO },
                { "unsupported", -EOPNOTSUPP },
                { "collected", -ECANCELED },
                { "once", -ESTALE },
                { "frozen", -EDEADLK },
                { "failed", -EIO },
        };

        for (size_t i = 0; result && i < ELEMENTSOF(table); i++)
                if (streq(result, table[i].result))
                        return table[i].error;
        return -EIO;
}

/* ---- job lifecycle */

static void unit_job_unlink(UnitJob *j) {
        if (!j->uc)
                return;
        if (j->prev)
                j->prev->next = j->next;
        else
                j->uc->jobs = j->next;
        if (j->next)
                j->next->prev = j->prev;
        j->uc = NULL;
        j->prev = j->next = NULL;
}

static UnitJob *unit_job_free(UnitJob *j) {
        if (!j)
                return NULL;
        unit_job_unlink(j);
        sd_bus_slot_unref(j->slot);
        sd_event_source_disable_unref(j->timer);
        free(j->unit);
        free(j->unit_path);
        free(j->mode);
        free(j->job_path);
        free(j->job_result);
        free(j->active_state);
        free(j->sub_state);
        free(j->service_result);
        free(j->unit_job);
        free(j);
        return NULL;
}
DEFINE_CLEANUP_FUNC(UnitJob, unit_job_free);

UnitJob *unit_job_cancel(UnitJob *j) {
        return unit_job_free(j);
}

/* Reports and frees the job. `detail` may be NULL (then derived from the error). */
static int unit_job_finish(UnitJob *j, int error, const char *detail) {
        char buf[256];
        UnitJobResult res;

        if (error < 0 && !detail) {
                snprintf(buf, sizeof(buf), "%s", strerror(-error));
                detail = buf;
        }
        res = (UnitJobResult) {
                .action = j->action,
                .unit = j->unit,
                .error = error < 0 ? error : 0,
                .detail = error < 0 ? detail : NULL,
                .job_result = j->job_result,
                .active_state = j->active_state,
                .sub_state = j->sub_state,
                .service_result = j->service_result,
                .invocation_before = j->invocation_before,
                .invocation_after = j->invocation_after,
                .duration_usec = clock_now_usec(CLOCK_MONOTONIC) - j->start_usec,
        };

        /* Unlink first: the callback may start new jobs or cancel others, but this one is over. */
        j->slot = sd_bus_slot_unref(j->slot);
        j->timer = sd_event_source_disable_unref(j->timer);
        unit_job_unlink(j);

        j->on_done(&res, j->userdata); /* res points into j: free only afterwards */
        unit_job_free(j);
        return 0;
}

static int unit_job_finish_bus_error(UnitJob *j, const sd_bus_error *e) {
        char buf[512];
        int r = sd_bus_error_get_errno(e);

        snprintf(buf, sizeof(buf), "%s", e->message ? e->message : e->name);
        return unit_job_finish(j, r > 0 ? -r : -EIO, buf);
}

/* ---- lost answers */

static void unit_control_resume(UnitControl *uc);
static void unit_control_check_owner(UnitControl *uc);

/* An error that says nothing about the request, only that its answer was lost on the way: the
 * connection closed (sd-bus answers every pending call so, before its Disconnected message), or
 * systemd left the bus (a re-exec: the bus answers NoReply for it and knows no owner for a while).
 * The request may or may not have been carried out; the job is resumed once systemd is back. */
static bool reply_is_lost(sd_bus_message *reply) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (!e)
                return false;
        if (sd_bus_is_open(sd_bus_message_get_bus(reply)) <= 0)
                return true;
        return sd_bus_error_has_names(e, SD_BUS_ERROR_NO_REPLY, SD_BUS_ERROR_SERVICE_UNKNOWN,
                                      SD_BUS_ERROR_NAME_HAS_NO_OWNER, SD_BUS_ERROR_DISCONNECTED);
}

static void unit_job_park(UnitJob *j) {
        j->slot = sd_bus_slot_unref(j->slot);
        j->parked = true;
        unit_control_check_owner(j->uc);
}

/* ---- property reads */

static int read_invocation_id(sd_bus_message *m, sd_id128_t *ret) {
        const void *p;
        size_t n;
        int r;

        r = sd_bus_message_read_array(m, 'y', &p, &n);
        if (r < 0)
                return r;
        if (n == 0)
                *ret = SD_ID128_NULL;
        else if (n == sizeof(sd_id128_t))
                memcpy(ret, p, n);
        else
                return -EBADMSG;
        return 0;
}

/* Unit.Job: (0, "/") when no job is queued for the unit. */
static int read_unit_job(sd_bus_message *m, char **ret) {
        const char *path;
        uint32_t id;
        int r;

        r = sd_bus_message_read(m, "v", "(uo)", &id, &path);
        if (r < 0)
                return r;
        return free_and_strdup(ret, id > 0 ? path : NULL);
}

typedef struct JobProperties {
        UnitJob *job;
        bool before; /* the snapshot before the job: only the invocation ID */
} JobProperties;

/* One property of Properties.GetAll(Unit): keeps what we judge a restart by. */
static int read_job_property(sd_bus_message *m, const char *name, void *userdata) {
        JobProperties *p = userdata;
        UnitJob *j = p->job;
        const char *s;
        int r;

        if (streq(name, "InvocationID")) {
                r = sd_bus_message_enter_container(m, 'v', "ay");
                if (r < 0)
                        return r;
                r = read_invocation_id(m, p->before ? &j->invocation_before : &j->invocation_after);
                if (r < 0)
                        return r;
                return sd_bus_message_exit_container(m);
        }
        if (!p->before && (streq(name, "ActiveState") || streq(name, "SubState"))) {
                r = sd_bus_message_read(m, "v", "s", &s);
                if (r < 0)
                        return r;
                return free_and_strdup(streq(name, "ActiveState") ? &j->active_state : &j->sub_state, s);
        }
        if (!p->before && streq(name, "Job"))
                return read_unit_job(m, &j->unit_job);
        return sd_bus_message_skip(m, "v");
}

static int unit_job_get_all(UnitJob *j, sd_bus_message_handler_t handler) {
        return sd_bus_call_method_async(j->uc->bus, &j->slot, SYSTEMD_DEST, j->unit_path,
                                        "org.freedesktop.DBus.Properties", "GetAll", handler, j, "s",
                                        SYSTEMD_UNIT);
}

/* ---- steps */

static bool unit_is_service(const char *unit) {
        size_t n = strlen(unit);
        return n > 8 && streq(unit + n - 8, ".service");
}

/* Judges start/restart by the job result and by where the unit ended up. */
static int unit_job_judge(UnitJob *j) {
        int job_error = j->vanished ? 0 : unit_job_result_to_errno(j->job_result);
        char buf[512];

        if (job_error < 0) {
                snprintf(buf, sizeof(buf), "job result: %s; unit %s/%s%s%s", j->job_result,
                         strempty(j->active_state), strempty(j->sub_state),
                         j->service_result ? ", service result: " : "", strempty(j->service_result));
                return unit_job_finish(j, job_error, buf);
        }

        /* A oneshot without RemainAfterExit= that ran and exited is inactive again, and systemd
         * drops its InvocationID then: the done job is the proof it ran. */
        if (j->action == UNIT_ACTION_RESTART && !streq_ptr(j->active_state, "inactive") &&
            (sd_id128_is_null(j->invocation_after) ||
             sd_id128_equal(j->invocation_before, j->invocation_after)))
                return unit_job_finish(j, -ESTALE, "unit did not restart (its InvocationID did not change)");

        /* "active" is the goal. "inactive" after a done start job means it ran and exited (a oneshot
         * without RemainAfterExit=). "failed" or anything else means it already died or is on its
         * way down or restarting: a Type=simple service whose process exits at once gets a "done"
         * job, so this is the only place such a failure shows. */
        if (streq_ptr(j->active_state, "active") || streq_ptr(j->active_state, "reloading") ||
            streq_ptr(j->active_state, "inactive"))
                return unit_job_finish(j, 0, NULL);

        snprintf(buf, sizeof(buf), "unit is %s/%s after the %s job%s%s", strempty(j->active_state),
                 strempty(j->sub_state), unit_action_to_string(j->action),
                 j->service_result ? ", service result: " : "", strempty(j->service_result));
        return unit_job_finish(j, -EIO, buf);
}

static int unit_job_on_service_result(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitJob *j = ASSERT_PTR(userdata);
        const char *s;

        j->slot = sd_bus_slot_unref(j->slot);
        /* Only for the report: without it we still know the unit failed. */
        if (!sd_bus_message_is_method_error(reply, NULL) && sd_bus_message_read(reply, "v", "s", &s) >= 0)
                (void) free_and_strdup(&j->service_result, s);
        return unit_job_judge(j);
}

/* The head of every GetAll reply (before and after the job, and the re-check): true when the unit's
 * properties were read into the job; false when the job is parked (the answer was lost) or finished
 * (and freed) with the error instead. */
static bool unit_job_take_properties(UnitJob *j, sd_bus_message *reply, bool before) {
        const sd_bus_error *e;
        int r;

        j->slot = sd_bus_slot_unref(j->slot);
        if (reply_is_lost(reply)) {
                unit_job_park(j);
                return false;
        }
        e = sd_bus_message_get_error(reply);
        if (e) {
                (void) unit_job_finish_bus_error(j, e);
                return false;
        }
        r = unit_properties_parse(reply, read_job_property, &(JobProperties) { .job = j, .before = before });
        if (r < 0) {
                (void) unit_job_finish(j, r, "cannot parse the unit's properties");
                return false;
        }
        return true;
}

/* A job that ended unseen, stop or reload: its result is where the unit is now. */
static int unit_job_judge_vanished(UnitJob *j) {
        char buf[512];
        bool ok = j->action == UNIT_ACTION_STOP ?
                streq_ptr(j->active_state, "inactive") || streq_ptr(j->active_state, "failed") :
                streq_ptr(j->active_state, "active") || streq_ptr(j->active_state, "reloading");

        if (ok)
                return unit_job_finish(j, 0, NULL);
        snprintf(buf, sizeof(buf),
                 "the %s job ended unseen (systemd re-executed or the bus restarted) and the unit "
                 "is %s/%s",
                 unit_action_to_string(j->action), strempty(j->active_state), strempty(j->sub_state));
        return unit_job_finish(j, -EIO, buf);
}

/* The unit's state after the job is in: judge it (reading Service.Result of a failed service first). */
static int unit_job_after(UnitJob *j) {
        int r;

        if (j->action != UNIT_ACTION_START && j->action != UNIT_ACTION_RESTART)
                return j->vanished ? unit_job_judge_vanished(j) : unit_job_finish(j, 0, NULL);

        if (streq_ptr(j->active_state, "failed") && unit_is_service(j->unit)) {
                j->step = STEP_SERVICE_RESULT;
                r = sd_bus_call_method_async(j->uc->bus, &j->slot, SYSTEMD_DEST, j->unit_path,
                                             "org.freedesktop.DBus.Properties", "Get",
                                             unit_job_on_service_result, j, "ss", SYSTEMD_SERVICE, "Result");
                if (r < 0)
                        return unit_job_judge(j);
                return 0;
        }
        return unit_job_judge(j);
}

static int unit_job_on_after(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitJob *j = ASSERT_PTR(userdata);

        if (!unit_job_take_properties(j, reply, /* before= */ false))
                return 0;
        return unit_job_after(j);
}

static int unit_job_on_removed(UnitJob *j, const char *result) {
        char buf[128];
        int r;

        j->slot = sd_bus_slot_unref(j->slot); /* a re-check in flight is answered by the signal */
        j->vanished = false;
        r = free_and_strdup(&j->job_result, result);
        if (r < 0)
                return unit_job_finish(j, r, NULL);

        /* For start/restart, a failed job is reported with the unit's state and Service.Result,
         * read next; for stop/reload the job result says it all. */
        r = unit_job_result_to_errno(result);
        if (r < 0 && j->action != UNIT_ACTION_START && j->action != UNIT_ACTION_RESTART) {
                snprintf(buf, sizeof(buf), "job result: %s", result);
                return unit_job_finish(j, r, buf);
        }

        j->step = STEP_AFTER;
        r = unit_job_get_all(j, unit_job_on_after);
        if (r < 0)
                return unit_job_finish(j, r, NULL);
        return 0;
}

static int unit_control_on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        UnitControl *uc = ASSERT_PTR(userdata);
        const char *path, *unit, *result;
        uint32_t id;

        if (sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0)
                return 0; /* malformed: not ours to judge */

        for (UnitJob *j = uc->jobs; j; j = j->next)
                if ((j->step == STEP_WAIT || j->step == STEP_RECHECK) && streq_ptr(j->job_path, path))
                        return unit_job_on_removed(j, result);
        return 0; /* someone else's job */
}

static int unit_job_send_call(UnitJob *j);

/* The re-check of a job whose JobRemoved may have been lost, or whose request's reply was: the unit's
 * pending job, if any, is ours (or the one ours merged into) to wait for; without one the job is over
 * (judged by the unit's state), or, if its request never got an answer, not carried out yet. */
static int unit_job_on_recheck(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitJob *j = ASSERT_PTR(userdata);
        bool restarted;
        int r;

        if (!unit_job_take_properties(j, reply, /* before= */ false))
                return 0;
        if (j->unit_job) {
                r = free_and_strdup(&j->job_path, j->unit_job);
                if (r < 0)
                        return unit_job_finish(j, r, NULL);
                j->step = STEP_WAIT; /* subscribed before this read: its JobRemoved will come */
                return 0;
        }
        restarted = j->action == UNIT_ACTION_RESTART && !sd_id128_is_null(j->invocation_after) &&
                !sd_id128_equal(j->invocation_before, j->invocation_after);
        if (!j->job_path && !restarted) {
                r = unit_job_send_call(j);
                return r < 0 ? unit_job_finish(j, r, NULL) : 0;
        }
        j->vanished = true;
        j->step = STEP_AFTER;
        return unit_job_after(j);
}

static int unit_job_recheck(UnitJob *j) {
        j->step = STEP_RECHECK;
        j->unit_job = mfree(j->unit_job); /* only what this read says counts */
        return unit_job_get_all(j, unit_job_on_recheck);
}

static int unit_job_on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitJob *j = ASSERT_PTR(userdata);
        const sd_bus_error *e;
        const char *path;
        int r;

        j->slot = sd_bus_slot_unref(j->slot); /* the call is over either way */

        if (reply_is_lost(reply)) {
                unit_job_park(j);
                return 0;
        }
        e = sd_bus_message_get_error(reply);
        if (e)
                return unit_job_finish_bus_error(j, e);

        if (unit_action_is_call(j->action))
                return unit_job_finish(j, 0, NULL); /* these reply once they are done */

        r = sd_bus_message_read(reply, "o", &path);
        if (r < 0)
                return unit_job_finish(j, r, "malformed reply from systemd");
        r = free_and_strdup(&j->job_path, path);
        if (r < 0)
                return unit_job_finish(j, r, NULL);

        j->step = STEP_WAIT;
        return 0; /* completion arrives as JobRemoved */
}

static int unit_job_send_call(UnitJob *j) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        j->step = STEP_CALL;
        r = sd_bus_message_new_method_call(j->uc->bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                           unit_action_method[j->action]);
        if (r < 0)
                return r;
        switch (j->action) {
        case UNIT_ACTION_DAEMON_RELOAD:
                r = 0;
                break;
        case UNIT_ACTION_ENABLE: /* runtime=false, force=true, as upstream */
                r = sd_bus_message_append(m, "asbb", 1, j->unit, false, true);
                break;
        case UNIT_ACTION_DISABLE:
                r = sd_bus_message_append(m, "asb", 1, j->unit, false);
                break;
        default:
                r = sd_bus_message_append(m, "ss", j->unit, j->mode);
        }
        if (r < 0)
                return r;
        j->sent = true;
        /* Reload() replies only when done: let our own timer, not sd-bus' 25 s default, decide. */
        return sd_bus_call_async(j->uc->bus, &j->slot, m, unit_job_on_reply, j,
                                 j->uc->job_timeout_usec + USEC_PER_SEC);
}

static int unit_job_on_before(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitJob *j = ASSERT_PTR(userdata);
        int r;

        if (!unit_job_take_properties(j, reply, /* before= */ true))
                return 0;

        r = unit_job_send_call(j);
        if (r < 0)
                return unit_job_finish(j, r, NULL);
        return 0;
}

/* Goes on from where the job stood when systemd became unreachable (or, for a new job, starts it). A
 * call whose answer was lost is not simply repeated: a restart must not run twice. */
static int unit_job_resume(UnitJob *j) {
        j->parked = false;
        switch (j->step) {
        case STEP_BEFORE:
                return unit_job_get_all(j, unit_job_on_before);
        case STEP_CALL:
                if (!j->sent || unit_action_is_call(j->action))
                        return unit_job_send_call(j); /* enable/disable/daemon-reload: idempotent */
                return unit_job_recheck(j);
        case STEP_WAIT:
        case STEP_RECHECK:
                return unit_job_recheck(j);
        case STEP_AFTER:
                return unit_job_get_all(j, unit_job_on_after);
        case STEP_SERVICE_RESULT:
                return unit_job_judge(j); /* Service.Result only adds to the report */
        case STEP_REACH:
                return unit_job_finish(j, 0, NULL);
        }
        return -EINVAL;
}

static const char *unit_control_link_problem(const UnitControl *uc) {
        switch (uc->link) {
        case LINK_DETACHED:
                return "no connection to the system bus";
        case LINK_WAITING:
                return "systemd is not on the system bus";
        default:
                return NULL;
        }
}

static int unit_job_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        UnitJob *j = ASSERT_PTR(userdata);
        const char *problem = unit_control_link_problem(j->uc);
        char d[DURATION_MAX_STR], buf[512];

        format_duration(d, sizeof(d), j->uc->job_timeout_usec);
        if (j->job_path)
                /* Not cancelled on purpose: cancelling a running start job leaves the unit's processes
                 * as they are; systemd's own TimeoutStartSec= is the better judge of those. */
                snprintf(buf, sizeof(buf), "no result within %s (job %s left to systemd)%s%s", d,
                         j->job_path, problem ? ": " : "", strempty(problem));
        else
                snprintf(buf, sizeof(buf), "no result within %s%s%s", d, problem ? ": " : "",
                         strempty(problem));
        return unit_job_finish(j, -ETIMEDOUT, buf);
}

/* ---- public */

int unit_control_run(UnitControl *uc, UnitAction action, const char *unit, const char *mode,
                     UnitJobDone on_done, void *userdata, UnitJob **ret_job) {
        _cleanup_(unit_job_freep) UnitJob *j = NULL;
        int r = 0;

        assert(uc);
        assert(action >= 0 && action < _UNIT_ACTION_MAX);
        assert((action == UNIT_ACTION_DAEMON_RELOAD || action == UNIT_ACTION_REACH) == !unit);
        assert(on_done);

        if (uc->subscribe_error < 0)
                return uc->subscribe_error;

        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (UnitJob) {
                .action = action,
                .step = action == UNIT_ACTION_RESTART ? STEP_BEFORE :
                        action == UNIT_ACTION_REACH   ? STEP_REACH :
                                                        STEP_CALL,
                .on_done = on_done,
                .userdata = userdata,
                .start_usec = clock_now_usec(CLOCK_MONOTONIC),
        };
        if (unit) {
                j->unit = strdup(unit);
                j->mode = strdup(mode ? mode : "replace");
                if (!j->unit || !j->mode)
                        return -ENOMEM;
                r = sd_bus_path_encode(UNIT_PATH_PREFIX, unit, &j->unit_path);
                if (r < 0)
                        return r;
        }

        r = sd_event_add_time_relative(uc->event, &j->timer, CLOCK_MONOTONIC, uc->job_timeout_usec,
                                       /* accuracy= */ 0, unit_job_on_timeout, j);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(j->timer, "unit-job-timeout");

        j->uc = uc;
        /* Without a way to systemd (the bus restarting, systemd re-executing) the request waits for
         * one, within its own timeout. */
        if (uc->link == LINK_READY && sd_bus_is_open(uc->bus) > 0) {
                assert(action != UNIT_ACTION_REACH); /* unit_control_reach() answers that itself */
                r = unit_job_resume(j);
        } else
                j->parked = true;
        if (r < 0) {
                j->uc = NULL;
                return r;
        }

        j->next = uc->jobs;
        if (uc->jobs)
                uc->jobs->prev = j;
        uc->jobs = j;

        if (ret_job)
                *ret_job = j;
        TAKE_PTR(j);
        return 0;
}

int unit_control_reach(UnitControl *uc, UnitJobDone on_done, void *userdata, UnitJob **ret_job) {
        int r;

        assert(uc);
        if (unit_control_get_bus(uc))
                return 1;
        r = unit_control_run(uc, UNIT_ACTION_REACH, NULL, NULL, on_done, userdata, ret_job);
        return r < 0 ? r : 0;
}

/* ---- the way to systemd */

/* Finishes every job with `error`: nothing can come of them. */
static void unit_control_fail_all(UnitControl *uc, int error, const char *detail) {
        while (uc->jobs)
                (void) unit_job_finish(uc->jobs, error, detail);
}

static int unit_control_on_subscribe(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitControl *uc = ASSERT_PTR(userdata);
        const sd_bus_error *e;
        char buf[512];
        int r;

        uc->slot_subscribe = sd_bus_slot_unref(uc->slot_subscribe);
        if (reply_is_lost(reply))
                return 0; /* subscribed again when systemd is back */
        e = sd_bus_message_get_error(reply);
        /* A second UnitControl on the same connection is already subscribed: that is fine. */
        if (!e || sd_bus_error_has_name(e, "org.freedesktop.systemd1.AlreadySubscribed")) {
                uc->subscribe_error = 0;
                return 0;
        }
        r = sd_bus_error_get_errno(e);
        uc->subscribe_error = r > 0 ? -r : -EIO;
        snprintf(buf, sizeof(buf), "cannot subscribe to systemd's job signals: %s", e->message ?: e->name);
        unit_control_fail_all(uc, uc->subscribe_error, buf);
        return 0;
}

/* Every job with `parked` set goes on, one at a time: a job finishing may start or cancel others. */
static void unit_control_resume(UnitControl *uc) {
        UnitJob *j;
        int r;

        if (uc->link != LINK_READY)
                return;
        for (;;) {
                for (j = uc->jobs; j && !j->parked; j = j->next)
                        ;
                if (!j)
                        return;
                r = unit_job_resume(j);
                if (r < 0)
                        (void) unit_job_finish(j, r, NULL);
        }
}

/* systemd is (again, or a new instance is) on the bus as `owner` (NULL on a direct connection). A new
 * instance (a re-exec, a reconnected bus) sent its signals to nobody meanwhile: subscribe again and
 * re-read every job waiting for a JobRemoved. Subscribe() goes out first, so no signal slips past. */
static void unit_control_ready(UnitControl *uc, const char *owner) {
        bool same = uc->link == LINK_READY && streq_ptr(owner, uc->owner);

        if (free_and_strdup(&uc->owner, owner) < 0) {
                unit_control_fail_all(uc, -ENOMEM, NULL);
                return;
        }
        uc->link = LINK_READY;
        if (!same) {
                log_debug("systemd is reachable%s%s; subscribing and going on with %zu job(s).",
                          owner ? " as " : "", strempty(owner), unit_control_n_jobs(uc));
                uc->slot_subscribe = sd_bus_slot_unref(uc->slot_subscribe);
                if (sd_bus_call_method_async(uc->bus, &uc->slot_subscribe, SYSTEMD_DEST, SYSTEMD_PATH,
                                             SYSTEMD_MANAGER, "Subscribe", unit_control_on_subscribe, uc,
                                             "") < 0) {
                        unit_control_fail_all(uc, -ENOTCONN, "cannot subscribe to systemd's job signals");
                        return;
                }
                for (UnitJob *j = uc->jobs; j; j = j->next)
                        if (j->step == STEP_WAIT)
                                j->parked = true;
        }
        unit_control_resume(uc);
}

static void unit_control_gone(UnitControl *uc) {
        if (uc->link == LINK_READY)
                log_debug("systemd is out of reach (%s); %zu job(s) wait.",
                          uc->bus ? "it left the bus" : "no bus connection", unit_control_n_jobs(uc));
        uc->link = uc->bus ? LINK_WAITING : LINK_DETACHED;
        uc->owner = mfree(uc->owner);
}

static int unit_control_on_get_owner(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitControl *uc = ASSERT_PTR(userdata);
        const char *owner;

        uc->slot_get_owner = sd_bus_slot_unref(uc->slot_get_owner);
        if (sd_bus_is_open(sd_bus_message_get_bus(reply)) <= 0)
                return 0; /* the connection is going: re-attached later */
        if (sd_bus_message_is_method_error(reply, NULL) || sd_bus_message_read(reply, "s", &owner) < 0) {
                unit_control_gone(uc); /* NameHasNoOwner: NameOwnerChanged brings it */
                return 0;
        }
        unit_control_ready(uc, owner);
        return 0;
}

/* Who owns systemd's name now? Asked on a new bus and after a lost answer. */
static void unit_control_check_owner(UnitControl *uc) {
        if (!uc->bus || sd_bus_is_open(uc->bus) <= 0)
                return; /* set_bus() follows with the next connection */
        if (sd_bus_is_bus_client(uc->bus) <= 0) {
                unit_control_resume(uc); /* a direct connection is systemd itself */
                return;
        }
        if (uc->slot_get_owner)
                return;
        if (sd_bus_call_method_async(uc->bus, &uc->slot_get_owner, DBUS_DEST, DBUS_PATH, DBUS_DEST,
                                     "GetNameOwner", unit_control_on_get_owner, uc, "s", SYSTEMD_DEST) < 0)
                unit_control_gone(uc); /* NameOwnerChanged is the other way back */
}

static int unit_control_on_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        UnitControl *uc = ASSERT_PTR(userdata);
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || !streq(name, SYSTEMD_DEST))
                return 0;
        if (isempty(new_owner))
                unit_control_gone(uc); /* a re-exec: requests wait for the new instance */
        else
                unit_control_ready(uc, new_owner);
        return 0;
}

/* Reloading(false): a daemon-reload is over. Jobs survive it, but a JobRemoved sent around it is not
 * worth betting an update on: re-read the jobs that wait for one. */
static int unit_control_on_reloading(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        UnitControl *uc = ASSERT_PTR(userdata);
        int active;

        if (sd_bus_message_read(m, "b", &active) < 0 || active)
                return 0;
        for (UnitJob *j = uc->jobs; j; j = j->next)
                if (j->step == STEP_WAIT && !j->slot)
                        j->parked = true;
        unit_control_resume(uc);
        return 0;
}

/* Drops the bus: calls in flight are forgotten and resumed on the next one. */
static void unit_control_detach(UnitControl *uc) {
        for (UnitJob *j = uc->jobs; j; j = j->next) {
                j->slot = sd_bus_slot_unref(j->slot);
                j->parked = true;
        }
        uc->slot_subscribe = sd_bus_slot_unref(uc->slot_subscribe);
        uc->slot_job_removed = sd_bus_slot_unref(uc->slot_job_removed);
        uc->slot_reloading = sd_bus_slot_unref(uc->slot_reloading);
        uc->slot_owner_changed = sd_bus_slot_unref(uc->slot_owner_changed);
        uc->slot_get_owner = sd_bus_slot_unref(uc->slot_get_owner);
        uc->bus = sd_bus_unref(uc->bus);
        unit_control_gone(uc);
}

int unit_control_set_bus(UnitControl *uc, sd_bus *bus) {
        int r;

        assert(uc);

        if (bus == uc->bus)
                return 0;
        unit_control_detach(uc);
        if (!bus)
                return 0;
        if (sd_bus_get_event(bus) != uc->event)
                return -EXDEV; /* the jobs' timers run on uc->event */

        uc->bus = sd_bus_ref(bus);
        uc->link = LINK_WAITING;
        /* Matches first, then the rest: all precede every job request on this connection, and the
         * bus delivers in order, so no JobRemoved of ours can slip past. Without a subscriber systemd
         * sends no job signals at all (org.freedesktop.systemd1(5)). */
        r = sd_bus_match_signal_async(bus, &uc->slot_job_removed, SYSTEMD_DEST, SYSTEMD_PATH,
                                      SYSTEMD_MANAGER, "JobRemoved", unit_control_on_job_removed,
                                      /* add_callback= */ NULL, uc);
        if (r >= 0)
                r = sd_bus_match_signal_async(bus, &uc->slot_reloading, SYSTEMD_DEST, SYSTEMD_PATH,
                                              SYSTEMD_MANAGER, "Reloading", unit_control_on_reloading, NULL,
                                              uc);
        if (r >= 0 && sd_bus_is_bus_client(bus) > 0)
                r = sd_bus_add_match_async(bus, &uc->slot_owner_changed, OWNER_CHANGED_MATCH,
                                           unit_control_on_owner_changed, NULL, uc);
        if (r < 0) {
                unit_control_detach(uc);
                return r;
        }
        if (sd_bus_is_bus_client(bus) > 0)
                unit_control_check_owner(uc);
        else
                unit_control_ready(uc, NULL);
        return 0;
}

int unit_control_new(sd_bus *bus, uint64_t job_timeout_usec, UnitControl **ret) {
        _cleanup_(unit_control_freep) UnitControl *uc = NULL;
        sd_event *event;
        int r;

        assert(bus);
        assert(ret);

        if (job_timeout_usec == 0 || job_timeout_usec == USEC_INFINITY)
                return -EINVAL;
        event = sd_bus_get_event(bus);
        if (!event)
                return -ENXIO; /* not attached: nothing would ever dispatch */

        uc = calloc(1, sizeof(*uc));
        if (!uc)
                return -ENOMEM;
        uc->event = sd_event_ref(event);
        uc->job_timeout_usec = job_timeout_usec;

        r = unit_control_set_bus(uc, bus);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(uc);
        return 0;
}

UnitControl *unit_control_free(UnitControl *uc) {
        if (!uc)
                return NULL;
        while (uc->jobs)
                unit_job_free(uc->jobs);
        unit_control_detach(uc);
        sd_event_unref(uc->event);
        free(uc);
        return NULL;
}

sd_bus *unit_control_get_bus(const UnitControl *uc) {
        /* Not while the connection is closing either: its calls are being answered "lost" then. */
        return uc && uc->link == LINK_READY && sd_bus_is_open(uc->bus) > 0 ? uc->bus : NULL;
}

size_t unit_control_n_jobs(const UnitControl *uc) {
        size_t n = 0;

        assert(uc);
        for (const UnitJob *j = uc->jobs; j; j = j->next)
                n++;
        return n;
}
