/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Which Pods bound to the node are deleted after an in-place update, and which are left alone
 * (docs/node-protocol.md §6.4 deleteRemainingPods: DaemonSet Pods and Pods with local storage come back
 * during the drain and must start again on the updated node):
 *   - mirror Pods (annotation kubernetes.io/config.mirror) and static Pods (an ownerReference of
 *     kind Node): the kubelet runs them from its manifests; a DELETE through the API stops nothing,
 *     the kubelet only creates the mirror again;
 *   - gardener-resource-manager's Pods (label app=gardener-resource-manager), as upstream leaves
 *     them since gardener PR #15030: its webhooks admit Pods, and deleting it together with every
 *     other Pod deadlocked the webhook and the CNI;
 *   - everything else is deleted.
 * Pure: decodes a PodList, decides each Pod and words the Event. */

#include <errno.h>
#include <jansson.h>
#include <stddef.h>

#define POD_ANNOTATION_MIRROR "kubernetes.io/config.mirror"
#define POD_LABEL_APP "app"
#define POD_APP_RESOURCE_MANAGER "gardener-resource-manager"

typedef enum PodVerdict {
        POD_DELETE,
        POD_SKIP_MIRROR,           /* annotation kubernetes.io/config.mirror */
        POD_SKIP_STATIC,           /* owned by the Node */
        POD_SKIP_RESOURCE_MANAGER, /* app=gardener-resource-manager */
        _POD_VERDICT_MAX,
        _POD_VERDICT_INVALID = -EINVAL,
} PodVerdict;

typedef struct PodEntry {
        char *namespace; /* owned */
        char *name;      /* owned */
        PodVerdict verdict;
} PodEntry;

typedef struct PodSelection {
        PodEntry *pods; /* owned, in the order of the list */
        size_t n_pods;
        size_t n_delete; /* of them POD_DELETE */
} PodSelection;

/* Why a Pod is left alone ("mirror pod", "static pod", "gardener-resource-manager"), "delete" for
 * POD_DELETE; NULL out of range. */
const char *pod_verdict_to_string(PodVerdict v);

/* The verdict for one Pod object. */
PodVerdict pod_verdict(const json_t *pod);

/* The selection of a PodList ({"items": [...]}). -EBADMSG with *ret_error naming what is wrong (the
 * item's index) when it is not a list or an item has no metadata.namespace and metadata.name: a Pod
 * that cannot be named cannot be deleted either, and must not pass for deleted. */
int pod_selection_from_list(const json_t *list, PodSelection *ret, char **ret_error);
void pod_selection_done(PodSelection *s);

/* The Event: "Deleted 2 Pod(s) still bound to the node after the in-place update: ns/a, ns/b.
 * Left alone 1: kube-system/x (mirror pod)." Counts always; names while they fit in `max` bytes
 * (the rest as "and N more"). NULL on -ENOMEM. */
char *pod_selection_message(const PodSelection *s, size_t max);
