/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#include "apply/osc-state.h"
#include "core/unit-guard.h"
#include "identity/identity.h"
#include "identity/kubelet-bootstrap.h"
#include "kubelet/kubelet-health.h"
#include "osc-runner-internal.h"
#include "util/fileio.h"
#include "util/in-root.h"
#include "util/log.h"

#define LAST_APPLIED_MAX (16 * 1024 * 1024)
/* A work list that cannot be computed for a reason that can go away (a full or unreadable state
 * directory) is computed again after 1 s, doubling up to 5 min. */
#define PREPARE_RETRY_FIRST_USEC USEC_PER_SEC
#define PREPARE_RETRY_MAX_USEC (300 * USEC_PER_SEC)
/* The whole plan goes to the journal in lines of about this many bytes. */
#define PLAN_LOG_LINE_MAX 4000
#define PERSIST_FAILED "cannot persist the remaining work"

static void prepared_clear(OscRunner *r) {
        r->checksum = mfree(r->checksum);
        r->yaml = mfree(r->yaml);
        r->yaml_size = 0;
        r->model = osc_model_free(r->model);
        r->committed = false;
        r->changes = osc_changes_free(r->changes);
        json_decref(r->plan);
        r->plan = NULL;
        r->error = mfree(r->error);
        r->error_code = _UPDATE_FAILURE_INVALID;
        r->retry_usec = 0;
        r->failures = 0;
}

void osc_runner_op_clear(OscRunner *r) {
        switch (r->op.kind) {
        case OSC_OP_STEP:
                sd_event_source_disable_unref(r->op.step);
                break;
        case OSC_OP_REACH:
                unit_job_cancel(r->op.reach);
                break;
        case OSC_OP_GUARD:
                osc_guard_free(r->op.guard);
                break;
        case OSC_OP_APPLY:
                osc_applier_free(r->op.applier);
                break;
        case OSC_OP_SECRET:
                kube_request_free(r->op.secret);
                break;
        case OSC_OP_KUBELET_HEALTH:
        case OSC_OP_REGISTRY_PROBE:
                http_probe_free(r->op.probe);
                break;
        case OSC_OP_PULL:
                file_stage_free(r->op.pull);
                break;
        case OSC_OP_NONE:
                break;
        }
        r->op = (OscOp) { .kind = OSC_OP_NONE };
}

static void run_clear(OscRunner *r) {
        osc_runner_op_clear(r);
        r->running = NULL;
        r->repairing = false;
        r->refused = mfree(r->refused);
        osc_masked_done(&r->masked);
        r->item = r->probe_host = 0;
        r->step_error = 0;
        r->step_detail = mfree(r->step_detail);
        r->done = NULL;
        r->userdata = NULL;
}

/* ---- preparing ----------------------------------------------------------------------------------- */

/* Whether osc.yaml is byte for byte the last-applied one: then there is nothing left to do for it. */
static bool is_last_applied(const OscRunner *r) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t size;

        if (asprintf(&path, "%s/%s", r->deps.config->state_directory, OSC_STATE_LAST_APPLIED) < 0)
                return false;
        if (read_full_file(path, LAST_APPLIED_MAX, &data, &size) < 0)
                return false;
        return size == r->yaml_size && memcmp(data, r->yaml, size) == 0;
}

static const char *baseline_to_string(OscBaseline b) {
        switch (b) {
        case OSC_BASELINE_RESUMED:
                return "resuming the saved remaining work";
        case OSC_BASELINE_LAST_APPLIED:
                return "diffed against the last-applied OSC";
        case OSC_BASELINE_HANDOVER:
                return "diffed against gardener-node-agent's last-applied OSC";
        default:
                return "first apply";
        }
}

static void warning_event(OscRunner *r, const char *reason, const char *message) {
        if (r->deps.reporter)
                (void) reporter_emit_event(r->deps.reporter, "Warning", reason, message);
}

