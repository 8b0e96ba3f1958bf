/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "core/annotation-budget.h"
#include "kube/kube-path.h"
#include "report/reporter.h"
#include "util/log.h"
#include "util/string-util.h"
#include "util/time-util.h"
#include "util/utf8.h"

#define CONDITION_MESSAGE_MAX 8192U

/* One report action's writes: `done` runs when the last of them finished. */
typedef struct ReportJob {
        unsigned pending;
        int error;
        ReporterDone done;
        void *userdata; /* borrowed */
} ReportJob;

typedef struct PendingWrite PendingWrite;
struct PendingWrite {
        Reporter *reporter;   /* borrowed: owns us */
        KubeRequest *request; /* owned */
        ReportJob *job;       /* owned by the last write of the job to finish; NULL: none */
        PendingWrite *next;
};

struct Reporter {
        char *node_name;                        /* owned */
        KubeClient *kube;                       /* borrowed; NULL until attached */
        KubeEvents *events;                     /* borrowed; NULL until attached */
        const NodeView *node;                   /* borrowed: the Manager's */
        PendingWrite *writes;                   /* owned: Node patches in flight */
        char *status;                           /* owned: last STATUS= sent */
        char *status_base;                      /* owned: the last reporter_set_status() text */
        char *status_notes[_REPORTER_NOTE_MAX]; /* owned: appended while set (reporter_set_status_note()) */
        bool ready;                             /* READY=1 sent */

        /* The progress write budget: what was last written, and when. */
        UpdatePhase progress_phase;
        unsigned progress_percent;
        uint64_t progress_usec;
};

int reporter_new(const char *node_name, Reporter **ret) {
        _cleanup_(reporter_freep) Reporter *r = NULL;

        assert(node_name);
        assert(ret);

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->progress_phase = _UPDATE_PHASE_INVALID;
        r->node_name = strdup(node_name);
        if (!r->node_name)
                return -ENOMEM;
        *ret = TAKE_PTR(r);
        return 0;
}

static PendingWrite *pending_write_free(PendingWrite *w) {
        kube_request_free(w->request);
        if (w->job && --w->job->pending == 0)
                free(w->job);
        free(w);
        return NULL;
}

Reporter *reporter_free(Reporter *r) {
        if (!r)
                return NULL;
        while (r->writes) {
                PendingWrite *next = r->writes->next;

                pending_write_free(r->writes);
                r->writes = next;
        }
        free(r->node_name);
        free(r->status);
        free(r->status_base);
        for (ReporterNote n = 0; n < _REPORTER_NOTE_MAX; n++)
                free(r->status_notes[n]);
        free(r);
        return NULL;
}

void reporter_attach(Reporter *r, KubeClient *kube, KubeEvents *events) {
        assert(r);
        r->kube = kube;
        r->events = events;
}

void reporter_set_node(Reporter *r, const NodeView *node) {
        assert(r);
        r->node = node;
}

/* ---- systemd ------------------------------------------------------------------------------------ */

static void reporter_send_status(Reporter *r) {
        _cleanup_free_ char *s = NULL;

        s = strdup(strempty(r->status_base));
        for (ReporterNote n = 0; s && n < _REPORTER_NOTE_MAX; n++)
                if (r->status_notes[n] && strextendf_with_separator(&s, "; ", "%s", r->status_notes[n]) < 0)
                        return;
        if (streq_ptr(s, r->status))
                return;
        (void) sd_notifyf(/* unset_environment= */ false, "STATUS=%s", s);
        free(r->status);
        r->status = TAKE_PTR(s);
}

void reporter_set_status(Reporter *r, const char *fmt, ...) {
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = free_and_vprintf(&r->status_base, fmt, ap);
        va_end(ap);
        if (k >= 0)
                reporter_send_status(r);
}

/* What the agent waits for besides its current work (the OSC Secret, the bus) stays on the line
 * whatever the manager or the executor says next; with nothing said yet there is nothing to append
 * it to. */
