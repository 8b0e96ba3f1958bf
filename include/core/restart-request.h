/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Parses the value of the Node annotation worker.gardener.cloud/restart-systemd-services (GNP §5,
 * CONTRACT §8.7) into what the agent will do: the valid units in request order, each once, the
 * agent's own unit moved last, and every rejected entry with the reason. Pure: no I/O, no logging,
 * no event loop.
 *
 * Differences from upstream, on purpose: entries are trimmed; duplicates (also "kubelet" vs
 * "kubelet.service") are restarted once; names are validated (unit-name.h) instead of handed to
 * systemd verbatim; a suffix like ".timer" is kept rather than turned into "foo.timer.service". */

#include <stdbool.h>
#include <stddef.h>

#include "util/macro.h"

/* Limits on untrusted input. A longer value is rejected as a whole; more units than the limit are
 * rejected one by one; rejections beyond the limit are summarised in one final record, so a hostile
 * annotation cannot turn into thousands of Events. */
#define RESTART_REQUEST_VALUE_MAX 16384
#define RESTART_REQUEST_UNITS_MAX 64         /* not counting the self unit */
#define RESTART_REQUEST_REJECTED_MAX 32
/* Longest rejected entry quoted back (after escaping); longer ones end in "...". */
#define RESTART_REQUEST_ENTRY_DISPLAY_MAX 128

typedef struct RestartRejected {
        char *entry;    /* owned: the trimmed entry, control characters, '"' and '\' escaped, capped */
        char *why;      /* owned: human reason, e.g. "contains ';'" */
} RestartRejected;

typedef struct RestartRequest {
        char **units;                   /* owned, NULL-terminated: canonical names, self unit last */
        size_t n_units;
        RestartRejected *rejected;      /* owned array, n_rejected entries, in request order */
        size_t n_rejected;
        bool has_self;                  /* self_unit was requested; it is units[n_units - 1] */
} RestartRequest;

/* Parses `value` (NULL or blank: nothing to do, no rejections). `self_unit` (canonical, may be
 * NULL) is the agent's own unit. Fails only with -ENOMEM; bad entries end up in ->rejected. */
int restart_request_parse(const char *value, const char *self_unit, RestartRequest **ret);
RestartRequest *restart_request_free(RestartRequest *r);
DEFINE_CLEANUP_FUNC(RestartRequest, restart_request_free);

/* "rejected unit name \"<entry>\": <why>" (CONTRACT §8.7), newly allocated; NULL on OOM. */
char *restart_rejected_message(const RestartRejected *r);

/* The note of the per-unit SystemDUnitRestart Event, worded as upstream (GNP §5):
 * "processed restart of unit <unit>" or "processed restart of unit <unit> failed with error <detail>".
 * Newly allocated; NULL on OOM. */
char *restart_result_message(const char *unit, bool ok, const char *detail);
