/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Credentials out of the OS update command's output before it is logged line by line or its tail
 * is put on the Node (gardener#15707; the rule of the secrets-never-leak test). The command is the
 * OS extension's and its output untrusted; whatever looks like a credential is replaced by
 * "[redacted]", erring on the side of hiding a harmless word:
 *   - the credentials of "Bearer <x>" / "Basic <x>" (an Authorization header, curl -v);
 *   - the user information of a URL with a password ("https://user:pw@host" -> "https://[redacted]@host");
 *   - the value after a key that names a secret ("password=x", "api_key: x", "\"token\": \"x\"",
 *     "--client-secret=x": any key containing password, passwd, passphrase, secret, token, apikey,
 *     api_key, api-key, accesskey, access_key, credential, privatekey, private_key);
 *   - Kubernetes bootstrap tokens ("abcdef.0123456789abcdef") and JWTs (service account tokens);
 *   - a PEM private key: its BEGIN line becomes "[redacted private key]", the lines up to and with
 *     its END line are dropped.
 * Pure: no I/O, no logging. */

#include <stdbool.h>
#include <stddef.h>

#define OUTPUT_REDACTED "[redacted]"
#define OUTPUT_REDACTED_KEY "[redacted private key]"

typedef struct OutputRedact {
        bool in_private_key; /* after a private key's BEGIN line, before its END line */
} OutputRedact;

/* One line (`size` bytes, no '\n'). *ret is the line with credentials replaced (NUL-terminated), or
 * NULL when the line is dropped (inside a private key). 0 or -ENOMEM. */
int output_redact_line(OutputRedact *r, const char *line, size_t size, char **ret);

/* Every line of `text` (NULL: ""); NULL only on allocation failure. */
char *output_redact_text(const char *text);