static void prepare_failed(OscRunner *r, int error, char *message, uint64_t now_usec) {
        /* A bad desired state (undecodable, an unknown codec, a bad path) cannot be fixed by retrying,
         * nor can a file among the agent's own (-EPERM, core/osc-protected: FileApplyFailed naming it);
         * a state directory we cannot write can: computed again with back-off. */
        bool invalid = error == -EINVAL || error == -EBADMSG || error == -EFBIG || error == -ENODATA;
        bool final = invalid || error == -EPERM;

        r->error_code = invalid ? UPDATE_FAILURE_INVALID_DESIRED_STATE : UPDATE_FAILURE_FILE_APPLY_FAILED;
        r->retry_usec = final ?
                0 :
                now_usec + MIN(PREPARE_RETRY_FIRST_USEC << MIN(r->failures, 16u), PREPARE_RETRY_MAX_USEC);
        r->failures = final ? 0 : r->failures + 1;
        r->error = message;
        if (!r->error &&
            asprintf(&r->error, "cannot compute the changes of the OSC: %s", strerror(-error)) < 0)
                r->error = NULL;
        if (r->error && log_once_check(&r->logged_error, 0, r->error)) {
                log_error("OSC %s: %s%s", strempty(r->checksum), r->error,
                          final ? "" : " (retrying with back-off)");
                if (!final)
                        warning_event(r, "OSCChangesNotComputed", r->error);
        }
}

/* The whole plan in the journal (the Node gets a summary): the remaining items, "; "-separated, in
 * lines of about PLAN_LOG_LINE_MAX bytes. */
static void log_plan(const OscRunner *r) {
        const OscChanges *c = r->changes;
        size_t total = osc_changes_remaining(c), first = 0, n = 0, len = 0;
        _cleanup_free_ char *line = NULL;

        for (size_t i = 0; i < c->n_items; i++) {
                _cleanup_free_ char *d = NULL;
                char *grown;

                if (c->items[i].done || osc_work_describe(&c->items[i], &d) < 0)
                        continue;
                grown = realloc(line, len + strlen(d) + 3);
                if (!grown)
                        return;
                line = grown;
                len += (size_t) sprintf(line + len, "%s%s", n > 0 ? "; " : "", d);
                n++;
                if (len < PLAN_LOG_LINE_MAX)
                        continue;
                log_info("OSC %s plan, items %zu-%zu of %zu: %s", r->checksum, first + 1, first + n, total,
                         line);
                first += n;
                n = len = 0;
        }
        if (n > 0)
                log_info("OSC %s plan, items %zu-%zu of %zu: %s", r->checksum, first + 1, first + n, total,
                         line);
}

/* The bytes that become the last-applied OSC: the executor's OscDesired may be gone by then. */
static char *yaml_copy(const OscDesired *osc) {
        char *p;

        if (!osc->yaml)
                return NULL;
        p = malloc(osc->yaml_size + 1);
        if (!p)
                return NULL;
        memcpy(p, osc->yaml, osc->yaml_size);
        p[osc->yaml_size] = 0;
        return p;
}

