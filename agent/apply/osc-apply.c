/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "apply/osc-apply.h"
#include "apply/osc-files.h"
#include "core/containerd-config.h"
#include "core/unit-guard.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/strv.h"
#include "util/time-util.h"

/* How long the applier runs file items back to back before it returns to the event loop once. */
#define OSC_APPLIER_SLICE_USEC (50 * USEC_PER_MSEC)
#define PERSIST_FAILED "cannot persist the remaining work"
/* After containerd's restart, how long and how often its socket is tried before the kubelet's. */
#define CONTAINERD_WAIT_USEC (30 * USEC_PER_SEC)
#define CONTAINERD_POLL_USEC (100 * USEC_PER_MSEC)

/* Where a multi-step item is; at most one D-Bus call is in flight. */
typedef enum Step {
        STEP_FIRST,
        STEP_ENABLE,     /* WRITE_UNIT: enable/disable sent */
        STEP_DISABLE,    /* DELETE_UNIT: disable sent */
        STEP_STOP,       /* DELETE_UNIT: stop sent */
        STEP_RESTART,    /* DELETE_UNIT of a unit we did not create: restart sent */
        STEP_JOB,        /* DAEMON_RELOAD, UNIT_COMMAND: the one job sent */
        STEP_SELF,       /* UNIT_COMMAND restarting the agent itself: done already, job sent */
        STEP_CONTAINERD, /* UNIT_COMMAND of the kubelet: waiting for containerd's socket */
} Step;

struct OscApplier {
        sd_event *event;              /* ref held */
        UnitControl *uc;              /* borrowed */
        OscChanges *changes;          /* borrowed */
        char *root, *unit_dir;        /* owned */
        char *self_unit;              /* owned; NULL: none */
        char *kubelet_unit;           /* owned; NULL: none */
        char *containerd_socket;      /* owned: below the root */
        uint64_t containerd_deadline; /* STEP_CONTAINERD: CLOCK_MONOTONIC */
        sd_event_source *poll;        /* owned: STEP_CONTAINERD's next try */
        bool restore;                 /* a drift repair (OscApplierParams.restore) */
        OscApplierCallbacks cb;
        void *userdata;         /* borrowed */
        sd_event_source *defer; /* owned: the deferred start */
        UnitJob *job;           /* the job in flight (owned by uc; cancelled with us) */
        size_t current;
        size_t cursor; /* the next item is the first not done from here */
        struct {       /* the first unit command that failed in this run */
                bool set;
                size_t index;
                int error;
                char *detail; /* owned */
        } command_failure;
        size_t *pending; /* owned: items done since the last items_done() */
        size_t n_pending;
        Step step;
        UpdateFailureCode why_code; /* the current item's own failure code and message, when it */
        char *why;                  /* knows more than errno (owned; consumed by fail()) */
};

OscApplier *osc_applier_free(OscApplier *a) {
        if (!a)
                return NULL;
        unit_job_cancel(a->job);
        sd_event_source_disable_unref(a->defer);
        sd_event_source_disable_unref(a->poll);
        sd_event_unref(a->event);
        free(a->why);
        free(a->command_failure.detail);
        free(a->pending);
        free(a->root);
        free(a->unit_dir);
        free(a->self_unit);
        free(a->kubelet_unit);
        free(a->containerd_socket);
        free(a);
        return NULL;
}

