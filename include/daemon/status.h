/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* `inplace-agent status`: what the agent is doing / did last, read from the state directory:
 * state.json (the transaction), contact-blocker.json (what keeps the daemon from the API server
 * before its first contact since it started, gardener#15707) and containerd.json (the version and
 * revision containerd last told the health check). Prints to stdout; returns a process exit code (0
 * ok, 1 unreadable/corrupt state). The daemon writes contact-blocker.json through
 * status_blocker_save()/status_blocker_remove() and containerd.json through status_containerd_save(),
 * so their formats live here with their reader. Does not log: the command prints, the daemon's calls
 * return -errno for the daemon to judge. */

#include <stdbool.h>
#include <stdint.h>

#include "util/macro.h"

#define STATUS_BLOCKER_FILE "contact-blocker.json"
#define STATUS_CONTAINERD_FILE "containerd.json"

int status_print(const char *state_dir, bool json) _warn_unused_result_;

/* {"reason","firstReason","since"} (since: RFC 3339 of a CLOCK_REALTIME µs value), atomically, 0600. */
int status_blocker_save(const char *state_dir, const char *reason, const char *first_reason,
                        uint64_t since_usec) _warn_unused_result_;
/* Gone (a missing file is fine). */
int status_blocker_remove(const char *state_dir) _warn_unused_result_;

/* {"version","revision","since"} (since: RFC 3339 of a CLOCK_REALTIME µs value), atomically, 0600. */
int status_containerd_save(const char *state_dir, const char *version, const char *revision,
                           uint64_t since_usec) _warn_unused_result_;
