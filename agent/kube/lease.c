/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "kube/kube-path.h"
#include "kube/lease.h"
#include "util/backoff.h"
#include "util/event-util.h"
#include "util/log.h"
#include "util/random-util.h"
#include "util/time-util.h"

#define LEASE_RETRY_BASE_USEC (200 * USEC_PER_MSEC)
#define LEASE_RETRY_RESET_USEC (5 * 60 * USEC_PER_SEC)

typedef enum LeaseStep {
        LEASE_GET,    /* read the current object */
        LEASE_CREATE, /* POST a new one */
        LEASE_RENEW,  /* PUT the last object with a new renewTime */
} LeaseStep;

struct Lease {
        KubeClient *client; /* borrowed */
        char *namespace;    /* owned */
        char *name;         /* owned */
        char *holder;       /* owned */
        char *node_name;    /* owned; NULL = no owner */
        char *node_uid;     /* owned */
        uint64_t duration_usec;
        json_t *object; /* ref held: last object the server returned; NULL before */
        LeaseStep step;
        KubeRequest *request;   /* owned: in flight */
        sd_event_source *timer; /* owned: next step */
        bool started;
        Backoff backoff;
        LeaseStats stats;
        LeaseStoppedCallback on_stopped;
        void *stopped_userdata; /* borrowed */
};

static int lease_on_timer(sd_event_source *s, uint64_t usec, void *userdata);

int lease_new(KubeClient *client, const char *namespace, const char *name, const char *holder,
              uint64_t duration_usec, Lease **ret) {
        _cleanup_(lease_freep) Lease *l = NULL;
        int r;

        assert(client);
        assert(namespace);
        assert(name);
        assert(holder);
        assert(duration_usec >= USEC_PER_SEC);
        assert(ret);

        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->client = client;
        l->duration_usec = duration_usec;
        l->namespace = strdup(namespace);
        l->name = strdup(name);
        l->holder = strdup(holder);
        if (!l->namespace || !l->name || !l->holder)
                return -ENOMEM;
        backoff_init(&l->backoff, LEASE_RETRY_BASE_USEC, duration_usec / 4, LEASE_RETRY_RESET_USEC);

        r = sd_event_add_time_relative(kube_client_get_event(client), &l->timer, CLOCK_MONOTONIC, 0,
                                       USEC_PER_MSEC, lease_on_timer, l);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(l->timer, "lease");

        *ret = TAKE_PTR(l);
        return 0;
}

Lease *lease_free(Lease *l) {
        if (!l)
                return NULL;
        kube_request_free(l->request);
        sd_event_source_disable_unref(l->timer);
        json_decref(l->object);
        free(l->namespace);
        free(l->name);
        free(l->holder);
        free(l->node_name);
        free(l->node_uid);
        free(l);
        return NULL;
}

void lease_set_stopped_callback(Lease *l, LeaseStoppedCallback cb, void *userdata) {
        assert(l);
        l->on_stopped = cb;
        l->stopped_userdata = userdata;
}

int lease_set_owner(Lease *l, const char *node_name, const char *uid) {
        int r;

        assert(l);
        r = free_and_strdup(&l->node_name, node_name);
        if (r < 0)
                return r;
        return free_and_strdup(&l->node_uid, uid);
}

void lease_stop(Lease *l) {
        assert(l);

        l->request = kube_request_free(l->request);
        (void) sd_event_source_set_enabled(l->timer, SD_EVENT_OFF);
        /* The next start reads the Lease again: it may be gone with its owner meanwhile. */
        json_decref(l->object);
        l->object = NULL;
        backoff_reset(&l->backoff);
        l->started = false;
}

void lease_get_stats(const Lease *l, LeaseStats *ret) {
        assert(l);
        assert(ret);
        *ret = l->stats;
}

static int set_spec_and_owner(Lease *l, json_t *obj) {
        char buf[RFC3339_MAX];
        const char *now = format_rfc3339(buf, clock_now_usec(CLOCK_REALTIME), /* micro= */ true);
        json_t *spec, *md;

        if (!now)
                return -ENOMEM;
        spec = json_object_get(obj, "spec");
        if (!json_is_object(spec)) {
                spec = json_object();
                if (!spec || json_object_set_new(obj, "spec", spec) < 0)
                        return -ENOMEM;
        }
        if (json_object_set_new(spec, "holderIdentity", json_string(l->holder)) < 0 ||
            json_object_set_new(spec, "leaseDurationSeconds",
                                json_integer((json_int_t) (l->duration_usec / USEC_PER_SEC))) < 0 ||
            json_object_set_new(spec, "renewTime", json_string(now)) < 0)
                return -ENOMEM;
        if (!json_object_get(spec, "acquireTime") &&
            json_object_set_new(spec, "acquireTime", json_string(now)) < 0)
                return -ENOMEM;

        if (!l->node_uid)
                return 0;
        md = json_object_get(obj, "metadata");
        if (!json_is_object(md))
                return -EINVAL;
        /* Our Node owns the Lease as its controller, as GNA's (docs/node-protocol.md §8 item 1); replaces
         * whatever was there (e.g. a previous incarnation's uid). */
        return json_object_set_new(md, "ownerReferences",
                                   json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", "v1", "kind",
                                             "Node", "name", l->node_name, "uid", l->node_uid, "controller",
                                             1, "blockOwnerDeletion", 1));
}

static int lease_schedule(Lease *l, LeaseStep step, uint64_t delay_usec);

