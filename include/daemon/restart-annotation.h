/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The Node's restart annotation, end to end (docs/node-protocol.md §5, docs/contract.md §8.7): owns the
 * RestartHandler (duties/restart-handler.h) that carries it out and turns what it reports into the
 * journal lines (MESSAGE_ID_UNIT_RESTARTED, MESSAGE_ID_UNIT_RESTART_FAILED) and SystemDUnitRestart
 * Events, removes the annotation through the reporter (conditionally: a newer value is never lost),
 * and holds the request while the executor says unit restarts must wait, telling it while one is
 * carried out. It lives with the process (daemon/) because it joins the duties' handler to the update
 * run, which no duty may know, and logs with the catalog's MESSAGE_IDs (update/catalog-ids.h).
 *
 * Borrows the loop, the UnitControl, the reporter, the executor and the strings; owns the handler. It
 * is the executor's released listener: free the executor first (which calls back no more). */

#include <systemd/sd-event.h>

#include "core/node-view.h"
#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "update/executor.h"
#include "util/macro.h"

typedef struct RestartAnnotation RestartAnnotation;

typedef struct RestartAnnotationOptions {
        const char *self_unit;       /* restart.selfUnit: restarted last */
        const char *state_path;      /* the handler's record file */
        char *const *replaced_units; /* osc.replacedUnits; NULL: the default */
} RestartAnnotationOptions;

int restart_annotation_new(sd_event *event, UnitControl *units, Reporter *reporter, Executor *executor,
                           const RestartAnnotationOptions *opts,
                           RestartAnnotation **ret) _warn_unused_result_;
/* Cancels what is in flight without calling back. */
RestartAnnotation *restart_annotation_free(RestartAnnotation *a);
DEFINE_CLEANUP_FUNC(RestartAnnotation, restart_annotation_free);

/* The Node as it is now (NULL: unknown or absent): its annotation is handed on unless the executor
 * blocks unit restarts. */
void restart_annotation_sync(RestartAnnotation *a, const NodeView *node);
/* The executor may have stopped blocking: the last value seen is handed on now. Called by the
 * executor itself at the end of a drift round (executor_set_released_callback()). */
void restart_annotation_retry(RestartAnnotation *a);
