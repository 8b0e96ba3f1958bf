/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* gardener-node-agent's component config as gardener-node-init provisioned it on the node
 * (docs/contract.md §9.6): <gna_directory>/config-<gardener version>.yaml (the lexically last when there are
 * several, e.g. after an OSC brought a newer one), else <gna_directory>/config.yaml (older
 * gardener-node-init). Before any OSC and before its Node exists, it is all a fresh node knows: the
 * API server its bootstrap token is for, and the name of its OSC Secret. Reads a small file; does not
 * log. */

#include "core/osc-component-config.h"

/* -ENOENT when there is none; -EINVAL (or the read's -errno) with *ret_error naming the file when it
 * cannot be read or decoded. */
int gna_config_read(const char *gna_directory, OscComponentConfig **ret,
                    char **ret_error) _warn_unused_result_;