static void lease_failed(Lease *l, int error) {
        uint64_t delay = backoff_next(&l->backoff, kube_client_now(l->client), random_u32());

        l->stats.failures++;
        l->stats.last_error = error;
        /* Renewing with a possibly stale copy is fine: the PUT then fails with 409 and we re-read. */
        (void) lease_schedule(l, l->object ? LEASE_RENEW : LEASE_GET, delay);
}

static void lease_on_answer(KubeRequest *req, int error, json_t *object, void *userdata) {
        Lease *l = userdata;
        LeaseStep step = l->step;

        l->request = kube_request_free(l->request);
        log_debug("Lease %s/%s: %s: %s", l->namespace, l->name,
                  step == LEASE_GET            ? "get" :
                          step == LEASE_CREATE ? "create" :
                                                 "renew",
                  error < 0 ? strerror(-error) : "ok");

        if (error >= 0) {
                json_decref(l->object);
                l->object = json_incref(object);
                if (step == LEASE_GET) {
                        (void) lease_schedule(l, LEASE_RENEW, 0); /* take it over / refresh it now */
                        return;
                }
                l->stats.renewals++;
                l->stats.last_error = 0;
                backoff_reset(&l->backoff);
                /* Renew every quarter of the duration, with a little jitter (kubelet: 4 %). */
                (void) lease_schedule(l, LEASE_RENEW,
                                      l->duration_usec / 4 - random_below(l->duration_usec / 25 + 1));
                return;
        }

        if (step == LEASE_GET && error == -ENOENT) {
                json_decref(l->object);
                l->object = NULL;
                (void) lease_schedule(l, LEASE_CREATE, 0);
                return;
        }
        if ((step == LEASE_CREATE || step == LEASE_RENEW) && error == -EBUSY) {
                /* Created by someone else meanwhile, or our copy is stale: read, then renew at once. */
                json_decref(l->object);
                l->object = NULL;
                (void) lease_schedule(l, LEASE_GET, 0);
                return;
        }
        if (step == LEASE_RENEW && error == -ENOENT) {
                json_decref(l->object);
                l->object = NULL;
                (void) lease_schedule(l, LEASE_CREATE, 0);
                return;
        }
        lease_failed(l, error);
}

/* A request hanging on a dead connection must not outlive the Lease it renews: each is cut at a
 * quarter of the duration, when the next renewal is due (10 s for 40 s, as kubelet's heartbeat client,
 * min(duration, 10 s)), and retried with the backoff, on a new connection if that one is gone. */
static uint64_t lease_request_timeout(const Lease *l) {
        return l->duration_usec / 4;
}

static int lease_send(Lease *l) {
        _cleanup_free_ char *collection = NULL, *path = NULL;
        _cleanup_(json_decrefp) json_t *obj = NULL;
        int r;

        r = kube_path(KUBE_RESOURCE_LEASES, l->namespace, NULL, NULL, &collection);
        if (r >= 0)
                r = kube_path(KUBE_RESOURCE_LEASES, l->namespace, l->name, NULL, &path);
        if (r < 0)
                return r;

        switch (l->step) {
        case LEASE_GET:
                return kube_client_send(l->client, "GET", path, NULL, lease_request_timeout(l),
                                        lease_on_answer, l, &l->request);
        case LEASE_CREATE:
                obj = json_pack("{s:s, s:s, s:{s:s, s:s}}", "apiVersion", "coordination.k8s.io/v1", "kind",
                                "Lease", "metadata", "name", l->name, "namespace", l->namespace);
                if (!obj)
                        return -ENOMEM;
                r = set_spec_and_owner(l, obj);
                if (r < 0)
                        return r;
                return kube_client_send(l->client, "POST", collection, obj, lease_request_timeout(l),
                                        lease_on_answer, l, &l->request);
        case LEASE_RENEW:
        default:
                if (!l->object)
                        return -ESTALE;
                /* A PUT of the last object carries its resourceVersion: a concurrent writer makes it 409. */
                obj = json_deep_copy(l->object);
                if (!obj)
                        return -ENOMEM;
                r = set_spec_and_owner(l, obj);
                if (r < 0)
                        return r;
                return kube_client_send(l->client, "PUT", path, obj, lease_request_timeout(l),
                                        lease_on_answer, l, &l->request);
        }
}

static int lease_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Lease *l = userdata;
        int r;

        r = lease_send(l);
        if (r < 0)
                lease_failed(l, r);
        return 0;
}

/* Arming fails only when the loop is finishing or this is a forked child, so retrying cannot help:
 * the heartbeat stops. */
static int lease_arm(Lease *l, LeaseStep step, uint64_t delay_usec) {
        int r;

        l->step = step;
        r = event_timer_arm(l->timer, delay_usec);
        if (r < 0) {
                l->started = false;
                l->stats.stopped = true;
                l->stats.last_error = r;
        }
        return r;
}

/* A step from the loop: the owner hears of a stop (or, without a callback, the log does) — a Lease
 * that silently stops being renewed would look like a dead node. */
static int lease_schedule(Lease *l, LeaseStep step, uint64_t delay_usec) {
        int r;

        r = lease_arm(l, step, delay_usec);
        if (r >= 0)
                return 0;
        if (l->on_stopped)
                l->on_stopped(l, r, l->stopped_userdata);
        else
                log_error("Lease %s/%s stopped: cannot arm its timer: %s", l->namespace, l->name,
                          strerror(-r));
        return r;
}

int lease_start(Lease *l) {
        int r;

        assert(l);

        if (l->started)
                return 0;
        r = lease_arm(l, LEASE_GET, 0);
        if (r < 0)
                return r;
        l->started = true;
        l->stats.stopped = false;
        return 0;
}
