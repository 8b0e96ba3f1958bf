/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The Manager owns the one sd_event loop and every long-lived object (bus, HTTP multi handle,
 * Kubernetes client, the watch on our Node, Events, the Lease, the update state machine). It feeds
 * inputs to the pure core and performs the actions the core returns. Logs (it is one of the two
 * layers that may). */

#include <jansson.h>

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "kube/kube-client.h"
#include "net/http.h"
#include "systemd/unit-control.h"

typedef struct Manager Manager;

/* Takes ownership of `config`. */
int manager_new(Config *config, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_CLEANUP_FUNC(Manager, manager_free);

/* Runs until SIGTERM/SIGINT or a fatal error. Returns 0 on a clean stop, -errno otherwise. */
int manager_run(Manager *m);

/* The latest state of our Node as watched (borrowed; NULL while unknown or absent). */
json_t *manager_get_node(Manager *m);

/* Completion of a Node write: 0, or -errno as in kube-client.h (the Manager already logged it). */
typedef void (*ManagerWriteCallback)(Manager *m, int error, void *userdata);

/* Merge patch of our Node's metadata. `metadata_patch` is e.g.
 * {"labels":{"a":"x","b":null},"annotations":{"c":"y"}} — null deletes a key; not stolen.
 * Labels and annotations go in one request. `cb` may be NULL. -ENODEV while there is no API client
 * (no usable kubeconfig yet). */
int manager_patch_node_metadata(Manager *m, const json_t *metadata_patch, ManagerWriteCallback cb, void *userdata);

/* Sets condition `type` on our Node (strategic merge patch of /status, merged by type, so kubelet's
 * conditions stay untouched). lastTransitionTime changes only when `status` changes. Nothing is
 * sent when status, reason and message already match the watched Node: returns 0; 1 when a patch
 * was sent; -errno otherwise. */
int manager_patch_node_condition(Manager *m, const char *type, const char *status, const char *reason,
                                 const char *message, ManagerWriteCallback cb, void *userdata);

/* A core/v1 Event about our Node (kube-events.h): `type` "Normal" or "Warning". Deduplicated and
 * rate-limited; -ENOBUFS when the send queue is full, -ENODEV without an API client. */
int manager_emit_event(Manager *m, const char *type, const char *reason, const char *message);

/* STATUS= for systemd (sent only when it changed). */
void manager_set_status(Manager *m, const char *fmt, ...) _printf_(2, 3);

/* What the executor uses; all borrowed, owned by the Manager. The kube client and the bus may be
 * NULL (no kubeconfig yet, no system bus). */
sd_event *manager_get_event(Manager *m);
const Config *manager_get_config(Manager *m);
Http *manager_get_http(Manager *m);
KubeClient *manager_get_kube(Manager *m);
sd_bus *manager_get_bus(Manager *m);
UnitControl *manager_get_unit_control(Manager *m);
/* The restart annotation is being processed: no update batch starts meanwhile. */
bool manager_restarts_busy(Manager *m);