int osc_applier_new(sd_event *event, UnitControl *uc, OscChanges *changes, const OscApplierParams *p,
                    const OscApplierCallbacks *cb, void *userdata, OscApplier **ret) {
        _cleanup_(osc_applier_freep) OscApplier *a = NULL;

        assert(event && uc && changes && p && cb && ret);
        assert(cb->items_done && cb->stopped);

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->event = sd_event_ref(event);
        a->uc = uc;
        a->changes = changes;
        a->cb = *cb;
        a->userdata = userdata;
        a->current = changes->n_items;
        a->why_code = _UPDATE_FAILURE_INVALID;
        a->restore = p->restore;
        a->root = strdup(p->root_directory ?: "/");
        a->unit_dir = strdup(p->unit_directory ?: "/etc/systemd/system");
        a->pending = calloc(MAX(changes->n_items, 1u), sizeof(size_t));
        if (!a->root || !a->unit_dir || !a->pending ||
            (p->self_unit && !(a->self_unit = strdup(p->self_unit))) ||
            (p->kubelet_unit && !(a->kubelet_unit = strdup(p->kubelet_unit))) ||
            path_below_root(a->root, OSC_CONTAINERD_SOCKET, &a->containerd_socket) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(a);
        return 0;
}

static UpdateFailureCode failure_code(OscWorkKind k) {
        switch (k) {
        case OSC_WORK_WRITE_UNIT:
        case OSC_WORK_DELETE_UNIT:
        case OSC_WORK_DAEMON_RELOAD:
        case OSC_WORK_UNIT_COMMAND:
                return UPDATE_FAILURE_UNIT_APPLY_FAILED;
        default:
                return UPDATE_FAILURE_FILE_APPLY_FAILED;
        }
}

static const char *subject(const OscWork *w) {
        return osc_work_target(w) ?: osc_work_kind_to_string(w->kind);
}

bool osc_applier_handles(const OscWork *w) {
        switch (w->kind) {
        case OSC_WORK_PULL_FILE:
        case OSC_WORK_KUBELET_HEALTH:
                return false;
        case OSC_WORK_WRITE_FILE:
                return w->file.source != OSC_FILE_SECRET;
        case OSC_WORK_REGISTRY:
                return !w->probe;
        default:
                return true;
        }
}

/* A write or removal of a file of ours, done at once and idempotent: its done mark may wait for the
 * next items_done() (a kill before it only writes the same file again). Everything else (units,
 * jobs, the owner's items) is persisted the moment it is done: a unit is restarted exactly once. */
static bool batchable(const OscWork *w) {
        switch (w->kind) {
        case OSC_WORK_CONTAINERD_CONFIG:
        case OSC_WORK_WRITE_FILE:
        case OSC_WORK_SKIP_FILE:
        case OSC_WORK_REGISTRY:
        case OSC_WORK_DELETE_REGISTRY:
        case OSC_WORK_DELETE_FILE:
                return osc_applier_handles(w);
        default:
                return false;
        }
}

/* Lets the owner persist the items done since the last time. */
static int flush(OscApplier *a) {
        size_t n = a->n_pending;

        if (n == 0)
                return 0;
        a->n_pending = 0;
        return a->cb.items_done(a, a->pending, n, a->userdata);
}

/* The failure code of the current item: `code`, else the item's own (why_code), else -EOPNOTSUPP's
 * (what cannot be done at all), else its kind's. */
static UpdateFailureCode fail_code(const OscApplier *a, const OscWork *w, UpdateFailureCode code,
                                   int error) {
        if (code >= 0)
                return code;
        if (a->why_code >= 0)
                return a->why_code;
        if (error == -EOPNOTSUPP)
                return UPDATE_FAILURE_UNSUPPORTED_CHANGE;
        return w ? failure_code(w->kind) : UPDATE_FAILURE_FILE_APPLY_FAILED;
}

/* Ends the run with a failure. Callers return at once: `stopped` may free us. */
static void fail(OscApplier *a, UpdateFailureCode code, int error, const char *detail) {
        _cleanup_free_ char *why = TAKE_PTR(a->why);
        /* No current item: the last items' done marks could not be persisted. */
        const OscWork *w = a->current < a->changes->n_items ? &a->changes->items[a->current] : NULL;
        OscApplyFailure f = {
                .code = fail_code(a, w, code, error),
                .subject = w ? subject(w) : "the work list",
                .error = error,
                .detail = detail ?:
                        why      ?:
                                   strerror(-error),
        };

        /* The items done before this one stay done (a failure to persist them is this failure). */
        (void) flush(a);
        a->step = STEP_FIRST;
        a->why_code = _UPDATE_FAILURE_INVALID;
        a->cb.stopped(a, a->current, &f, a->userdata);
}

/* A unit command that failed: the other commands still run (upstream runs them all at once and
 * keeps only the failed ones for the retry), and the run fails with the first failure once the last
 * of them is done. The failed item stays not done: the retry runs it, and only it, again. */
static int command_failed(OscApplier *a, int error, const char *detail) {
        if (!a->command_failure.set) {
                a->command_failure.detail = strdup(strempty(detail));
                if (!a->command_failure.detail)
                        return -ENOMEM;
                a->command_failure.set = true;
                a->command_failure.index = a->current;
                a->command_failure.error = error;
        }
        a->cursor = a->current + 1;
        a->step = STEP_FIRST;
        return 0;
}

static void fail_command(OscApplier *a) {
        _cleanup_free_ char *detail = TAKE_PTR(a->command_failure.detail);

        a->command_failure.set = false;
        a->current = a->command_failure.index;
        fail(a, UPDATE_FAILURE_UNIT_APPLY_FAILED, a->command_failure.error, detail);
}

/* Marks the current item done; the owner persists it now, or with the next batch (batchable()). */
static int mark_done(OscApplier *a) {
        osc_changes_mark_done(a->changes, a->current);
        a->step = STEP_FIRST;
        a->pending[a->n_pending++] = a->current;
        return batchable(&a->changes->items[a->current]) ? 0 : flush(a);
}

static void on_job(const UnitJobResult *res, void *userdata);

static int start_job(OscApplier *a, UnitAction action, const char *unit, Step step) {
        int r = unit_control_run(a->uc, action, unit, NULL, on_job, a, &a->job);

        if (r < 0)
                return r;
        a->step = step;
        return 0;
}

/* The run_*() return 1 when the item is done now, 0 when a call is in flight, -errno on failure. */

/* A unit file or drop-in the admin masked (a symlink to /dev/null) stays masked: the applier leaves
 * it, and what systemd would refuse for the unit for ever (enable, start, restart), and tells the
 * owner: the item is then done, never retried. 1 if the unit itself is masked. */
static int unit_masked(OscApplier *a, const char *unit, const char *left_out) {
        _cleanup_free_ char *path = NULL;
        int r = osc_unit_masked(a->unit_dir, unit);

        if (r <= 0 || !a->cb.masked)
                return r;
        if (asprintf(&path, "%s/%s", a->unit_dir, unit) < 0)
                return -ENOMEM;
        a->cb.masked(a, path, left_out, a->userdata);
        return 1;
}

static int run_write_unit(OscApplier *a, const OscWork *w) {
        _cleanup_strv_free_ char **masked = NULL;
        _cleanup_free_ char *unit_file = NULL;
        bool enable = w->unit.enable != 0;
        int r;

        if (a->step == STEP_ENABLE)
                return 1;
        if (w->remove_cpu_manager_state) {
                /* A changed cpuManagerPolicy makes the kubelet refuse its old checkpoint. */
                r = osc_remove_file(a->root, OSC_CPU_MANAGER_STATE);
                if (r < 0)
                        return r;
        }
        r = a->restore ? osc_restore_unit_files(a->unit_dir, &w->unit, &masked) :
                         osc_write_unit_files(a->unit_dir, &w->unit, w->drop_ins_deleted, &masked);
        if (r < 0)
                return r;
        if (asprintf(&unit_file, "%s/%s", a->unit_dir, w->unit.name) < 0)
                return -ENOMEM;
        for (char **m = masked; m && *m && a->cb.masked; m++)
                if (!streq(*m, unit_file)) /* the unit's own: named with its enable below */
                        a->cb.masked(a, *m, "not written", a->userdata);
        r = unit_masked(a, w->unit.name,
                        w->unit.content ? (enable ? "not written or enabled" : "not written or disabled") :
                                          (enable ? "not enabled" : "not disabled"));
        if (r != 0)
                return r;
        /* As upstream: enabled unless enable: false, for every changed unit, before the reload. */
        return start_job(a, enable ? UNIT_ACTION_ENABLE : UNIT_ACTION_DISABLE, w->unit.name, STEP_ENABLE);
}

static int run_delete_unit(OscApplier *a, const OscWork *w) {
        int exists, r;

        switch (a->step) {
        case STEP_DISABLE:
                return start_job(a, UNIT_ACTION_STOP, w->unit.name, STEP_STOP);
        case STEP_RESTART:
                return 1;
        default:
                break;
        }
        exists = osc_unit_file_exists(a->unit_dir, w->unit.name);
        if (exists < 0)
                return exists;
        if (a->step == STEP_FIRST && w->unit.content && exists)
                return start_job(a, UNIT_ACTION_DISABLE, w->unit.name, STEP_DISABLE);
        r = osc_remove_unit_files(a->unit_dir, &w->unit);
        if (r < 0)
                return r;
        /* A unit we only had drop-ins for keeps running: restart it so the removed drop-ins stop
         * applying (upstream does this when its unit file exists in the unit directory). */
        if (!w->unit.content && exists)
                return start_job(a, UNIT_ACTION_RESTART, w->unit.name, STEP_RESTART);
        return 1;
}

/* docs/node-protocol.md §6.4 step 5: containerd's directories and the config.toml the agent owns entirely
 * (core/containerd-config.h), written only when it differs, 0644 as upstream. The drop-in with the
 * PATH is the model's containerd.service drop-in (a write-unit item), the restart a unit command. A
 * criConfig we cannot render is a change we cannot apply: UnsupportedChange naming the field. */
static int run_containerd_config(OscApplier *a, const OscWork *w) {
        _cleanup_free_ char *toml = NULL;
        int r;

        r = osc_ensure_containerd_dirs(a->root);
        if (r < 0)
                return r;
        free(a->why);
        a->why = NULL;
        r = containerd_config_render(w->containerd, &toml, &a->why);
        if (r == -EINVAL)
                a->why_code = UPDATE_FAILURE_UNSUPPORTED_CHANGE;
        if (r < 0)
                return r;
        return osc_write_file(a->root, CONTAINERD_CONFIG_FILE, toml, strlen(toml), 0644,
                              /* if_changed= */ true);
}

static int run_file_item(OscApplier *a, const OscWork *w) {
        _cleanup_free_ char *content = NULL;
        size_t size;
        int r;

        switch (w->kind) {
        case OSC_WORK_CONTAINERD_CONFIG:
                r = run_containerd_config(a, w);
                break;
        case OSC_WORK_WRITE_FILE:
                r = osc_file_inline_content(&w->file, &content, &size);
                if (r >= 0)
                        r = osc_write_file(a->root, w->file.path, content, size, osc_file_mode(&w->file),
                                           /* if_changed= */ false);
                break;
        case OSC_WORK_SKIP_FILE:
                r = 0; /* as upstream: a file without content is not written (the owner said so) */
                break;
        case OSC_WORK_REGISTRY:
                r = osc_write_registry(a->root, &w->registry);
                break;
        case OSC_WORK_DELETE_REGISTRY:
                r = osc_remove_registry(a->root, w->name);
                break;
        case OSC_WORK_DELETE_FILE:
                r = osc_remove_file(a->root, w->file.path);
                break;
        default:
                r = -EINVAL;
        }
        return r < 0 ? r : 1;
}

/* The agent restarting itself: systemd stops this process while the job runs, so the item is done
 * and on disk before the job is sent; the next process resumes after it (at most once, never in a
 * loop). Surviving it (the unit is not the one we run in) goes on with the next item. */
static int run_self_restart(OscApplier *a, const OscWork *w) {
        int r = mark_done(a);

        if (r < 0)
                return r;
        return start_job(a, UNIT_ACTION_RESTART, w->name, STEP_SELF);
}

/* A non-blocking connect(): something listens (EAGAIN: its backlog is full), or not. */
static bool socket_answers(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return false;
        memcpy(sa.sun_path, path, strlen(path) + 1); /* length checked above */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return false;
        r = connect(fd, (struct sockaddr *) &sa, sizeof(sa));
        r = r >= 0 || errno == EAGAIN || errno == EINPROGRESS;
        close(fd);
        return r;
}

/* The kubelet's restart after containerd's in this work list (core/osc-diff.h puts containerd's
 * first): containerd must answer on its socket before the kubelet starts against it. */
static bool follows_containerd_restart(const OscApplier *a, const OscWork *w) {
        if (w->command == OSC_UNIT_COMMAND_STOP || !streq_ptr(w->name, a->kubelet_unit))
                return false;
        for (size_t i = 0; i < a->current; i++) {
                const OscWork *c = &a->changes->items[i];

                if (c->kind == OSC_WORK_UNIT_COMMAND && c->done && c->command != OSC_UNIT_COMMAND_STOP &&
                    streq(c->name, OSC_CONTAINERD_UNIT))
                        return true;
        }
        return false;
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata);

/* 1 when containerd answers (or CONTAINERD_WAIT_USEC passed: the kubelet is restarted all the same,
 * it waits for its runtime itself, and `containerd_late` says so); 0 while a retry is armed. */
static int wait_for_containerd(OscApplier *a) {
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
        int r;

        if (a->step != STEP_CONTAINERD)
                a->containerd_deadline = now + CONTAINERD_WAIT_USEC;
        if (socket_answers(a->containerd_socket))
                return 1;
        if (now >= a->containerd_deadline) {
                if (a->cb.containerd_late)
                        a->cb.containerd_late(a, a->containerd_socket, CONTAINERD_WAIT_USEC, a->userdata);
                return 1;
        }
        r = sd_event_add_time_relative(a->event, &a->poll, CLOCK_MONOTONIC, CONTAINERD_POLL_USEC, 0, on_poll,
                                       a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(a->poll, "osc-applier-containerd");
        a->step = STEP_CONTAINERD;
        return 0;
}

static int run_command(OscApplier *a, const OscWork *w) {
        int r;

        if (a->step == STEP_JOB)
                return 1;
        if (w->command == OSC_UNIT_COMMAND_STOP)
                return start_job(a, UNIT_ACTION_STOP, w->name, STEP_JOB);
        if (unit_guard_is_self_restart(a->self_unit, w))
                return run_self_restart(a, w);
        if (a->step == STEP_CONTAINERD || follows_containerd_restart(a, w)) {
                r = wait_for_containerd(a);
                if (r <= 0)
                        return r;
        }
        r = unit_masked(a, w->name, "not restarted");
        return r != 0 ? r : start_job(a, UNIT_ACTION_RESTART, w->name, STEP_JOB);
}

static int run_item(OscApplier *a, const OscWork *w) {
        switch (w->kind) {
        case OSC_WORK_WRITE_UNIT:
                return run_write_unit(a, w);
        case OSC_WORK_DELETE_UNIT:
                return run_delete_unit(a, w);
        case OSC_WORK_DAEMON_RELOAD:
                return a->step == STEP_JOB ? 1 : start_job(a, UNIT_ACTION_DAEMON_RELOAD, NULL, STEP_JOB);
        case OSC_WORK_UNIT_COMMAND:
                return run_command(a, w);
        default:
                return run_file_item(a, w);
        }
}

static int on_defer(sd_event_source *s, void *userdata);

/* Back to the loop for a moment (the watchdog, the watches), then on from here. */
static void yield(OscApplier *a) {
        int r = sd_event_add_defer(a->event, &a->defer, on_defer, a);

        if (r < 0)
                return fail(a, UPDATE_FAILURE_FILE_APPLY_FAILED, r, "cannot continue on the event loop");
        (void) sd_event_source_set_description(a->defer, "osc-applier-continue");
}

/* Runs items until one waits for a reply, the time slice is used up or the next item is the owner's;
 * the batchable items done meanwhile are persisted together before anything else starts, and before
 * returning to the loop or the owner. */
static void advance(OscApplier *a) {
        uint64_t deadline = clock_now_usec(CLOCK_MONOTONIC) + OSC_APPLIER_SLICE_USEC;

        for (;;) {
                const OscWork *w = NULL;
                bool now_batchable, late;
                int r;

                a->current = osc_changes_next_from(a->changes, a->cursor);
                if (a->current < a->changes->n_items)
                        w = &a->changes->items[a->current];
                now_batchable = w && batchable(w);
                late = now_batchable && clock_now_usec(CLOCK_MONOTONIC) >= deadline;
                if (!now_batchable || late) {
                        r = flush(a);
                        if (r < 0)
                                return fail(a, UPDATE_FAILURE_FILE_APPLY_FAILED, r, PERSIST_FAILED);
                }
                if (a->command_failure.set && (!w || w->kind != OSC_WORK_UNIT_COMMAND))
                        return fail_command(a);
                if (!w)
                        return a->cb.stopped(a, a->changes->n_items, NULL, a->userdata);
                if (late)
                        return yield(a);
                if (!osc_applier_handles(w))
                        return a->cb.stopped(a, a->current, NULL, a->userdata);
                r = run_item(a, w);
                if (r < 0 && w->kind == OSC_WORK_UNIT_COMMAND) {
                        r = command_failed(a, r, strerror(-r));
                        if (r < 0)
                                return fail(a, _UPDATE_FAILURE_INVALID, r, NULL);
                        continue;
                }
                if (r < 0)
                        return fail(a, _UPDATE_FAILURE_INVALID, r, NULL);
                if (r == 0)
                        return; /* a D-Bus call is in flight; on_job() continues */
                r = mark_done(a);
                if (r < 0)
                        return fail(a, UPDATE_FAILURE_FILE_APPLY_FAILED, r, PERSIST_FAILED);
        }
}

static void on_job(const UnitJobResult *res, void *userdata) {
        OscApplier *a = ASSERT_PTR(userdata);
        char buf[512];

        a->job = NULL;
        if (res->error < 0) {
                int r;

                snprintf(buf, sizeof(buf), "%s %s: %s", unit_action_to_string(res->action),
                         strempty(res->unit), strempty(res->detail));
                if (a->changes->items[a->current].kind != OSC_WORK_UNIT_COMMAND)
                        return fail(a, UPDATE_FAILURE_UNIT_APPLY_FAILED, res->error, buf);
                r = command_failed(a, res->error, buf);
                if (r < 0)
                        return fail(a, _UPDATE_FAILURE_INVALID, r, NULL);
        }
        if (a->step == STEP_SELF)
                a->step = STEP_FIRST; /* that item was done before its job: on to the next */
        advance(a);                   /* the item's next step, or the next item */
}

static int on_defer(sd_event_source *s, void *userdata) {
        OscApplier *a = ASSERT_PTR(userdata);

        a->defer = sd_event_source_disable_unref(a->defer);
        advance(a);
        return 0;
}

static int on_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        OscApplier *a = ASSERT_PTR(userdata);

        a->poll = sd_event_source_disable_unref(a->poll);
        advance(a); /* the same item, STEP_CONTAINERD: tries the socket again */
        return 0;
}

int osc_applier_start(OscApplier *a) {
        int r;

        assert(!a->defer && !a->job);
        a->step = STEP_FIRST;
        a->cursor = 0;
        a->command_failure.set = false;
        a->command_failure.detail = mfree(a->command_failure.detail);
        r = sd_event_add_defer(a->event, &a->defer, on_defer, a);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(a->defer, "osc-applier-start");
        return 0;
}
