/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pod-selection.h"
#include "util/macro.h"
#include "util/string-util.h"

#define TAIL_MAX (sizeof(" and 18446744073709551615 more") - 1)

static const char *const verdict_names[_POD_VERDICT_MAX] = {
        [POD_DELETE] = "delete",
        [POD_SKIP_MIRROR] = "mirror pod",
        [POD_SKIP_STATIC] = "static pod",
        [POD_SKIP_RESOURCE_MANAGER] = POD_APP_RESOURCE_MANAGER,
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(pod_verdict, PodVerdict, verdict_names);

static const char *member_string(const json_t *o, const char *key) {
        return json_string_value(json_object_get(o, key));
}

static bool owned_by_node(const json_t *metadata) {
        const json_t *ref;
        size_t i;

        json_array_foreach(json_object_get(metadata, "ownerReferences"), i, ref)
                if (streq_ptr(member_string(ref, "kind"), "Node"))
                        return true;
        return false;
}

PodVerdict pod_verdict(const json_t *pod) {
        const json_t *md = json_object_get(pod, "metadata");

        /* The kubelet's own first: never through the API, whatever their labels say. */
        if (json_object_get(json_object_get(md, "annotations"), POD_ANNOTATION_MIRROR))
                return POD_SKIP_MIRROR;
        if (owned_by_node(md))
                return POD_SKIP_STATIC;
        if (streq_ptr(member_string(json_object_get(md, "labels"), POD_LABEL_APP), POD_APP_RESOURCE_MANAGER))
                return POD_SKIP_RESOURCE_MANAGER;
        return POD_DELETE;
}

void pod_selection_done(PodSelection *s) {
        for (size_t i = 0; i < s->n_pods; i++) {
                free(s->pods[i].namespace);
                free(s->pods[i].name);
        }
        free(s->pods);
        *s = (PodSelection) {};
}

_printf_(2, 3) static int bad_list(char **ret_error, const char *format, ...) {
        va_list ap;

        if (!ret_error)
                return -EBADMSG;
        va_start(ap, format);
        if (vasprintf(ret_error, format, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return -EBADMSG;
}

int pod_selection_from_list(const json_t *list, PodSelection *ret, char **ret_error) {
        _cleanup_(pod_selection_done) PodSelection s = {};
        const json_t *items = json_object_get(list, "items"), *pod;
        size_t i;

        assert(ret);

        if (ret_error)
                *ret_error = NULL;
        /* A list with no Pods may come without "items" (omitempty); anything else is not a PodList. */
        if (!json_is_object(list) || (items && !json_is_array(items)))
                return bad_list(ret_error, "the Pod list is not a PodList");
        /* Never NULL, also for an empty list: the loop below indexes it. */
        s.pods = calloc(MAX(json_array_size(items), (size_t) 1), sizeof(PodEntry));
        if (!s.pods)
                return -ENOMEM;
        json_array_foreach(items, i, pod) {
                const json_t *md = json_object_get(pod, "metadata");
                const char *ns = member_string(md, "namespace"), *name = member_string(md, "name");
                PodEntry *e = &s.pods[s.n_pods];

                if (isempty(ns) || isempty(name))
                        return bad_list(ret_error,
                                        "item %zu of the Pod list has no metadata.namespace and "
                                        "metadata.name",
                                        i);
                e->namespace = strdup(ns);
                e->name = strdup(name);
                if (!e->namespace || !e->name) {
                        s.n_pods++; /* freed with the rest */
                        return -ENOMEM;
                }
                e->verdict = pod_verdict(pod);
                s.n_pods++;
                if (e->verdict == POD_DELETE)
                        s.n_delete++;
        }
        *ret = s;
        s = (PodSelection) {};
        return 0;
}

/* ---- the Event ---- */

static size_t entry_length(const PodEntry *e, bool with_reason) {
        size_t n = strlen(e->namespace) + 1 + strlen(e->name);

        return with_reason ? n + strlen(" ()") + strlen(pod_verdict_to_string(e->verdict)) : n;
}

/* The names of the `n` entries that are deleted (or left alone), in at most `budget` bytes. */
static int append_names(char **buf, const PodSelection *s, bool deleted, size_t n, size_t budget) {
        size_t used = 0, shown = 0;
        int r;

        for (size_t i = 0; i < s->n_pods; i++) {
                const PodEntry *e = &s->pods[i];
                size_t len;

                if ((e->verdict == POD_DELETE) != deleted)
                        continue;
                len = (shown > 0 ? 2 : 0) + entry_length(e, !deleted);
                if (used + len + (shown + 1 < n ? TAIL_MAX : 0) > budget)
                        break;
                r = deleted ? strextendf_with_separator(buf, ", ", "%s/%s", e->namespace, e->name) :
                              strextendf_with_separator(buf, ", ", "%s/%s (%s)", e->namespace, e->name,
                                                        pod_verdict_to_string(e->verdict));
                if (r < 0)
                        return r;
                used += len;
                shown++;
        }
        if (shown < n)
                return strextendf_with_separator(
                        buf, NULL, shown > 0 ? " and %zu more" : "%zu not named here", n - shown);
        return 0;
}

char *pod_selection_message(const PodSelection *s, size_t max) {
        _cleanup_free_ char *head = NULL, *tail = NULL, *names = NULL, *skipped_names = NULL;
        size_t skipped = s->n_pods - s->n_delete, fixed, budget, used;
        char *m;

        if (asprintf(&head, "Deleted %zu Pod(s) still bound to the node after the in-place update",
                     s->n_delete) < 0)
                return NULL;
        if (skipped > 0 && asprintf(&tail, " Left alone %zu: ", skipped) < 0)
                return NULL;
        /* ": " and "." after the deleted names, "." after the others, the NUL */
        fixed = strlen(head) + 3 + (tail ? strlen(tail) + 1 : 0) + 1;
        budget = max > fixed ? max - fixed : 0;
        if (s->n_delete > 0 &&
            append_names(&names, s, /* deleted= */ true, s->n_delete, skipped > 0 ? budget / 2 : budget) < 0)
                return NULL;
        used = strlen(strempty(names));
        if (skipped > 0 &&
            append_names(&skipped_names, s, /* deleted= */ false, skipped,
                         budget > used ? budget - used : 0) < 0)
                return NULL;
        if (asprintf(&m, "%s%s%s.%s%s%s", head, names ? ": " : "", strempty(names), strempty(tail),
                     strempty(skipped_names), tail ? "." : "") < 0)
                return NULL;
        if (strlen(m) >= max && max > 0)
                m[max - 1] = '\0'; /* only when `max` cannot even hold the counts */
        return m;
}
