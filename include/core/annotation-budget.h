/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The byte budget of every annotation the agent writes on its Node. The API server allows 256 KiB
 * for all of an object's annotations together, keys and values (NODE_ANNOTATIONS_MAX), and a patch
 * over it is rejected whole (422), so a too-long value would block every write of the same patch,
 * retried forever. The Node's other writers (kubelet, MCM, gardener, users) need their share, so
 * the agent's own annotations together stay under ANNOTATION_BUDGET_TOTAL, a quarter of the limit,
 * whatever the input: a 10,000-file OSC, a 100 MB command output, a 4 KiB path.
 *
 * Each key has a fixed share. Producers summarise first (the OSC plan carries counts per action and
 * the first items, failure messages are cut at 4 KiB); the reporter passes every value through here
 * as the last line, so no input can exceed the share.
 *
 * Pure: no I/O, no logging. */

#include <jansson.h>
#include <stddef.h>

#define ANNOTATION_BUDGET_TOTAL (64 * 1024)
#define ANNOTATION_BUDGET_OTHER 1024U /* a key without a share (the agent writes none) */

/* The value budget of `key` in bytes. */
size_t annotation_budget(const char *key);

/* The sum of every share plus its key: what the agent's annotations take at most together
 * (<= ANNOTATION_BUDGET_TOTAL). */
size_t annotation_budget_sum(void);

/* `value` within the budget of `key`: a copy when it fits, else cut on a character boundary with
 * "..." appended (invalid UTF-8 and control characters replaced). NULL: out of memory. */
char *annotation_fit_string(const char *key, const char *value);

/* The compact JSON of `value` within the budget of `key`: as it is when that fits; else with every
 * string cut (as above) to the longest length that fits; else {"truncated":true,"bytes":N} with
 * the length it had. NULL: out of memory. */
char *annotation_fit_json(const char *key, const json_t *value);
