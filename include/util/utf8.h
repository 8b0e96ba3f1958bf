/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Making untrusted bytes (command output, os-release, API strings) safe to put into JSON
 * annotations and human messages: jansson refuses invalid UTF-8, and Kubernetes annotations are
 * size-limited. Pure; does not log. */

#include <stdbool.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if the bytes at s are not one
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). n = bytes available. */
size_t utf8_sequence_length(const char *s, size_t n);

bool utf8_is_valid(const char *s, size_t n);

/* A new NUL-terminated copy of s[0..n) that is valid UTF-8: invalid bytes and NULs become '?',
 * other control characters except '\n' and '\t' become ' '. If the result would exceed max_bytes,
 * it is cut on a character boundary and "..." appended (max_bytes >= 3 is then honoured).
 * NULL only on allocation failure. */
char *utf8_sanitize(const char *s, size_t n, size_t max_bytes);

/* Go's %q, closely enough for error texts we copy from upstream: a double-quoted string with \" \\
 * \n \r \t, \xNN for other control bytes and invalid UTF-8, valid UTF-8 kept as is.
 * NULL only on allocation failure. */
char *utf8_quote(const char *s, size_t n);
