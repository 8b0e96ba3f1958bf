/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>

#include "core/restart-request.h"
#include "duties/restart-handler.h"
#include "util/backoff.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"

typedef enum RestartHandlerState {
        RESTART_HANDLER_IDLE,
        RESTART_HANDLER_RESTARTING, /* one unit job in flight */
        RESTART_HANDLER_REMOVING,   /* remove_annotation() in flight */
        RESTART_HANDLER_RETRY_WAIT, /* removal failed; retry timer armed */
        RESTART_HANDLER_SAVE_WAIT,  /* the record not saved before a restart; retry timer armed */
        RESTART_HANDLER_SELF,       /* restarting our own unit: we expect to be stopped */
} RestartHandlerState;

/* What was done for one annotation value; mirrored to state_path. */
typedef struct RestartRecord {
        char *value; /* owned; NULL = no record */
        char **done; /* owned, n_done entries: units restarted (or tried) */
        size_t n_done;
        bool rejected_reported; /* the Warnings for rejected entries went out */
        bool removed;           /* the annotation with this value was removed */
        bool finished;          /* every restart was started (the agent's own last) */
} RestartRecord;

struct RestartHandler {
        sd_event *event;                   /* borrowed: the Manager's loop */
        UnitControl *uc;                   /* borrowed */
        char *self_unit;                   /* owned; may be NULL */
        const char *const *replaced_units; /* borrowed, NULL-terminated: also mean self_unit */
        char *state_path;                  /* owned; may be NULL */
        RestartHandlerCallbacks cb;
        void *userdata; /* borrowed */

        RestartHandlerState state;
        RestartRequest *request;      /* owned: the parsed current value */
        size_t index;                 /* next unit in request->units */
        UnitJob *job;                 /* borrowed: owned by uc, cancelled in our destructor */
        sd_event_source *retry_timer; /* owned */
        unsigned retries;             /* removal (or record save) failures in a row */
        uint64_t retry_min_usec;
        uint64_t retry_max_usec;
        RestartRecord record;
        char *pending;       /* owned: newest value seen while busy */
        bool has_pending;    /* pending is meaningful (NULL pending = annotation gone) */
        LogOnce logged_save; /* the last failure to save the record, logged once */
};

/* ---- the record */

static void record_clear(RestartRecord *rec) {
        for (size_t i = 0; i < rec->n_done; i++)
                free(rec->done[i]);
        free(rec->done);
        free(rec->value);
        *rec = (RestartRecord) {};
}

static bool record_has_done(const RestartRecord *rec, const char *unit) {
        for (size_t i = 0; i < rec->n_done; i++)
                if (streq(rec->done[i], unit))
                        return true;
        return false;
}

static int record_add_done(RestartRecord *rec, const char *unit) {
        char **a, *u;

        if (record_has_done(rec, unit))
                return 0;
        u = strdup(unit);
        a = u ? reallocarray(rec->done, rec->n_done + 1, sizeof(*a)) : NULL;
        if (!a) {
                free(u);
                return -ENOMEM;
        }
        rec->done = a;
        rec->done[rec->n_done++] = u;
        return 0;
}

/* Returns < 0 when the record is not on disk. Only the save before a restart must succeed (the
 * header's at-most-once); the others (rejections reported, annotation removed, all started) may
 * fail: the next save carries them, and a crash before it repeats a Warning, never a restart. */
static int record_save(const RestartHandler *h) {
        json_t *j, *done;
        char *s;
        int r;

        if (!h->state_path)
                return 0;
        if (!h->record.value)
                return unlink(h->state_path) < 0 && errno != ENOENT ? -errno : 0;
        done = json_array();
        for (size_t i = 0; done && i < h->record.n_done; i++)
                json_array_append_new(done, json_string(h->record.done[i]));
        j = json_pack("{s:s, s:o*, s:b, s:b, s:b}", "value", h->record.value, "done", done,
                      "rejectedReported", h->record.rejected_reported, "removed", h->record.removed,
                      "finished", h->record.finished);
        s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        r = s ? write_file_atomic(h->state_path, s, strlen(s), 0600) : -ENOMEM;
        free(s);
        json_decref(j);
        return r;
}

