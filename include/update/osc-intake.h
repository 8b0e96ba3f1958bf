/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Whether the agent takes an OSC Secret at all (docs/node-protocol.md §2.2). Every OSC the watch delivers
 * comes through here once, before anything of it is used:
 *   - the values the update engine reads (core/osc: types, versions, sizes, base64);
 *   - the whole model every applier reads (core/osc-model: paths, permissions, unit and drop-in
 *     names, secretRef names, NUL);
 *   - GNA's component config a replaced unit lists (core/osc-component-config: token syncs);
 *   - every image reference against the distribution grammar (oci/oci-ref), before any of it can
 *     reach a registry URL.
 * A Secret that fails any of these becomes a refused OscDesired (osc.h) carrying the message, which
 * names the field and the reason: the update engine fails it with InvalidDesiredState on the Node
 * (inplace-agent/failure, a Warning Event, the condition) and in STATUS=, applies nothing of it and
 * leaves checksum/cloud-config-data alone; the next good OSC is taken as usual.
 * osc.yaml is parsed once, here; an accepted OscDesired carries the model the OSC runner applies
 * (decoded with `model_options`: this host's files, containerd's drop-in), which the runner shares by
 * reference instead of decoding the bytes again.
 * Pure apart from the allocations: no I/O, no logging. */

#include <jansson.h>

#include "core/osc-component-config.h"
#include "core/osc.h"

/* *ret_osc: the decoded OSC, or a refused one; *ret_component: GNA's component config of an accepted
 * OSC (NULL without one, or when refused). `model_options` (NULL: none) are the runner's
 * (osc_runner_model_options()). Fails only with -ENOMEM. */
int osc_intake(const json_t *secret, const char *kubelet_path, char *const *replaced_units,
               const OscModelOptions *model_options, OscDesired **ret_osc,
               OscComponentConfig **ret_component);
