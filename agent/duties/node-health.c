/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <ifaddrs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/containerd-version.h"
#include "core/go-duration.h"
#include "core/health-tracker.h"
#include "duties/node-health.h"
#include "kubelet/kubelet-health.h"
#include "net/grpc-call.h"
#include "util/event-util.h"
#include "util/log.h"
#include "util/string-util.h"
#include "util/time-util.h"

/* A probe that hangs fails after this (upstream: the kubelet's http.Client timeout; its Version call has
 * none, so a containerd that accepts but never answers would hold its check forever). */
#define PROBE_TIMEOUT_USEC (10 * USEC_PER_SEC)

typedef struct NodeHealth NodeHealth;

/* One checked component: kubelet or containerd. */
typedef struct Component {
        NodeHealth *owner; /* borrowed */
        const char *name;  /* static: the Event reason */
        const char *title; /* static: "Kubelet", "Containerd" */
        char *unit;        /* owned */
        HealthTracker tracker;
        bool probing;                /* a probe is in flight */
        uint64_t probe_started_usec; /* when the round that started the probe began */
        HttpProbe *http_probe;       /* owned: kubelet */
        GrpcCall *version_call;      /* owned: containerd */
        UnitJob *restart;            /* borrowed handle: the restart job in flight */
        bool not_installed;          /* the last restart found no unit file (said once) */
        bool update_owned;           /* an update step owned the unit when the probe started */
} Component;

struct NodeHealth {
        sd_event *event;    /* borrowed */
        Http *http;         /* borrowed */
        UnitControl *units; /* borrowed: restarts, and the connection to read unit state */
        Reporter *reporter; /* borrowed */
        char *healthz_url;  /* owned */
        char *socket;       /* owned */
        uint64_t period_usec, grace_usec;
        const UpdateGate *gate; /* borrowed; NULL: none */
        void (*on_containerd_version)(const ContainerdVersion *v, void *userdata);
        ContainerdVersion containerd_version; /* the last one containerd told */
        void *userdata;
        Component kubelet, containerd;
        ToggleTracker toggles;
        sd_event_source *timer; /* owned */

        const NodeView *node;   /* borrowed: the Node as watched; NULL: absent */
        char *last_internal_ip; /* owned: the last InternalIP the Node had */
        bool address_lost;      /* the Node has no IP; said (and restored, if it could be) */
        bool address_restoring; /* the patch putting it back is in flight */
};

static void component_done(Component *c) {
        c->http_probe = http_probe_free(c->http_probe);
        c->version_call = grpc_call_free(c->version_call);
        c->restart = unit_job_cancel(c->restart);
        free(c->unit);
        c->unit = NULL;
}

NodeHealth *node_health_free(NodeHealth *h) {
        if (!h)
                return NULL;
        component_done(&h->kubelet);
        component_done(&h->containerd);
        sd_event_source_disable_unref(h->timer);
        containerd_version_done(&h->containerd_version);
        free(h->last_internal_ip);
        free(h->healthz_url);
        free(h->socket);
        free(h);
        return NULL;
}

int node_health_new(sd_event *event, Http *http, UnitControl *units, Reporter *reporter,
                    const NodeHealthOptions *o, NodeHealth **ret) {
        _cleanup_(node_health_freep) NodeHealth *h = NULL;

        assert(event && http && units && reporter && o && ret);
        assert(o->period_usec > 0);

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        *h = (NodeHealth) {
                .event = event,
                .http = http,
                .units = units,
                .reporter = reporter,
                .period_usec = o->period_usec,
                .grace_usec = o->grace_usec,
                .gate = o->gate,
                .on_containerd_version = o->on_containerd_version,
                .userdata = o->userdata,
                .kubelet = { .owner = h, .name = "kubelet", .title = "Kubelet" },
                .containerd = { .owner = h, .name = "containerd", .title = "Containerd" },
        };
        h->healthz_url = strdup(o->kubelet_healthz_url);
        h->socket = strdup(o->containerd_socket);
        h->kubelet.unit = strdup(o->kubelet_unit);
        h->containerd.unit = strdup(o->containerd_unit);
        if (!h->healthz_url || !h->socket || !h->kubelet.unit || !h->containerd.unit)
                return -ENOMEM;
        *ret = TAKE_PTR(h);
        return 0;
}

/* An Event with upstream's text, and the same line in the journal unless someone already said it. */
static void node_health_say(NodeHealth *h, const Component *c, bool warning, bool journal, const char *fmt,
                            va_list ap) _printf_(5, 0);
