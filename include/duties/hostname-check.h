/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* GNA's hostname check (docs/node-protocol.md §8 item 5): every period (30 s) the lower-cased hostname is
 * compared with the one at start; when it changed, the agent's own unit is restarted through systemd, so
 * that it starts over with the new name (upstream: the process ends and systemd restarts it). The
 * hostname is read from /proc/sys/kernel/hostname (what gethostname() returns; a file, so tests can
 * bind-mount another one over it in a private mount namespace). Owns its timer; borrows the rest.
 * Logs the change (notice) and a restart that failed (warning). */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "systemd/unit-control.h"
#include "util/macro.h"

#define HOSTNAME_PATH "/proc/sys/kernel/hostname"

typedef struct HostnameCheck HostnameCheck;

/* Reads the hostname at start; `self_unit` is copied. */
int hostname_check_new(sd_event *event, UnitControl *units, const char *self_unit, uint64_t period_usec,
                       HostnameCheck **ret) _warn_unused_result_;
HostnameCheck *hostname_check_free(HostnameCheck *h);
DEFINE_CLEANUP_FUNC(HostnameCheck, hostname_check_free);