static void prepare_now(OscRunner *r, const OscDesired *osc, const char *os_version, uint64_t now_usec) {
        const Config *c = r->deps.config;
        _cleanup_free_ char *error = NULL, *warning = NULL;
        OscBaseline baseline = OSC_BASELINE_NONE;
        int k;

        /* The model is held by reference (its address cannot be reused meanwhile): the same model is
         * the same delivery, a retry; another one is a new delivery of the OSC. */
        if (!streq_ptr(r->checksum, osc->checksum) || osc->model != r->model) {
                prepared_clear(r);
                r->yaml = yaml_copy(osc);
                r->yaml_size = osc->yaml_size;
                r->model = osc_model_ref(osc->model);
                r->checksum = strdup(osc->checksum);
                if (!r->checksum || !r->yaml)
                        return prepare_failed(r, -ENOMEM, NULL, now_usec);
        } else
                r->error = mfree(r->error); /* a retry of the same OSC */

        if (is_last_applied(r)) {
                r->committed = true;
                r->yaml = mfree(r->yaml);
                return;
        }
        k = osc_state_prepare(
                &(OscPrepareInput) {
                        .state_directory = c->state_directory,
                        .root_directory = c->osc.root_directory,
                        .model = r->model,
                        .yaml = r->yaml,
                        .size = r->yaml_size,
                        .checksum = r->checksum,
                        .model_options = r->model_options,
                        .current_os_version = os_version,
                        .replaced_units = c->osc.replaced_units,
                        .protected = &r->own_files,
                        .self_unit = c->restart.self_unit,
                },
                &r->changes, &baseline, &warning, &error);
        if (warning) {
                /* A corrupt bookkeeping file was moved aside: the work starts over, and says so. */
                log_warning("OSC %s: %s.", r->checksum, warning);
                warning_event(r, "CorruptStateFile", warning);
        }
        if (k < 0)
                return prepare_failed(r, k, TAKE_PTR(error), now_usec);
        r->plan = osc_changes_plan_json(r->changes, OSC_PLAN_SUMMARY_BUDGET);
        if (!r->plan)
                return prepare_failed(r, -ENOMEM, NULL, now_usec);
        log_once_clear(&r->logged_error);
        r->failures = 0;
        r->retry_usec = 0;
        log_info("OSC %s: %zu change(s) to apply (%s)%s; the whole plan is in %s/%s.", r->checksum,
                 osc_changes_remaining(r->changes), baseline_to_string(baseline),
                 osc_in_place_flags_any(&r->changes->in_place) ?
                         "; in-place changes wait for ReadyForUpdate" :
                         "",
                 c->state_directory, OSC_STATE_PLAN);
        log_plan(r);
        for (size_t i = 0; i < r->changes->n_items; i++)
                if (r->changes->items[i].kind == OSC_WORK_SKIP_FILE && !r->changes->items[i].done)
                        log_notice(
                                "OSC %s: skipping file %s: its content has neither inline, secretRef nor imageRef "
                                "(as gardener-node-agent does).",
                                r->checksum, r->changes->items[i].file.path);
}

static bool restarts_unit(const OscChanges *c, const char *unit) {
        for (size_t i = 0; c && i < c->n_items; i++) {
                const OscWork *w = &c->items[i];

                if (!w->done && w->kind == OSC_WORK_UNIT_COMMAND && w->command != OSC_UNIT_COMMAND_STOP &&
                    streq_ptr(w->name, unit))
                        return true;
        }
        return false;
}

void osc_runner_prepare(OscRunner *r, const OscDesired *osc, const NodeView *node, const char *os_version,
                        uint64_t now_usec, OscWorkView *ret) {
        assert(r && ret);

        *ret = (OscWorkView) { .error_code = _UPDATE_FAILURE_INVALID };
        /* A refused OSC has nothing to prepare: the decider fails it (osc->refused). Without a Node
         * (a fresh node's first OSC) there is no checksum on it to compare. */
        if (!osc || osc->refused || isempty(osc->checksum))
                return;
        /* The Node already says this OSC is applied (docs/node-protocol.md §2.2): the decider does nothing
         * with it. */
        if (node && streq_ptr(node->applied_checksum, osc->checksum))
                return;
        assert(!r->done); /* the executor never decides while a run is in flight */
        if (!streq_ptr(r->checksum, osc->checksum) || (r->error && now_usec >= r->retry_usec))
                prepare_now(r, osc, os_version, now_usec);

        if (r->error) {
                ret->error = r->error;
                ret->error_code = r->error_code;
                ret->retry_usec = r->retry_usec;
                return;
        }
        if (r->committed || !r->changes)
                return;
        ret->pending = true;
        ret->gated = osc_in_place_flags_any(&r->changes->in_place);
        ret->restarts_kubelet = restarts_unit(r->changes, r->deps.config->kubelet.unit);
        ret->plan = r->plan;
}

/* ---- the run ------------------------------------------------------------------------------------------
 *
 * The runner walks the work list: a stretch of items the applier does itself (files, units over
 * D-Bus) runs as one OscApplier, which stops at the next item that needs the world outside the node;
 * that one the runner does itself as its operation in flight, marks done and persists like any item,
 * and goes on. Every step after the start comes from the loop (a callback of the operation that
 * ended), so `done` never runs inside osc_runner_apply()/osc_runner_repair(). */

static void run_next(OscRunner *r);