static void node_health_say(NodeHealth *h, const Component *c, bool warning, bool journal, const char *fmt,
                            va_list ap) {
        _cleanup_free_ char *msg = strdup_vprintf(fmt, ap);

        if (!msg) {
                log_oom();
                return;
        }
        if (journal)
                log_full(warning ? LOG_WARNING : LOG_INFO, "%s", msg);
        /* Best effort, like every Event: the journal line (or the failure it follows) stays. */
        IGNORE_RESULT(reporter_emit_event_action(h->reporter, warning ? "Warning" : "Normal", c->name,
                                                 NODE_HEALTH_EVENT_ACTION, msg));
}

static void node_health_event(NodeHealth *h, const Component *c, bool warning, const char *fmt, ...)
        _printf_(4, 5);
static void node_health_event(NodeHealth *h, const Component *c, bool warning, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        node_health_say(h, c, warning, /* journal= */ true, fmt, ap);
        va_end(ap);
}

/* The Event alone: the journal has the failure already (the reporter logs a failed write). */
static void node_health_event_only(NodeHealth *h, const Component *c, const char *fmt, ...) _printf_(3, 4);
static void node_health_event_only(NodeHealth *h, const Component *c, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        node_health_say(h, c, /* warning= */ true, /* journal= */ false, fmt, ap);
        va_end(ap);
}

static void component_on_restarted(const UnitJobResult *res, void *userdata) {
        Component *c = userdata;
        NodeHealth *h = c->owner;
        uint64_t now = 0;

        c->restart = NULL;
        (void) sd_event_now(h->event, CLOCK_MONOTONIC, &now);
        if (res->error == -ENOENT) {
                /* No unit file: nothing runs it yet (a node whose first OSC is not applied, or
                 * failed before its units were written). Said once; tried again quietly after the
                 * next grace time, until the unit exists. */
                if (!c->not_installed)
                        node_health_event(h, c, /* warning= */ true,
                                          "%s is not installed (%s); not restarting it", c->unit,
                                          strempty(res->detail));
                c->not_installed = true;
                health_tracker_restarted(&c->tracker, now);
                return;
        }
        c->not_installed = false;
        if (res->error < 0) {
                node_health_event(h, c, /* warning= */ true, "Restarting %s failed: %s", c->unit,
                                  strempty(res->detail));
                return;
        }
        log_info("Restarted %s (health check).", c->unit);
        health_tracker_restarted(&c->tracker, now);
}

static void component_restart(Component *c) {
        NodeHealth *h = c->owner;
        int r;

        r = unit_control_restart_unit(h->units, c->unit, component_on_restarted, c, &c->restart);
        if (r < 0)
                node_health_event(h, c, /* warning= */ true, "Restarting %s failed: %s", c->unit,
                                  strerror(-r));
}

/* An update step restarts (and checks) the unit itself. */
static bool update_owns(const Component *c) {
        const NodeHealth *h = c->owner;

        return h->gate && h->gate->blocks_unit_restarts(h->gate->userdata);
}

/* One probe's outcome: `error` NULL when healthy. Owned by an update when it was so at the probe's
 * start or is now: a probe that began during the update's restart may end after it. */
static void component_observe(Component *c, const char *error) {
        NodeHealth *h = c->owner;
        char grace[GO_DURATION_STR_MAX];
        HealthOwner owner;

        c->probing = false;
        owner = c->update_owned || update_owns(c) ? HEALTH_OWNER_UPDATE :
                c->restart                        ? HEALTH_OWNER_CHECK_RESTARTING :
                                                    HEALTH_OWNER_CHECK;
        go_duration_format_seconds(grace, sizeof(grace), h->grace_usec);

        /* Stamped with the round's start, not the answer's arrival: rounds are a period apart, so the
         * third failed round is a full grace time after the first even when the first answer was the
         * slower one (upstream's requeue after the round ends gives the same). */
        switch (health_tracker_observe(&c->tracker, !error, c->probe_started_usec, h->grace_usec, owner)) {
        case HEALTH_OK:
        case HEALTH_FAILING:
                return;
        case HEALTH_OWNED:
                log_debug("%s probe failed while an update step owns %s: %s", c->title, c->unit, error);
                return;
        case HEALTH_RECOVERED:
                c->not_installed = false;
                node_health_event(h, c, /* warning= */ false, "%s is healthy", c->title);
                return;
        case HEALTH_FIRST_FAILURE:
                if (c == &h->kubelet)
                        node_health_event(h, c, /* warning= */ true,
                                          "Kubelet is unhealthy, health check error: %s", error);
                else
                        node_health_event(h, c, /* warning= */ true, "Containerd is unhealthy: %s", error);
                return;
        case HEALTH_RESTART:
                /* A unit found missing is retried quietly: component_on_restarted() said it once. */
                if (!c->not_installed && c == &h->kubelet)
                        node_health_event(h, c, /* warning= */ true,
                                          "Kubelet is unhealthy for more than %s, restarting it. "
                                          "Health check error: %s",
                                          grace, error);
                else if (!c->not_installed)
                        node_health_event(h, c, /* warning= */ true,
                                          "Containerd is unhealthy for more than %s, restarting it: %s",
                                          grace, error);
                component_restart(c);
                return;
        }
}

