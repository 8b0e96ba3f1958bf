/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Parses the value of the Node annotation worker.gardener.cloud/restart-systemd-services
 * (docs/node-protocol.md §5, docs/contract.md §8.7, §9.12) into what the agent will do: the valid units in
 * request order, each once, the agent's own unit moved last, and every rejected entry with the reason. Pure:
 * no I/O, no logging, no event loop.
 *
 * Differences from upstream, on purpose: entries are trimmed; duplicates (also "kubelet" vs
 * "kubelet.service") are restarted once; names are validated (unit-name.h) instead of handed to
 * systemd verbatim; a suffix like ".timer" is kept rather than turned into "foo.timer.service".
 * Upstream appends ".service" to everything, so it only ever restarts services; we also allow
 * sockets and timers (docs/contract.md §9.12). Every other unit type is rejected: restarting a slice
 * (system.slice) or a target stops the agent, kubelet and containerd with it, and a scope, mount,
 * device, swap, path or automount is nothing a user needs restarted through a Node annotation.
 * An entry naming the agent's own unit or one of the units it replaces (docs/contract.md §9.4, default
 * gardener-node-agent.service) means the agent itself: restarted once, last.
 *
 * Untrusted text quoted back (Event messages, journal lines) is escaped ('"', '\\', control and
 * non-ASCII bytes as \\xNN) and cut at RESTART_REQUEST_ENTRY_DISPLAY_MAX bytes followed by "…"; a
 * whole message is at most RESTART_REQUEST_MESSAGE_MAX bytes. */

#include <stdbool.h>
#include <stddef.h>

#include "util/macro.h"

/* Limits on untrusted input. A longer value is rejected as a whole; more units than the limit are
 * rejected one by one; only the first RESTART_REQUEST_REJECTED_MAX rejections are kept (all are
 * counted), so a hostile annotation cannot turn into thousands of Events or log lines. */
#define RESTART_REQUEST_VALUE_MAX 16384
#define RESTART_REQUEST_UNITS_MAX 64 /* not counting the self unit */
#define RESTART_REQUEST_REJECTED_MAX 32
/* Longest quoted entry (after escaping), in bytes; a longer one is cut there and ends in "…". */
#define RESTART_REQUEST_ENTRY_DISPLAY_MAX 253
/* Up to this many rejections are reported one by one (docs/contract.md §8.7 message each); more are
 * aggregated into one message, as kubelet's event correlator does, so that the Event spam filter
 * and queue never drop them silently. */
#define RESTART_REQUEST_REJECTED_EACH_MAX 3
/* Bound of every message built here (below the Event message limit). */
#define RESTART_REQUEST_MESSAGE_MAX 1000

/* The units the agent replaces when no other list is configured (docs/contract.md §9.4). */
extern const char *const restart_request_replaced_units_default[];

typedef struct RestartRejected {
        char *entry; /* owned: the trimmed entry for display (see above); NULL when `why` is the
                      * whole message, e.g. for a value over RESTART_REQUEST_VALUE_MAX */
        char *why;   /* owned: human reason, e.g. "contains ';'" */
} RestartRejected;

typedef struct RestartRequest {
        char **units; /* owned, NULL-terminated: canonical names, self unit last */
        size_t n_units;
        RestartRejected *rejected; /* owned array, n_rejected entries, in request order */
        size_t n_rejected;         /* ≤ RESTART_REQUEST_REJECTED_MAX */
        size_t n_rejected_total;   /* all rejections, also those not kept */
        bool has_self;             /* self_unit was requested; it is units[n_units - 1] */
} RestartRequest;

/* Parses `value` (NULL or blank: nothing to do, no rejections). `self_unit` (canonical, may be
 * NULL) is the agent's own unit; `replaced_units` (NULL-terminated canonical names, may be NULL)
 * are treated as the self unit, or rejected when there is none. Fails only with -ENOMEM; bad entries end up
 * in ->rejected. */
int restart_request_parse(const char *value, const char *self_unit, const char *const *replaced_units,
                          RestartRequest **ret);
RestartRequest *restart_request_free(RestartRequest *r);
DEFINE_CLEANUP_FUNC(RestartRequest, restart_request_free);

/* "rejected unit name \"<entry>\": <why>" (docs/contract.md §8.7), or `why` alone when entry is NULL;
 * newly allocated; NULL on OOM. */
char *restart_rejected_message(const RestartRejected *r);

/* When more than RESTART_REQUEST_REJECTED_EACH_MAX entries were rejected: one message for all of
 * them, "rejected <N> unit names: \"a\" (<why>), \"b\" (<why>), … (+<M> more)", at most
 * RESTART_REQUEST_MESSAGE_MAX bytes, in *ret. Otherwise *ret = NULL: report each rejection.
 * Returns 0 or -ENOMEM. */
int restart_request_rejected_summary(const RestartRequest *r, char **ret);

/* `s` escaped and cut for quoting in a message or a journal line, as described above. Newly
 * allocated; NULL on OOM. */
char *restart_request_display(const char *s);

/* The note of the per-unit SystemDUnitRestart Event, worded as upstream (docs/node-protocol.md §5):
 * "processed restart of unit <unit>" or "processed restart of unit <unit> failed with error <detail>".
 * Newly allocated; NULL on OOM. */
char *restart_result_message(const char *unit, bool ok, const char *detail);
