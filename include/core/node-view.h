/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's own Node, decoded from the watched json_t into the plain values the update engine
 * decides on (docs/contract.md §4, docs/node-protocol.md §1.2 and Appendix A). Pure: no I/O, no logging. The
 * decoder is lenient where the API server already guarantees shape or where we do not use a value, strict
 * where we read: a field we use (name, uid, resourceVersion, the labels and annotations below, the
 * type, reason and lastTransitionTime of conditions) that is not a string, is longer than the API
 * allows or contains a NUL character (JSON "\u0000", which the API server accepts) is an error
 * naming the field. A NUL anywhere else (another annotation, a condition message) is ignored: the
 * JSON is decoded with JSON_ALLOW_NUL and such values are never looked at, or dropped (status,
 * message of our conditions are informational).
 *
 * Conditions: at most NODE_CONDITIONS_MAX are looked at (a real Node has about ten); the excess is
 * ignored with a warning naming the limit. Several InPlaceUpdate entries are allowed (the
 * documented manual retry appends one by JSON patch): the gate opens if any has reason
 * ReadyForUpdate (docs/contract.md §9.9). */

#include <jansson.h>
#include <stdbool.h>

#include "util/macro.h"

/* Written by machine-controller-manager (or a user, for selected-for-update). */
#define NODE_LABEL_CANDIDATE "node.machine.sapcloud.io/candidate-for-update"
#define NODE_LABEL_SELECTED "node.machine.sapcloud.io/selected-for-update"
#define NODE_CONDITION_IN_PLACE_UPDATE "InPlaceUpdate"
#define NODE_REASON_READY_FOR_UPDATE "ReadyForUpdate"
/* Written by the agent, read by MCM (and by the agent as the retry gate). */
#define NODE_LABEL_UPDATE_RESULT "node.machine.sapcloud.io/update-result"
#define NODE_ANNOTATION_FAILED_REASON "node.machine.sapcloud.io/update-failed-reason"
#define NODE_ANNOTATION_UPDATING_OS "node-agent.gardener.cloud/updating-operating-system-version"
#define NODE_ANNOTATION_CHECKSUM "checksum/cloud-config-data"
#define NODE_LABEL_KUBERNETES_VERSION "worker.gardener.cloud/kubernetes-version"
/* Written by users / MCM node templates. */
#define NODE_ANNOTATION_RESTART "worker.gardener.cloud/restart-systemd-services"
#define NODE_LABEL_SECRET_NAME "worker.gardener.cloud/gardener-node-agent-secret-name"
#define NODE_ANNOTATION_RECONCILE_DELAY "node-agent.gardener.cloud/reconciliation-delay"
#define NODE_ANNOTATION_MIN_VERSION "inplace-agent/min-version-for-update"
/* Written by the agent as GNA does (docs/node-protocol.md Appendix A); gardenlet reads the condition. */
#define NODE_LABEL_ROLE_WORKER "node-role.kubernetes.io/worker"
#define NODE_LABEL_ROLE_CONTROL_PLANE "node-role.kubernetes.io/control-plane"
#define NODE_LABEL_ZONE "topology.kubernetes.io/zone"
#define NODE_CONDITION_UNITS_READY "SystemdUnitsReady"
#define NODE_CONDITION_READY "Ready"
/* Ours (docs/contract.md §6). */
#define NODE_ANNOTATION_PROGRESS "inplace-agent/progress"
#define NODE_ANNOTATION_PLAN "inplace-agent/plan"
#define NODE_ANNOTATION_FAILURE "inplace-agent/failure"
#define NODE_CONDITION_AGENT "InPlaceUpdateAgent"
/* Whether the OSC Secret can be read (core/osc-availability.h); apart from InPlaceUpdateAgent,
 * whose reason the update engine owns. */
#define NODE_CONDITION_OSC_SECRET "OSCSecretAvailable"

#define NODE_NAME_MAX 253
#define NODE_LABEL_VALUE_MAX 63
#define NODE_ANNOTATIONS_MAX (256 * 1024) /* the API's limit for all annotations together */
#define NODE_CONDITIONS_MAX 1024
#define NODE_ADDRESS_MAX 64 /* an IPv6 address with a zone fits; longer ones are not IPs */

typedef enum NodeUpdateResult {
        NODE_UPDATE_RESULT_NONE, /* label absent */
        NODE_UPDATE_RESULT_SUCCESSFUL,
        NODE_UPDATE_RESULT_FAILED,
        NODE_UPDATE_RESULT_INVALID, /* any other value: ignored, and reported in NodeView.warning */
        _NODE_UPDATE_RESULT_MAX,
        _NODE_UPDATE_RESULT_INVALID = -EINVAL,
} NodeUpdateResult;

