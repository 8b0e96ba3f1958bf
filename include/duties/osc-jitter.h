/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* GNA's reconciliation jitter for OSC Secret updates (docs/node-protocol.md §2.1 "Watch scope",
 * docs/contract.md §9.8): the first OSC after the watch starts (upstream's Create) is handed over at once; a
 * later one with other content (checksum) waits the delay of the Node annotation
 * node-agent.gardener.cloud/reconciliation-delay, which gardener-resource-manager spreads over the nodes so
 * that an ungated change does not restart every kubelet of the cluster at once. An unparseable or absent
 * annotation keeps the previous delay (initially 0). Not delayed: a change while the MCM gate is open (the
 * node is already drained for it), and a waiting one is handed over as soon as the gate opens. A newer OSC
 * replaces a waiting one without moving its deadline.
 *
 * Owns the waiting OSC and its timer; hands OSCs to `deliver`, which takes them. Logs each wait and
 * hand-over, and the annotation's value once per value (a value that is no duration as a warning). */

#include <systemd/sd-event.h>

#include "core/node-view.h"
#include "core/osc.h"
#include "util/macro.h"

typedef void (*OscJitterDeliver)(OscDesired *osc, void *userdata);

typedef struct OscJitter OscJitter;

int osc_jitter_new(sd_event *event, OscJitterDeliver deliver, void *userdata,
                   OscJitter **ret) _warn_unused_result_;
OscJitter *osc_jitter_free(OscJitter *j);
DEFINE_CLEANUP_FUNC(OscJitter, osc_jitter_free);

/* A decoded OSC from the Secret watch (taken), or NULL (no usable OSC: handed over at once).
 * `node` is the Node as watched (may be NULL). */
void osc_jitter_submit(OscJitter *j, OscDesired *osc, const NodeView *node);

/* The Node changed: a waiting OSC goes as soon as the gate is open. */
void osc_jitter_node_changed(OscJitter *j, const NodeView *node);

/* The watch starts over (another Secret): the next OSC is a Create again. Drops a waiting one. */
void osc_jitter_reset(OscJitter *j);
