/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "kube/kube-path.h"
#include "kube/kube-watch.h"
#include "kube/watch-stream.h"
#include "util/backoff.h"
#include "util/event-util.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/random-util.h"
#include "util/time-util.h"

/* Returned from the stream callback to stop at an ERROR event; never leaves this file. */
#define STOP_ERROR_EVENT (-ECANCELED)

typedef struct PendingEvent {
        WatchEventType type;
        json_t *object; /* ref held */
} PendingEvent;

typedef enum WatchStep {
        STEP_NONE,
        STEP_LIST,
        STEP_WATCH,
} WatchStep;

struct KubeWatch {
        KubeClient *client; /* borrowed: outlives us */
        char *collection;   /* owned: e.g. "/api/v1/nodes" (kube_path()) */
        char *name;         /* owned: a valid object name */
        char *selector;     /* owned: "metadata.name=<name>", escaped into each query */
        KubeWatchCallbacks cb;
        void *userdata; /* borrowed */

        json_t *object;      /* ref held: current object; NULL if absent */
        char *rv;            /* owned: last synced resourceVersion; NULL before the first LIST */
        bool rv_unavailable; /* the server no longer has `rv`: next LIST with RV="" */

        Backoff backoff;
        sd_event_source *timer; /* owned: the next step */
        WatchStep next_step;
        KubeRequest *list;     /* owned: LIST in flight */
        HttpRequest *watch;    /* owned: WATCH in flight */
        WatchStream *stream;   /* owned */
        PendingEvent *pending; /* owned: decoded, not yet applied events */
        size_t n_pending, n_pending_alloc;
        sd_event_source *dispatch; /* owned: applies `pending` outside libcurl's callbacks */
        uint64_t watch_started_usec;
        unsigned watch_events; /* events of the current watch */
        int error_code;        /* Status code of an ERROR event in the current watch */
        bool error_too_large;
        int stream_error;              /* decode error of the current watch */
        uint64_t forbidden_since_usec; /* the first 403 of the LISTs failing with it; 0 none */
        LogOnce event_too_large;       /* a WATCH event over the line limit, said once until one fits */
        char *list_message;            /* owned: why the last LIST failed (the Status message, or the
                                        * size limit); NULL none */

        KubeWatchStats stats;
};

static int kube_watch_schedule(KubeWatch *w, WatchStep step, uint64_t delay_usec);

static const char *object_rv(const json_t *o) {
        return json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));
}

static const char *object_uid(const json_t *o) {
        return json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
}

static int set_rv(KubeWatch *w, const char *rv) {
        if (isempty(rv))
                return 0;
        return free_and_strdup(&w->rv, rv);
}

static void object_changed(KubeWatch *w, json_t *o) {
        bool same = w->object && streq_ptr(object_rv(w->object), object_rv(o)) &&
                streq_ptr(object_uid(w->object), object_uid(o));

        json_decref(w->object);
        w->object = json_incref(o);
        if (!same && w->cb.on_object)
                w->cb.on_object(w, o, w->userdata);
}

static void object_deleted(KubeWatch *w, json_t *last) {
        _cleanup_(json_decrefp) json_t *old = TAKE_PTR(w->object);

        if (w->cb.on_deleted)
                w->cb.on_deleted(w, last ? last : old, w->userdata);
}

static void synced(KubeWatch *w, int error) {
        if (w->cb.on_synced)
                w->cb.on_synced(w, error, w->userdata);
}

static uint64_t backoff_step(KubeWatch *w) {
        return backoff_next(&w->backoff, kube_client_now(w->client), random_u32());
}

/* After a connection attempt found no server. A server that is down is down for every node of the
 * cluster at once, and they all come back when it does: the jitter then covers the whole spread
 * window, so a fleet's reconnects do not arrive as one herd. The first retry after a dropped watch
 * is not one of these (it is the ordinary step), so a lone agent whose connection merely broke is
 * back as fast as before. */