/* Once per run, however many of a masked unit's items it met (core/osc-masked.h); the item is done
 * all the same (a mask is the admin's decision, not a failure to retry). */
static void log_masked(const OscRunner *r) {
        _cleanup_free_ char *text = NULL;

        if (osc_masked_describe(&r->masked, &text) < 0)
                log_oom();
        else if (text)
                log_warning(
                        "%s%s: left masked (a symlink to /dev/null), unmask for the OSC to manage it: %s.",
                        r->repairing ? "The drift repair" : "OSC ",
                        r->repairing ? "" : strempty(r->checksum), text);
}

static void finish(OscRunner *r, int error, UpdateFailureCode code, const char *message) {
        _cleanup_free_ char *refused = TAKE_PTR(r->refused);
        OscRunnerDone done = r->done;
        void *userdata = r->userdata;

        log_masked(r);
        run_clear(r);
        /* A repair that left refused units out says so with its success (osc_runner_repair()). */
        done(r, error, code, error >= 0 ? refused : message, userdata);
}

/* Items `indices[0..n)` are done: persisted now (a drift repair persists nothing; the next round sees
 * what is left). */
static int persist_done(OscRunner *r, const size_t *indices, size_t n) {
        const char *self = r->deps.config->restart.self_unit;
        int k;

        if (r->repairing)
                return 0;
        k = osc_state_save_done(r->deps.config->state_directory, r->changes, indices, n);
        for (size_t i = 0; k >= 0 && i < n; i++)
                if (unit_guard_is_self_restart(self, &r->changes->items[indices[i]]))
                        log_notice(
                                "OSC %s changed the agent's own unit %s: restarting it now (marked done first, "
                                "so once); the next process finishes the OSC.",
                                r->checksum, self);
        return k;
}

/* Our item failed: the run fails with `code` (_UPDATE_FAILURE_INVALID: the item's own) naming it
 * (upstream's reason for the kubelet health check, for MCM: docs/node-protocol.md §9 scenario 25); the item
 * stays not done. */
static void item_failed(OscRunner *r, UpdateFailureCode code, int error, const char *detail) {
        const OscWork *w = osc_runner_current(r);
        _cleanup_free_ char *message = NULL;
        int k;

        detail = detail ?: strerror(-error);
        if (code < 0)
                code = error == -EOPNOTSUPP                ? UPDATE_FAILURE_UNSUPPORTED_CHANGE :
                        w->kind == OSC_WORK_KUBELET_HEALTH ? UPDATE_FAILURE_KUBELET_UNHEALTHY :
                                                             UPDATE_FAILURE_FILE_APPLY_FAILED;
        if (code == UPDATE_FAILURE_KUBELET_UNHEALTHY)
                k = kubelet_health_failure_reason(detail, &message);
        else
                k = asprintf(&message, "%s: %s", osc_work_target(w) ?: osc_work_kind_to_string(w->kind),
                             detail) < 0 ?
                        -ENOMEM :
                        0;
        if (k < 0)
                message = NULL;
        finish(r, error < 0 ? error : -EIO, code, message ?: "applying the OSC failed");
}

/* Upstream's triggerTokenResyncForDeletedFile: a token file the OSC removed (or a drift repair
 * restored) is written again by the token sync of its config at once, not at its next period. */
static void resync_tokens(OscRunner *r, const size_t *indices, size_t n) {
        TokenSync *tokens = r->deps.tokens ? *r->deps.tokens : NULL;

        for (size_t i = 0; tokens && i < n; i++) {
                const OscWork *w = &r->running->items[indices[i]];

                if (w->kind == OSC_WORK_DELETE_FILE ||
                    (r->repairing && (w->kind == OSC_WORK_WRITE_FILE || w->kind == OSC_WORK_PULL_FILE)))
                        (void) token_sync_resync_path(tokens, w->file.path);
        }
}

/* Our item is done: marked and persisted like the applier's. */
static int item_done(OscRunner *r) {
        osc_changes_mark_done(r->running, r->item);
        resync_tokens(r, &r->item, 1);
        return persist_done(r, &r->item, 1);
}

