/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* GNA's bootstrapper, at every start (docs/contract.md §9.6): a new node's kubelet needs its bootstrap
 * kubeconfig before the first OSC starts it, written from gardener-node-agent's provisioned bootstrap
 * token and component config (identity/kubelet-bootstrap.h). Not fatal: the kubelet then says what it
 * misses. Logs what it wrote (info) or why it could not (warning). */

#include "core/config.h"

void gna_bootstrap_provision_kubelet(const Config *config);