static uint64_t backoff_step_spread(KubeWatch *w) {
        return backoff_next_spread(&w->backoff, kube_client_now(w->client), random_u32(),
                                   kube_client_get_tuning(w->client)->reconnect_spread_usec);
}

/* ---- LIST ------------------------------------------------------------------------------------- */

static const char *list_rv(KubeWatch *w) {
        /* client-go's relistResourceVersion(): "0" at first (watch cache), then the last synced RV,
         * and "" (a consistent read) once the server said it no longer has that. */
        if (w->rv_unavailable)
                return "";
        return w->rv ? w->rv : "0";
}

static json_t *find_item(KubeWatch *w, json_t *list) {
        json_t *item;
        size_t i;

        json_array_foreach(json_object_get(list, "items"), i, item) {
                const char *n =
                        json_string_value(json_object_get(json_object_get(item, "metadata"), "name"));

                if (json_is_object(item) && streq_ptr(n, w->name))
                        return item;
        }
        return NULL;
}

/* 403: our identity may not read this object. A lasting one is RBAC or an authorizer, i.e.
 * configuration, which a quick retry never fixes (docs/kube-api.md §6.4): the owner hears it with the
 * server's reason (on_synced), and the wait grows with the time it has been forbidden, up to
 * forbidden-backoff (2 min, jittered by up to a quarter). A short one is not rare at a node's first
 * boot (GNA's authorizer looks the machine up through a cache), so the first retries keep the
 * ordinary backoff. */
static uint64_t forbidden(KubeWatch *w, uint64_t delay) {
        uint64_t now = kube_client_now(w->client), floor;

        if (w->forbidden_since_usec == 0 || w->forbidden_since_usec > now)
                w->forbidden_since_usec = now;
        floor = MIN(kube_client_get_tuning(w->client)->forbidden_backoff_usec,
                    now - w->forbidden_since_usec);
        return MAX(delay, floor + random_below(floor / 4 + 1));
}

/* Why a LIST failed, for the owner's on_synced: a 403's reason is what an operator has to fix; an
 * oversized object, the limit, which no retry changes. */
static int set_list_message(KubeWatch *w, int error, const json_t *status) {
        const char *msg = error < 0 ? json_string_value(json_object_get(status, "message")) : NULL;

        w->list_message = mfree(w->list_message);
        if (error == -EFBIG && !msg)
                return asprintf(&w->list_message, "the object is larger than the limit of %u bytes",
                                KUBE_RESPONSE_MAX) < 0 ?
                        -ENOMEM :
                        0;
        return free_and_strdup(&w->list_message, msg);
}

static void kube_watch_on_list(KubeRequest *req, int error, json_t *list, void *userdata) {
        KubeWatch *w = userdata;
        bool expired;
        json_t *item;
        const char *rv;

        w->list = kube_request_free(w->list);

        expired = error == -ESTALE || (error == -ETIMEDOUT && kube_status_is_too_large_rv(list));
        if (expired && !w->rv_unavailable) {
                /* Like the reflector: the RV is gone (or from the future after a server reset), so list
                 * again at once with a consistent read instead of waiting. */
                log_debug("LIST %s/%s: resourceVersion %s unavailable, listing from scratch.", w->collection,
                          w->name, list_rv(w));
                w->rv_unavailable = true;
                (void) kube_watch_schedule(w, STEP_LIST, 0);
                return;
        }
        rv = json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion"));
        if (error >= 0 && isempty(rv))
                error = -EBADMSG;
        (void) set_list_message(w, error, list); /* OOM: the owner hears the error alone */
        if (error < 0) {
                uint64_t delay = backoff_step(w);

                if (error == -EPERM)
                        delay = forbidden(w, delay);
                log_debug("LIST %s/%s failed: %s%s%s; retrying in %" PRIu64 " ms.", w->collection, w->name,
                          strerror(-error), w->list_message ? ": " : "", strempty(w->list_message),
                          delay / USEC_PER_MSEC);
                synced(w, error);
                (void) kube_watch_schedule(w, STEP_LIST, delay);
                return;
        }

        w->rv_unavailable = false;
        w->forbidden_since_usec = 0;
        if (set_rv(w, rv) < 0) {
                (void) kube_watch_schedule(w, STEP_LIST, backoff_step(w));
                return;
        }
        item = find_item(w, list);
        if (item)
                object_changed(w, item);
        else if (w->object)
                object_deleted(w, NULL);
        log_debug("LIST %s/%s: rv=%s, %s.", w->collection, w->name, w->rv, item ? "present" : "absent");
        synced(w, 0);
        (void) kube_watch_schedule(w, STEP_WATCH, 0);
}

