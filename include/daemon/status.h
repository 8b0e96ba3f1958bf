/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* `inplace-agent status`: what the agent is doing / did last, read from the state directory.
 * Prints to stdout; returns a process exit code (0 ok, 1 unreadable/corrupt state). */

#include <stdbool.h>

int status_print(const char *state_dir, bool json);
