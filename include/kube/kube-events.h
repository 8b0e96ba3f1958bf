/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Records core/v1 Events about our Node (docs/contract.md §6, §8.15; docs/kube-api.md §5): namespace
 * "default", involvedObject {kind Node, apiVersion v1, name, uid — the Node's uid once known, else its name
 * like kubelet — and no namespace}, so `kubectl describe node` lists them; source {component, host},
 * reportingComponent/reportingInstance. Repeats are folded into one Event whose count and
 * lastTimestamp are patched (strategic merge); a patch that finds the Event expired (404) creates it
 * again; a per-object spam filter drops bursts (event-cache.h). Sending is sequential through a
 * bounded queue: when it is full the new event is dropped (debug log). Status errors are not retried
 * (like client-go's sink); transport errors are retried a few times, 10 s apart.
 *
 * Runs on the KubeClient's sd_event loop; logs at debug level only. Borrows the KubeClient. */

#include "kube/kube-client.h"
#include "util/macro.h"

#define KUBE_EVENTS_NAMESPACE "default"
#define KUBE_EVENTS_QUEUE_MAX 32U
#define KUBE_EVENTS_MESSAGE_MAX 1024U
#define KUBE_EVENTS_ATTEMPTS 3U
#define KUBE_EVENTS_RETRY_USEC (10 * USEC_PER_SEC)

typedef struct KubeEvents KubeEvents;

/* `component` is source.component/reportingComponent (e.g. "inplace-agent"); `node_name` is the
 * involved object and source.host/reportingInstance. */
int kube_events_new(KubeClient *client, const char *component, const char *node_name,
                    KubeEvents **ret) _warn_unused_result_;
KubeEvents *kube_events_free(KubeEvents *e);
DEFINE_CLEANUP_FUNC(KubeEvents, kube_events_free);

/* The Node's uid (NULL: unknown, the name is used). */
int kube_events_set_node_uid(KubeEvents *e, const char *uid) _warn_unused_result_;

/* Queues an Event. `type` is "Normal" or "Warning"; `reason` a CamelCase word; `message` is cut at
 * KUBE_EVENTS_MESSAGE_MAX bytes. Returns 0 when queued, 0 as well when the spam filter dropped it
 * (that is the filter's purpose), -ENOBUFS when the queue is full, -EINVAL for a bad type. */
int kube_events_emit(KubeEvents *e, const char *type, const char *reason,
                     const char *message) _warn_unused_result_;
/* The same with the Event's `action` (e.g. "HealthCheck", as GNA's health checks; NULL: none). */
int kube_events_emit_action(KubeEvents *e, const char *type, const char *reason, const char *action,
                            const char *message) _warn_unused_result_;

/* Events queued or in flight (for tests and idle checks). */
unsigned kube_events_pending(const KubeEvents *e);