static int kube_watch_list(KubeWatch *w) {
        _cleanup_free_ char *path = NULL;
        const char *rv = list_rv(w);

        path = strdup(w->collection);
        if (!path || kube_path_add_query(&path, "fieldSelector", w->selector) < 0 ||
            (!isempty(rv) && kube_path_add_query(&path, "resourceVersion", rv) < 0))
                return -ENOMEM;
        w->stats.lists++;
        return kube_client_get(w->client, path, kube_watch_on_list, w, &w->list);
}

/* ---- WATCH ------------------------------------------------------------------------------------ */

static void apply_event(KubeWatch *w, WatchEventType type, json_t *object) {
        switch (type) {
        case WATCH_EVENT_ADDED:
        case WATCH_EVENT_MODIFIED:
                object_changed(w, object);
                break;
        case WATCH_EVENT_DELETED:
                object_deleted(w, object);
                break;
        case WATCH_EVENT_BOOKMARK:
        default:
                /* Only the RV of a bookmark means anything; its object is a husk. */
                break;
        }
        w->watch_events++;
        if (type != WATCH_EVENT_BOOKMARK)
                log_once_clear(&w->event_too_large); /* our object fits again: a new oversized one is news */
        w->stats.events++;
        if (set_rv(w, object_rv(object)) < 0)
                log_debug("Out of memory recording resourceVersion of %s/%s.", w->collection, w->name);
}

/* Applies decoded events in order. Runs from the dispatch source or before a watch's end is
 * handled, never from inside libcurl, so the callbacks may start or cancel requests. */
static void dispatch_pending(KubeWatch *w) {
        for (size_t i = 0; i < w->n_pending; i++) {
                apply_event(w, w->pending[i].type, w->pending[i].object);
                json_decref(w->pending[i].object);
        }
        w->n_pending = 0;
        (void) sd_event_source_set_enabled(w->dispatch, SD_EVENT_OFF);
}

static int kube_watch_on_dispatch(sd_event_source *s, void *userdata) {
        dispatch_pending(userdata);
        return 0;
}

static void drop_pending(KubeWatch *w) {
        for (size_t i = 0; i < w->n_pending; i++)
                json_decref(w->pending[i].object);
        w->n_pending = 0;
}

/* Called from inside libcurl's write callback: decode and queue only. */
static int kube_watch_on_event(WatchEventType type, json_t *object, void *userdata) {
        KubeWatch *w = userdata;

        if (type == WATCH_EVENT_ERROR) {
                w->error_code = kube_status_code(object);
                w->error_too_large = kube_status_is_too_large_rv(object);
                log_debug("WATCH %s/%s: ERROR %i %s: %s", w->collection, w->name, w->error_code,
                          strempty(kube_status_reason(object)),
                          strempty(json_string_value(json_object_get(object, "message"))));
                return STOP_ERROR_EVENT;
        }
        if (type != WATCH_EVENT_BOOKMARK &&
            !streq_ptr(json_string_value(json_object_get(json_object_get(object, "metadata"), "name")),
                       w->name))
                return -EBADMSG; /* the field selector makes this impossible */

        if (w->n_pending == w->n_pending_alloc) {
                size_t na = MAX(w->n_pending_alloc * 2, (size_t) 8);
                PendingEvent *np = realloc(w->pending, na * sizeof(PendingEvent));

                if (!np)
                        return -ENOMEM;
                w->pending = np;
                w->n_pending_alloc = na;
        }
        w->pending[w->n_pending++] = (PendingEvent) { .type = type, .object = json_incref(object) };
        (void) sd_event_source_set_enabled(w->dispatch, SD_EVENT_ONESHOT);
        return 0;
}

