/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Base64 encoding (RFC 4648 §4, and §5 "base64url" without padding) of a buffer into an owned string.
 * Pure: OpenSSL's EVP_EncodeBlock in memory, no I/O, no logging. */

#include <stdbool.h>
#include <stddef.h>

/* -ENOMEM, or -E2BIG for inputs OpenSSL's int lengths cannot take. */
int base64_encode(const void *data, size_t size, bool url, char **ret);
