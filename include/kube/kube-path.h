/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The one place where API paths are made (docs/kube-api.md §1). A name from the cluster — a Secret named
 * in the OSC or by a Node label, a Pod from a list, a CSR the server named — never reaches a URL as
 * it came: every namespace must be a DNS-1123 label and every name a DNS-1123 subdomain (a CSR's a
 * path segment name; core/kube-name.h), and each segment is percent-encoded all the same, so that
 * "../../default/secrets/other" or "x?labelSelector=y" can never select another object. Query
 * values are percent-encoded too. kube_client refuses any path that is not safe by
 * kube_path_is_safe(), so a path made elsewhere cannot slip through either. Pure: no I/O, no
 * logging. */

#include <stdbool.h>

#include "util/macro.h"

typedef enum KubeResource {
        KUBE_RESOURCE_NODES, /* /api/v1/nodes (cluster-scoped) */
        KUBE_RESOURCE_PODS,  /* /api/v1/namespaces/<ns>/pods, or /api/v1/pods for all */
        KUBE_RESOURCE_SECRETS,
        KUBE_RESOURCE_EVENTS,
        KUBE_RESOURCE_LEASES, /* coordination.k8s.io/v1 */
        KUBE_RESOURCE_CSRS,   /* certificates.k8s.io/v1 certificatesigningrequests (cluster-scoped) */
        _KUBE_RESOURCE_MAX,
        _KUBE_RESOURCE_INVALID = -EINVAL,
} KubeResource;

/* "nodes", "secrets", ... (the plural), for messages. */
const char *kube_resource_to_string(KubeResource r);

/* The path of `resource`: its collection when `name` is NULL, else the object, else (with
 * `subresource`, e.g. "status") its subresource. `namespace` is required for a namespaced resource
 * (except a collection: NULL lists every namespace) and must be NULL for a cluster-scoped one.
 * -EINVAL if a segment is not valid; -ENOMEM. */
int kube_path(KubeResource resource, const char *namespace, const char *name, const char *subresource,
              char **ret) _warn_unused_result_;

/* Appends "?key=value" (or "&key=value" if *path has a query already) to *path, reallocated; the
 * value is percent-encoded, the key must be a plain word ([A-Za-z]). -EINVAL, -ENOMEM. */
int kube_path_add_query(char **path, const char *key, const char *value) _warn_unused_result_;

/* `s` percent-encoded: every byte but RFC 3986's unreserved characters (A-Z a-z 0-9 - . _ ~) becomes
 * %XX. NULL on OOM. */
char *kube_path_escape(const char *s);

/* Whether `path` is one kube_path() (and kube_path_add_query()) can make: starts with '/', holds
 * only unreserved characters and '/' before the query, and unreserved characters, '=', '&' and
 * well-formed %XX escapes in it, and has no empty, "." or ".." segment — nothing a server or
 * libcurl could resolve to another object. */
bool kube_path_is_safe(const char *path);
