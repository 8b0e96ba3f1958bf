/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The OSC Secret, from its name to the executor (docs/node-protocol.md §2.1, docs/contract.md §9.4):
 * which Secret (osc.secretName, else the Node's label, else the name in gardener-node-agent's
 * provisioned component config, read once at start), watching it, saying whether it can be read
 * (duties/osc-secret-state.h), decoding it once (update/osc-intake.h: a refused one is logged once
 * per reason and handed on as refused), GNA's component config of the accepted OSC with its token
 * syncs (identity/token-sync.h, recreated only when they change), and the reconciliation delay
 * (duties/osc-jitter.h) before the OSC reaches the executor and the node labeler.
 *
 * Owns the watch, the jitter, the Secret's availability, the component config and the token sync;
 * borrows the loop, the configuration, the reporter, the labeler, the executor and the client. */

#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/node-view.h"
#include "core/osc-component-config.h"
#include "duties/node-labeler.h"
#include "identity/token-sync.h"
#include "kube/kube-client.h"
#include "report/reporter.h"
#include "update/executor.h"
#include "util/macro.h"

typedef struct OscSource OscSource;

int osc_source_new(sd_event *event, const Config *config, Reporter *reporter, NodeLabeler *labeler,
                   OscSource **ret) _warn_unused_result_;
OscSource *osc_source_free(OscSource *s);
DEFINE_CLEANUP_FUNC(OscSource, osc_source_free);

/* What the executor reads when a credentials rotation runs (ExecutorDeps): valid while `s` lives. */
OscComponentConfig *const *osc_source_component_slot(const OscSource *s);
TokenSync *const *osc_source_tokens_slot(const OscSource *s);

/* Where the OSC goes: the executor is created after the source, since it reads the slots above. */
void osc_source_set_executor(OscSource *s, Executor *executor);
/* The API client, once there is one: the Secret is watched from then on. */
void osc_source_set_kube(OscSource *s, KubeClient *kube);

/* Reads the OSC Secret's name from gardener-node-agent's provisioned component config: once, at start. */
void osc_source_read_gna_config(OscSource *s);

/* The decoded Node (NULL: absent), borrowed until the next call: says whether a Secret is named. */
void osc_source_set_node(OscSource *s, const NodeView *view);
/* The Node changed: the delay follows it, the labeler syncs, the watch follows the Secret's name. */
void osc_source_node_changed(OscSource *s);

/* The client's credentials changed on disk: the watch reconnects with them. */
void osc_source_reconnect(OscSource *s);
