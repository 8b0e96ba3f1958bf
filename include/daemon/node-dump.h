/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Debug aid for tests: what the agent believes its Node looks like, at every change. One debug line
 * (presence, uid, resourceVersion, labels, annotations) and, when INPLACE_AGENT_DEBUG_NODE_VIEW is set
 * in the environment (read once, by the Manager), the view as <stateDirectory>/node-view.json (name,
 * presence, time, metadata, conditions), written atomically. Failures only at debug: it is a mirror. */

#include <jansson.h>
#include <stdbool.h>

#define NODE_DUMP_ENV "INPLACE_AGENT_DEBUG_NODE_VIEW"

/* `node` NULL: absent. `mirror`: write node-view.json too. */
void node_dump(const char *node_name, const json_t *node, const char *state_directory, bool mirror);
