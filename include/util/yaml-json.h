/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* YAML -> json_t, done once at the edge so everything else decodes with jansson. Pure.
 * Plain scalars become null/bool/integer/real/string by YAML 1.2 core-schema rules; quoted
 * scalars are always strings. Aliases are refused (no billion-laughs), as are duplicate keys,
 * non-scalar keys and nesting deeper than YAML_JSON_MAX_DEPTH. Only the first document is read;
 * an empty stream yields JSON null. Does not log: errors come back as -errno plus a message. */

#include <jansson.h>
#include <stddef.h>

#define YAML_JSON_MAX_DEPTH 64

/* On failure returns -EBADMSG (syntax), -ENOTSUP (alias), -ENOMEM, and, when ret_error is not
 * NULL, a message like "line 3, column 5: did not find expected key". */
int yaml_to_json(const char *data, size_t size, json_t **ret, char **ret_error);
