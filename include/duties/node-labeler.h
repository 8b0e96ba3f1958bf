/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Keeps GNA's node-role and zone labels on the Node (core/node-labels.h): the zone file is read at
 * start and with every OSC handed over (as upstream reads it at every OSC reconcile), the role is
 * taken from each OSC handed over (worker until one says control-plane); a label patch is sent only
 * when the watched Node differs, one at a time. Owns the zone value; borrows the reporter. Logs the
 * labels it sets and a zone file it cannot use (once per distinct error); a failed patch is the
 * reporter's to log. */

#include "core/node-labels.h"
#include "core/node-view.h"
#include "report/reporter.h"
#include "util/macro.h"

typedef struct NodeLabeler NodeLabeler;

/* `zone_path` is copied. */
int node_labeler_new(Reporter *reporter, const char *zone_path, NodeLabeler **ret) _warn_unused_result_;
NodeLabeler *node_labeler_free(NodeLabeler *l);
DEFINE_CLEANUP_FUNC(NodeLabeler, node_labeler_free);

/* Re-reads the zone file (absent: no zone label; unusable: logged once, no zone label). */
void node_labeler_reload(NodeLabeler *l);

/* The role of the OSC handed over (OscDesired.control_plane); applies with the next sync. */
void node_labeler_set_control_plane(NodeLabeler *l, bool control_plane);

/* The Node as watched (NULL: absent): patches what differs. */
void node_labeler_sync(NodeLabeler *l, const NodeView *v);