static void kubelet_on_probe(HttpProbe *p, int error, const char *message, unsigned n_probes,
                             void *userdata) {
        Component *c = userdata;

        c->http_probe = http_probe_free(c->http_probe);
        component_observe(c, error < 0 ? strempty(message) : NULL);
}

static void kubelet_probe(NodeHealth *h) {
        HttpProbeOptions o =
                kubelet_health_probe_once(h->healthz_url, MIN(PROBE_TIMEOUT_USEC, h->period_usec));
        int r;

        r = http_probe_start(h->event, h->http, &o, kubelet_on_probe, &h->kubelet, &h->kubelet.http_probe);
        if (r < 0) {
                log_debug_errno(r, "Cannot probe the kubelet: %m");
                return;
        }
        h->kubelet.probing = true;
}

/* What containerd says it is: into the journal (and `inplace-agent status`) when it is new. */
static void containerd_remember(NodeHealth *h, ContainerdVersion *v) {
        if (streq_ptr(v->version, h->containerd_version.version) &&
            streq_ptr(v->revision, h->containerd_version.revision))
                return;
        containerd_version_done(&h->containerd_version);
        h->containerd_version = TAKE_STRUCT(*v);
        log_info("containerd %s (revision %s) answers on unix://%s.", h->containerd_version.version,
                 h->containerd_version.revision, h->socket);
        if (h->on_containerd_version)
                h->on_containerd_version(&h->containerd_version, h->userdata);
}

/* Upstream's check, containerdClient.Version(): healthy when containerd answers, not when it accepts. */
static void containerd_on_version(GrpcCall *call, int error, long http_status, const GrpcReply *reply,
                                  void *userdata) {
        Component *c = userdata;
        NodeHealth *h = c->owner;
        _cleanup_(containerd_version_done) ContainerdVersion v = {};
        _cleanup_free_ char *why = NULL, *msg = NULL;
        char d[DURATION_MAX_STR];
        int r;

        format_duration(d, sizeof(d), MIN(PROBE_TIMEOUT_USEC, h->period_usec));
        if (error == -ETIMEDOUT)
                r = asprintf(&why, "no answer within %s", d);
        else if (error == -EPROTO)
                r = asprintf(&why, "HTTP %ld", http_status);
        else if (error < 0)
                r = asprintf(&why, "%s", strerror(-error));
        else
                r = containerd_version_decode(reply->grpc_status, reply->grpc_message, reply->body,
                                              reply->body_size, &v, &why);
        /* The reply is the call's: decoded above, gone now. */
        c->version_call = grpc_call_free(c->version_call);
        if (error >= 0 && r >= 0) {
                containerd_remember(h, &v);
                component_observe(c, NULL);
                return;
        }
        if (!why || asprintf(&msg, "Version on unix://%s: %s", h->socket, why) < 0) {
                msg = NULL;
                c->probing = false;
                log_oom();
                return;
        }
        component_observe(c, msg);
}

static void containerd_probe(NodeHealth *h) {
        Component *c = &h->containerd;
        int r;

        r = grpc_call_start(h->http, h->socket, CONTAINERD_VERSION_METHOD, containerd_version_request,
                            sizeof(containerd_version_request), MIN(PROBE_TIMEOUT_USEC, h->period_usec),
                            CONTAINERD_VERSION_MESSAGE_MAX + 5, containerd_on_version, c, &c->version_call);
        if (r < 0) {
                log_debug_errno(r, "Cannot ask containerd for its version: %m");
                return;
        }
        c->probing = true;
}

/* ---- the Node's InternalIP (upstream's kubelet health check, ensureNodeInternalIP) ---------------- */

/* `ip` is configured on one of this machine's interfaces. */
static bool address_is_local(const char *ip) {
        unsigned char want[sizeof(struct in6_addr)], have[sizeof(struct in6_addr)];
        struct ifaddrs *list, *i;
        bool found = false;
        int family;

        family = inet_pton(AF_INET, ip, want) == 1 ? AF_INET :
                inet_pton(AF_INET6, ip, want) == 1 ? AF_INET6 :
                                                     -1;
        if (family < 0 || getifaddrs(&list) < 0)
                return false;
        for (i = list; i && !found; i = i->ifa_next) {
                if (!i->ifa_addr || i->ifa_addr->sa_family != family)
                        continue;
                if (family == AF_INET)
                        memcpy(have, &((const struct sockaddr_in *) i->ifa_addr)->sin_addr,
                               sizeof(struct in_addr));
                else
                        memcpy(have, &((const struct sockaddr_in6 *) i->ifa_addr)->sin6_addr,
                               sizeof(struct in6_addr));
                found = memcmp(want, have,
                               family == AF_INET ? sizeof(struct in_addr) : sizeof(struct in6_addr)) == 0;
        }
        freeifaddrs(list);
        return found;
}