void osc_runner_item_ended(OscRunner *r, int error, const char *detail) {
        int k;

        if (error < 0)
                return item_failed(r, _UPDATE_FAILURE_INVALID, error, detail);
        k = item_done(r);
        if (k < 0)
                return item_failed(r, UPDATE_FAILURE_FILE_APPLY_FAILED, k, PERSIST_FAILED);
        run_next(r);
}

static int on_step(sd_event_source *s, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *detail = TAKE_PTR(r->step_detail);
        int error = r->step_error;

        osc_runner_op_clear(r);
        r->step_error = 0;
        if (error < 0)
                item_failed(r, _UPDATE_FAILURE_INVALID, error, detail);
        else
                run_next(r);
        return 0;
}

int osc_runner_op_step(OscRunner *r, int error, const char *detail) {
        _cleanup_(sd_event_source_disable_unrefp) sd_event_source *s = NULL;
        int k;

        k = sd_event_add_defer(r->deps.event, &s, on_step, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(s, "osc-runner-step");
        if (free_and_strdup(&r->step_detail, detail) < 0)
                return -ENOMEM;
        osc_runner_op_clear(r);
        r->op = (OscOp) { .kind = OSC_OP_STEP, .step = TAKE_PTR(s) };
        r->step_error = error;
        return 0;
}

/* ---- the applier's stretches ------------------------------------------------------------------- */

static void on_masked(OscApplier *a, const char *path, const char *left_out, void *userdata) {
        OscRunner *r = userdata;

        if (osc_masked_add(&r->masked, path, left_out) < 0)
                log_oom();
}

static void on_containerd_late(OscApplier *a, const char *socket, uint64_t waited_usec, void *userdata) {
        log_warning("containerd was restarted but %s did not accept a connection within %" PRIu64
                    " s; restarting "
                    "the kubelet all the same.",
                    socket, waited_usec / USEC_PER_SEC);
}

static int on_items_done(OscApplier *a, const size_t *indices, size_t n, void *userdata) {
        resync_tokens(userdata, indices, n);
        return persist_done(userdata, indices, n);
}

static void on_stopped(OscApplier *a, size_t at, const OscApplyFailure *f, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *message = NULL;

        if (!f) {
                osc_runner_op_clear(r);
                return run_next(r); /* item `at`, ours, or the end */
        }
        if (asprintf(&message, "%s: %s", strempty(f->subject), strempty(f->detail)) < 0)
                message = NULL;
        finish(r, f->error < 0 ? f->error : -EIO, f->code, message ?: "applying the OSC failed");
}

static int start_applier(OscRunner *r) {
        static const OscApplierCallbacks cb = {
                .items_done = on_items_done,
                .stopped = on_stopped,
                .masked = on_masked,
                .containerd_late = on_containerd_late,
        };
        _cleanup_(osc_applier_freep) OscApplier *a = NULL;
        const Config *c = r->deps.config;
        int k;

        k = osc_applier_new(r->deps.event, r->deps.units, r->running,
                            &(OscApplierParams) { .root_directory = c->osc.root_directory,
                                                  .unit_directory = c->systemd.unit_directory,
                                                  .self_unit = c->restart.self_unit,
                                                  .kubelet_unit = c->kubelet.unit,
                                                  .restore = r->repairing },
                            &cb, r, &a);
        if (k >= 0)
                k = osc_applier_start(a);
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_APPLY, .applier = TAKE_PTR(a) };
        return 0;
}

/* ---- committing --------------------------------------------------------------------------------- */

/* A bootstrap credential below osc.rootDirectory that has done its job: removed, said once. */
static void retire(const char *root, const char *path, const char *what) {
        _cleanup_free_ char *file = NULL;

        if (path_below_root(root, path, &file) < 0) {
                log_oom();
                return;
        }
        if (unlink(file) >= 0) {
                (void) fsync_parent_dir(file);
                log_info("Removed %s %s: the OSC is applied and the Node registered.", what, file);
        } else if (errno != ENOENT)
                log_warning_errno(errno, "Cannot remove %s %s: %m", what, file);
}

