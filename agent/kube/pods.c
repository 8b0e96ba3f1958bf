/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube/kube-path.h"
#include "kube/pods.h"
#include "util/log.h"

/* Names in messages at most as long as Kubernetes allows them (a DNS subdomain): whatever the list
 * held, a message stays readable. */
#define POD_NAME_FORMAT "%.253s/%.253s"

struct PodCleanup {
        KubeClient *client;    /* borrowed */
        char *node_name;       /* owned */
        KubeRequest *list;     /* owned */
        KubeRequest **deletes; /* owned: one per Pod to delete (NULL: not sent) */
        size_t n_deletes;
        size_t pending; /* requests in flight, +1 while DELETEs are being sent */
        int error;      /* the first failure */
        char *message;  /* owned: what failed, for which Pod */
        bool listed;    /* `selection` holds the list */
        PodSelection selection;
        PodCleanupDone done;
        void *userdata;
};

/* The one place this module builds API paths: the LIST of the node's Pods (pod NULL), or the DELETE
 * of one Pod. docs/kube-api.md §3.2: Pods of a node are selected by spec.nodeName. */
/* Names the server handed back go through kube_path() like any other name (kube/kube-path.h). */
static int pods_path(const char *node_name, const PodEntry *pod, char **ret) {
        _cleanup_free_ char *path = NULL, *selector = NULL;
        int r;

        if (pod)
                return kube_path(KUBE_RESOURCE_PODS, pod->namespace, pod->name, NULL, ret);
        if (asprintf(&selector, "spec.nodeName=%s", node_name) < 0)
                return -ENOMEM;
        r = kube_path(KUBE_RESOURCE_PODS, NULL, NULL, NULL, &path);
        if (r >= 0)
                r = kube_path_add_query(&path, "fieldSelector", selector);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(path);
        return 0;
}

PodCleanup *pod_cleanup_free(PodCleanup *pc) {
        if (!pc)
                return NULL;
        kube_request_free(pc->list);
        for (size_t i = 0; i < pc->n_deletes; i++)
                kube_request_free(pc->deletes[i]);
        free(pc->deletes);
        pod_selection_done(&pc->selection);
        free(pc->message);
        free(pc->node_name);
        free(pc);
        return NULL;
}

/* Keeps the first failure: the one the caller reports. */
_printf_(3, 4) static void record_failure(PodCleanup *pc, int error, const char *format, ...) {
        va_list ap;

        if (pc->error < 0)
                return;
        pc->error = error;
        va_start(ap, format);
        if (vasprintf(&pc->message, format, ap) < 0)
                pc->message = NULL;
        va_end(ap);
}

/* What the server said, else the errno's text. */
static const char *failure_text(const KubeRequest *req, int error) {
        const char *m = req ? kube_request_get_message(req) : NULL;

        return isempty(m) ? strerror(-error) : m;
}

/* Calls `done`, which may free `pc`: nothing touches it afterwards. */
static void finish(PodCleanup *pc) {
        PodCleanupDone done = pc->done;

        pc->done = NULL;
        if (done)
                done(pc, pc->error, pc->error < 0 ? (pc->message ?: strerror(-pc->error)) : NULL,
                     pc->listed ? &pc->selection : NULL, pc->userdata);
}

static void request_ended(PodCleanup *pc) {
        assert(pc->pending > 0);
        if (--pc->pending == 0)
                finish(pc);
}

static const PodEntry *entry_of(PodCleanup *pc, const KubeRequest *req) {
        for (size_t i = 0, k = 0; i < pc->selection.n_pods; i++) {
                if (pc->selection.pods[i].verdict != POD_DELETE)
                        continue;
                if (pc->deletes[k++] == req)
                        return &pc->selection.pods[i];
        }
        return NULL;
}

static void on_deleted(KubeRequest *req, int error, json_t *object, void *userdata) {
        PodCleanup *pc = userdata;

        /* 404: deleted meanwhile, by its controller or an earlier attempt of ours. */
        if (error < 0 && error != -ENOENT) {
                const PodEntry *e = entry_of(pc, req);

                record_failure(pc, error, "deleting Pod " POD_NAME_FORMAT " failed: %s",
                               e ? e->namespace : "?", e ? e->name : "?", failure_text(req, error));
        }
        log_debug("DELETE %s: %s", kube_request_get_path(req), error < 0 ? strerror(-error) : "ok");
        request_ended(pc);
}

static void send_deletes(PodCleanup *pc) {
        pc->pending = 1; /* held until every DELETE was sent */
        for (size_t i = 0; i < pc->selection.n_pods; i++) {
                const PodEntry *e = &pc->selection.pods[i];
                _cleanup_free_ char *path = NULL;
                int r;

                if (e->verdict != POD_DELETE)
                        continue;
                r = pods_path(NULL, e, &path);
                if (r >= 0)
                        r = kube_client_delete(pc->client, path, on_deleted, pc,
                                               &pc->deletes[pc->n_deletes]);
                pc->n_deletes++;
                if (r < 0) {
                        /* Never sent: the Pod is still there, the run must not pass for done. */
                        record_failure(pc, r,
                                       "deleting Pod " POD_NAME_FORMAT " failed: the request could not be "
                                       "sent: %s",
                                       e->namespace, e->name, strerror(-r));
                        continue;
                }
                pc->pending++;
        }
        request_ended(pc);
}

static void on_listed(KubeRequest *req, int error, json_t *object, void *userdata) {
        PodCleanup *pc = userdata;
        _cleanup_free_ char *why = NULL;
        int r;

        if (error < 0) {
                record_failure(pc, error, "listing the Pods bound to node %s failed: %s", pc->node_name,
                               failure_text(req, error));
                finish(pc);
                return;
        }
        r = pod_selection_from_list(object, &pc->selection, &why);
        if (r < 0) {
                record_failure(pc, r, "listing the Pods bound to node %s failed: %s", pc->node_name,
                               why ?: strerror(-r));
                finish(pc);
                return;
        }
        pc->listed = true;
        pc->deletes = calloc(pc->selection.n_delete ?: 1, sizeof(KubeRequest *));
        if (!pc->deletes) {
                record_failure(pc, -ENOMEM, "deleting the Pods bound to node %s failed: %s", pc->node_name,
                               strerror(ENOMEM));
                finish(pc);
                return;
        }
        send_deletes(pc);
}

int pod_cleanup_start(KubeClient *client, const char *node_name, PodCleanupDone done, void *userdata,
                      PodCleanup **ret) {
        _cleanup_(pod_cleanup_freep) PodCleanup *pc = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        assert(client);
        assert(node_name);
        assert(ret);

        pc = calloc(1, sizeof(PodCleanup));
        if (!pc)
                return -ENOMEM;
        *pc = (PodCleanup) { .client = client, .done = done, .userdata = userdata };
        pc->node_name = strdup(node_name);
        if (!pc->node_name)
                return -ENOMEM;
        r = pods_path(node_name, NULL, &path);
        if (r < 0)
                return r;
        r = kube_client_get(client, path, on_listed, pc, &pc->list);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(pc);
        return 0;
}
