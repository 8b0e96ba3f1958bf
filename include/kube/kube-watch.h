/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* List+watch of ONE object, selected with fieldSelector=metadata.name=<name> (the Node, the OSC
 * Secret), recovering exactly like client-go's reflector (docs/kube-api.md §3.6, §7.4, §11):
 * - first a LIST with resourceVersion=0 (served from the watch cache), after a random start-up
 *   delay so a fleet restarting together does not LIST at once;
 * - then a WATCH from the list's resourceVersion with allowWatchBookmarks=true and timeoutSeconds
 *   uniform in [300,600); bookmarks keep the resourceVersion fresh while nothing changes;
 * - a clean end re-watches at once from the last resourceVersion (no relist); a dropped stream or an
 *   unreachable server re-watches after a backoff step; 429 re-watches after max(backoff,
 *   Retry-After); 410, decode errors, unknown event types and other errors relist after a backoff
 *   step from the last resourceVersion, and if that LIST fails with 410 (or "too large resource
 *   version"), at once with resourceVersion="" (a consistent read);
 * - a watch that delivers no byte for longer than the bookmark interval plus a margin is considered
 *   dead and re-established; every watch is also capped at timeoutSeconds + 30 s;
 * - event lines are limited to WATCH_STREAM_LINE_MAX bytes.
 * Backoff: backoff.h (0.8 s doubling to 30 s, +100 % jitter, reset after 2 min without failures).
 * Timings come from the client's KubeTuning.
 *
 * Runs on the KubeClient's sd_event loop. Logs at debug level only: a failed LIST is the owner's to
 * say (on_synced, with kube_watch_get_list_message()), and a watch that has to stop (its timer cannot
 * be armed: the loop is finishing, or in a forked child) tells on_stopped. Two exceptions, where no
 * owner hears of it: a WATCH event over the line limit (the watch relists by itself) is a warning,
 * once until an event fits again; a stop without on_stopped is an error line instead of going quiet.
 * The KubeWatch borrows the KubeClient, which must outlive it. */

#include <jansson.h>
#include <stdbool.h>

#include "kube/kube-client.h"
#include "kube/kube-path.h"
#include "util/macro.h"

typedef struct KubeWatch KubeWatch;

typedef struct KubeWatchCallbacks {
        /* The object appeared or changed (LIST item, ADDED, MODIFIED); `object` is borrowed. Not
         * called again for an unchanged resourceVersion (e.g. after a relist). */
        void (*on_object)(KubeWatch *w, json_t *object, void *userdata);
        /* The object is gone (DELETED, or a LIST without it); `last` is its last known state. */
        void (*on_deleted)(KubeWatch *w, json_t *last, void *userdata);
        /* After every LIST: completed (0; the object may or may not exist) or failed, or could not
         * be sent (-errno). The first call is the moment to report readiness; retries continue
         * either way. LISTs are rare (start-up, relists), so are these calls. Optional. */
        void (*on_synced)(KubeWatch *w, int error, void *userdata);
        /* The watch stopped and will not try again (-errno: its next step could not be scheduled);
         * the owner decides (restart it, or exit and let systemd restart us). May free the watch.
         * Optional: without it the watch logs the error itself. */
        void (*on_stopped)(KubeWatch *w, int error, void *userdata);
} KubeWatchCallbacks;

typedef struct KubeWatchStats {
        unsigned lists;   /* LIST requests sent */
        unsigned watches; /* WATCH requests sent */
        unsigned events;  /* ADDED/MODIFIED/DELETED/BOOKMARK received */
        int stop_error;   /* why the watch stopped (-errno, as given to on_stopped); 0 while it runs */
} KubeWatchStats;

/* Watches the object `name` of `resource` (in `namespace`, NULL for a cluster-scoped one). -EINVAL
 * if the name or namespace is not valid (kube-path.h). `cb` is copied. */
int kube_watch_new(KubeClient *client, KubeResource resource, const char *namespace, const char *name,
                   const KubeWatchCallbacks *cb, void *userdata, KubeWatch **ret) _warn_unused_result_;
KubeWatch *kube_watch_free(KubeWatch *w);
DEFINE_CLEANUP_FUNC(KubeWatch, kube_watch_free);

/* Starts the first LIST after the start-up delay. A failure is the caller's to handle (it is not a
 * stop: on_stopped is not called, nothing is logged). */
int kube_watch_start(KubeWatch *w) _warn_unused_result_;

/* Drops the current watch and re-watches at once from the last resourceVersion, e.g. because the
 * client certificate changed. No-op while a LIST or a backoff is pending. */
void kube_watch_reconnect(KubeWatch *w);

/* The current object (borrowed, NULL if absent or not listed yet) and the last resourceVersion. */
json_t *kube_watch_get_object(KubeWatch *w);
const char *kube_watch_get_resource_version(KubeWatch *w);
const char *kube_watch_get_name(KubeWatch *w);
/* Why the last LIST failed: the server's message (Status .message), e.g. an authorizer's reason for a
 * 403, or for -EFBIG the size limit the object is over; NULL after a successful LIST or when there is
 * nothing to add to the error. For on_synced. */
const char *kube_watch_get_list_message(KubeWatch *w);
void kube_watch_get_stats(KubeWatch *w, KubeWatchStats *ret);
