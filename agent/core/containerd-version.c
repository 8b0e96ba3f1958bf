/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/containerd-version.h"
#include "util/utf8.h"

#define GRPC_PREFIX_SIZE 5

/* Protobuf wire types (https://protobuf.dev/programming-guides/encoding/). */
enum {
        WIRE_VARINT = 0,
        WIRE_FIXED64 = 1,
        WIRE_LEN = 2,
        WIRE_FIXED32 = 5,
};

const uint8_t containerd_version_request[5] = { 0, 0, 0, 0, 0 };

static const char *const grpc_code_table[] = {
        "OK",       "Canceled",        "Unknown",          "InvalidArgument",   "DeadlineExceeded",
        "NotFound", "AlreadyExists",   "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
        "Aborted",  "OutOfRange",      "Unimplemented",    "Internal",          "Unavailable",
        "DataLoss", "Unauthenticated",
};

const char *grpc_code_to_string(unsigned code) {
        return code < ELEMENTSOF(grpc_code_table) ? grpc_code_table[code] : NULL;
}

void containerd_version_done(ContainerdVersion *v) {
        if (!v)
                return;
        free(v->version);
        free(v->revision);
        *v = (ContainerdVersion) {};
}

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(ret_error, fmt, ap);
        va_end(ap);
        if (r < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return -EBADMSG;
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* grpc-message is percent-encoded (gRPC over HTTP/2, "Responses"); a bad escape is kept as it is. */
static char *grpc_message_decode(const char *s) {
        size_t n = strlen(s), j = 0;
        _cleanup_free_ char *raw = malloc(n + 1);

        if (!raw)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                int hi = i + 2 < n && s[i] == '%' ? hex_digit(s[i + 1]) : -1;
                int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;

                if (lo >= 0) {
                        raw[j++] = (char) (hi << 4 | lo);
                        i += 2;
                } else
                        raw[j++] = s[i];
        }
        return utf8_sanitize(raw, j, CONTAINERD_VERSION_GRPC_MESSAGE_MAX);
}

/* grpc-status: "0" or a decimal without sign or leading zeros, as gRPC sends it. */
static int grpc_status_parse(const char *s, unsigned *ret) {
        unsigned v = 0;

        if (isempty(s) || strlen(s) > 3 || (s[0] == '0' && s[1]))
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned) (*p - '0');
        }
        *ret = v;
        return 0;
}

static int grpc_status_check(const char *status, const char *message, char **ret_error) {
        _cleanup_free_ char *desc = NULL, *quoted = NULL;
        const char *name;
        unsigned code;

        if (!status)
                return fail(ret_error, "the reply carries no grpc-status");
        if (grpc_status_parse(status, &code) < 0) {
                quoted = utf8_quote(status, MIN(strlen(status), 32u));
                return quoted ? fail(ret_error, "the reply's grpc-status %s is not a status code", quoted) :
                                -ENOMEM;
        }
        if (code == 0)
                return 0;
        desc = grpc_message_decode(strempty(message));
        if (!desc)
                return -ENOMEM;
        name = grpc_code_to_string(code);
        if (name)
                return fail(ret_error, "rpc error: code = %s desc = %s", name, desc);
        return fail(ret_error, "rpc error: code = Code(%u) desc = %s", code, desc);
}

typedef struct Reader {
        const uint8_t *p, *end;
} Reader;

