/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Time: durations as the configuration writes them ("90s", "5m", "1h30m", "250ms"), RFC 3339
 * timestamps as the Kubernetes API writes them, and the one way to read a clock outside the event
 * loop (inside it, event-util.h's event_now_usec()). Pure but for clock_now_usec(); does not log. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Parses a sequence of <integer><unit> with units ms, s, m, h (e.g. "1h30m"). No sign, no
 * fractions, no bare numbers. -EINVAL on syntax errors, -ERANGE on overflow. */
int parse_duration(const char *s, uint64_t *ret_usec);

/* Writes the shortest "1h30m5s"/"250ms" form; "0s" for zero. Returns buf. */
char *format_duration(char *buf, size_t size, uint64_t usec);
#define DURATION_MAX_STR 64

/* Now on `clock` (CLOCK_MONOTONIC, CLOCK_REALTIME, ...) in µs. */
uint64_t clock_now_usec(clockid_t clock);

/* RFC 3339 in UTC of a CLOCK_REALTIME µs value: metav1.Time "2006-01-02T15:04:05Z", or with `micro`
 * metav1.MicroTime "2006-01-02T15:04:05.000000Z". Returns buf, or NULL if the time cannot be
 * represented. */
#define RFC3339_MAX 32
char *format_rfc3339(char buf[static RFC3339_MAX], uint64_t realtime_usec, bool micro);
