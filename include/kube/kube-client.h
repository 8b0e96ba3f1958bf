/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Requests to the Kubernetes API server (docs/kube-api.md §1, §3, §4, §7): builds URLs from the
 * kubeconfig's server (path prefix kept), attaches credentials (kube-credentials.h), sends
 * Accept/Content-Type/User-Agent, decodes JSON responses and Status errors, and applies client-go's
 * retry rules:
 * - a 429 or 503 carrying an integer Retry-After is retried after that many seconds (at most
 *   KUBE_CLIENT_RETRIES times) — 503 only for requests that are safe to repeat (not POST); other 5xx
 *   are the caller's to handle (client-go retries those too, which for a 504 "too large resource
 *   version" only delays the relist that fixes it);
 * - a connection reset is retried after 1 s for requests that are safe to repeat (GET, PUT with a
 *   resourceVersion, DELETE, and PATCH — the agent's patches set absolute values), never for POST;
 *   a POST also goes on a fresh connection, so libcurl's own replay on dead reused connections
 *   cannot send it twice either (for the others that replay is harmless);
 * - a 401 makes the token file be re-read; if that yields a new token, the request is repeated
 *   once at once (client-go would fail it and let the caller retry).
 * Status errors are translated to -errno in exactly one place (http_error_from_result()).
 *
 * Runs on the Manager's sd_event loop; requests never block it. Does not log above debug.
 * Ownership: the KubeClient is owned by the Manager, borrows the Http and must outlive every
 * KubeRequest it handed out. A request returned through `ret` is owned by the caller (freeing it
 * cancels it without a callback); with `ret == NULL` the request is "floating": owned by the client
 * and freed after its callback, or cancelled without callback when the client is freed. */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "kube/kube-tuning.h"
#include "kube/kubeconfig.h"
#include "net/http.h"
#include "util/macro.h"

#define KUBE_CLIENT_RETRIES 10
#define KUBE_RESPONSE_MAX (8U * 1024U * 1024U)

typedef struct KubeClient KubeClient;
typedef struct KubeRequest KubeRequest;

typedef enum KubePatchType {
        KUBE_PATCH_MERGE,     /* application/merge-patch+json: labels/annotations, null deletes */
        KUBE_PATCH_STRATEGIC, /* application/strategic-merge-patch+json: conditions by type */
        KUBE_PATCH_JSON,      /* application/json-patch+json: RFC 6902, "test" preconditions */
        KUBE_PATCH_APPLY,     /* application/apply-patch+yaml: server-side apply */
        _KUBE_PATCH_TYPE_MAX,
        _KUBE_PATCH_TYPE_INVALID = -EINVAL,
} KubePatchType;

const char *kube_patch_type_to_content_type(KubePatchType t);

/* Completion. `error` is 0 for a 2xx answer, else the -errno of http_error_from_result() (HTTP:
 * 404 -ENOENT, 409 -EBUSY, 410 -ESTALE, 429 -EAGAIN, 401 -EACCES, 403 -EPERM, …; transport:
 * -ECONNREFUSED, -ETIMEDOUT, -EKEYREJECTED, …), or -EBADMSG when a 2xx body is not a JSON object.
 * `object` is the decoded body (the object, or the Status of an error; NULL when there is none or it
 * is not JSON), borrowed for the duration of the call. The callback may free the request. */
typedef void (*KubeRequestCallback)(KubeRequest *req, int error, json_t *object, void *userdata);

/* Called when the client certificate, key or CA changed on disk: long-lived requests (watches)
 * still run on connections made with the old material and should be restarted. */
typedef void (*KubeClientReconnectCallback)(KubeClient *c, void *userdata);

/* `event`, `http` and `tuning` are borrowed and must outlive the client; `kc` is copied. */
int kube_client_new(sd_event *event, Http *http, const KubeConfig *kc, const KubeTuning *tuning,
                    KubeClient **ret) _warn_unused_result_;
KubeClient *kube_client_free(KubeClient *c);
DEFINE_CLEANUP_FUNC(KubeClient, kube_client_free);

void kube_client_set_reconnect_callback(KubeClient *c, KubeClientReconnectCallback cb, void *userdata);

/* Called when the API server answered 401 and a token re-read did not help (the client certificate may
 * have been rejected: identity/ bootstraps a new one). */
typedef void (*KubeClientUnauthorizedCallback)(KubeClient *c, void *userdata);
void kube_client_set_unauthorized_callback(KubeClient *c, KubeClientUnauthorizedCallback cb, void *userdata);

/* Re-checks the certificate, key and CA files now (e.g. right after a renewal wrote them) instead of at
 * the next cert-check tick; runs the reconnect callback and returns 1 if they changed. */
int kube_client_reload_credentials(KubeClient *c);

const KubeTuning *kube_client_get_tuning(KubeClient *c);
sd_event *kube_client_get_event(KubeClient *c);

/* `path` is the API path with query, e.g. "/api/v1/nodes/n1" (appended to the server URL), as
 * kube-path.h makes it: a path that is not kube_path_is_safe() fails with -EINVAL, nothing sent.
 * Bodies are serialized compactly; `body` is not stolen. */
int kube_client_get(KubeClient *c, const char *path, KubeRequestCallback cb, void *userdata,
                    KubeRequest **ret) _warn_unused_result_;
int kube_client_delete(KubeClient *c, const char *path, KubeRequestCallback cb, void *userdata,
                       KubeRequest **ret) _warn_unused_result_;
int kube_client_post(KubeClient *c, const char *path, const json_t *body, KubeRequestCallback cb,
                     void *userdata, KubeRequest **ret) _warn_unused_result_;
int kube_client_put(KubeClient *c, const char *path, const json_t *body, KubeRequestCallback cb,
                    void *userdata, KubeRequest **ret) _warn_unused_result_;
/* The general form of the four above: `body` NULL sends none (GET, DELETE); `timeout_usec` bounds this
 * request, never beyond the client's request timeout (0: that timeout). For a caller whose answer is
 * worthless after a deadline of its own, e.g. the Lease's renewal (kubelet cuts its heartbeat requests
 * at min(lease duration, 10 s)). */
int kube_client_send(KubeClient *c, const char *method, const char *path, const json_t *body,
                     uint64_t timeout_usec, KubeRequestCallback cb, void *userdata,
                     KubeRequest **ret) _warn_unused_result_;
int kube_client_patch(KubeClient *c, const char *path, KubePatchType type, const json_t *body,
                      KubeRequestCallback cb, void *userdata, KubeRequest **ret) _warn_unused_result_;

KubeRequest *kube_request_free(KubeRequest *r);
DEFINE_CLEANUP_FUNC(KubeRequest, kube_request_free);

/* About the last answer (valid in and after the callback): HTTP status (0 if none), Status reason
 * and message (for plain-text errors the message is the body's first line), Retry-After, and how
 * many attempts were made. */
long kube_request_get_status(const KubeRequest *r);
const char *kube_request_get_reason(const KubeRequest *r);
const char *kube_request_get_message(const KubeRequest *r);
uint64_t kube_request_get_retry_after_usec(const KubeRequest *r);
unsigned kube_request_get_attempts(const KubeRequest *r);
const char *kube_request_get_method(const KubeRequest *r);
const char *kube_request_get_path(const KubeRequest *r);

/* For streaming requests (watches), which drive the HttpRequest themselves: an HttpRequest for
 * `path` with credentials, Accept and User-Agent set, not started. Fails with the credentials'
 * error if a configured credential was never readable. */
int kube_client_prepare(KubeClient *c, const char *method, const char *path,
                        HttpRequest **ret) _warn_unused_result_;
/* Feed back the HTTP status of a request made with kube_client_prepare() (401 → token re-read). */
void kube_client_observe_status(KubeClient *c, long status);

/* Monotonic now on the client's loop. */
uint64_t kube_client_now(KubeClient *c);
