/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Durations as the configuration writes them ("90s", "5m", "1h30m", "250ms"). Pure. */

#include <stddef.h>
#include <stdint.h>

/* Parses a sequence of <integer><unit> with units ms, s, m, h (e.g. "1h30m"). No sign, no
 * fractions, no bare numbers. -EINVAL on syntax errors, -ERANGE on overflow. */
int parse_duration(const char *s, uint64_t *ret_usec);

/* Writes the shortest "1h30m5s"/"250ms" form; "0s" for zero. Returns buf. */
char *format_duration(char *buf, size_t size, uint64_t usec);
#define DURATION_MAX_STR 64
