/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "core/restart-request.h"
#include "daemon/restart-annotation.h"
#include "duties/restart-handler.h"
#include "update/catalog-ids.h"
#include "util/log.h"
#include "util/string-util.h"

struct RestartAnnotation {
        RestartHandler *handler; /* owned */
        Reporter *reporter;      /* borrowed */
        Executor *executor;      /* borrowed */
        char *value;             /* owned: the annotation's value last seen; NULL: none */
};

static void on_unit_result(const char *unit, bool ok, const char *detail, void *userdata) {
        RestartAnnotation *a = userdata;
        _cleanup_free_ char *msg = restart_result_message(unit, ok, detail);

        if (ok)
                (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_UNIT_RESTARTED, "%s", msg ? msg : unit);
        else
                (void) log_struct_id(LOG_WARNING, 0, MESSAGE_ID_UNIT_RESTART_FAILED, "%s", msg ? msg : unit);
        (void) reporter_emit_event(a->reporter, ok ? "Normal" : "Warning", "SystemDUnitRestart",
                                   msg ? msg : unit);
}

static void on_rejected(const char *entry, const char *why, void *userdata) {
        RestartAnnotation *a = userdata;
        RestartRejected rej = { .entry = (char *) entry, .why = (char *) why };
        _cleanup_free_ char *msg = restart_rejected_message(&rej);

        log_warning("%s", msg ? msg : entry);
        (void) reporter_emit_event(a->reporter, "Warning", "SystemDUnitRestart", msg ? msg : entry);
}

static void on_annotation_removed(int error, void *userdata) {
        RestartAnnotation *a = userdata;

        /* 422 from the "test" op: the value changed meanwhile, a newer request is not ours to drop. */
        restart_handler_annotation_removed(a->handler, error == -EINVAL ? -ESTALE : error);
}

static int remove_annotation(const char *value, void *userdata) {
        RestartAnnotation *a = userdata;
        int r;

        /* Conditional: removes the annotation only if it still holds the value we handled. */
        r = reporter_remove_annotation(a->reporter, NODE_ANNOTATION_RESTART, value, on_annotation_removed,
                                       a);
        return r > 0 ? -EIO : r;
}

static void on_finished(const char *value, void *userdata) {
        RestartAnnotation *a = userdata;

        log_info("Handled restart request \"%s\".", value);
        executor_set_restarts_busy(a->executor, false);
}

/* A drift round held the executor: a request that waited for it goes now. */
static void on_released(void *userdata) {
        restart_annotation_retry(userdata);
}

int restart_annotation_new(sd_event *event, UnitControl *units, Reporter *reporter, Executor *executor,
                           const RestartAnnotationOptions *opts, RestartAnnotation **ret) {
        static const RestartHandlerCallbacks callbacks = {
                .on_unit_result = on_unit_result,
                .on_rejected = on_rejected,
                .remove_annotation = remove_annotation,
                .on_finished = on_finished,
        };
        _cleanup_(restart_annotation_freep) RestartAnnotation *a = NULL;
        int r;

        assert(event && units && reporter && executor && opts && ret);

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->reporter = reporter;
        a->executor = executor;
        r = restart_handler_new(event, units, opts->self_unit, opts->state_path, &callbacks, a, &a->handler);
        if (r < 0)
                return r;
        if (opts->replaced_units)
                restart_handler_set_replaced_units(a->handler, (const char *const *) opts->replaced_units);
        executor_set_released_callback(executor, on_released, a);
        *ret = TAKE_PTR(a);
        return 0;
}

RestartAnnotation *restart_annotation_free(RestartAnnotation *a) {
        if (!a)
                return NULL;
        restart_handler_free(a->handler);
        free(a->value);
        free(a);
        return NULL;
}

void restart_annotation_retry(RestartAnnotation *a) {
        if (!a)
                return;
        /* Units are not restarted behind the back of an update that restarts units itself. */
        if (executor_blocks_unit_restarts(a->executor))
                return;
        if (restart_handler_submit(a->handler, a->value) < 0)
                log_oom();
        executor_set_restarts_busy(a->executor, restart_handler_is_busy(a->handler));
}

void restart_annotation_sync(RestartAnnotation *a, const NodeView *node) {
        if (!a)
                return;
        if (free_and_strdup(&a->value, node ? node->restart_services : NULL) < 0) {
                log_oom();
                return;
        }
        restart_annotation_retry(a);
}