void osc_runner_retire_bootstrap_credentials(OscRunner *r) {
        const char *root = r->deps.config->osc.root_directory;

        retire(root, KUBELET_DIRECTORY "/" KUBELET_BOOTSTRAP_KUBECONFIG,
               "the kubelet's bootstrap kubeconfig");
        retire(root, IDENTITY_GNA_DIRECTORY "/" GNA_BOOTSTRAP_TOKEN,
               "gardener-node-agent's bootstrap token");
}

/* Every item is done: the OSC becomes the last-applied one (docs/node-protocol.md §6.4 step 19). */
static void commit(OscRunner *r) {
        _cleanup_free_ char *message = NULL;
        size_t n;
        int k;

        k = osc_state_commit(r->deps.config->state_directory, r->yaml, r->yaml_size);
        if (k < 0) {
                if (asprintf(&message, "%s/%s: %s", r->deps.config->state_directory, OSC_STATE_LAST_APPLIED,
                             strerror(-k)) < 0)
                        message = NULL;
                return finish(r, k, UPDATE_FAILURE_FILE_APPLY_FAILED,
                              message ?: "cannot record the last-applied OSC");
        }
        n = r->changes ? r->changes->n_items : 0;
        r->running = NULL;
        r->committed = true;
        r->yaml = mfree(r->yaml);
        r->changes = osc_changes_free(r->changes);
        json_decref(r->plan);
        r->plan = NULL;
        log_notice("Applied every change of OSC %s (%zu item(s)); it is the last-applied OSC now.",
                   r->checksum, n);
        finish(r, 0, _UPDATE_FAILURE_INVALID, NULL);
}

/* ---- the walk ----------------------------------------------------------------------------------- */

/* Runs the work from the first item not done: the applier's stretch, or our items one after the
 * other, until something is in flight or the run ends. Only from the loop. */
static void run_next(OscRunner *r) {
        for (;;) {
                _cleanup_free_ char *detail = NULL;
                const OscWork *w;
                int k;

                r->item = r->running ? osc_changes_next(r->running) : 0;
                if (!r->running || r->item >= r->running->n_items) {
                        if (r->repairing || r->committed)
                                return finish(r, 0, _UPDATE_FAILURE_INVALID, NULL);
                        return commit(r);
                }
                w = osc_runner_current(r);
                if (osc_applier_handles(w)) {
                        k = start_applier(r);
                        if (k < 0)
                                finish(r, k, UPDATE_FAILURE_FILE_APPLY_FAILED,
                                       "cannot start applying the OSC");
                        return;
                }
                k = osc_runner_start_item(r, w, &detail);
                if (k == 0)
                        return;
                if (k < 0)
                        return item_failed(r, _UPDATE_FAILURE_INVALID, k, detail ?: "cannot start");
                k = item_done(r);
                if (k < 0)
                        return item_failed(r, UPDATE_FAILURE_FILE_APPLY_FAILED, k, PERSIST_FAILED);
        }
}

static int run_start(OscRunner *r);

/* A repair restores what is fine and leaves out a unit the guard refuses (every item of it), then asks
 * the guard again about the rest: one bad unit never holds back the files and units that are fine. An
 * OSC apply stays whole: its checksum promises every item. */
static int refuse_in_repair(OscRunner *r, const char *unit, const char *why) {
        char *joined = NULL;
        int k;

        if (osc_changes_refuse_unit(r->running, unit) == 0)
                return 0; /* nothing of it left to leave out: refused as a whole */
        if (asprintf(&joined, "%s%s%s (%s)", strempty(r->refused), r->refused ? "; " : "", unit,
                     strempty(why)) < 0)
                return -ENOMEM;
        free(r->refused);
        r->refused = joined;
        osc_runner_op_clear(r); /* frees `unit` and `why` */
        k = run_start(r);
        return k < 0 ? k : 1;
}

