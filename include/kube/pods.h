/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Deleting the Pods bound to our Node after an in-place update (docs/node-protocol.md §6.4
 * deleteRemainingPods; docs/kube-api.md §6.3: the node-agent identity may list its node's Pods and delete
 * them): one LIST with fieldSelector=spec.nodeName=<node>, the selection of core/pod-selection.h
 * (gardener-resource-manager, mirror and static Pods are left alone), then a DELETE for every Pod it picks,
 * all in flight at once. A 404 counts as deleted (the Pod is already gone). Any other failure, a DELETE that
 * could not even be sent included, fails the run with a message naming the Pod, once every request has
 * ended: nothing passes for deleted that was not.
 *
 * Runs on the KubeClient's sd_event loop; logs at debug level only (the caller decides and logs).
 * Owns its requests: freeing the PodCleanup cancels them without a callback. Borrows the KubeClient. */

#include "core/pod-selection.h"
#include "kube/kube-client.h"
#include "util/macro.h"

typedef struct PodCleanup PodCleanup;

/* Completion, exactly once: `error` 0 or the first -errno, `message` what failed and for which Pod
 * (NULL on success), `selection` what was listed and decided (NULL when there is no list). Both are
 * borrowed for the call. The callback may free the PodCleanup. */
typedef void (*PodCleanupDone)(PodCleanup *pc, int error, const char *message, const PodSelection *selection,
                               void *userdata);

/* Sends the LIST; -errno when it cannot be sent (no callback then). */
int pod_cleanup_start(KubeClient *client, const char *node_name, PodCleanupDone done, void *userdata,
                      PodCleanup **ret) _warn_unused_result_;
PodCleanup *pod_cleanup_free(PodCleanup *pc);
DEFINE_CLEANUP_FUNC(PodCleanup, pod_cleanup_free);