static int read_varint(Reader *r, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64; shift += 7) {
                uint8_t b;

                if (r->p >= r->end)
                        return -EBADMSG;
                b = *r->p++;
                if (shift == 63 && b > 1)
                        return -EBADMSG; /* more than 64 bits */
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

static int skip(Reader *r, uint64_t n) {
        if (n > (uint64_t) (r->end - r->p))
                return -EBADMSG;
        r->p += n;
        return 0;
}

/* A string field: valid UTF-8 without control characters, at most CONTAINERD_VERSION_FIELD_MAX. */
static int read_string(Reader *r, const char *name, char **field, char **ret_error) {
        uint64_t n;
        const char *s;
        char *copy;

        if (read_varint(r, &n) < 0 || n > (uint64_t) (r->end - r->p))
                return fail(ret_error, "VersionResponse: field %s runs past the message", name);
        if (n > CONTAINERD_VERSION_FIELD_MAX)
                return fail(ret_error, "VersionResponse: field %s is %llu bytes long (at most %d)", name,
                            (unsigned long long) n, CONTAINERD_VERSION_FIELD_MAX);
        s = (const char *) r->p;
        if (!utf8_is_valid(s, n))
                return fail(ret_error, "VersionResponse: field %s is not UTF-8", name);
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return fail(ret_error, "VersionResponse: field %s holds a control character", name);
        copy = strndup(s, n);
        if (!copy)
                return -ENOMEM;
        free(*field);
        *field = copy; /* a repeated field: the last one wins, as protobuf says */
        r->p += n;
        return 0;
}

static int decode_response(const uint8_t *msg, size_t size, ContainerdVersion *v, char **ret_error) {
        Reader r = { msg, msg + size };

        while (r.p < r.end) {
                uint64_t key, field, ignored;
                unsigned wire;
                int k;

                if (read_varint(&r, &key) < 0)
                        return fail(ret_error, "VersionResponse: a field key runs past the message");
                field = key >> 3;
                wire = (unsigned) (key & 7);
                if (field == 0 || field > UINT32_MAX >> 3)
                        return fail(ret_error, "VersionResponse: field number %llu is invalid",
                                    (unsigned long long) field);
                if ((field == 1 || field == 2) && wire != WIRE_LEN)
                        return fail(ret_error, "VersionResponse: field %s has wire type %u, not a string",
                                    field == 1 ? "version" : "revision", wire);
                switch (wire) {
                case WIRE_VARINT:
                        k = read_varint(&r, &ignored);
                        break;
                case WIRE_FIXED64:
                        k = skip(&r, 8);
                        break;
                case WIRE_FIXED32:
                        k = skip(&r, 4);
                        break;
                case WIRE_LEN:
                        if (field == 1 || field == 2) {
                                k = read_string(&r, field == 1 ? "version" : "revision",
                                                field == 1 ? &v->version : &v->revision, ret_error);
                                if (k < 0)
                                        return k;
                                continue;
                        }
                        k = read_varint(&r, &ignored);
                        if (k >= 0)
                                k = skip(&r, ignored);
                        break;
                default: /* groups (3, 4) are not proto3; 6 and 7 do not exist */
                        return fail(ret_error, "VersionResponse: field %llu has wire type %u",
                                    (unsigned long long) field, wire);
                }
                if (k < 0)
                        return fail(ret_error, "VersionResponse: field %llu runs past the message",
                                    (unsigned long long) field);
        }
        return 0;
}

/* One length-prefixed message (gRPC over HTTP/2, "Length-Prefixed-Message"), uncompressed: we sent no
 * grpc-accept-encoding, so a server may not compress. */
static int grpc_unframe(const uint8_t *body, size_t size, const uint8_t **ret_msg, size_t *ret_size,
                        char **ret_error) {
        uint32_t n;

        if (size < GRPC_PREFIX_SIZE)
                return fail(ret_error, "the reply holds %zu bytes, not a gRPC message", size);
        if (body[0] != 0)
                return fail(ret_error, "the reply's gRPC message is compressed (flag %u)", body[0]);
        n = (uint32_t) body[1] << 24 | (uint32_t) body[2] << 16 | (uint32_t) body[3] << 8 | body[4];
        if (n > CONTAINERD_VERSION_MESSAGE_MAX)
                return fail(ret_error, "the reply's gRPC message is %u bytes long (at most %d)", n,
                            CONTAINERD_VERSION_MESSAGE_MAX);
        if ((size_t) n != size - GRPC_PREFIX_SIZE)
                return fail(ret_error, "the reply holds %zu bytes after the gRPC prefix, which announces %u",
                            size - GRPC_PREFIX_SIZE, n);
        *ret_msg = body + GRPC_PREFIX_SIZE;
        *ret_size = n;
        return 0;
}

int containerd_version_decode(const char *grpc_status, const char *grpc_message, const void *body,
                              size_t size, ContainerdVersion *ret, char **ret_error) {
        _cleanup_(containerd_version_done) ContainerdVersion v = {};
        const uint8_t *msg = NULL;
        size_t n = 0;
        int r;

        assert(body || size == 0);
        assert(ret);
        assert(ret_error);

        *ret_error = NULL;
        r = grpc_status_check(grpc_status, grpc_message, ret_error);
        if (r < 0)
                return r;
        r = grpc_unframe(body, size, &msg, &n, ret_error);
        if (r < 0)
                return r;
        r = decode_response(msg, n, &v, ret_error);
        if (r < 0)
                return r;
        if ((!v.version && !(v.version = strdup(""))) || (!v.revision && !(v.revision = strdup(""))))
                return -ENOMEM;
        *ret = TAKE_STRUCT(v);
        return 0;
}
