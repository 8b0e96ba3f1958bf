/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Lines for the kernel console (gardener#15707): what keeps the agent from the API server, said where
 * a cloud provider's serial console shows it when the node never joins. Two routes:
 * - standard output (console.path ""), each line "<3><text>": the shipped unit has
 *   StandardOutput=kmsg, so journald, which may write /dev/kmsg, puts every line into the kernel log
 *   at priority err (above the console log level of a "quiet" boot, and above journald's
 *   MaxLevelKMsg=notice), prefixed "inplace-agent[<pid>]: ", and keeps it in the journal; the agent
 *   itself needs no device, so PrivateDevices= and ProtectKernelLogs= stay;
 * - a path (console.path: /dev/kmsg when the agent runs without that sandbox, a file or FIFO in
 *   tests), each line "<3>inplace-agent: <text>" in one write(), so /dev/kmsg takes it as one record.
 * Never blocks the loop: a socket is written with MSG_DONTWAIT, a path opened O_NONBLOCK (a FIFO
 * without a reader or a full pipe loses the line and says so with -errno). The caller rate-limits
 * (core/contact-blocker.h). Does not log: a lost line is the caller's to judge. */

#include "util/macro.h"

#define CONSOLE_PREFIX "inplace-agent: "

typedef struct Console Console;

/* `path` NULL or "": standard output. Copied. */
int console_new(const char *path, Console **ret) _warn_unused_result_;
Console *console_free(Console *c);
DEFINE_CLEANUP_FUNC(Console, console_free);

/* One line (no newline in `text`; one is added, embedded ones become spaces). 0 or -errno. */
int console_write(Console *c, const char *text) _warn_unused_result_;
