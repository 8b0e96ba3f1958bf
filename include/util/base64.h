/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Base64 encoding (RFC 4648 §4, and §5 "base64url" without padding) of a buffer into an owned string.
 * Pure: OpenSSL's EVP_EncodeBlock in memory, no I/O, no logging. */

#include <stdbool.h>
#include <stddef.h>

/* -ENOMEM, or -E2BIG for inputs OpenSSL's int lengths cannot take. */
int base64_encode(const void *data, size_t size, bool url, char **ret);

/* The one decoder: `n` bytes of standard base64 (RFC 4648 §4, padded) into an owned NUL-terminated
 * buffer (the NUL is not counted in *ret_size).
 *   strict: Go's base64.StdEncoding, what the API server writes into Secret data and []byte fields
 *           and docker into config.json: only the alphabet, a length that is a multiple of four, at
 *           most two '=' and only at the end;
 *   not strict: the same after spaces, tabs, CR and LF anywhere are skipped (kubeconfig's -data
 *           fields, which YAML block scalars may break into lines).
 * -EBADMSG if malformed (a NUL inside `text` included), -EFBIG if the result would exceed `max`
 * (SIZE_MAX: no limit), -ENOMEM. */
int base64_decode_full(const char *text, size_t n, bool strict, size_t max, char **ret, size_t *ret_size);

/* The strict decoder on a NUL-terminated `text`. */
int base64_decode(const char *text, size_t max, char **ret, size_t *ret_size);
