/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Client-side correlation of core/v1 Events, as client-go's EventCorrelator does it
 * (docs/kube-api.md §5.3): a per-object spam filter (token bucket: burst 25, one token back every
 * 300 s, keyed by involved object uid and event type) and deduplication (an identical event —
 * same object, type, reason and message — is not created again but its count and lastTimestamp
 * are patched). The "(combined from similar events)" message aggregation is not implemented: the
 * agent's messages are few and distinct on purpose.
 *
 * All events of one cache belong to one source (component + host) and one kind of object (our
 * Node), so the keys only carry what varies. Bounded: the least recently used entries are
 * evicted. Pure: time is passed in, no I/O, no logging. */

#include <stdint.h>

#include "util/macro.h"

#define EVENT_CACHE_ENTRIES 256
#define EVENT_CACHE_BUCKETS 16
#define EVENT_SPAM_BURST 25U
#define EVENT_SPAM_REFILL_USEC (300 * USEC_PER_SEC)
#define EVENT_NAME_MAX 253

typedef enum EventAction {
        EVENT_ACTION_DROP,   /* spam filter: no token left for this object and type */
        EVENT_ACTION_CREATE, /* first occurrence: POST a new Event named `name` */
        EVENT_ACTION_PATCH,  /* repeat: PATCH count/lastTimestamp of `name` */
        _EVENT_ACTION_MAX,
        _EVENT_ACTION_INVALID = -EINVAL,
} EventAction;

typedef struct EventDecision {
        EventAction action;
        char name[EVENT_NAME_MAX + 1]; /* metadata.name of the Event */
        unsigned count;                /* value for .count (1 for CREATE) */
        uint64_t first_usec;           /* CLOCK_REALTIME of the first occurrence (.firstTimestamp) */
} EventDecision;

typedef struct EventCache EventCache;

int event_cache_new(EventCache **ret) _warn_unused_result_;
EventCache *event_cache_free(EventCache *c);
DEFINE_CLEANUP_FUNC(EventCache, event_cache_free);

/* Records one occurrence and says what to send. `object_name` is the involved object's name (the
 * Event name is "<object_name>.<hex nanoseconds>" like client-go's); `uid` its uid. `now_usec` is
 * monotonic (spam filter, LRU), `realtime_usec` wall-clock (names, timestamps). */
int event_cache_observe(EventCache *c, const char *object_name, const char *uid, const char *type,
                        const char *reason, const char *message, uint64_t now_usec, uint64_t realtime_usec,
                        EventDecision *ret) _warn_unused_result_;

/* Forgets the Event of an identical occurrence, e.g. after creating it failed for good, so the next
 * occurrence creates a new one instead of patching one that does not exist. */
void event_cache_forget(EventCache *c, const char *name);

const char *event_action_to_string(EventAction a);