/* A missing, unreadable or corrupt record means "nothing done yet". */
static void record_load(RestartHandler *h) {
        _cleanup_free_ char *data = NULL;
        json_t *j, *done, *v;
        const char *value;
        int rejected = 0, removed = 0, finished = -1;
        size_t i;

        if (!h->state_path || read_full_file(h->state_path, RESTART_HANDLER_STATE_MAX, &data, NULL) < 0)
                return;
        j = json_loads(data, 0, NULL);
        if (!j ||
            json_unpack(j, "{s:s, s:o, s?b, s?b, s?b}", "value", &value, "done", &done, "rejectedReported",
                        &rejected, "removed", &removed, "finished", &finished) < 0 ||
            !json_is_array(done)) {
                json_decref(j);
                return;
        }
        h->record.value = strdup(value);
        h->record.rejected_reported = rejected;
        h->record.removed = removed;
        /* Records written before "finished" existed were removed only after all restarts. */
        h->record.finished = finished < 0 ? removed : finished;
        json_array_foreach(done, i, v)
                if (json_is_string(v) && i < RESTART_REQUEST_UNITS_MAX + 1)
                        (void) record_add_done(&h->record, json_string_value(v));
        if (!h->record.value)
                record_clear(&h->record);
        json_decref(j);
}

/* ---- sequencing */

static void handler_next(RestartHandler *h);
static int handler_start(RestartHandler *h, const char *value);

static bool value_is_blank(const char *v) {
        return !v || v[strspn(v, " \t\n\r\v\f")] == '\0';
}

static void handler_finish(RestartHandler *h) {
        _cleanup_free_ char *value = NULL, *pending = NULL;
        bool has_pending = h->has_pending;

        value = h->record.value ? restart_request_display(h->record.value) : NULL;
        h->request = restart_request_free(h->request);
        h->job = NULL;
        h->retry_timer = sd_event_source_disable_unref(h->retry_timer);
        h->state = RESTART_HANDLER_IDLE;
        pending = TAKE_PTR(h->pending);
        h->has_pending = false;

        if (h->cb.on_finished && value)
                h->cb.on_finished(value, h->userdata);

        /* A value it cannot take now (out of memory) is not lost: the Manager submits the Node's value
         * again with every Node update. */
        if (has_pending)
                IGNORE_RESULT(restart_handler_submit(h, pending));
}

static void handler_report(RestartHandler *h, const char *unit, bool ok, const char *detail) {
        if (h->cb.on_unit_result)
                h->cb.on_unit_result(unit, ok, detail, h->userdata);
}

static void handler_on_self_done(const UnitJobResult *res, void *userdata) {
        RestartHandler *h = ASSERT_PTR(userdata);

        /* We survived our own restart: the unit is not the one we run in (or systemd refused). */
        h->job = NULL;
        handler_report(h, res->unit, res->error >= 0, res->detail);
        handler_finish(h);
}

static void handler_retry_later(RestartHandler *h, RestartHandlerState state);

/* Records `unit` as started, on disk, before it is started: if its restart takes the agent down, the
 * next instance does not start it again (at most once per annotation value). If that cannot be saved,
 * nothing is started: the handler says so once and tries again later. */
static bool handler_record_start(RestartHandler *h, const char *unit, bool finished) {
        int r;

        assert(!record_has_done(&h->record, unit));
        r = record_add_done(&h->record, unit);
        if (r >= 0) {
                h->record.finished = finished;
                r = record_save(h);
                if (r < 0) {
                        free(h->record.done[--h->record.n_done]);
                        h->record.finished = false;
                }
        }
        if (r < 0) {
                if (log_once_check(&h->logged_save, r, NULL))
                        log_error_errno(r, "Failed to save %s, not restarting %s until it is saved: %m",
                                        strempty(h->state_path), unit);
                handler_retry_later(h, RESTART_HANDLER_SAVE_WAIT);
                return false;
        }
        log_once_clear(&h->logged_save);
        h->retries = 0;
        return true;
}

static void handler_restart_self(RestartHandler *h) {
        const char *self = h->request->units[h->request->n_units - 1];
        int r;

        /* On disk before systemd stops us: the next instance must not do this again. */
        if (!handler_record_start(h, self, /* finished= */ true))
                return; /* continues in handler_on_retry() */

        h->state = RESTART_HANDLER_SELF;
        r = unit_control_restart_unit(h->uc, self, handler_on_self_done, h, &h->job);
        if (r < 0) {
                handler_report(h, self, /* ok= */ false, strerror(-r));
                handler_finish(h);
        }
}

static bool handler_self_pending(const RestartHandler *h) {
        return h->request->has_self &&
                !record_has_done(&h->record, h->request->units[h->request->n_units - 1]);
}

static int handler_on_retry(sd_event_source *s, uint64_t usec, void *userdata);