static void on_guarded(OscGuard *g, int error, const char *unit, const char *why, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *message = NULL;

        if (error >= 0) {
                osc_runner_op_clear(r);
                return run_next(r);
        }
        if (error == -EPERM && r->repairing && unit) {
                int k = refuse_in_repair(r, unit, why);

                if (k > 0)
                        return;
                if (k < 0)
                        return finish(r, k, UPDATE_FAILURE_UNIT_APPLY_FAILED,
                                      "cannot go on with the repair");
        }
        /* Refused, or systemd could not be asked: either way nothing of the OSC ran. */
        if (asprintf(&message, "%s: %s", strempty(unit), strempty(why)) < 0)
                message = NULL;
        finish(r, error, UPDATE_FAILURE_UNIT_APPLY_FAILED, message ?: "an OSC unit is refused");
}

static int start_guard(OscRunner *r) {
        const Config *c = r->deps.config;
        OscGuard *g = NULL;
        int k;

        k = osc_guard_start(unit_control_get_bus(r->deps.units),
                            &(OscGuardParams) { .self_unit = c->restart.self_unit,
                                                .replaced_units = c->osc.replaced_units,
                                                .kubelet_unit = c->kubelet.unit,
                                                .containerd_unit = OSC_CONTAINERD_UNIT },
                            r->running, on_guarded, r, &g);
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_GUARD, .guard = g };
        return 0;
}

static void on_reached(const UnitJobResult *result, void *userdata) {
        OscRunner *r = userdata;
        int k;

        r->op = (OscOp) { .kind = OSC_OP_NONE }; /* the UnitControl frees the job */
        k = result->error < 0 ? result->error : start_guard(r);
        if (k < 0)
                finish(r, k, UPDATE_FAILURE_UNIT_APPLY_FAILED,
                       result->detail ?: "cannot ask systemd about the OSC's units");
}

/* Before the first unit item runs, the guard judges them all (the OSC is held whole). It asks systemd
 * over the connection of the moment; while there is none (the bus restarts, systemd re-executes) the
 * run waits for it like any unit job, rather than apply unit items unjudged. Without unit items the
 * run starts from the loop. */
static int run_start(OscRunner *r) {
        UnitJob *job = NULL;
        int k;

        if (!r->running || !osc_guard_needed(r->running))
                return osc_runner_op_step(r, 0, NULL);
        k = unit_control_reach(r->deps.units, on_reached, r, &job);
        if (k > 0)
                return start_guard(r);
        if (k == 0)
                r->op = (OscOp) { .kind = OSC_OP_REACH, .reach = job };
        return k;
}

int osc_runner_apply(OscRunner *r, const char *checksum, OscRunnerDone done, void *userdata) {
        bool nothing;
        int k;

        assert(r && done);
        if (r->done)
                return -EBUSY;
        if (streq_ptr(r->checksum, checksum) && r->error)
                return -ENODATA;
        if (!streq_ptr(r->checksum, checksum) || (!r->committed && !r->changes))
                return -ESTALE;
        /* Committed before a restart, or an OSC without file or unit changes: only the commit. */
        nothing = r->committed || osc_changes_complete(r->changes);
        if (!nothing && !r->deps.units)
                return -ENOTCONN;
        r->done = done;
        r->userdata = userdata;
        r->running = r->changes;
        k = run_start(r);
        if (k < 0)
                run_clear(r);
        return k;
}

const char *osc_runner_error(const OscRunner *r, UpdateFailureCode *ret_code) {
        if (ret_code)
                *ret_code = r->error_code;
        return r->error;
}

int osc_runner_repair(OscRunner *r, OscChanges *c, OscRunnerDone done, void *userdata) {
        int k;

        assert(r && c && done);
        if (r->done)
                return -EBUSY;
        if (!r->deps.units)
                return -ENOTCONN;
        r->done = done;
        r->userdata = userdata;
        r->running = c;
        r->repairing = true;
        k = run_start(r);
        if (k < 0)
                run_clear(r);
        return k;
}

bool osc_runner_work_pending(const OscRunner *r) {
        _cleanup_free_ char *path = NULL;

        /* Once the current OSC is prepared, that says it: a saved list of another checksum is never
         * resumed (an OSC whose work could not be computed wrote nothing, and its diff starts from
         * the last-applied OSC a repair restores). Before (at start), a saved list may be resumed. */
        if (r->checksum)
                return r->changes && !r->committed;
        if (asprintf(&path, "%s/%s", r->deps.config->state_directory, OSC_STATE_CHANGES) < 0)
                return true; /* not knowing is not "nothing pending" */
        return access(path, F_OK) >= 0;
}

