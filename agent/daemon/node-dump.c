/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/node-dump.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/string-util.h"
#include "util/time-util.h"

#define NODE_VIEW_FILE "node-view.json"
#define DEBUG_JSON_MAX 4096

static const char *node_string(const json_t *node, const char *field) {
        return json_string_value(json_object_get(json_object_get(node, "metadata"), field));
}

static char *json_compact(const json_t *j) {
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");

        if (s && strlen(s) > DEBUG_JSON_MAX)
                memcpy(s + DEBUG_JSON_MAX - 3, "...", 4);
        return s;
}

void node_dump(const char *node_name, const json_t *node, const char *state_directory, bool mirror) {
        _cleanup_free_ char *path = NULL, *data = NULL, *labels = NULL, *annotations = NULL;
        json_t *md = json_object_get(node, "metadata");
        _cleanup_(json_decrefp) json_t *view = NULL, *empty_object = NULL, *empty_array = NULL;
        json_t *conditions;
        int r;

        labels = json_compact(json_object_get(md, "labels"));
        annotations = json_compact(json_object_get(md, "annotations"));
        log_debug("Node %s: present=%s uid=%s rv=%s labels=%s annotations=%s", node_name,
                  node ? "yes" : "no", strempty(node_string(node, "uid")),
                  strempty(node_string(node, "resourceVersion")), strempty(labels), strempty(annotations));
        if (!mirror)
                return;

        empty_object = json_object();
        empty_array = json_array();
        conditions = json_object_get(json_object_get(node, "status"), "conditions");
        view = json_pack("{s:s, s:b, s:I, s:O?, s:O?}", "name", node_name, "present", node != NULL,
                         "updatedUsec", (json_int_t) clock_now_usec(CLOCK_REALTIME), "metadata",
                         md ?: empty_object, "conditions", conditions ?: empty_array);
        data = view ? json_dumps(view, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!data || asprintf(&path, "%s/%s", state_directory, NODE_VIEW_FILE) < 0) {
                log_oom();
                return;
        }
        r = write_file_atomic(path, data, strlen(data), 0600);
        if (r < 0)
                log_debug_errno(r, "Failed to write %s: %m", path);
}
