/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Typed access to the members of a decoded JSON (or YAML) document, for every decoder: one set of
 * rules for what "absent", "null" and "of another type" mean, and one way of naming the field in the
 * error. Pure: jansson only, no I/O, no logging; the caller decides and logs.
 *
 * Each getter reads obj[key]. A NULL `obj`, an absent member and JSON null are all "unset" (Go's
 * zero value): the getter returns 0 and stores the unset value (NULL, -1, 0). A member of another
 * type, or one out of the limits given, is -EINVAL with *ret_error (when ret_error is not NULL) set
 * to "<where>.<key>: <what is wrong>" — `where` is the caller's name for `obj` ("spec.files[3]";
 * NULL or "" for the top level), and a key that is no plain identifier is written ["<key>"]
 * (metadata.labels["worker.gardener.cloud/pool"]). On error *ret is the unset value too, so calls
 * can be chained with "if (r >= 0) r = ...". -ENOMEM only where a copy is made. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

typedef enum JsonFieldFlags {
        /* Unset (and for strings "", for lists []) is an error: "must not be empty". */
        JSON_FIELD_REQUIRED = 1 << 0,
        /* "" (strings) or [] (lists) read as unset. Without it they are kept. */
        JSON_FIELD_EMPTY_IS_UNSET = 1 << 1,
} JsonFieldFlags;

/* The member, or NULL for a NULL or non-object `obj`, an absent member and JSON null. */
const json_t *json_field(const json_t *obj, const char *key);

/* -EINVAL, with *ret_error "<where>.<key>: <format ...>" as above. For the checks the getters do
 * not know (an enum name, a path, a range), so that every message about a field reads the same. */
int json_field_error(char **ret_error, const char *where, const char *key, const char *format, ...)
        _printf_(4, 5);
/* The same for entry `index` of the list obj[key]: "<where>.<key>[<index>]: ...". */
int json_field_entry_error(char **ret_error, const char *where, const char *key, size_t index,
                           const char *format, ...) _printf_(5, 6);

int json_field_object(const json_t *obj, const char *where, const char *key, const json_t **ret,
                      char **ret_error);
int json_field_array(const json_t *obj, const char *where, const char *key, const json_t **ret,
                     char **ret_error);

/* A string, borrowed from `obj`: only its type is checked (it may hold a NUL; see
 * json_string_length()). */
int json_field_string_ref(const json_t *obj, const char *where, const char *key, const char **ret,
                          char **ret_error);
/* A copy of a string of at most `max` bytes without a NUL inside. */
int json_field_string(const json_t *obj, const char *where, const char *key, size_t max,
                      JsonFieldFlags flags, char **ret, char **ret_error);
/* A list of at most `max_n` such strings of at most `max_len` bytes each, as a NULL-terminated strv
 * (an entry's error names it: "<where>.<key>[2]: expected a string"). */
int json_field_strv(const json_t *obj, const char *where, const char *key, size_t max_n, size_t max_len,
                    JsonFieldFlags flags, char ***ret, char **ret_error);

/* true or false: *ret is 1 or 0, unset -1. */
int json_field_bool(const json_t *obj, const char *where, const char *key, int *ret, char **ret_error);
/* An integer of any value: returns 1 when present (and *ret is it), 0 when unset (*ret = 0). */
int json_field_integer(const json_t *obj, const char *where, const char *key, json_int_t *ret,
                       char **ret_error);
/* A non-negative integer of at most `max`; returns 1 when present, 0 when unset (*ret = 0). */
int json_field_u64(const json_t *obj, const char *where, const char *key, uint64_t max, uint64_t *ret,
                   char **ret_error);