const OscModelOptions *osc_runner_model_options(const OscRunner *r) {
        return &r->model_options;
}

const OscProtected *osc_runner_own_files(const OscRunner *r) {
        return &r->own_files;
}

void osc_runner_cancel(OscRunner *r) {
        if (r)
                run_clear(r);
}

/* ---- setup ----------------------------------------------------------------------------------------------
 */

static char *lower_host_name(void) {
        char buf[256] = "";

        if (gethostname(buf, sizeof(buf) - 1) < 0)
                return strdup("");
        for (char *p = buf; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        return strdup(buf);
}

/* `path` as named (its directory resolved, the last component not followed: an OSC file's own
 * canonical form) and, where it exists, with every symlink resolved (a state directory that is a
 * symlink is protected where it leads). */
static int protect(OscProtected *p, const char *path, const char *what) {
        _cleanup_close_ int root_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *named = NULL, *real = NULL;
        int k;

        if (root_fd < 0)
                return -errno;
        k = path_in_root_canonical(root_fd, path, &named);
        if (k >= 0)
                k = osc_protected_add(p, named, what);
        real = realpath(path, NULL);
        if (k >= 0 && real)
                k = osc_protected_add(p, real, what);
        return k == -ENOMEM ? k : 0; /* a path that is no path protects nothing */
}

/* What no OSC file may touch (core/osc-protected.h says why): the agent's state and configuration
 * directories, its binary, and its unit files and drop-in directories where systemd looks for them
 * (systemd.unitDirectory and the vendor directory). */
static int protect_own_files(OscRunner *r) {
        const Config *c = r->deps.config;
        const char *const unit_dirs[] = { c->systemd.unit_directory, "/usr/lib/systemd/system" };
        _cleanup_free_ char *exe = realpath("/proc/self/exe", NULL);
        int k;

        k = protect(&r->own_files, c->state_directory, "state directory");
        if (k >= 0 && c->config_directory)
                k = protect(&r->own_files, c->config_directory, "configuration directory");
        if (k >= 0 && exe)
                k = protect(&r->own_files, exe, "binary");
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(unit_dirs); i++) {
                _cleanup_free_ char *unit = NULL, *drop_ins = NULL;

                if (asprintf(&unit, "%s/%s", unit_dirs[i], c->restart.self_unit) < 0 ||
                    asprintf(&drop_ins, "%s.d", unit) < 0)
                        return -ENOMEM;
                k = protect(&r->own_files, unit, "unit file");
                if (k >= 0)
                        k = protect(&r->own_files, drop_ins, "drop-in directory");
        }
        for (size_t i = 0; k >= 0 && i < r->own_files.n_items; i++)
                log_debug("No OSC file may write or remove %s (the agent's %s).", r->own_files.items[i].path,
                          r->own_files.items[i].what);
        return k;
}

int osc_runner_new(const OscRunnerDeps *deps, OscRunner **ret) {
        _cleanup_(osc_runner_freep) OscRunner *r = NULL;
        int k;

        assert(deps && deps->event && deps->config && deps->http && ret);
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->deps = *deps;
        r->error_code = _UPDATE_FAILURE_INVALID;
        r->host_name = lower_host_name();
        if (!r->host_name)
                return -ENOMEM;
        r->model_options =
                (OscModelOptions) { .host_name = r->host_name, .containerd_path = r->deps.config->path };
        k = protect_own_files(r);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}

OscRunner *osc_runner_free(OscRunner *r) {
        if (!r)
                return NULL;
        run_clear(r);
        prepared_clear(r);
        log_once_done(&r->logged_error);
        file_store_free(r->images);
        free(r->host_name);
        osc_protected_done(&r->own_files);
        free(r->desired);
        free(r);
        return NULL;
}

void osc_runner_set_kube(OscRunner *r, KubeClient *kube) {
        r->kube = kube;
}

void osc_runner_set_units(OscRunner *r, UnitControl *units) {
        r->deps.units = units;
}
