/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* "Log each distinct failure once": a repeated failure (a retry every few seconds, a Node update
 * that brings the same undecodable field again) is news only when it differs from the one before,
 * and again after it cleared. A LogOnce remembers the last (error, message) of one such source and
 * says whether the one at hand is new. Pure: no I/O, does NOT log — the caller logs when
 * log_once_check() says so, at the level it chooses. The owner embeds it zeroed and calls
 * log_once_done() when it goes. */

#include <stdbool.h>

#include "util/macro.h"

typedef struct LogOnce {
        bool set;      /* something is remembered */
        int error;     /* its -errno (or 0) */
        char *message; /* owned: its message; NULL: none */
} LogOnce;

/* Remembers (error, message) and returns true when it differs from what was remembered (or nothing
 * was): log it. `message` may be NULL (then only `error` counts) and is copied. On OOM it returns
 * true and remembers nothing, so a failure is never swallowed. */
bool log_once_check(LogOnce *o, int error, const char *message);

/* The failure cleared: the next one is news, even if it is the same as before. */
void log_once_clear(LogOnce *o);

/* The message last remembered (borrowed; NULL: none). */
static inline const char *log_once_message(const LogOnce *o) {
        return o->message;
}

/* Frees what is remembered; the LogOnce is zeroed (for destructors and _cleanup_). */
void log_once_done(LogOnce *o);
