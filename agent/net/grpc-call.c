/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "net/grpc-call.h"

struct GrpcCall {
        HttpRequest *req; /* owned */
        GrpcCallDone done;
        void *userdata; /* borrowed */
};

GrpcCall *grpc_call_free(GrpcCall *c) {
        if (!c)
                return NULL;
        http_request_free(c->req);
        free(c);
        return NULL;
}

/* A trailers-only reply (gRPC over HTTP/2: an error without a body) carries the status in its headers. */
static const char *grpc_field(HttpRequest *req, const char *name) {
        const char *v = http_request_get_trailer(req, name);

        return v ? v : http_request_get_header(req, name);
}

static void grpc_call_on_done(HttpRequest *req, int error, long status, void *userdata) {
        GrpcCall *c = userdata;
        GrpcReply reply = {};

        if (error < 0) {
                c->done(c, error, status, NULL, c->userdata);
                return;
        }
        if (status != 200) {
                c->done(c, -EPROTO, status, NULL, c->userdata);
                return;
        }
        reply.grpc_status = grpc_field(req, "grpc-status");
        reply.grpc_message = grpc_field(req, "grpc-message");
        reply.body = http_request_get_body(req, &reply.body_size);
        c->done(c, 0, status, &reply, c->userdata);
}

int grpc_call_start(Http *http, const char *socket_path, const char *method, const void *request,
                    size_t request_size, uint64_t timeout_usec, size_t max_body, GrpcCallDone done,
                    void *userdata, GrpcCall **ret) {
        _cleanup_(grpc_call_freep) GrpcCall *c = NULL;
        _cleanup_free_ char *url = NULL;
        int r;

        assert(http && socket_path && method && done && ret);
        assert(request || request_size == 0);

        if (method[0] != '/')
                return -EINVAL;
        /* The host is only the :authority; gRPC's Go client says "localhost" for a unix socket too. */
        if (asprintf(&url, "http://localhost%s", method) < 0)
                return -ENOMEM;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->done = done;
        c->userdata = userdata;
        r = http_request_new(http, "POST", url, &c->req);
        if (r < 0)
                return r;
        r = http_request_set_unix_socket(c->req, socket_path);
        if (r >= 0)
                r = http_request_add_header(c->req, "Content-Type: application/grpc");
        if (r >= 0)
                r = http_request_add_header(c->req, "TE: trailers");
        if (r >= 0)
                r = http_request_set_body(c->req, request, request_size);
        if (r < 0)
                return r;
        http_request_set_timeout(c->req, timeout_usec, timeout_usec);
        http_request_set_max_body(c->req, max_body);
        r = http_request_start(c->req, grpc_call_on_done, c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}