static int kube_watch_on_data(HttpRequest *req, const void *data, size_t size, void *userdata) {
        KubeWatch *w = userdata;
        int r;

        r = watch_stream_feed(w->stream, data, size);
        if (r < 0 && r != STOP_ERROR_EVENT)
                w->stream_error = r;
        return r;
}

static WatchEndKind classify_end(KubeWatch *w, int error, long status, int *ret_code) {
        *ret_code = 0;
        if (error == STOP_ERROR_EVENT) {
                *ret_code = w->error_code;
                return WATCH_END_ERROR_EVENT;
        }
        if (w->stream_error < 0)
                return WATCH_END_DECODE;
        if (status == 200)
                /* Transport error after the headers, or a final line without its newline. */
                return error < 0 || watch_stream_pending(w->stream) > 0 ? WATCH_END_DROPPED :
                                                                          WATCH_END_CLEAN;
        if (error < 0 || status == 0)
                return WATCH_END_CONNECT;
        *ret_code = (int) status;
        return WATCH_END_HTTP;
}

static void kube_watch_on_watch_done(HttpRequest *req, int error, long status, void *userdata) {
        KubeWatch *w = userdata;
        uint64_t now = kube_client_now(w->client), duration, delay = 0, retry_after;
        json_auto_t *body = NULL;
        WatchEndKind kind;
        WatchNext next;
        int code;

        /* Events that arrived with the end of the stream come first: they move the RV. */
        dispatch_pending(w);
        duration = now > w->watch_started_usec ? now - w->watch_started_usec : 0;
        kind = classify_end(w, error, status, &code);
        retry_after = http_request_get_retry_after_usec(req);
        if (kind == WATCH_END_HTTP) {
                size_t size;
                const char *b = http_request_get_body(req, &size);

                body = b ? json_loadb(b, size, JSON_ALLOW_NUL, NULL) : NULL;
                if (code == 504 && kube_status_is_too_large_rv(body))
                        w->error_too_large = true;
        }
        kube_client_observe_status(w->client, status);
        w->watch = http_request_free(w->watch);

        next = watch_end_decide(kind, code, w->watch_events, duration);
        if (next != WATCH_NEXT_REWATCH)
                delay = kind == WATCH_END_CONNECT ? backoff_step_spread(w) : backoff_step(w);
        /* The server asked for a pause (429, shutdown): honour it on top of the backoff. */
        if (next == WATCH_NEXT_REWATCH_BACKOFF && kind == WATCH_END_HTTP)
                delay = MAX(delay, retry_after);
        log_debug("WATCH %s/%s ended after %" PRIu64 " ms, %u events: %s%s%s (code %i); %s in %" PRIu64
                  " ms, rv=%s.",
                  w->collection, w->name, duration / USEC_PER_MSEC, w->watch_events,
                  watch_end_kind_to_string(kind), error < 0 && error != STOP_ERROR_EVENT ? ": " : "",
                  error < 0 && error != STOP_ERROR_EVENT ? strerror(-error) : "", code,
                  watch_next_to_string(next), delay / USEC_PER_MSEC, strempty(w->rv));

        /* Only the watch knows: no owner callback carries a watch's end. */
        if (w->stream_error == -EMSGSIZE && log_once_check(&w->event_too_large, -EMSGSIZE, NULL))
                log_warning("WATCH %s/%s: an event is larger than the limit of %u bytes; listing again.",
                            w->collection, w->name, WATCH_STREAM_LINE_MAX);

        /* The watch said the RV is from the future (server restarted with a reset counter): the
         * relist with it would wait and fail the same way, so go straight to a consistent LIST. */
        if (w->error_too_large)
                w->rv_unavailable = true;

        (void) kube_watch_schedule(w, next == WATCH_NEXT_RELIST_BACKOFF ? STEP_LIST : STEP_WATCH, delay);
}

