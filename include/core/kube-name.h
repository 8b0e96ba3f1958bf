/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Names of Kubernetes objects, checked the way the API server checks them (apimachinery's
 * IsDNS1123Subdomain and IsDNS1123Label), before any of them reaches a URL: a Secret named in the
 * OSC or by a Node label, the namespaces, the Node and Lease names of the configuration, names the
 * API server hands back (Pods, CSRs). A name that passes holds only [a-z0-9.-], so it can never be
 * a dot segment, a query or a second path segment. Pure: no I/O, no logging. */

#include <stdbool.h>

#include "util/macro.h"

#define KUBE_NAME_SUBDOMAIN_MAX 253
#define KUBE_NAME_LABEL_MAX 63
/* Longest part of a rejected name quoted back in a message (then "..."). */
#define KUBE_NAME_DISPLAY_MAX 80

typedef enum KubeNameKind {
        KUBE_NAME_SUBDOMAIN,    /* object names: dot-separated labels, at most 253 characters */
        KUBE_NAME_LABEL,        /* namespaces: one label, at most 63 characters */
        KUBE_NAME_PATH_SEGMENT, /* CertificateSigningRequests, which the API server names freely (kubelet's
                                 * and GNA's are base64url): apimachinery's IsValidPathSegmentName, narrowed
                                 * to what a URL carries as is: [A-Za-z0-9._~-], not "." or "..", at most 253
                                 */
        _KUBE_NAME_KIND_MAX,
        _KUBE_NAME_KIND_INVALID = -EINVAL,
} KubeNameKind;

/* NULL if `name` is valid, else why not (a static string in the API server's words). */
const char *kube_name_invalid_reason(const char *name, KubeNameKind kind);

static inline bool kube_name_is_valid(const char *name, KubeNameKind kind) {
        return !kube_name_invalid_reason(name, kind);
}

/* 0 if valid; else -EINVAL with *ret_error (if not NULL) set to
 * "<field>: \"<name>\" is not a valid <what>: <reason>", the name quoted and cut for display. */
int kube_name_check(const char *name, KubeNameKind kind, const char *field, char **ret_error);
