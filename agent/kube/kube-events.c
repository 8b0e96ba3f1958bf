/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "kube/event-cache.h"
#include "kube/kube-events.h"
#include "kube/kube-path.h"
#include "util/log.h"
#include "util/time-util.h"

typedef struct QueuedEvent {
        EventDecision decision;
        char *type;             /* owned */
        char *reason;           /* owned */
        char *action;           /* owned; NULL: none */
        char *message;          /* owned */
        char *uid;              /* owned: involvedObject.uid at the time of the event */
        uint64_t realtime_usec; /* lastTimestamp */
        unsigned attempts;
        bool recreate; /* the count patch found no Event: POST it again */
} QueuedEvent;

struct KubeEvents {
        KubeClient *client; /* borrowed */
        char *component;    /* owned */
        char *node_name;    /* owned */
        char *node_uid;     /* owned; NULL = unknown */
        EventCache *cache;  /* owned */
        QueuedEvent queue[KUBE_EVENTS_QUEUE_MAX];
        unsigned head, n_queued;
        KubeRequest *inflight;        /* owned: request for queue[head] */
        sd_event_source *retry_timer; /* owned */
};

static void queued_done(QueuedEvent *q) {
        free(q->type);
        free(q->reason);
        free(q->action);
        free(q->message);
        free(q->uid);
        *q = (QueuedEvent) {};
}

int kube_events_new(KubeClient *client, const char *component, const char *node_name, KubeEvents **ret) {
        _cleanup_(kube_events_freep) KubeEvents *e = NULL;
        int r;

        assert(client);
        assert(component);
        assert(node_name);
        assert(ret);

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->client = client;
        e->component = strdup(component);
        e->node_name = strdup(node_name);
        if (!e->component || !e->node_name)
                return -ENOMEM;
        r = event_cache_new(&e->cache);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(e);
        return 0;
}

KubeEvents *kube_events_free(KubeEvents *e) {
        if (!e)
                return NULL;
        kube_request_free(e->inflight);
        sd_event_source_disable_unref(e->retry_timer);
        for (unsigned i = 0; i < KUBE_EVENTS_QUEUE_MAX; i++)
                queued_done(&e->queue[i]);
        event_cache_free(e->cache);
        free(e->component);
        free(e->node_name);
        free(e->node_uid);
        free(e);
        return NULL;
}

int kube_events_set_node_uid(KubeEvents *e, const char *uid) {
        assert(e);
        return free_and_strdup(&e->node_uid, isempty(uid) ? NULL : uid);
}

unsigned kube_events_pending(const KubeEvents *e) {
        assert(e);
        return e->n_queued;
}

/* metav1.Time: RFC 3339 in UTC with whole seconds. */
static char *format_time(uint64_t realtime_usec) {
        char buf[RFC3339_MAX];

        return format_rfc3339(buf, realtime_usec, /* micro= */ false) ? strdup(buf) : NULL;
}

static json_t *event_body(KubeEvents *e, const QueuedEvent *q) {
        _cleanup_free_ char *first = format_time(q->decision.first_usec),
                            *last = format_time(q->realtime_usec);

        if (!first || !last)
                return NULL;
        return json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s}, s:s, s:s, s:s, s:{s:s, s:s},"
                         " s:s, s:s, s:I, s:s, s:s, s:s*}",
                         "apiVersion", "v1", "kind", "Event", "metadata", "name", q->decision.name,
                         "namespace", KUBE_EVENTS_NAMESPACE, "involvedObject", "kind", "Node", "apiVersion",
                         "v1", "name", e->node_name, "uid", q->uid, "reason", q->reason, "message",
                         q->message, "type", q->type, "source", "component", e->component, "host",
                         e->node_name, "firstTimestamp", first, "lastTimestamp", last, "count",
                         (json_int_t) q->decision.count, "reportingComponent", e->component,
                         "reportingInstance", e->node_name, "action", q->action);
}

static json_t *count_patch(const QueuedEvent *q) {
        _cleanup_free_ char *last = format_time(q->realtime_usec);

        if (!last)
                return NULL;
        return json_pack("{s:I, s:s, s:s}", "count", (json_int_t) q->decision.count, "lastTimestamp", last,
                         "message", q->message);
}

static void kube_events_send_next(KubeEvents *e);

static void pop_head(KubeEvents *e) {
        queued_done(&e->queue[e->head]);
        e->head = (e->head + 1) % KUBE_EVENTS_QUEUE_MAX;
        e->n_queued--;
}

static int kube_events_on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeEvents *e = userdata;

        e->retry_timer = sd_event_source_disable_unref(e->retry_timer);
        kube_events_send_next(e);
        return 0;
}