static int kube_watch_watch(KubeWatch *w) {
        const KubeTuning *t = kube_client_get_tuning(w->client);
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        _cleanup_free_ char *path = NULL, *timeout = NULL;
        uint64_t timeout_sec;
        int r;

        assert(w->rv);

        timeout_sec = (t->watch_timeout_min_usec +
                       random_below(t->watch_timeout_max_usec - t->watch_timeout_min_usec)) /
                USEC_PER_SEC;
        path = strdup(w->collection);
        if (!path || asprintf(&timeout, "%" PRIu64, timeout_sec) < 0 ||
            kube_path_add_query(&path, "watch", "1") < 0 ||
            kube_path_add_query(&path, "fieldSelector", w->selector) < 0 ||
            kube_path_add_query(&path, "resourceVersion", w->rv) < 0 ||
            kube_path_add_query(&path, "allowWatchBookmarks", "true") < 0 ||
            kube_path_add_query(&path, "timeoutSeconds", timeout) < 0)
                return -ENOMEM;

        r = kube_client_prepare(w->client, "GET", path, &req);
        if (r < 0)
                return r;
        http_request_set_stream(req, kube_watch_on_data);
        /* The server ends the watch after timeoutSeconds; if it does not, we do, a bit later. */
        http_request_set_timeout(req, timeout_sec * USEC_PER_SEC + t->watch_cap_margin_usec, 0);
        /* Bookmarks arrive about once a minute; a stream silent for longer is dead. */
        http_request_set_silence(req, t->watch_silence_usec);
        http_request_set_max_body(req, KUBE_RESPONSE_MAX);

        watch_stream_reset(w->stream);
        drop_pending(w);
        w->watch_events = 0;
        w->error_code = 0;
        w->error_too_large = false;
        w->stream_error = 0;
        w->watch_started_usec = kube_client_now(w->client);
        r = http_request_start(req, kube_watch_on_watch_done, w);
        if (r < 0)
                return r;
        w->watch = TAKE_PTR(req);
        w->stats.watches++;
        return 0;
}

/* ---- scheduling ------------------------------------------------------------------------------- */

static int kube_watch_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeWatch *w = userdata;
        WatchStep step = w->next_step;
        int r;

        w->next_step = STEP_NONE;
        r = step == STEP_LIST ? kube_watch_list(w) : step == STEP_WATCH ? kube_watch_watch(w) : 0;
        if (r < 0) {
                /* Could not even send (e.g. the token file is missing): same as a failed attempt. */
                uint64_t delay = backoff_step(w);

                log_debug("%s %s/%s not sent: %s; retrying in %" PRIu64 " ms.",
                          step == STEP_LIST ? "LIST" : "WATCH", w->collection, w->name, strerror(-r),
                          delay / USEC_PER_MSEC);
                if (step == STEP_LIST)
                        synced(w, r);
                (void) kube_watch_schedule(w, step, delay);
        }
        return 0;
}

/* Every step goes through the timer, even with no delay: callers sit inside HTTP callbacks. Arming
 * fails only when the loop is finishing or this is a forked child, so retrying cannot help: the
 * watch stops. */
static int kube_watch_arm(KubeWatch *w, WatchStep step, uint64_t delay_usec) {
        int r;

        w->next_step = step;
        r = event_timer_arm(w->timer, delay_usec);
        if (r < 0) {
                w->next_step = STEP_NONE;
                w->stats.stop_error = r;
        }
        return r;
}

