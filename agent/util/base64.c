/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <limits.h>
#include <openssl/evp.h>

#include "util/base64.h"
#include "util/macro.h"

int base64_encode(const void *data, size_t size, bool url, char **ret) {
        _cleanup_free_ char *out = NULL;
        int n;

        assert(data || size == 0);
        assert(ret);

        if (size > (size_t) INT_MAX / 4 * 3 - 3)
                return -E2BIG;
        out = malloc((size + 2) / 3 * 4 + 1);
        if (!out)
                return -ENOMEM;
        n = EVP_EncodeBlock((unsigned char *) out, data, (int) size);
        if (url) {
                for (int i = 0; i < n; i++)
                        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
                while (n > 0 && out[n - 1] == '=')
                        n--;
        }
        out[n] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}
