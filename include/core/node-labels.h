/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The labels GNA puts on its Node at every OSC reconcile (docs/node-protocol.md §2.2 step 3, Appendix A,
 * upstream operatingsystemconfig/reconciler.go): node-role.kubernetes.io/worker="", or
 * node-role.kubernetes.io/control-plane="" when the OSC's spec.files has the kube-apiserver static pod
 * manifest (OscDesired.control_plane), and, when the zone file <root>/var/lib/gardener-node-agent/zone
 * exists, topology.kubernetes.io/zone=<its content, trimmed>. As upstream, a role label is only ever
 * added: the other role's label is left alone. Pure. */

#include <jansson.h>

#include "core/node-view.h"

#define NODE_ZONE_FILE "/var/lib/gardener-node-agent/zone" /* below osc.rootDirectory */
#define NODE_ZONE_MAX NODE_LABEL_VALUE_MAX

/* The zone file's content as the label value: surrounding white space trimmed; -EINVAL if empty,
 * too long for a label or not a valid label value. */
int node_zone_from_file(const char *content, char **ret);

/* The labels that differ from the Node's as a merge-patch object ({"labels": {...}}), or *ret NULL
 * when the Node already carries them. `control_plane` picks the role label; `zone` NULL: no zone
 * label is set (an existing one stays). */
int node_labels_patch(const NodeView *v, bool control_plane, const char *zone, json_t **ret);
