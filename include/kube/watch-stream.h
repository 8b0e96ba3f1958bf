/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Decoding of a Kubernetes watch response body (docs/kube-api.md §3.4, §3.5, §11) and the reflector's
 * rules for what to do when a watch ends (§3.6). The body is a byte stream of compact JSON objects
 * {"type":…,"object":{…}}, each terminated by '\n'; one network read may carry several events or a
 * fraction of one, so bytes are buffered and cut at '\n' (a raw newline cannot occur inside JSON).
 *
 * Pure: no I/O, no logging, no event loop. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

/* Longest accepted event line. A Node with many labels and managedFields is tens of KiB; this
 * leaves two orders of magnitude of room while bounding memory against a broken server. */
#define WATCH_STREAM_LINE_MAX (4U * 1024U * 1024U)

typedef enum WatchEventType {
        WATCH_EVENT_ADDED,
        WATCH_EVENT_MODIFIED,
        WATCH_EVENT_DELETED,
        WATCH_EVENT_BOOKMARK,
        WATCH_EVENT_ERROR,
        _WATCH_EVENT_TYPE_MAX,
        _WATCH_EVENT_TYPE_INVALID = -EINVAL,
} WatchEventType;

const char *watch_event_type_to_string(WatchEventType t);
WatchEventType watch_event_type_from_string(const char *s);

/* Called once per decoded event. `object` is borrowed for the duration of the call (take a
 * reference to keep it). Return < 0 to stop decoding; watch_stream_feed() then returns that. */
typedef int (*WatchStreamCallback)(WatchEventType type, json_t *object, void *userdata);

typedef struct WatchStream WatchStream;

/* max_line 0 = WATCH_STREAM_LINE_MAX. */
int watch_stream_new(size_t max_line, WatchStreamCallback cb, void *userdata,
                     WatchStream **ret) _warn_unused_result_;
WatchStream *watch_stream_free(WatchStream *s);
DEFINE_CLEANUP_FUNC(WatchStream, watch_stream_free);

/* Appends bytes and dispatches every complete line. Empty lines are skipped. Errors:
 * -EMSGSIZE when a line exceeds the limit, -EBADMSG for a line that is not a JSON object with a
 * string "type" and an object "object", or whose type is unknown; or the callback's error. After an
 * error the stream is unusable until watch_stream_reset(). */
int watch_stream_feed(WatchStream *s, const void *data, size_t size) _warn_unused_result_;

/* Drops buffered bytes (a new watch response starts). */
void watch_stream_reset(WatchStream *s);

/* Bytes of an incomplete trailing line: non-zero at the end of a response means the last event was
 * truncated. */
size_t watch_stream_pending(const WatchStream *s);

/* Status objects (docs/kube-api.md §1): "code" (0 if absent), "reason" (NULL if absent), and whether a
 * cause says ResourceVersionTooLarge (504 from a watch or list for an RV the server hasn't seen). */
int kube_status_code(const json_t *status);
const char *kube_status_reason(const json_t *status);
bool kube_status_is_too_large_rv(const json_t *status);

/* How a watch ended; the input of watch_end_decide(). */
typedef enum WatchEndKind {
        WATCH_END_CLEAN,       /* 200 and the server closed the stream properly */
        WATCH_END_DROPPED,     /* transport error after 200: reset, truncated, silent, hard cap */
        WATCH_END_ERROR_EVENT, /* an ERROR event; `code` is its Status code */
        WATCH_END_DECODE,      /* undecodable line, unknown type, oversized line */
        WATCH_END_HTTP,        /* non-200 answer to the watch request; `code` is the HTTP status */
        WATCH_END_CONNECT,     /* no answer at all: refused, unreachable, TLS failure, timeout */
        _WATCH_END_KIND_MAX,
        _WATCH_END_KIND_INVALID = -EINVAL,
} WatchEndKind;

typedef enum WatchNext {
        WATCH_NEXT_REWATCH,         /* re-watch from the last RV at once */
        WATCH_NEXT_REWATCH_BACKOFF, /* re-watch from the last RV after a backoff step */
        WATCH_NEXT_RELIST_BACKOFF,  /* LIST again (from the last RV) after a backoff step */
        _WATCH_NEXT_MAX,
        _WATCH_NEXT_INVALID = -EINVAL,
} WatchNext;

const char *watch_end_kind_to_string(WatchEndKind k);
const char *watch_next_to_string(WatchNext n);

/* A watch that lasted less than this and delivered no event counts as "very short". */
#define WATCH_SHORT_USEC (1 * USEC_PER_SEC)

/* The reflector's decision (docs/kube-api.md §3.6, §11):
 * clean end → re-watch at once, unless very short with no events → relist after backoff;
 * dropped connection → re-watch after backoff (a truncated last event was never applied, so the
 *   last RV is still right); 429 (ERROR event or HTTP) or connection-level failures → re-watch
 *   after backoff; 410 and every other error, decode errors included → relist after backoff.
 * `n_events` counts ADDED/MODIFIED/DELETED/BOOKMARK events of this watch. */
WatchNext watch_end_decide(WatchEndKind kind, int code, unsigned n_events, uint64_t duration_usec);