const char *node_update_result_to_string(NodeUpdateResult r);
NodeUpdateResult node_update_result_from_string(const char *s);

typedef struct NodeCondition {
        bool present;
        char position[40];          /* "status.conditions[<i>]" */
        char *status;               /* owned; NULL if absent */
        char *reason;               /* owned; NULL if absent (a condition without reason is fine) */
        char *message;              /* owned; NULL if absent */
        char *last_transition_time; /* owned; NULL if absent */
} NodeCondition;

typedef struct NodeView {
        char *name;             /* owned */
        char *uid;              /* owned; NULL if absent */
        char *resource_version; /* owned; NULL if absent */

        bool candidate; /* candidate-for-update == "true" */
        bool selected;  /* selected-for-update == "true" */
        NodeUpdateResult update_result;
        char *update_result_value;     /* owned: the raw label value; NULL if absent */
        NodeCondition in_place_update; /* of type InPlaceUpdate: the last one with reason ReadyForUpdate,
                                        * else the first one */
        NodeCondition agent;           /* the first condition of type InPlaceUpdateAgent */
        NodeCondition osc_secret;      /* the first condition of type OSCSecretAvailable */
        NodeCondition units_ready;     /* the first condition of type SystemdUnitsReady */
        NodeCondition ready;           /* the first condition of type Ready (kubelet's) */

        char *restart_services;       /* owned: worker.gardener.cloud/restart-systemd-services */
        char *updating_os_version;    /* owned: the attempt marker */
        char *applied_checksum;       /* owned: checksum/cloud-config-data */
        char *update_failed_reason;   /* owned */
        char *progress;               /* owned: inplace-agent/progress, raw */
        char *plan;                   /* owned: inplace-agent/plan, raw */
        char *failure;                /* owned: inplace-agent/failure, raw */
        char *secret_name;            /* owned: label ...gardener-node-agent-secret-name */
        char *kubernetes_version;     /* owned: label worker.gardener.cloud/kubernetes-version */
        char *role_worker;            /* owned: label node-role.kubernetes.io/worker ("" when set) */
        char *role_control_plane;     /* owned: label node-role.kubernetes.io/control-plane */
        char *zone;                   /* owned: label topology.kubernetes.io/zone */
        char *reconciliation_delay;   /* owned: annotation ...reconciliation-delay, raw */
        char *min_version_for_update; /* owned: annotation inplace-agent/min-version-for-update */

        char *internal_ip; /* owned: the first status.addresses entry of type InternalIP
                            * (a clean string of at most NODE_ADDRESS_MAX bytes); NULL if none */
        bool external_ip;  /* status.addresses has an entry of type ExternalIP */

        char *warning; /* owned: what was tolerated but is worth a log line; NULL if none */
} NodeView;

NodeView *node_view_free(NodeView *v);
DEFINE_CLEANUP_FUNC(NodeView, node_view_free);

/* Decodes a core/v1 Node. -EINVAL with *ret_error (if not NULL) naming the field when the object is
 * not a Node we can use (no metadata.name, a used label/annotation of the wrong type or size). */
int node_view_decode(const json_t *node, NodeView **ret, char **ret_error);

/* The decoded condition of `type` among those the agent writes (InPlaceUpdateAgent,
 * OSCSecretAvailable, SystemdUnitsReady) or watches (Ready); NULL for other types. */
const NodeCondition *node_view_condition(const NodeView *v, const char *type);

/* docs/node-protocol.md §1.2: any InPlaceUpdate condition with reason ReadyForUpdate; its status is not
 * checked. */
bool node_view_ready_for_update(const NodeView *v);

/* What identifies the current ReadyForUpdate signal, to tell a new one (a manual retry) from the
 * one already seen: its lastTransitionTime, or "status.conditions[<i>]" for an entry without one.
 * NULL when not ready. Valid as long as `v`. */
const char *node_view_ready_since(const NodeView *v);

/* The in-place gate: ReadyForUpdate, or update-result=failed (the retry path). */
bool node_view_gate_open(const NodeView *v);

/* docs/node-protocol.md §9 scenario 8: the transition that makes upstream enqueue the OSC — ReadyForUpdate
 * present in `new` but not in `old` (old NULL = a Create event). The engine itself is idempotent and does
 * not need this; it lets the manager skip re-deciding on unrelated Node updates. */
bool node_view_became_ready(const NodeView *old, const NodeView *new);
