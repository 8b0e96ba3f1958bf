/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The reporter owns every write the agent makes about itself to the world: Node metadata patches
 * (labels and annotations, with their keys and patch layout), the InPlaceUpdateAgent condition
 * (strategic merge on /status, written only on change), core/v1 Events, the progress write budget
 * (docs/contract.md §6: every phase change, otherwise at most every 10 s / 10 %), and systemd's STATUS= and
 * READY=1. The executor hands it the core's report actions; the manager hands it the Node as watched
 * (for write-on-change) and the Kubernetes client once there is one.
 *
 * Writes are asynchronous on the client's sd_event loop. A report action completes through its
 * callback once every write it started has finished; failures are logged here once, as warnings. */

#include <jansson.h>
#include <stdbool.h>

#include "core/node-update.h"
#include "core/node-view.h"
#include "kube/kube-client.h"
#include "kube/kube-events.h"
#include "util/macro.h"

typedef struct Reporter Reporter;

#define REPORTER_REASON_OSC_APPLIED "OSCApplied"
#define REPORTER_MESSAGE_OSC_APPLIED "Operating system config has been applied successfully"

/* Completion of a report: 0, or the first -errno of its writes. */
typedef void (*ReporterDone)(int error, void *userdata);

/* `node_name` is copied. */
int reporter_new(const char *node_name, Reporter **ret) _warn_unused_result_;
/* Drops the writes in flight without calling their callbacks. */
Reporter *reporter_free(Reporter *r);
DEFINE_CLEANUP_FUNC(Reporter, reporter_free);

/* The API client and the Event recorder, once a kubeconfig was loaded (both borrowed; they outlive
 * the reporter). Without them writes fail with -ENODEV. */
void reporter_attach(Reporter *r, KubeClient *kube, KubeEvents *events);

/* The Node as last watched (borrowed until the next call; NULL: unknown or absent). */
void reporter_set_node(Reporter *r, const NodeView *node);

/* True for the action types the reporter carries out (plan, progress, result, marker, checksum,
 * Event). */
bool reporter_handles(UpdateActionType t);

/* Carries out one report action of the core. Returns 0 when writes were started (`done` follows),
 * 1 when there was nothing to write (done at once, `done` is not called), -errno when nothing could
 * be started. */
int reporter_report(Reporter *r, const UpdateTransaction *tx, const UpdateAction *a, uint64_t now_usec,
                    ReporterDone done, void *userdata) _warn_unused_result_;

/* Byte progress of the running step: written fire-and-forget when the budget allows
 * (progress_should_write()), with STATUS= `status` (may be NULL). */
void reporter_progress(Reporter *r, const UpdateTransaction *tx, const UpdateAction *a, uint64_t done,
                       uint64_t total, uint64_t now_usec, const char *status);

/* Merge patch of the Node's metadata, e.g. {"labels":{"a":"x","b":null}}; `done` may be NULL. */
int reporter_patch_metadata(Reporter *r, const json_t *metadata_patch, ReporterDone done,
                            void *userdata) _warn_unused_result_;

/* Removes annotation `key` only while it still holds `value` (JSON patch test + remove); a value
 * changed meanwhile fails with -EINVAL (422). Returns like reporter_report(). */
int reporter_remove_annotation(Reporter *r, const char *key, const char *value, ReporterDone done,
                               void *userdata) _warn_unused_result_;

/* Condition `type` of our Node (one node_view_condition() knows, so that its current value is
 * watched), fire and forget: written (strategic merge on /status, by type) only when status, reason
 * or message differ from the watched Node's; -ENODEV while there is no Node. `now_usec` on
 * CLOCK_REALTIME. */
int reporter_set_condition(Reporter *r, const char *type, bool status, const char *reason,
                           const char *message, uint64_t now_usec) _warn_unused_result_;

/* Puts the InternalIP `address` back into the Node's status.addresses (strategic merge on /status,
 * by type, so the other addresses stay; GNA's kubelet health check). Returns like reporter_report();
 * -ENODEV while there is no Node. */
int reporter_set_internal_ip(Reporter *r, const char *address, ReporterDone done,
                             void *userdata) _warn_unused_result_;

/* A core/v1 Event about our Node (deduplicated and rate-limited by kube-events.h). */
int reporter_emit_event(Reporter *r, const char *type, const char *reason, const char *message);
/* The same with the Event's `action` (NULL: none). */
int reporter_emit_event_action(Reporter *r, const char *type, const char *reason, const char *action,
                               const char *message) _warn_unused_result_;

/* STATUS= for systemd, sent only when it changed. */
void reporter_set_status(Reporter *r, const char *fmt, ...) _printf_(2, 3);
/* What the agent waits for besides its current work, appended ("<status>; <note>; ...") to every
 * STATUS= line while set, each in its own slot so one does not clobber another: the system bus being
 * down, the OSC Secret missing. NULL removes it; `note` is copied. */
typedef enum ReporterNote {
        REPORTER_NOTE_BUS,
        REPORTER_NOTE_OSC_SECRET,
        _REPORTER_NOTE_MAX,
} ReporterNote;
void reporter_set_status_note(Reporter *r, ReporterNote which, const char *note);
/* READY=1, once (docs/contract.md §8.14). */
void reporter_notify_ready(Reporter *r);