static void kube_events_on_done(KubeRequest *req, int error, json_t *object, void *userdata) {
        KubeEvents *e = userdata;
        QueuedEvent *q = &e->queue[e->head];
        long status = kube_request_get_status(req);
        bool patch = streq(kube_request_get_method(req), "PATCH");

        e->inflight = kube_request_free(e->inflight);

        if (patch && error == -ENOENT) {
                /* Expired (event TTL) or never created: create it again with the current count. */
                log_debug("Event %s is gone, creating it again.", q->decision.name);
                q->recreate = true;
                kube_events_send_next(e);
                return;
        }
        if (error < 0 && status == 0 && q->attempts < KUBE_EVENTS_ATTEMPTS) {
                /* Transport failure: the server may be restarting. Status errors are final. */
                if (sd_event_add_time_relative(kube_client_get_event(e->client), &e->retry_timer,
                                               CLOCK_MONOTONIC, KUBE_EVENTS_RETRY_USEC, USEC_PER_SEC,
                                               kube_events_on_retry, e) >= 0)
                        return;
        }
        if (error < 0) {
                log_debug("Dropping event %s (%s %s): %s%s%s", q->decision.name, q->type, q->reason,
                          strerror(-error), kube_request_get_message(req) ? ": " : "",
                          strempty(kube_request_get_message(req)));
                /* A repeat must not patch an Event that does not exist. 409 AlreadyExists means it
                 * does exist, so keep it. */
                if (error != -EBUSY)
                        event_cache_forget(e->cache, q->decision.name);
        }
        pop_head(e);
        kube_events_send_next(e);
}

static int send_head(KubeEvents *e) {
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *path = NULL;
        QueuedEvent *q = &e->queue[e->head];
        int r;

        q->attempts++;
        if (q->decision.action == EVENT_ACTION_PATCH && !q->recreate) {
                body = count_patch(q);
                if (!body)
                        return -ENOMEM;
                r = kube_path(KUBE_RESOURCE_EVENTS, KUBE_EVENTS_NAMESPACE, q->decision.name, NULL, &path);
                if (r < 0)
                        return r;
                return kube_client_patch(e->client, path, KUBE_PATCH_STRATEGIC, body, kube_events_on_done, e,
                                         &e->inflight);
        }
        body = event_body(e, q);
        if (!body)
                return -ENOMEM;
        r = kube_path(KUBE_RESOURCE_EVENTS, KUBE_EVENTS_NAMESPACE, NULL, NULL, &path);
        if (r < 0)
                return r;
        return kube_client_post(e->client, path, body, kube_events_on_done, e, &e->inflight);
}

static void kube_events_send_next(KubeEvents *e) {
        while (e->n_queued > 0 && !e->inflight && !e->retry_timer) {
                QueuedEvent *q = &e->queue[e->head];
                int r;

                r = send_head(e);
                if (r >= 0)
                        return;
                log_debug_errno(r, "Dropping event %s: %m", q->decision.name);
                event_cache_forget(e->cache, q->decision.name);
                pop_head(e);
        }
}

int kube_events_emit(KubeEvents *e, const char *type, const char *reason, const char *message) {
        return kube_events_emit_action(e, type, reason, NULL, message);
}

int kube_events_emit_action(KubeEvents *e, const char *type, const char *reason, const char *action,
                            const char *message) {
        QueuedEvent *q;
        EventDecision d;
        uint64_t realtime;
        const char *uid;
        int r;

        assert(e);
        assert(reason);

        if (!streq_ptr(type, "Normal") && !streq_ptr(type, "Warning"))
                return -EINVAL;
        if (e->n_queued >= KUBE_EVENTS_QUEUE_MAX) {
                log_debug("Event queue full, dropping %s %s: %s", type, reason, strempty(message));
                return -ENOBUFS;
        }

        realtime = clock_now_usec(CLOCK_REALTIME);
        uid = e->node_uid ? e->node_uid : e->node_name;
        r = event_cache_observe(e->cache, e->node_name, uid, type, reason, strempty(message),
                                kube_client_now(e->client), realtime, &d);
        if (r < 0)
                return r;
        if (d.action == EVENT_ACTION_DROP) {
                log_debug("Spam filter dropped event %s %s: %s", type, reason, strempty(message));
                return 0;
        }

        q = &e->queue[(e->head + e->n_queued) % KUBE_EVENTS_QUEUE_MAX];
        *q = (QueuedEvent) {
                .decision = d,
                .type = strdup(type),
                .reason = strdup(reason),
                .action = action ? strdup(action) : NULL,
                .message = strndup(strempty(message), KUBE_EVENTS_MESSAGE_MAX),
                .uid = strdup(uid),
                .realtime_usec = realtime,
        };
        if (!q->type || !q->reason || !q->message || !q->uid || (action && !q->action)) {
                queued_done(q);
                return -ENOMEM;
        }
        e->n_queued++;
        kube_events_send_next(e);
        return 0;
}
