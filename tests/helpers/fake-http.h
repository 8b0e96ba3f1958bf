/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A canned-response HTTP/1.1 server on loopback, driven by the same sd_event loop as the code
 * under test. Each accepted request is answered with the next queued response (or 404).
 * Test-only; plain HTTP, or HTTPS with a self-signed certificate for 127.0.0.1 (fake_http_new_tls()):
 * the Kubernetes client speaks only https://, as kubeconfig.h requires. */

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

typedef struct FakeHttp FakeHttp;

typedef struct FakeResponse {
        int status;
        const char *headers; /* extra header lines, each ending in "\r\n"; may be NULL */
        const char *body;    /* may be NULL */
        size_t body_size;    /* 0: body is a string; else its size in bytes (binary) */
        bool chunked;        /* send body with Transfer-Encoding: chunked */
        size_t chunk_size;   /* split the body into chunks of this size (0 = one) */
        bool close_early;    /* drop the connection after the body, without the final chunk */
        bool hold;           /* chunked: keep the connection open after the body, no final
                              * chunk (a watch that stays up) */
        bool stall;          /* announce the whole body, send stall_after bytes of it, then
                              * nothing more while keeping the connection open */
        size_t stall_after;
} FakeResponse;

int fake_http_new(sd_event *e, FakeHttp **ret);
/* HTTPS: a fresh key and certificate (SAN IP:127.0.0.1), which is its own CA, as PEM. */
int fake_http_new_tls(sd_event *e, FakeHttp **ret);
const char *fake_http_ca_pem(FakeHttp *f);
FakeHttp *fake_http_free(FakeHttp *f);
unsigned fake_http_port(FakeHttp *f);
/* Queues a response; strings are copied. */
int fake_http_push(FakeHttp *f, const FakeResponse *r);
/* Instead of the queue, `handler` answers each request (its request line, headers and body): true
 * with *ret filled in (strings borrowed until the handler runs again), or false to leave it
 * unanswered for now — asked again at fake_http_wake() (a watch that waits for a change). */
typedef bool (*FakeHttpHandler)(const char *request, FakeResponse *ret, void *userdata);
void fake_http_set_handler(FakeHttp *f, FakeHttpHandler handler, void *userdata);
void fake_http_wake(FakeHttp *f);

/* Number of requests received (answered or not), and the last request line + headers + body. */
unsigned fake_http_requests(FakeHttp *f);
const char *fake_http_last_request(FakeHttp *f);
/* Request number i (from 0) as above; NULL if not served yet. */
const char *fake_http_request(FakeHttp *f, unsigned i);