void reporter_set_status_note(Reporter *r, ReporterNote which, const char *note) {
        assert(r);
        assert(which >= 0 && which < _REPORTER_NOTE_MAX);
        if (streq_ptr(note, r->status_notes[which]) || free_and_strdup(&r->status_notes[which], note) < 0)
                return;
        if (r->status_base)
                reporter_send_status(r);
}

void reporter_notify_ready(Reporter *r) {
        if (r->ready)
                return;
        r->ready = true;
        (void) sd_notify(/* unset_environment= */ false, "READY=1");
}

/* ---- Node writes ------------------------------------------------------------------------------------ */

static void reporter_on_write_done(KubeRequest *req, int error, json_t *object, void *userdata) {
        PendingWrite *w = userdata;
        Reporter *r = w->reporter;
        ReportJob *job = TAKE_PTR(w->job);

        if (error < 0)
                log_warning_errno(error, "%s %s failed: %s%s%m", kube_request_get_method(req),
                                  kube_request_get_path(req), strempty(kube_request_get_message(req)),
                                  kube_request_get_message(req) ? ": " : "");
        for (PendingWrite **p = &r->writes; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        pending_write_free(w);

        if (!job)
                return;
        if (error < 0 && job->error == 0)
                job->error = error;
        if (--job->pending > 0)
                return;
        {
                _cleanup_free_ ReportJob *j = job;

                if (j->done)
                        j->done(j->error, j->userdata);
        }
}

static int reporter_patch(Reporter *r, const char *subresource, KubePatchType type, const json_t *body,
                          ReportJob *job) {
        _cleanup_free_ char *path = NULL;
        PendingWrite *w;
        int k;

        if (!r->kube)
                return -ENODEV;
        k = kube_path(KUBE_RESOURCE_NODES, NULL, r->node_name, subresource, &path);
        if (k < 0)
                return k;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (PendingWrite) { .reporter = r, .job = job };
        k = kube_client_patch(r->kube, path, type, body, reporter_on_write_done, w, &w->request);
        if (k < 0) {
                free(w);
                return k;
        }
        if (job)
                job->pending++;
        w->next = r->writes;
        r->writes = w;
        return 0;
}

static int patch_metadata(Reporter *r, const json_t *metadata_patch, ReportJob *job) {
        _cleanup_(json_decrefp) json_t *body = json_pack("{s:O}", "metadata", metadata_patch);

        return body ? reporter_patch(r, NULL, KUBE_PATCH_MERGE, body, job) : -ENOMEM;
}

/* A job that owns itself once its first write is in flight; freed here when none started. */
static ReportJob *job_new(ReporterDone done, void *userdata) {
        ReportJob *job = calloc(1, sizeof(*job));

        if (job)
                *job = (ReportJob) { .done = done, .userdata = userdata };
        return job;
}

/* 0: writes started, `done` follows; 1: nothing was started (job freed); -errno likewise. */
static int job_launched(ReportJob *job, int error) {
        if (job->pending > 0)
                return 0;
        free(job);
        return error < 0 ? error : 1;
}

int reporter_patch_metadata(Reporter *r, const json_t *metadata_patch, ReporterDone done, void *userdata) {
        ReportJob *job;

        assert(r);
        assert(json_is_object(metadata_patch));

        if (!done)
                return patch_metadata(r, metadata_patch, NULL);
        job = job_new(done, userdata);
        if (!job)
                return -ENOMEM;
        return job_launched(job, patch_metadata(r, metadata_patch, job));
}

/* Condition `type` (strategic merge on /status, merged by type, so kubelet's and MCM's conditions
 * stay untouched). Nothing is sent when status, reason and message already match the watched Node
 * (docs/contract.md §8.13: every Node write is an event for every watcher). lastTransitionTime moves only
 * when the status value changes (kubelet/gardener convention). */
static int patch_condition(Reporter *r, const char *type, bool status, const char *reason,
                           const char *message, uint64_t now_usec, ReportJob *job) {
        const NodeCondition *old = node_view_condition(r->node, type);
        const char *s = status ? "True" : "False";
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *cut = NULL;
        char now[RFC3339_MAX];
        const char *transition;

        /* Bounded like the annotations: the Node's size is shared with kubelet's status. */
        if (message && strlen(message) > CONDITION_MESSAGE_MAX) {
                cut = utf8_sanitize(message, strlen(message), CONDITION_MESSAGE_MAX);
                if (!cut)
                        return -ENOMEM;
                message = cut;
        }
        if (old && old->present && streq_ptr(old->status, s) &&
            streq_ptr(strempty(old->reason), strempty(reason)) &&
            streq_ptr(strempty(old->message), strempty(message)))
                return 0;
        if (!format_rfc3339(now, now_usec, /* micro= */ false))
                return -EINVAL;
        transition = old && old->present && streq_ptr(old->status, s) ? old->last_transition_time : NULL;
        body = json_pack("{s:{s:[{s:s, s:s, s:s, s:s, s:s, s:s}]}}", "status", "conditions", "type", type,
                         "status", s, "reason", strempty(reason), "message", strempty(message),
                         "lastHeartbeatTime", now, "lastTransitionTime", transition ?: now);
        if (!body)
                return -ENOMEM;
        return reporter_patch(r, "status", KUBE_PATCH_STRATEGIC, body, job);
}

int reporter_set_condition(Reporter *r, const char *type, bool status, const char *reason,
                           const char *message, uint64_t now_usec) {
        assert(r);
        assert(node_view_condition(&(NodeView) {}, type)); /* a type we watch, for write-on-change */
        if (!r->node)
                return -ENODEV; /* no Node (yet, or any more): nothing to write to */
        return patch_condition(r, type, status, reason, message, now_usec, NULL);
}

int reporter_set_internal_ip(Reporter *r, const char *address, ReporterDone done, void *userdata) {
        _cleanup_(json_decrefp) json_t *body = NULL;
        ReportJob *job;

        assert(r);
        assert(address);
        assert(done);
        if (!r->node)
                return -ENODEV;
        /* addresses merge by type (patchMergeKey "type"): Hostname and the others stay. */
        body = json_pack("{s:{s:[{s:s, s:s}]}}", "status", "addresses", "type", "InternalIP", "address",
                         address);
        job = body ? job_new(done, userdata) : NULL;
        if (!job)
                return -ENOMEM;
        return job_launched(job, reporter_patch(r, "status", KUBE_PATCH_STRATEGIC, body, job));
}

int reporter_emit_event(Reporter *r, const char *type, const char *reason, const char *message) {
        return reporter_emit_event_action(r, type, reason, NULL, message);
}

int reporter_emit_event_action(Reporter *r, const char *type, const char *reason, const char *action,
                               const char *message) {
        assert(r);

        if (!r->events)
                return -ENODEV;
        return kube_events_emit_action(r->events, type, reason, action, message);
}

/* ---- the core's report actions --------------------------------------------------------------------- */

/* A label's value (validated where it is made); null removes it. */
static int set_label(json_t *obj, const char *key, const char *value) {
        return json_object_set_new(obj, key, value ? json_string(value) : json_null()) < 0 ? -ENOMEM : 0;
}

/* Every annotation value stays within the key's share of the Node's annotation space
 * (core/annotation-budget.h); null removes the annotation. Our JSON annotations hold the compact
 * encoding. */
static int set_json_annotation(json_t *obj, const char *key, const json_t *value) {
        _cleanup_free_ char *s = value ? annotation_fit_json(key, value) : NULL;

        return value && !s ? -ENOMEM : set_label(obj, key, s);
}

static int set_string(json_t *obj, const char *key, const char *value) {
        _cleanup_free_ char *s = value ? annotation_fit_string(key, value) : NULL;

        return value && !s ? -ENOMEM : set_label(obj, key, s);
}

/* The labels and annotations one report action writes (docs/contract.md §6, §8.12; docs/node-protocol.md
 * §6.4 step 25). */
static int build_metadata(const UpdateAction *a, json_t *labels, json_t *ann) {
        int k = 0;

        switch (a->type) {
        case UPDATE_ACTION_PUBLISH_PLAN:
                return set_json_annotation(ann, NODE_ANNOTATION_PLAN, a->json);
        case UPDATE_ACTION_REPORT_PROGRESS:
                return set_json_annotation(ann, NODE_ANNOTATION_PROGRESS, a->json);
        case UPDATE_ACTION_SET_MARKER:
                return set_string(ann, NODE_ANNOTATION_UPDATING_OS, a->version);
        case UPDATE_ACTION_SET_CHECKSUM:
                if (a->checksum)
                        k = set_string(ann, NODE_ANNOTATION_CHECKSUM, a->checksum);
                if (k >= 0 && a->version)
                        k = set_label(labels, NODE_LABEL_KUBERNETES_VERSION, a->version);
                return k;
        case UPDATE_ACTION_REPORT_RESULT:
                /* The final progress and update-result travel in one patch (docs/contract.md §8.12). */
                if (a->json)
                        k = set_json_annotation(ann, NODE_ANNOTATION_PROGRESS, a->json);
                if (k >= 0)
                        k = set_json_annotation(ann, NODE_ANNOTATION_FAILURE, a->failure);
                if (k >= 0 && a->result != NODE_UPDATE_RESULT_NONE)
                        k = set_label(labels, NODE_LABEL_UPDATE_RESULT,
                                      node_update_result_to_string(a->result));
                if (k >= 0 && a->clear_marker) {
                        k = set_string(ann, NODE_ANNOTATION_UPDATING_OS, NULL);
                        if (k >= 0)
                                k = set_string(ann, NODE_ANNOTATION_FAILED_REASON, NULL);
                } else if (k >= 0 && a->reason && !a->keep_reason)
                        k = set_string(ann, NODE_ANNOTATION_FAILED_REASON, a->reason);
                return k;
        default:
                return 0;
        }
}

bool reporter_handles(UpdateActionType t) {
        switch (t) {
        case UPDATE_ACTION_PUBLISH_PLAN:
        case UPDATE_ACTION_REPORT_PROGRESS:
        case UPDATE_ACTION_REPORT_RESULT:
        case UPDATE_ACTION_SET_MARKER:
        case UPDATE_ACTION_SET_CHECKSUM:
        case UPDATE_ACTION_EMIT_EVENT:
                return true;
        default:
                return false;
        }
}

static void reporter_mark_progress(Reporter *r, UpdatePhase phase, unsigned percent, uint64_t now_usec) {
        r->progress_phase = phase;
        r->progress_percent = percent;
        r->progress_usec = now_usec;
}

int reporter_report(Reporter *r, const UpdateTransaction *tx, const UpdateAction *a, uint64_t now_usec,
                    ReporterDone done, void *userdata) {
        _cleanup_(json_decrefp) json_t *labels = json_object(), *ann = json_object(), *md = json_object();
        bool condition = a->type == UPDATE_ACTION_REPORT_PROGRESS || a->type == UPDATE_ACTION_REPORT_RESULT;
        ReportJob *job;
        int k;

        assert(r);
        assert(reporter_handles(a->type));

        if (a->type == UPDATE_ACTION_EMIT_EVENT) {
                k = reporter_emit_event(r, a->event_type, a->event_reason, a->message);
                return k < 0 ? k : 1;
        }
        if (!labels || !ann || !md || build_metadata(a, labels, ann) < 0)
                return -ENOMEM;
        if ((json_object_size(labels) > 0 && json_object_set(md, "labels", labels) < 0) ||
            (json_object_size(ann) > 0 && json_object_set(md, "annotations", ann) < 0))
                return -ENOMEM;
        if (a->type == UPDATE_ACTION_REPORT_PROGRESS)
                reporter_mark_progress(r, a->phase, update_transaction_percent(tx), now_usec);
        /* GNA's Event right before the checksum that says so (docs/node-protocol.md §1.3); best effort, like
         * every Event: the checksum is what counts. */
        if (a->type == UPDATE_ACTION_SET_CHECKSUM && a->checksum)
                IGNORE_RESULT(reporter_emit_event_action(r, "Normal", REPORTER_REASON_OSC_APPLIED,
                                                         "Reconcile", REPORTER_MESSAGE_OSC_APPLIED));

        job = job_new(done, userdata);
        if (!job)
                return -ENOMEM;
        k = 0;
        if (json_object_size(md) > 0)
                k = patch_metadata(r, md, job);
        if (k >= 0 && condition) {
                int c = patch_condition(r, NODE_CONDITION_AGENT, a->condition_status, a->condition_reason,
                                        a->message, now_usec, job);
                /* The condition is worth less than the metadata: its failure alone fails nothing
                 * already in flight. */
                if (c < 0 && job->pending == 0)
                        k = c;
        }
        return job_launched(job, k);
}

void reporter_progress(Reporter *r, const UpdateTransaction *tx, const UpdateAction *a, uint64_t done,
                       uint64_t total, uint64_t now_usec, const char *status) {
        _cleanup_(json_decrefp) json_t *progress = NULL, *ann = NULL, *md = NULL;
        unsigned percent = total > 0 ? (unsigned) (done * 100 / total) : 0;

        assert(r);
        if (!a ||
            !progress_should_write(r->progress_phase, r->progress_percent, r->progress_usec, a->phase,
                                   percent, now_usec))
                return;
        progress = update_progress_json(tx, update_step_to_string(a->step), done, total, percent, now_usec);
        ann = json_object();
        if (!progress || !ann || set_json_annotation(ann, NODE_ANNOTATION_PROGRESS, progress) < 0)
                return;
        md = json_pack("{s:O}", "annotations", ann);
        if (!md)
                return;
        reporter_mark_progress(r, a->phase, percent, now_usec);
        if (status)
                reporter_set_status(r, "%s: %u%%", status, percent);
        /* Fire and forget: an intermediate figure that does not arrive is replaced by the next. No
         * Node (a fresh node's first OSC): STATUS= only. */
        if (r->node)
                (void) patch_metadata(r, md, NULL);
}

/* RFC 6901: "~" -> "~0", "/" -> "~1". */
static char *json_pointer_escape(const char *s) {
        char *out = malloc(strlen(s) * 2 + 1), *o = out;

        if (!out)
                return NULL;
        for (; *s; s++)
                if (*s == '~' || *s == '/') {
                        *o++ = '~';
                        *o++ = *s == '~' ? '0' : '1';
                } else
                        *o++ = *s;
        *o = 0;
        return out;
}

int reporter_remove_annotation(Reporter *r, const char *key, const char *value, ReporterDone done,
                               void *userdata) {
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *escaped = NULL, *pointer = NULL;
        ReportJob *job;

        assert(r);
        assert(key);
        assert(value);

        escaped = json_pointer_escape(key);
        if (!escaped || asprintf(&pointer, "/metadata/annotations/%s", escaped) < 0)
                return -ENOMEM;
        /* Conditional: "test" fails the whole patch (422) when the value changed meanwhile. */
        body = json_pack("[{s:s, s:s, s:s}, {s:s, s:s}]", "op", "test", "path", pointer, "value", value,
                         "op", "remove", "path", pointer);
        job = body ? job_new(done, userdata) : NULL;
        if (!job)
                return -ENOMEM;
        return job_launched(job, reporter_patch(r, NULL, KUBE_PATCH_JSON, body, job));
}
