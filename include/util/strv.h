/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* NULL-terminated string arrays (argv, envp, name lists). A NULL strv is the empty list for every
 * function here. Freeing: strv_free(), or _cleanup_strv_free_ from macro.h. Pure; does
 * not log. */

#include <stdbool.h>
#include <stddef.h>

#include "util/macro.h"

size_t strv_length(char *const *l);
bool strv_contains(char *const *l, const char *s);

/* Frees the strings and the array; returns NULL. */
char **strv_free(char **l);

/* A deep copy; NULL for NULL. -ENOMEM (*ret NULL then). */
int strv_copy(char *const *l, char ***ret);

/* Appends `s`, taking it over (freed if it cannot be appended; NULL `s` is -ENOMEM, so that
 * strv_consume(&l, strdup(x)) needs no check of its own). */
int strv_consume(char ***l, char *s);

/* Removes (and frees) every entry equal to an earlier one, keeping the order of the rest; O(n log n).
 * -ENOMEM (then `l` is unchanged). */
int strv_uniq(char **l);
