/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* One unary gRPC call over a unix socket, on the loop through net/http.h: POST <method> over HTTP/2 with
 * prior knowledge (libcurl with nghttp2), content-type application/grpc, te: trailers, the request body
 * as given (a gRPC length-prefixed message). The reply is handed over as received — the body (capped),
 * grpc-status and grpc-message from the trailers, or from the headers of a trailers-only reply —
 * for the caller to decode (core/containerd-version.h). Does not log: the outcome is one callback.
 * Owns its HttpRequest; borrows the Http, which must outlive it. */

#include <stddef.h>
#include <stdint.h>

#include "net/http.h"
#include "util/macro.h"

typedef struct GrpcCall GrpcCall;

typedef struct GrpcReply {
        const char *grpc_status;  /* NULL: absent */
        const char *grpc_message; /* NULL: absent */
        const void *body;
        size_t body_size;
} GrpcReply;

/* Exactly once, unless freed before. error 0: the server answered with HTTP 200 (the gRPC status is
 * in `reply`, valid during the callback). Otherwise -errno of the transport (-ETIMEDOUT: no answer
 * within the timeout, -ECONNREFUSED, ...), -EPROTO for an HTTP status other than 200 (`http_status`
 * says which), `reply` NULL. The callback may free the GrpcCall. */
typedef void (*GrpcCallDone)(GrpcCall *c, int error, long http_status, const GrpcReply *reply,
                             void *userdata);

/* `socket_path`, `method` ("/package.Service/Method") and `request` are copied. */
int grpc_call_start(Http *http, const char *socket_path, const char *method, const void *request,
                    size_t request_size, uint64_t timeout_usec, size_t max_body, GrpcCallDone done,
                    void *userdata, GrpcCall **ret) _warn_unused_result_;
/* Cancels without callback. */
GrpcCall *grpc_call_free(GrpcCall *c);
DEFINE_CLEANUP_FUNC(GrpcCall, grpc_call_free);