/* A step from the loop: a stop is the owner's to hear (or, without on_stopped, the log's). */
static int kube_watch_schedule(KubeWatch *w, WatchStep step, uint64_t delay_usec) {
        int r;

        r = kube_watch_arm(w, step, delay_usec);
        if (r >= 0)
                return 0;
        if (w->cb.on_stopped)
                w->cb.on_stopped(w, r, w->userdata);
        else
                log_error("Watch of %s/%s stopped: cannot arm its timer: %s", w->collection, w->name,
                          strerror(-r));
        return r;
}

int kube_watch_new(KubeClient *client, KubeResource resource, const char *namespace, const char *name,
                   const KubeWatchCallbacks *cb, void *userdata, KubeWatch **ret) {
        _cleanup_(kube_watch_freep) KubeWatch *w = NULL;
        const KubeTuning *t;
        int r;

        assert(client);
        assert(name);
        assert(cb);
        assert(ret);

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->client = client;
        w->cb = *cb;
        w->userdata = userdata;
        r = kube_path(resource, namespace, name, NULL, &w->collection); /* checks the name */
        if (r >= 0) {
                free(w->collection);
                r = kube_path(resource, namespace, NULL, NULL, &w->collection);
        }
        if (r < 0)
                return r;
        w->name = strdup(name);
        if (!w->name || asprintf(&w->selector, "metadata.name=%s", name) < 0)
                return -ENOMEM;

        t = kube_client_get_tuning(client);
        backoff_init(&w->backoff, t->backoff_base_usec, t->backoff_cap_usec, t->backoff_reset_usec);

        r = watch_stream_new(WATCH_STREAM_LINE_MAX, kube_watch_on_event, w, &w->stream);
        if (r < 0)
                return r;
        r = sd_event_add_defer(kube_client_get_event(client), &w->dispatch, kube_watch_on_dispatch, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(w->dispatch, SD_EVENT_OFF);
        (void) sd_event_source_set_description(w->dispatch, "kube-watch-dispatch");
        /* 1 ms accuracy: "re-watch at once" must not wait for sd-event's default slack (250 ms). */
        r = sd_event_add_time_relative(kube_client_get_event(client), &w->timer, CLOCK_MONOTONIC, 0,
                                       USEC_PER_MSEC, kube_watch_on_timer, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(w->timer, "kube-watch");

        *ret = TAKE_PTR(w);
        return 0;
}

KubeWatch *kube_watch_free(KubeWatch *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->timer);
        sd_event_source_disable_unref(w->dispatch);
        drop_pending(w);
        free(w->pending);
        kube_request_free(w->list);
        http_request_free(w->watch);
        watch_stream_free(w->stream);
        json_decref(w->object);
        free(w->rv);
        free(w->list_message);
        log_once_done(&w->event_too_large);
        free(w->collection);
        free(w->name);
        free(w->selector);
        free(w);
        return NULL;
}

int kube_watch_start(KubeWatch *w) {
        const KubeTuning *t;

        assert(w);

        t = kube_client_get_tuning(w->client);
        return kube_watch_arm(w, STEP_LIST, random_below(t->startup_delay_usec));
}

void kube_watch_reconnect(KubeWatch *w) {
        assert(w);

        if (!w->watch)
                return;
        dispatch_pending(w);
        w->watch = http_request_free(w->watch);
        (void) kube_watch_schedule(w, STEP_WATCH, 0);
}

json_t *kube_watch_get_object(KubeWatch *w) {
        assert(w);
        return w->object;
}

const char *kube_watch_get_resource_version(KubeWatch *w) {
        assert(w);
        return w->rv;
}

const char *kube_watch_get_list_message(KubeWatch *w) {
        assert(w);
        return w->list_message;
}

const char *kube_watch_get_name(KubeWatch *w) {
        assert(w);
        return w->name;
}

void kube_watch_get_stats(KubeWatch *w, KubeWatchStats *ret) {
        assert(w);
        assert(ret);
        *ret = w->stats;
}
