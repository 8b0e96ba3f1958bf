/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/kube-name.h"
#include "kube/kube-path.h"

static const struct {
        const char *prefix; /* group and version */
        const char *plural;
        bool namespaced;
        KubeNameKind names;
} resources[_KUBE_RESOURCE_MAX] = {
        [KUBE_RESOURCE_NODES] = { "/api/v1", "nodes", false, KUBE_NAME_SUBDOMAIN },
        [KUBE_RESOURCE_PODS] = { "/api/v1", "pods", true, KUBE_NAME_SUBDOMAIN },
        [KUBE_RESOURCE_SECRETS] = { "/api/v1", "secrets", true, KUBE_NAME_SUBDOMAIN },
        [KUBE_RESOURCE_EVENTS] = { "/api/v1", "events", true, KUBE_NAME_SUBDOMAIN },
        [KUBE_RESOURCE_LEASES] = { "/apis/coordination.k8s.io/v1", "leases", true, KUBE_NAME_SUBDOMAIN },
        [KUBE_RESOURCE_CSRS] = { "/apis/certificates.k8s.io/v1", "certificatesigningrequests", false,
                                 KUBE_NAME_PATH_SEGMENT },
};

const char *kube_resource_to_string(KubeResource r) {
        return r >= 0 && r < _KUBE_RESOURCE_MAX ? resources[r].plural : NULL;
}

static bool is_unreserved(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                c == '.' || c == '_' || c == '~';
}

static bool is_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

char *kube_path_escape(const char *s) {
        static const char hex[] = "0123456789ABCDEF";
        char *out, *o;

        assert(s);

        out = malloc(strlen(s) * 3 + 1);
        if (!out)
                return NULL;
        o = out;
        for (const char *p = s; *p; p++) {
                unsigned char c = (unsigned char) *p;

                if (is_unreserved(*p)) {
                        *o++ = *p;
                        continue;
                }
                *o++ = '%';
                *o++ = hex[c >> 4];
                *o++ = hex[c & 0xf];
        }
        *o = '\0';
        return out;
}

static bool is_word(const char *s) {
        if (isempty(s))
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                        return false;
        return true;
}

int kube_path(KubeResource resource, const char *namespace, const char *name, const char *subresource,
              char **ret) {
        _cleanup_free_ char *ns = NULL, *n = NULL;
        char *path;

        assert(ret);

        if (resource < 0 || resource >= _KUBE_RESOURCE_MAX)
                return -EINVAL;
        if (resources[resource].namespaced ? !namespace && name : !!namespace)
                return -EINVAL;
        if ((namespace && !kube_name_is_valid(namespace, KUBE_NAME_LABEL)) ||
            (name && !kube_name_is_valid(name, resources[resource].names)) ||
            (subresource && (!name || !is_word(subresource))))
                return -EINVAL;
        /* Valid names hold nothing to escape; escaped all the same, so that no later change of the
         * rules can turn a name into a second segment. */
        if (namespace && !(ns = kube_path_escape(namespace)))
                return -ENOMEM;
        if (name && !(n = kube_path_escape(name)))
                return -ENOMEM;
        if (asprintf(&path, "%s%s%s/%s%s%s%s%s", resources[resource].prefix, ns ? "/namespaces/" : "",
                     strempty(ns), resources[resource].plural, n ? "/" : "", strempty(n),
                     subresource ? "/" : "", strempty(subresource)) < 0)
                return -ENOMEM;
        *ret = path;
        return 0;
}

int kube_path_add_query(char **path, const char *key, const char *value) {
        _cleanup_free_ char *v = NULL;
        char *joined;

        assert(path && *path);
        assert(value);

        if (!is_word(key))
                return -EINVAL;
        v = kube_path_escape(value);
        if (!v || asprintf(&joined, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, v) < 0)
                return -ENOMEM;
        free(*path);
        *path = joined;
        return 0;
}

bool kube_path_is_safe(const char *path) {
        const char *query;

        if (!path || path[0] != '/')
                return false;
        query = strchrnul(path, '?');
        for (const char *seg = path + 1;;) {
                const char *end = memchr(seg, '/', (size_t) (query - seg)) ?: query;
                size_t n = (size_t) (end - seg);

                if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                        return false;
                if (end == query)
                        break;
                seg = end + 1;
        }
        for (const char *p = path; *p; p++) {
                if (is_unreserved(*p) || (*p == '/' && p < query) || (p >= query && strchr("?=&", *p)))
                        continue;
                /* Escapes only in the query: a server that unescapes the path first would see a
                 * "%2E%2E" segment as "..". Valid names never need one. */
                if (*p == '%' && p > query && is_hex(p[1]) && is_hex(p[2])) {
                        p += 2;
                        continue;
                }
                return false;
        }
        return true;
}
