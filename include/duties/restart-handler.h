/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Carries out the Node annotation worker.gardener.cloud/restart-systemd-services (docs/node-protocol.md §5,
 * docs/contract.md §5, §8.7, §9.12): parses its value (restart-request.h), reports rejected entries (one
 * message each, or one aggregate for many), asks for the annotation to be removed, and only once it is gone
 * restarts the valid units one at a time in request order through UnitControl, the agent's own unit (or a
 * unit it replaces) last. Removing first is what keeps a restart that reaches the agent from finding the
 * annotation again and looping; upstream restarts first and removes after, which only works because it never
 * restarts anything containing itself.
 *
 * It owns a small record of what it did for the current annotation value (value, units started,
 * whether the annotation was removed, whether all restarts were started), persisted atomically to
 * `state_path` before every restart. With it, a crash or a restart of the agent never restarts a
 * unit twice for one annotation value (at most once: a unit whose restart was started is not
 * started again), the restarts still due after a crash are resumed, and a stale view of the Node
 * that still shows an already removed value is not processed again. A restart whose record cannot be
 * saved is not started: the handler stays busy and tries again with the removal's backoff. The record
 * lives in its own file, not in state.json, because it is independent of update transactions
 * (state.json holds exactly one of those).
 *
 * Runs on the sd_event loop of the UnitControl. Logs only a failure to save the record (once, until
 * a save succeeds); everything else worth reporting comes out through the callbacks
 * (daemon/restart-annotation.h turns them into Events, Node patches and journal lines). */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "systemd/unit-control.h"
#include "util/macro.h"

#define RESTART_HANDLER_STATE_MAX (64 * 1024) /* limit on the record file we read back */
#define RESTART_HANDLER_RETRY_MIN_USEC (1 * USEC_PER_SEC)
#define RESTART_HANDLER_RETRY_MAX_USEC (60 * USEC_PER_SEC)

typedef struct RestartHandlerCallbacks {
        /* One call per valid unit, in order (the self unit only if the agent survives its restart).
         * `ok` false: `detail` is the D-Bus error, the job result or the timeout. */
        void (*on_unit_result)(const char *unit, bool ok, const char *detail, void *userdata);
        /* One call per rejected entry; `entry` is escaped and cut for display. Message format
         * (docs/contract.md §8.7): rejected unit name "<entry>": <why> (restart_rejected_message()). With
         * more than RESTART_REQUEST_REJECTED_EACH_MAX rejections, or for a value over the size
         * limit, a single call with `entry` NULL and `why` the complete message. */
        void (*on_rejected)(const char *entry, const char *why, void *userdata);
        /* Remove the annotation if it still has `value` (a conditional patch, so a newer value is
         * never lost). Report completion with restart_handler_annotation_removed(), now or later;
         * -ENOENT/-ESTALE there (annotation gone or changed) count as done. Return < 0 if the request
         * could not even be started; it is retried with backoff like a failed removal. */
        int (*remove_annotation)(const char *value, void *userdata);
        /* Optional: everything for `value` is done (the annotation is gone, all units handled).
         * `value` is for display: escaped and cut like a rejected entry. */
        void (*on_finished)(const char *value, void *userdata);
} RestartHandlerCallbacks;

typedef struct RestartHandler RestartHandler;

/* `uc` and `event` are borrowed and must outlive the handler. `self_unit` (canonical unit name, may
 * be NULL) is restarted last; `state_path` (may be NULL: memory only) is the record file, e.g.
 * "<stateDirectory>/restart-request.json"; an existing record is loaded. `cb` is copied. */
int restart_handler_new(sd_event *event, UnitControl *uc, const char *self_unit, const char *state_path,
                        const RestartHandlerCallbacks *cb, void *userdata,
                        RestartHandler **ret) _warn_unused_result_;
/* Cancels what is in flight without calling back. */
RestartHandler *restart_handler_free(RestartHandler *h);
DEFINE_CLEANUP_FUNC(RestartHandler, restart_handler_free);

/* The annotation's value as currently seen on the Node: NULL or blank when absent. Call it on every
 * Node update; repeated values are cheap no-ops. A new value arriving while another is processed is
 * kept (latest wins) and handled afterwards. Returns 0, or -ENOMEM. */
int restart_handler_submit(RestartHandler *h, const char *value) _warn_unused_result_;

/* Completion of RestartHandlerCallbacks.remove_annotation(). */
void restart_handler_annotation_removed(RestartHandler *h, int error);

/* The units whose names also mean the agent itself (docs/contract.md §9.4, osc.replacedUnits; borrowed,
 * NULL-terminated, must outlive the handler). Default: restart_request_replaced_units_default. */
void restart_handler_set_replaced_units(RestartHandler *h, const char *const *units);

/* Backoff between failed annotation removals, and between failed saves of the record: doubles from
 * min to max (defaults RESTART_HANDLER_RETRY_{MIN,MAX}_USEC). For tests, and for a Manager that wants
 * its own policy. */
void restart_handler_set_retry_interval(RestartHandler *h, uint64_t min_usec, uint64_t max_usec);

/* True while restarting, removing, or waiting to retry a removal or a save. */
bool restart_handler_is_busy(const RestartHandler *h);
