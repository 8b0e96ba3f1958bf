/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* systemd unit names as the agent accepts them from configuration and from the
 * worker.gardener.cloud/restart-systemd-services annotation (docs/contract.md §8.7). Pure. */

#include <stdbool.h>

#define UNIT_NAME_MAX 255

/* Validates `name` and returns a newly allocated canonical form in *ret: ".service" appended when
 * the name has no known unit-type suffix. On rejection returns -EINVAL and, if ret_why is not
 * NULL, points it at a static human reason ("empty", "contains ';'", ...). */
int unit_name_normalize(const char *name, char **ret, const char **ret_why);

/* True if the name already ends in a known unit-type suffix (".service", ".timer", ...). */
bool unit_name_has_type_suffix(const char *name);

/* The unit-type suffix the name ends in (".service", ".slice", ...: a static string), or NULL. */
const char *unit_name_type(const char *name);
