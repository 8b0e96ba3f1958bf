/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Non-blocking HTTP(S) on the sd-event loop: one curl multi handle (HTTP/2 multiplexing,
 * keep-alive) driven by sd-event io/timer sources. This is the one place where CURLcode and
 * HTTP status are translated to -errno (http_error_from_result). Does not log. URLs are sent as
 * given (CURLOPT_PATH_AS_IS): no dot segment is resolved on the way.
 *
 * Ownership: the Http object is owned by the Manager and must outlive every HttpRequest.
 * An HttpRequest is owned by whoever created it; it may be freed at any time (an active
 * transfer is cancelled, no callback fires). The done callback may free the request. */

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef struct Http Http;
typedef struct HttpRequest HttpRequest;

/* Streaming body callback: return 0 to continue, <0 (-errno) to abort the transfer; the done
 * callback then gets that error. */
typedef int (*HttpDataCallback)(HttpRequest *req, const void *data, size_t size, void *userdata);
/* Completion: `error` is 0 for a transfer that completed with any HTTP status (check status), or
 * -errno for transport failures / aborts. */
typedef void (*HttpDoneCallback)(HttpRequest *req, int error, long status, void *userdata);

/* TLS material. Blobs win over files. All pointers are borrowed only for the duration of
 * http_request_set_tls(), which copies them. */
typedef struct HttpTls {
        const char *ca_file;
        const void *ca_pem;
        size_t ca_pem_size;
        const char *cert_file;
        const void *cert_pem;
        size_t cert_pem_size;
        const char *key_file;
        const void *key_pem;
        size_t key_pem_size;
        const char *server_name; /* tls-server-name: SNI + verification name (via CONNECT_TO) */
} HttpTls;

#define HTTP_BODY_MAX_DEFAULT (16U * 1024U * 1024U)

int http_new(sd_event *event, Http **ret) _warn_unused_result_;
Http *http_free(Http *h);
DEFINE_CLEANUP_FUNC(Http, http_free);

/* Number of transfers in flight (for tests and idle checks). */
unsigned http_active(Http *h);

int http_request_new(Http *h, const char *method, const char *url, HttpRequest **ret) _warn_unused_result_;
HttpRequest *http_request_free(HttpRequest *req);
DEFINE_CLEANUP_FUNC(HttpRequest, http_request_free);

/* "Name: value". May be called repeatedly. */
int http_request_add_header(HttpRequest *req, const char *header) _warn_unused_result_;
/* Copies the body. */
int http_request_set_body(HttpRequest *req, const void *data, size_t size) _warn_unused_result_;
/* Total transfer timeout (0 = none) and connect timeout. */
void http_request_set_timeout(HttpRequest *req, uint64_t total_usec, uint64_t connect_usec);
/* Abort when fewer than `bytes` arrive within `usec` (a stalled download). curl checks every second. */
void http_request_set_low_speed(HttpRequest *req, unsigned long bytes, uint64_t usec);
/* Abort with -ETIMEDOUT when not one byte arrives for `usec` (a silent watch). One timer per silence
 * period instead of curl's once-a-second speed check, so an idle watch costs no wake-ups. */
void http_request_set_silence(HttpRequest *req, uint64_t usec);
/* Cap for buffered (non-streaming) bodies; exceeded → -EFBIG. Default HTTP_BODY_MAX_DEFAULT. */
void http_request_set_max_body(HttpRequest *req, size_t max);
/* Stream the body to `cb` instead of buffering it (non-2xx bodies are still buffered, capped). */
void http_request_set_stream(HttpRequest *req, HttpDataCallback cb);
int http_request_set_tls(HttpRequest *req, const HttpTls *tls) _warn_unused_result_;
/* Follow redirects (registries redirect blobs to storage). Off by default. */
void http_request_set_follow(HttpRequest *req, bool follow);
/* Range request starting at `offset` (resume). */
void http_request_set_resume_from(HttpRequest *req, uint64_t offset);
/* Use a new connection instead of a pooled one. libcurl silently re-sends a request whose reused
 * connection died before any answer byte arrived — even a POST it had fully sent, which the server
 * may have executed. On a fresh connection it never does that. */
void http_request_set_fresh_connect(HttpRequest *req, bool fresh);

/* Connect to the unix socket `path` (copied) instead of the URL's host, speaking HTTP/2 without
 * upgrade (prior knowledge), as a gRPC server on a local socket expects, on a connection of its own
 * (closed after the request); the URL's host is only the :authority. */
int http_request_set_unix_socket(HttpRequest *req, const char *path) _warn_unused_result_;

int http_request_start(HttpRequest *req, HttpDoneCallback done, void *userdata) _warn_unused_result_;
void http_request_cancel(HttpRequest *req);
bool http_request_is_active(HttpRequest *req);

/* Valid after completion. The body is NUL-terminated (size excludes the NUL). */
const char *http_request_get_body(HttpRequest *req, size_t *ret_size);
long http_request_get_status(HttpRequest *req);
/* Last value of a response header (case-insensitive name), NULL if absent. Headers of the final
 * response only (after redirects). The string is libcurl's: valid until the request is started
 * again or freed. */
const char *http_request_get_header(HttpRequest *req, const char *name);
/* The same for a trailer (HTTP/2 trailing headers, gRPC's grpc-status), NULL if absent. */
const char *http_request_get_trailer(HttpRequest *req, const char *name);
/* Retry-After in usec (integer seconds only), or 0 if absent/invalid. */
uint64_t http_request_get_retry_after_usec(HttpRequest *req);
const char *http_request_get_url(HttpRequest *req);
void *http_request_get_userdata(HttpRequest *req);

/* The one translation from libcurl/HTTP to -errno:
 * timeouts → -ETIMEDOUT; resolve/connect failures → -EHOSTUNREACH / -ECONNREFUSED;
 * TLS verification → -EKEYREJECTED; other TLS → -ENOKEY? (see .c); partial/recv → -ECONNRESET;
 * HTTP 401/403 → -EACCES/-EPERM; 404 → -ENOENT; 409 → -EBUSY; 410 → -ESTALE; 413 → -EFBIG;
 * 415/422/400 → -EINVAL; 429 → -EAGAIN; 5xx → -EIO... 2xx → 0. */
int http_error_from_result(CURLcode code, long status);
