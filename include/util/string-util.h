/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Formatting into owned strings: the one way to turn a caller's printf-style arguments into a
 * message, and to grow a "; "-joined list of them. Pure: no I/O, no logging. */

#include <stdarg.h>

#include "util/macro.h"

/* vasprintf() into a new string; NULL on OOM. */
char *strdup_vprintf(const char *format, va_list ap) _printf_(1, 0);

/* Replaces *s with the formatted text, like free_and_strdup(). -ENOMEM, and *s is unchanged. */
int free_and_vprintf(char **s, const char *format, va_list ap) _printf_(2, 0);

/* Appends the formatted text to *s (which may be NULL), with `separator` before it when *s already
 * holds something. -ENOMEM, and *s is unchanged. */
int strextendv_with_separator(char **s, const char *separator, const char *format, va_list ap)
        _printf_(3, 0);
int strextendf_with_separator(char **s, const char *separator, const char *format, ...) _printf_(3, 4);
