/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>
#include <time.h>

#include "core/node-labels.h"
#include "duties/node-labeler.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/time-util.h"

struct NodeLabeler {
        Reporter *reporter;   /* borrowed */
        char *zone_path;      /* owned */
        char *zone;           /* owned; NULL: no zone file */
        LogOnce zone_error;   /* the last read error, logged once */
        bool control_plane;   /* the last OSC handed over has the kube-apiserver manifest */
        bool writing;         /* a label patch is in flight */
        uint64_t failed_usec; /* CLOCK_MONOTONIC of the last failed patch; 0: none */
};

/* After a failed patch (e.g. forbidden), Node events do not each bring another one. */
#define NODE_LABELER_RETRY_USEC (5 * 60 * USEC_PER_SEC)

int node_labeler_new(Reporter *reporter, const char *zone_path, NodeLabeler **ret) {
        _cleanup_(node_labeler_freep) NodeLabeler *l = NULL;

        assert(reporter);
        assert(zone_path);
        assert(ret);
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->reporter = reporter;
        l->zone_path = strdup(zone_path);
        if (!l->zone_path)
                return -ENOMEM;
        node_labeler_reload(l);
        *ret = TAKE_PTR(l);
        return 0;
}

NodeLabeler *node_labeler_free(NodeLabeler *l) {
        if (!l)
                return NULL;
        free(l->zone_path);
        free(l->zone);
        log_once_done(&l->zone_error);
        free(l);
        return NULL;
}

void node_labeler_reload(NodeLabeler *l) {
        _cleanup_free_ char *data = NULL, *zone = NULL;
        int r;

        assert(l);
        r = read_full_file(l->zone_path, 4096, &data, NULL);
        if (r >= 0)
                r = node_zone_from_file(data, &zone);
        if (r < 0 && r != -ENOENT) {
                if (log_once_check(&l->zone_error, r, NULL))
                        log_warning_errno(r, "Ignoring the zone file %s: %m", l->zone_path);
        } else
                log_once_clear(&l->zone_error);
        free(l->zone);
        l->zone = TAKE_PTR(zone);
}

void node_labeler_set_control_plane(NodeLabeler *l, bool control_plane) {
        assert(l);
        l->control_plane = control_plane;
}

static void node_labeler_on_done(int error, void *userdata) {
        NodeLabeler *l = userdata;

        /* A failure is logged by the reporter; a Node event after the retry interval tries again. */
        l->writing = false;
        l->failed_usec = error < 0 ? clock_now_usec(CLOCK_MONOTONIC) : 0;
}

void node_labeler_sync(NodeLabeler *l, const NodeView *v) {
        _cleanup_(json_decrefp) json_t *patch = NULL;
        int r;

        assert(l);
        if (!v || l->writing ||
            (l->failed_usec && clock_now_usec(CLOCK_MONOTONIC) - l->failed_usec < NODE_LABELER_RETRY_USEC))
                return;
        r = node_labels_patch(v, l->control_plane, l->zone, &patch);
        if (r < 0) {
                log_oom();
                return;
        }
        if (!patch)
                return;
        log_info("Labelling node %s as %s%s%s.", strempty(v->name),
                 l->control_plane ? "control-plane" : "a worker", l->zone ? " in zone " : "",
                 strempty(l->zone));
        r = reporter_patch_metadata(l->reporter, patch, node_labeler_on_done, l);
        if (r == 0)
                l->writing = true;
        else if (r < 0 && r != -ENODEV)
                log_debug_errno(r, "Cannot label the node: %m");
}
