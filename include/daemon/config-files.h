/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Loading the configuration (docs/contract.md §3): files and environment. Errors come back as -errno plus
 * a message naming file, key and reason; nothing is logged here. */

#include <stdbool.h>

#include "core/config.h"

/* Reads `path` (must exist unless `optional`) and then <dirname(path)>/config.d/<name>.yaml in
 * lexical order. Unreadable files and YAML errors also fail with -EINVAL/-errno + message. */
int config_load_files(Config *c, const char *path, bool optional, char **ret_error) _warn_unused_result_;

/* Command line (NULL = not given), then $NODE_NAME / $KUBECONFIG, then the hostname; finalizes. */
int config_load_environment(Config *c, const char *node_name, const char *kubeconfig, const char *state_dir,
                            char **ret_error) _warn_unused_result_;
