/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Where the API server is and how to authenticate (docs/kube-api.md §2.1, §2.2): a kubeconfig file
 * (YAML or JSON) resolved through current-context to one cluster and one user, or, when the file
 * does not exist, the in-cluster service-account setup. Only what a node agent needs is accepted:
 * server, CA (file or data), tls-server-name, token, tokenFile, client certificate/key (file or
 * data). Anything that would weaken or bypass TLS verification (insecure-skip-tls-verify), run a
 * program (exec), or authenticate differently (auth-provider, username/password, impersonation,
 * proxy-url) is refused with an error that names the field; unknown fields are ignored like
 * client-go does. Relative paths are resolved against the kubeconfig's directory.
 *
 * Parsing is pure; kubeconfig_load() reads the one file (and checks that in-cluster files exist).
 * Does not log; errors come back as -errno plus a message. No event loop. */

#include <stddef.h>

#include "util/macro.h"

#define KUBECONFIG_FILE_MAX (1024U * 1024U)
#define KUBECONFIG_SERVICE_ACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct KubeConfig {
        char *source;          /* owned: the file, or "in-cluster", for messages */
        char *server;          /* owned: "https://host:port[/prefix]", no trailing '/' */
        char *tls_server_name; /* owned; NULL: verify against the URL's host */
        char *ca_file;         /* owned: absolute path; NULL if ca_data or none */
        char *ca_data;         /* owned: PEM bytes (decoded certificate-authority-data); NULL if none */
        size_t ca_data_size;
        char *cert_file; /* owned: absolute path; NULL if cert_data or none */
        char *cert_data; /* owned: PEM bytes; NULL if none */
        size_t cert_data_size;
        char *key_file; /* owned: absolute path; NULL if key_data or none */
        char *key_data; /* owned: PEM bytes; NULL if none */
        size_t key_data_size;
        char *token;      /* owned: static bearer token; NULL if none */
        char *token_file; /* owned: absolute path, re-read periodically; wins over token */
        char *namespace;  /* owned: the context's namespace; NULL if unset */
} KubeConfig;

KubeConfig *kubeconfig_free(KubeConfig *c);
DEFINE_CLEANUP_FUNC(KubeConfig, kubeconfig_free);

/* Parses kubeconfig text. `path` names the file in messages and anchors relative paths (its
 * directory); it need not exist. -EINVAL with *ret_error ("<path>: <field>: <reason>") for invalid
 * or unsupported content, -EBADMSG for YAML syntax errors, -ENOMEM. */
int kubeconfig_parse(const char *text, size_t size, const char *path, KubeConfig **ret,
                     char **ret_error) _warn_unused_result_;

/* In-cluster configuration: server https://<host>:<port> (IPv6 hosts bracketed), tokenFile
 * <sa_dir>/token, CA file <sa_dir>/ca.crt, namespace from <sa_dir>/namespace if readable. -ENOENT
 * with a message when host/port are unset or the token or CA file is missing. */
int kubeconfig_in_cluster(const char *host, const char *port, const char *sa_dir, KubeConfig **ret,
                          char **ret_error) _warn_unused_result_;

/* Reads `path`; if it does not exist, falls back to the in-cluster configuration from
 * $KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT and KUBECONFIG_SERVICE_ACCOUNT_DIR. -ENOENT
 * (with a message naming both) when neither is available. */
int kubeconfig_load(const char *path, KubeConfig **ret, char **ret_error) _warn_unused_result_;