/* In `state` (a failed removal or record save) until the timer runs handler_on_retry(). */
static void handler_retry_later(RestartHandler *h, RestartHandlerState state) {
        int r;

        h->state = state;
        h->retry_timer = sd_event_source_disable_unref(h->retry_timer);
        r = sd_event_add_time_relative(
                h->event, &h->retry_timer, CLOCK_MONOTONIC,
                backoff_exponential(h->retry_min_usec, h->retry_max_usec, h->retries++),
                /* accuracy= */ 0, handler_on_retry, h);
        if (r < 0)
                /* Nothing left to drive a retry; the next submit() of this value will. */
                h->state = RESTART_HANDLER_IDLE;
}

static void handler_remove(RestartHandler *h) {
        int r;

        h->state = RESTART_HANDLER_REMOVING;
        r = h->cb.remove_annotation ? h->cb.remove_annotation(h->record.value, h->userdata) : 0;
        if (r < 0)
                handler_retry_later(h, RESTART_HANDLER_RETRY_WAIT);
        else if (!h->cb.remove_annotation)
                restart_handler_annotation_removed(h, 0);
        /* else: completion comes through restart_handler_annotation_removed(), maybe already did */
}

static int handler_on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        RestartHandler *h = ASSERT_PTR(userdata);

        h->retry_timer = sd_event_source_disable_unref(h->retry_timer);
        if (h->state == RESTART_HANDLER_SAVE_WAIT)
                handler_next(h);
        else
                handler_remove(h);
        return 0;
}

void restart_handler_annotation_removed(RestartHandler *h, int error) {
        assert(h);

        if (h->state != RESTART_HANDLER_REMOVING)
                return; /* late completion of something we gave up on */
        if (error < 0 && error != -ENOENT && error != -ESTALE) {
                handler_retry_later(h, RESTART_HANDLER_RETRY_WAIT);
                return;
        }
        h->retries = 0;
        h->record.removed = true;
        (void) record_save(h);
        handler_next(h);
}

static void handler_on_unit_done(const UnitJobResult *res, void *userdata) {
        RestartHandler *h = ASSERT_PTR(userdata);

        h->job = NULL;
        handler_report(h, res->unit, res->error >= 0, res->detail);
        h->index++;
        handler_next(h);
}

/* Runs once the annotation is gone: restarts the next unit not done yet, the agent's own last. */
static void handler_next(RestartHandler *h) {
        size_t n_others = h->request->n_units - (h->request->has_self ? 1 : 0);
        int r;

        h->state = RESTART_HANDLER_RESTARTING;
        for (; h->index < n_others; h->index++) {
                const char *unit = h->request->units[h->index];

                if (record_has_done(&h->record, unit))
                        continue; /* started before a crash */
                if (!handler_record_start(h, unit, /* finished= */ false))
                        return; /* continues in handler_on_retry() */
                r = unit_control_restart_unit(h->uc, unit, handler_on_unit_done, h, &h->job);
                if (r >= 0)
                        return; /* continues in handler_on_unit_done() */
                handler_report(h, unit, /* ok= */ false, strerror(-r));
        }

        if (handler_self_pending(h)) {
                handler_restart_self(h);
                return;
        }
        h->record.finished = true;
        (void) record_save(h);
        handler_finish(h);
}

static void handler_report_rejected(RestartHandler *h) {
        _cleanup_free_ char *summary = NULL;

        if (!h->cb.on_rejected)
                return;
        /* Many rejections become one message: past the Event spam filter, each would be dropped. */
        if (restart_request_rejected_summary(h->request, &summary) < 0)
                return;
        if (summary) {
                h->cb.on_rejected(NULL, summary, h->userdata);
                return;
        }
        for (size_t i = 0; i < h->request->n_rejected; i++)
                h->cb.on_rejected(h->request->rejected[i].entry, h->request->rejected[i].why, h->userdata);
}

static int handler_start(RestartHandler *h, const char *value) {
        _cleanup_(restart_request_freep) RestartRequest *req = NULL;
        int r;

        r = restart_request_parse(value, h->self_unit, h->replaced_units, &req);
        if (r < 0)
                return r;

        if (!streq_ptr(h->record.value, value)) {
                record_clear(&h->record);
                h->record.value = strdup(value);
                if (!h->record.value)
                        return -ENOMEM;
        }
        restart_request_free(h->request); /* left over if a removal retry could not be armed */
        h->request = TAKE_PTR(req);
        h->index = 0;
        h->retries = 0;

        if (!h->record.rejected_reported) {
                h->record.rejected_reported = true;
                (void) record_save(h);
                handler_report_rejected(h);
        }

        /* docs/contract.md §9.12: the annotation goes before any restart. A restart that reaches the
         * agent (its own unit, or anything that stops it) must not find the annotation again. */
        if (h->record.removed)
                handler_next(h); /* resuming after a crash */
        else
                handler_remove(h);
        return 0;
}

