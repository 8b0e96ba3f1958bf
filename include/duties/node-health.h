/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* GNA's kubelet and containerd health checks (docs/node-protocol.md §8 item 2, docs/contract.md §9.8): every
 * period (30 s; the first at start) one probe each —
 *   kubelet:    GET kubelet.healthzURL (net/http-probe.h, one probe: an HTTP status other than 200 or
 *               a refused connection fails it at once, a kubelet that does not answer in 10 s too);
 *   containerd: its Version call, as upstream's check (containerdClient.Version()): gRPC over
 *               HTTP/2 on <osc.rootDirectory>/run/containerd/containerd.sock (net/grpc-call.h,
 *               core/containerd-version.h), 10 s at most, so a containerd that accepts but does not
 *               answer (stopped, deadlocked) is unhealthy within one round. The version and
 *               revision it tells are logged when new and handed to on_containerd_version.
 * Decisions by core/health-tracker.h, each probe stamped with its round's start, so the third failed round
 * (60 s after the first) restarts, as upstream's; Events with reason "kubelet"/"containerd", action
 * "HealthCheck", and upstream's messages; a unit unhealthy for the grace time (1 min) is restarted over
 * D-Bus — never while the update run blocks unit restarts (`gate`; an in-place update step restarts and
 * checks it itself: a probe failing then, or begun then, is not judged at all, so its restart brings no
 * "unhealthy" Warning); a unit that does not exist (no unit file yet) is said once, not restarted every
 * grace time. The Node's Ready condition is followed for the toggle warning. The Node's InternalIP is
 * remembered; when status.addresses has neither an InternalIP nor an ExternalIP any more (kubelet lost them
 * at its start), a Warning says so and, if the last one is still an address of this machine, it is put back
 * (strategic merge by type, the other addresses kept; upstream rewrites the whole list), checked on every
 * Node change and every round; a failed write restarts the kubelet, as upstream.
 *
 * Owns its timers, probes and restart jobs; borrows everything it is given. Logs what its Events say
 * and each restart (a duty logs what it finds and does). */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/containerd-version.h"
#include "core/node-view.h"
#include "core/update-gate.h"
#include "net/http.h"
#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

#define NODE_HEALTH_EVENT_ACTION "HealthCheck"
#define CONTAINERD_UNIT "containerd.service"
#define CONTAINERD_SOCKET "/run/containerd/containerd.sock" /* below osc.rootDirectory */

typedef struct NodeHealthOptions {
        const char *kubelet_unit;
        const char *kubelet_healthz_url;
        const char *containerd_unit;
        const char *containerd_socket; /* the full path */
        uint64_t period_usec;
        uint64_t grace_usec;
        const UpdateGate *gate; /* the executor's (executor_gate()); NULL: always restart */
        /* containerd answered with another version or revision than before (NULL: not wanted). */
        void (*on_containerd_version)(const ContainerdVersion *v, void *userdata);
        void *userdata;
} NodeHealthOptions;

typedef struct NodeHealth NodeHealth;

/* Strings of `o` are copied. */
int node_health_new(sd_event *event, Http *http, UnitControl *units, Reporter *reporter,
                    const NodeHealthOptions *o, NodeHealth **ret) _warn_unused_result_;
NodeHealth *node_health_free(NodeHealth *h);
DEFINE_CLEANUP_FUNC(NodeHealth, node_health_free);

/* The Node as watched (NULL: absent; borrowed until the next call), for the Ready toggles and the
 * InternalIP. */
void node_health_set_node(NodeHealth *h, const NodeView *v);

/* First round at once, then every period; a no-op when running. */
int node_health_start(NodeHealth *h) _warn_unused_result_;
