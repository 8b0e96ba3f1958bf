/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Asks the system to reboot after an `image` OS update (osUpdate.reboot, docs/contract.md §8.8; the
 * `command` backend never reboots by itself):
 *   login1  -> org.freedesktop.login1.Manager.Reboot(false) (non-interactive), as upstream's
 *              unused DBus.Reboot() would (docs/node-protocol.md §6.1);
 *   systemd -> org.freedesktop.systemd1.Manager.StartUnit("reboot.target", "replace-irreversibly"),
 *              so that a later job cannot cancel the shutdown;
 *   none    -> nothing; the caller reports REBOOT_DISABLED_MESSAGE.
 *
 * Owns: the pending method call (its slot). The bus is the caller's (ref held), attached to the
 * caller's sd_event loop; the call is asynchronous and never blocks the loop. Does not log. A
 * successful reply means the request was accepted, not that the machine is going down yet. */

#include <systemd/sd-bus.h>

#include "core/config.h"
#include "util/macro.h"

#define REBOOT_DISABLED_MESSAGE "reboot required but disabled"
/* Positive outcome of reboot_request_start() for REBOOT_METHOD_NONE. */
#define REBOOT_DISABLED 1

typedef struct RebootRequest RebootRequest;

/* error: 0 when the request was accepted, else -errno from the D-Bus error (e.g. -EACCES,
 * -ETIMEDOUT); reboot_request_get_error_message() has the peer's text. The request may be freed
 * inside the callback. */
typedef void (*RebootRequestDone)(RebootRequest *r, int error, void *userdata);

int reboot_request_new(sd_bus *bus, RebootMethod method, RebootRequest **ret) _warn_unused_result_;
/* Drops a pending call (its reply is then ignored; the reboot may still happen). */
RebootRequest *reboot_request_free(RebootRequest *r);
DEFINE_CLEANUP_FUNC(RebootRequest, reboot_request_free);

/* 0: the call is on its way and `done` follows from the loop; REBOOT_DISABLED (1) for
 * REBOOT_METHOD_NONE: nothing was done and `done` is not called; -EALREADY if already started;
 * -errno if the call could not be queued (then `done` is not called). */
int reboot_request_start(RebootRequest *r, RebootRequestDone done, void *userdata) _warn_unused_result_;

/* The D-Bus error name and message of a failed call ("org.freedesktop.DBus.Error.AccessDenied:
 * ..."), NULL if none. Borrowed. */
const char *reboot_request_get_error_message(const RebootRequest *r);
