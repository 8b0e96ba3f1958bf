/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* containerd's Version call (containerd/api services/version/v1/version.proto), the question upstream's
 * containerd health check asks (healthcheck/containerd.go: containerdClient.Version()), as bytes: the
 * request's gRPC body and the decoding of the reply — the grpc-status and grpc-message the server
 * sent (a trailer, or a header of a trailers-only reply), and the body: one length-prefixed gRPC
 * message holding the protobuf VersionResponse {1: string version, 2: string revision}. The transport
 * (HTTP/2 over containerd's unix socket) is net/grpc-call.h's. Pure: no I/O, no logging; the reply is
 * untrusted and bounded (fuzzed: tests/fuzz/fuzz-containerd-version.c). */

#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define CONTAINERD_VERSION_METHOD "/containerd.services.version.v1.Version/Version"
/* The gRPC message of a reply: a VersionResponse is two short strings. */
#define CONTAINERD_VERSION_MESSAGE_MAX 4096
/* Each of version and revision; a longer one is refused, not cut. */
#define CONTAINERD_VERSION_FIELD_MAX 256
/* grpc-message as quoted in an error. */
#define CONTAINERD_VERSION_GRPC_MESSAGE_MAX 512

typedef struct ContainerdVersion {
        char *version;  /* owned; "" when the reply had none */
        char *revision; /* owned; "" when the reply had none */
} ContainerdVersion;

void containerd_version_done(ContainerdVersion *v);

/* The request body: one uncompressed gRPC message of zero bytes (google.protobuf.Empty). */
extern const uint8_t containerd_version_request[5];

/* A reply: `grpc_status` and `grpc_message` as received (NULL: absent), `body` the HTTP/2 DATA.
 * 0 and *ret filled on grpc-status 0 with one well-formed VersionResponse. Otherwise -EBADMSG (or
 * -ENOMEM) and *ret_error says what was wrong, Go's gRPC error text for a status other than 0
 * ("rpc error: code = Unavailable desc = ..."). */
int containerd_version_decode(const char *grpc_status, const char *grpc_message, const void *body,
                              size_t size, ContainerdVersion *ret, char **ret_error);

/* The gRPC status code's name ("Unavailable"), or NULL for a code gRPC does not define. */
const char *grpc_code_to_string(unsigned code);
