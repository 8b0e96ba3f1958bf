/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Base64 encoding (RFC 4648 §4, and §5 "base64url" without padding) of a buffer into an owned string.
 * Pure: OpenSSL's EVP_EncodeBlock in memory, no I/O, no logging. */

#include <stdbool.h>
#include <stddef.h>

/* -ENOMEM, or -E2BIG for inputs OpenSSL's int lengths cannot take. */
int base64_encode(const void *data, size_t size, bool url, char **ret);

/* Standard base64 with padding (what Kubernetes puts in []byte fields) into an owned NUL-terminated
 * buffer; -EBADMSG if malformed, -EFBIG if the result would exceed `max`. */
int base64_decode(const char *text, size_t max, char **ret, size_t *ret_size);
