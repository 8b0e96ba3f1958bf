/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Content digests of OCI objects: parsing and formatting "sha256:<64 hex>", and a streaming SHA-256
 * (libcrypto EVP) that is fed while data arrives, so nothing needs to be read twice. Pure: no event
 * loop, no file or network I/O, does not log. Only sha256 is accepted; other algorithms that the OCI
 * spec allows (sha512) are refused with -EPROTONOSUPPORT rather than silently not verified. */

#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define DIGEST_SHA256_SIZE 32
/* "sha256:" + 64 hex digits + NUL */
#define DIGEST_STRING_MAX (7 + 2 * DIGEST_SHA256_SIZE + 1)

typedef struct Digest {
        uint8_t sha256[DIGEST_SHA256_SIZE];
} Digest;

/* Parses "sha256:<64 lower-case hex>". -EPROTONOSUPPORT for another well-formed algorithm,
 * -EINVAL for anything malformed (upper-case hex included: digests are canonical). */
int digest_parse(const char *s, Digest *ret) _warn_unused_result_;
/* Writes "sha256:<hex>" into buf (at least DIGEST_STRING_MAX bytes) and returns buf. */
char *digest_format(const Digest *d, char *buf);
/* The 64 hex digits only (for file names). buf needs 2 * DIGEST_SHA256_SIZE + 1 bytes. */
char *digest_format_hex(const Digest *d, char *buf);
int digest_equal(const Digest *a, const Digest *b);

/* One-shot hash of a buffer. */
int digest_buffer(const void *data, size_t size, Digest *ret) _warn_unused_result_;

/* Streaming hash. */
typedef struct DigestContext DigestContext;
int digest_context_new(DigestContext **ret) _warn_unused_result_;
DigestContext *digest_context_free(DigestContext *c);
DEFINE_CLEANUP_FUNC(DigestContext, digest_context_free);
int digest_context_update(DigestContext *c, const void *data, size_t size) _warn_unused_result_;
/* Number of bytes fed so far. */
uint64_t digest_context_size(const DigestContext *c);
/* Finishes the hash; the context is reset and may be reused afterwards. */
int digest_context_final(DigestContext *c, Digest *ret) _warn_unused_result_;
/* Starts over (used when a resumed download has to restart from byte 0). */
int digest_context_reset(DigestContext *c) _warn_unused_result_;

/* Compares `actual` against `expected`. 0 when equal; otherwise -EBADMSG and, if ret_message is
 * non-NULL, "digest mismatch: expected sha256:..., got sha256:..." (owned by the caller). */
int digest_verify(const Digest *expected, const Digest *actual, char **ret_message) _warn_unused_result_;
