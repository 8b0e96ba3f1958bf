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

int base64_decode(const char *text, size_t max, char **ret, size_t *ret_size) {
        size_t n = strlen(text);
        _cleanup_free_ unsigned char *out = NULL;
        int len;

        assert(ret);
        assert(ret_size);

        if (n % 4 != 0)
                return -EBADMSG;
        /* n / 4 * 3 - 2 is the least the text can decode to; "max + 2" would wrap for max = SIZE_MAX
         * (no limit) and refuse everything longer than four characters. */
        if ((n / 4 * 3 > 2 && n / 4 * 3 - 2 > max) || n > (size_t) INT_MAX)
                return -EFBIG;
        out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        len = EVP_DecodeBlock(out, (const unsigned char *) text, (int) n);
        if (len < 0)
                return -EBADMSG;
        /* EVP_DecodeBlock counts the padding as zero bytes. */
        for (size_t i = n; i > 0 && text[i - 1] == '='; i--)
                len--;
        if ((size_t) len > max)
                return -EFBIG;
        out[len] = '\0';
        *ret = (char *) TAKE_PTR(out);
        *ret_size = (size_t) len;
        return 0;
}
