/* SPDX-License-Identifier: Apache-2.0 */
/* WWW-Authenticate headers, token answers and auth.json from the outside world. The first byte picks
 * the parser. */
#include <stdint.h>

#include "oci/registry-auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL, *url = NULL, *token = NULL, *basic = NULL;
        _cleanup_(registry_challenge_freep) RegistryChallenge *ch = NULL;
        _cleanup_(registry_credentials_freep) RegistryCredentials *cr = NULL;
        uint64_t exp;

        if (size < 1 || size > 64 * 1024)
                return 0;
        s = strndup((const char *) data + 1, size - 1);
        if (!s)
                return 0;
        switch (data[0] % 3) {
        case 0:
                if (registry_challenge_parse(s, &ch) >= 0)
                        IGNORE_RESULT(registry_challenge_token_url(ch, "repository:a/b:pull", &url));
                break;
        case 1:
                IGNORE_RESULT(registry_token_parse(data + 1, size - 1, &token, &exp));
                break;
        default:
                if (registry_auth_file_lookup(data + 1, size - 1, "reg.io:5000", "team/app", &cr) >= 0)
                        IGNORE_RESULT(registry_credentials_basic_header(cr, &basic));
                break;
        }
        return 0;
}