/* ---- public */

int restart_handler_submit(RestartHandler *h, const char *value) {
        assert(h);

        if (value_is_blank(value))
                value = NULL;

        switch (h->state) {
        case RESTART_HANDLER_RESTARTING:
        case RESTART_HANDLER_REMOVING:
        case RESTART_HANDLER_SAVE_WAIT:
        case RESTART_HANDLER_SELF:
                if (streq_ptr(value, h->record.value)) {
                        /* Back to what we are doing: whatever came in between is superseded. */
                        free(h->pending);
                        h->pending = NULL;
                        h->has_pending = false;
                        return 0;
                }
                /* Finish what was asked first (MaxConcurrentReconciles=1 upstream); latest wins. */
                h->has_pending = true;
                return free_and_strdup(&h->pending, value);

        case RESTART_HANDLER_RETRY_WAIT:
                if (streq_ptr(value, h->record.value))
                        return 0; /* still there: the timer retries */
                /* Gone or replaced: nothing of ours left to remove; the restarts can go ahead,
                 * and a new value comes afterwards. */
                h->retry_timer = sd_event_source_disable_unref(h->retry_timer);
                h->retries = 0;
                h->record.removed = true;
                (void) record_save(h);
                h->has_pending = true;
                if (free_and_strdup(&h->pending, value) < 0)
                        return -ENOMEM;
                handler_next(h);
                return 0;

        case RESTART_HANDLER_IDLE:
                break;
        }

        if (h->state != RESTART_HANDLER_IDLE)
                return 0; /* handler_finish() started the pending value */

        if (h->record.value && h->record.removed && !h->record.finished) {
                /* A previous instance removed the annotation and died before all restarts were
                 * started: finish those first, then look at what the Node says now. */
                if (!streq_ptr(value, h->record.value)) {
                        h->has_pending = true;
                        if (free_and_strdup(&h->pending, value) < 0)
                                return -ENOMEM;
                }
                return handler_start(h, h->record.value);
        }
        if (!value) {
                /* Seen absent: a later identical value is a new request. */
                if (h->record.value) {
                        record_clear(&h->record);
                        (void) record_save(h);
                }
                return 0;
        }
        if (streq_ptr(value, h->record.value) && h->record.removed)
                return 0; /* a stale view from before our removal */
        return handler_start(h, value);
}

void restart_handler_set_replaced_units(RestartHandler *h, const char *const *units) {
        assert(h);
        h->replaced_units = units;
}

void restart_handler_set_retry_interval(RestartHandler *h, uint64_t min_usec, uint64_t max_usec) {
        assert(h);
        assert(min_usec > 0 && min_usec <= max_usec);
        h->retry_min_usec = min_usec;
        h->retry_max_usec = max_usec;
}

bool restart_handler_is_busy(const RestartHandler *h) {
        assert(h);
        return h->state != RESTART_HANDLER_IDLE;
}

int restart_handler_new(sd_event *event, UnitControl *uc, const char *self_unit, const char *state_path,
                        const RestartHandlerCallbacks *cb, void *userdata, RestartHandler **ret) {
        _cleanup_(restart_handler_freep) RestartHandler *h = NULL;

        assert(event);
        assert(uc);
        assert(cb);
        assert(ret);

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = event;
        h->uc = uc;
        h->cb = *cb;
        h->userdata = userdata;
        h->retry_min_usec = RESTART_HANDLER_RETRY_MIN_USEC;
        h->retry_max_usec = RESTART_HANDLER_RETRY_MAX_USEC;
        h->replaced_units = restart_request_replaced_units_default;
        if (free_and_strdup(&h->self_unit, self_unit) < 0 || free_and_strdup(&h->state_path, state_path) < 0)
                return -ENOMEM;
        record_load(h);

        *ret = TAKE_PTR(h);
        return 0;
}

RestartHandler *restart_handler_free(RestartHandler *h) {
        if (!h)
                return NULL;
        unit_job_cancel(h->job);
        sd_event_source_disable_unref(h->retry_timer);
        restart_request_free(h->request);
        record_clear(&h->record);
        log_once_done(&h->logged_save);
        free(h->pending);
        free(h->self_unit);
        free(h->state_path);
        free(h);
        return NULL;
}