static void address_on_restored(int error, void *userdata) {
        NodeHealth *h = userdata;
        Component *c = &h->kubelet;

        h->address_restoring = false;
        if (error >= 0) {
                node_health_event(h, c, /* warning= */ false,
                                  "Updated the lost internal IP address of node status to the previous "
                                  "known: %s ",
                                  h->last_internal_ip);
                return;
        }
        /* As upstream: a kubelet that starts again publishes its addresses itself. The next round (or
         * Node change) tries again. */
        h->address_lost = false;
        node_health_event_only(h, c, "Unable to update node status with internal IP: %s", strerror(-error));
        if (!c->restart && !update_owns(c))
                component_restart(c);
}

/* A Node that lost both IPs (kubelet timed out on the cloud provider at its start) gets its last
 * InternalIP back, if this machine still has it; said once per loss, where upstream repeats it every
 * round. */
static void check_address(NodeHealth *h) {
        const NodeView *v = h->node;
        int r;

        if (!v || h->address_restoring)
                return;
        if (v->internal_ip || v->external_ip) {
                if (v->internal_ip && !streq_ptr(v->internal_ip, h->last_internal_ip) &&
                    free_and_strdup(&h->last_internal_ip, v->internal_ip) < 0)
                        log_oom();
                h->address_lost = false;
                return;
        }
        if (h->address_lost)
                return;
        h->address_lost = true;
        if (!h->last_internal_ip) {
                node_health_event(h, &h->kubelet, /* warning= */ true,
                                  "Node status does neither have an internal nor an external IP");
                return;
        }
        node_health_event(h, &h->kubelet, /* warning= */ true,
                          "Node status does neither have an internal nor an external IP, try "
                          "to recover from last known internal IP: %s",
                          h->last_internal_ip);
        if (!address_is_local(h->last_internal_ip)) {
                log_info(
                        "%s is not an address of this machine any more; the Node's InternalIP is not restored.",
                        h->last_internal_ip);
                return;
        }
        r = reporter_set_internal_ip(h->reporter, h->last_internal_ip, address_on_restored, h);
        if (r < 0) {
                /* Not even sent: the reporter said nothing, so it is said here. */
                log_warning_errno(r, "Cannot restore the Node's InternalIP %s: %m", h->last_internal_ip);
                address_on_restored(r, h);
        } else
                h->address_restoring = r == 0;
}

static int node_health_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        NodeHealth *h = userdata;
        uint64_t now = event_now_usec(h->event);

        check_address(h);
        if (!h->kubelet.probing) {
                h->kubelet.update_owned = update_owns(&h->kubelet);
                h->kubelet.probe_started_usec = now;
                kubelet_probe(h);
        }
        if (!h->containerd.probing) {
                h->containerd.update_owned = update_owns(&h->containerd);
                h->containerd.probe_started_usec = now;
                containerd_probe(h);
        }
        if (event_timer_arm(s, h->period_usec) < 0)
                log_warning(
                        "Cannot re-arm the health check timer; kubelet and containerd are no longer checked.");
        return 0;
}

int node_health_start(NodeHealth *h) {
        int r;

        assert(h);
        if (h->timer)
                return 0;
        r = sd_event_add_time_relative(h->event, &h->timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC,
                                       node_health_on_timer, h);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(h->timer, "node-health");
        return 0;
}

void node_health_set_node(NodeHealth *h, const NodeView *v) {
        uint64_t now = 0;

        assert(h);
        h->node = v;
        check_address(h);
        if (!v || !v->ready.present)
                return;
        (void) sd_event_now(h->event, CLOCK_MONOTONIC, &now);
        if (toggle_tracker_observe(&h->toggles, streq_ptr(v->ready.status, "True"), now)) {
                char window[GO_DURATION_STR_MAX];

                node_health_event(
                        h, &h->kubelet, /* warning= */ true,
                        "Kubelet toggled between NotReady and Ready at least %d times in a %s time window. "
                        "Rebooting the node might help",
                        HEALTH_TOGGLES_MAX,
                        go_duration_format_seconds(window, sizeof(window), HEALTH_TOGGLE_WINDOW_USEC));
        }
}
