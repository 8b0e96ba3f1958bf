/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <string.h>

#include "core/node-labels.h"
#include "util/macro.h"

/* A label value: empty or [A-Za-z0-9] at both ends with [-_.A-Za-z0-9] between, at most 63. */
static bool label_value_valid(const char *s, size_t n) {
        if (n == 0 || n > NODE_LABEL_VALUE_MAX || !isalnum((unsigned char) s[0]) ||
            !isalnum((unsigned char) s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char) s[i]) && !strchr("-_.", s[i]))
                        return false;
        return true;
}

int node_zone_from_file(const char *content, char **ret) {
        const char *b = content, *e;
        char *z;

        assert(content);
        assert(ret);
        while (isspace((unsigned char) *b))
                b++;
        e = b + strlen(b);
        while (e > b && isspace((unsigned char) e[-1]))
                e--;
        if (!label_value_valid(b, (size_t) (e - b)))
                return -EINVAL;
        z = strndup(b, (size_t) (e - b));
        if (!z)
                return -ENOMEM;
        *ret = z;
        return 0;
}

int node_labels_patch(const NodeView *v, bool control_plane, const char *zone, json_t **ret) {
        _cleanup_(json_decrefp) json_t *labels = json_object();
        const char *role = control_plane ? NODE_LABEL_ROLE_CONTROL_PLANE : NODE_LABEL_ROLE_WORKER;
        const char *have;

        assert(v);
        assert(ret);
        if (!labels)
                return -ENOMEM;
        have = control_plane ? v->role_control_plane : v->role_worker;
        if (!streq_ptr(have, "") && json_object_set_new(labels, role, json_string("")) < 0)
                return -ENOMEM;
        if (zone && !streq_ptr(v->zone, zone) &&
            json_object_set_new(labels, NODE_LABEL_ZONE, json_string(zone)) < 0)
                return -ENOMEM;
        if (json_object_size(labels) == 0) {
                *ret = NULL;
                return 0;
        }
        *ret = json_pack("{s:O}", "labels", labels);
        return *ret ? 1 : -ENOMEM;
}
