/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The credentials of the Kubernetes client, kept fresh like client-go does (docs/kube-api.md §2.3):
 * - tokenFile is re-read when the last successful read is older than the refresh period (≤ 60 s)
 *   and after a 401; whitespace is trimmed; an empty or unreadable file keeps the last good token.
 *   A tokenFile that was read successfully wins over a static token.
 * - client certificate, key and CA files are read into memory and handed to libcurl as blobs. They
 *   are re-checked (inode, size, mtime) on kube_credentials_check_files(), which the caller runs
 *   every few minutes, and re-read when they changed. A changed certificate or key is reported so
 *   the caller can drop long-lived connections; libcurl does not reuse a connection made with
 *   different certificate blobs, so new requests use new connections anyway.
 * TLS verification is not configurable here or anywhere else.
 *
 * Reads small local files synchronously (bounded sizes); time is passed in. Does not log. No
 * event loop. */

#include <stdbool.h>
#include <stdint.h>

#include "kube/kubeconfig.h"
#include "net/http.h"
#include "util/macro.h"

#define KUBE_CREDENTIALS_FILE_MAX (1024U * 1024U)
#define KUBE_TOKEN_MAX (64U * 1024U)

typedef struct KubeCredentials KubeCredentials;

/* Copies what it needs from `kc` and reads the files once; files that cannot be read yet are
 * retried on every refresh. `token_refresh_usec` is the token re-read period. */
int kube_credentials_new(const KubeConfig *kc, uint64_t token_refresh_usec, uint64_t now_usec,
                         KubeCredentials **ret) _warn_unused_result_;
KubeCredentials *kube_credentials_free(KubeCredentials *c);
DEFINE_CLEANUP_FUNC(KubeCredentials, kube_credentials_free);

/* Before each request: re-reads the token file if due (or invalidated), and retries TLS files that
 * were never read. Returns 0 when everything configured is available, -errno of the failed read
 * (e.g. -ENOENT) when a configured credential has never been read successfully. */
int kube_credentials_refresh(KubeCredentials *c, uint64_t now_usec) _warn_unused_result_;

/* stat()s the certificate, key and CA files and re-reads changed ones. Returns 1 if the client
 * certificate, key or CA content changed, 0 if not. A file that vanished or became unreadable keeps
 * its last content (a rotation in progress). */
int kube_credentials_check_files(KubeCredentials *c);

/* After a 401: the next refresh re-reads the token file. Returns true if there is a token file
 * (so a retry with a possibly new token makes sense). */
bool kube_credentials_invalidate_token(KubeCredentials *c);

/* The bearer token, or NULL for certificate-only or anonymous access. Valid until the next refresh. */
const char *kube_credentials_token(const KubeCredentials *c);

/* TLS material for http_request_set_tls(); pointers valid until the next refresh/check. */
void kube_credentials_tls(const KubeCredentials *c, HttpTls *ret);
