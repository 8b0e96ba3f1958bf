/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Go's time.Duration text form, both ways, for the values gardener writes and reads: the Node
 * annotation node-agent.gardener.cloud/reconciliation-delay (parsed as time.ParseDuration does) and
 * the durations in SystemdUnitsReady messages (formatted as Duration.Truncate(time.Second).String()).
 * Pure. */

#include <stddef.h>
#include <stdint.h>

#define GO_DURATION_STR_MAX 32

/* "1h2m3.5s", "300ms", "1.5h", "0", "2us", "2µs", "10ns" (rounded down to microseconds). A leading
 * '+' is accepted; a negative duration is -ERANGE (a delay cannot be negative), as is one that does
 * not fit in uint64 microseconds. Empty, a missing unit or an unknown unit: -EINVAL. */
int go_duration_parse(const char *s, uint64_t *ret_usec);

/* GNA's delayer (docs/node-protocol.md §2.1 "Watch scope"): the delay for the next OSC Secret update from
 * the Node annotation node-agent.gardener.cloud/reconciliation-delay. Absent (NULL) or unparseable: the
 * previous delay stays (returns -ENODATA / -EINVAL, for a log line); else 0 and *delay_usec set. */
int reconciliation_delay_update(const char *annotation, uint64_t *delay_usec);

/* Whole seconds as Go prints them: "0s", "12s", "5m0s", "1h2m3s". Returns buf. */
char *go_duration_format_seconds(char *buf, size_t size, uint64_t usec);
