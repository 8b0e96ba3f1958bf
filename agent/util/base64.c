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

static bool is_alphabet(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                c == '/';
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* Whether `text` is canonical padded base64, and how many '=' end it. EVP_DecodeBlock alone is
 * no judge: it reads '=' anywhere as a zero sextet and trims leading and trailing whitespace. */
static bool is_strict(const char *text, size_t n, size_t *ret_pad) {
        size_t pad = 0;

        if (n % 4 != 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                if (text[i] == '=' && i + 2 >= n) {
                        pad++;
                        continue;
                }
                if (pad > 0 || !is_alphabet(text[i]))
                        return false;
        }
        *ret_pad = pad;
        return true;
}

int base64_decode_full(const char *text, size_t n, bool strict, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *packed = NULL;
        _cleanup_free_ unsigned char *out = NULL;
        size_t pad, size;
        int len;

        assert(text || n == 0);
        assert(ret);
        assert(ret_size);

        if (!strict) {
                size_t m = 0;

                packed = malloc(n + 1);
                if (!packed)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if (!is_blank(text[i]))
                                packed[m++] = text[i];
                text = packed;
                n = m;
        }
        if (n > (size_t) INT_MAX || !is_strict(text, n, &pad))
                return -EBADMSG;
        size = n / 4 * 3 - pad;
        if (size > max)
                return -EFBIG;
        out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        /* Checked above, so this cannot fail; it counts the padding as zero bytes. */
        len = EVP_DecodeBlock(out, (const unsigned char *) text, (int) n);
        if (len < 0 || (size_t) len != size + pad)
                return -EBADMSG;
        out[size] = '\0';
        *ret = (char *) TAKE_PTR(out);
        *ret_size = size;
        return 0;
}

int base64_decode(const char *text, size_t max, char **ret, size_t *ret_size) {
        assert(text);
        return base64_decode_full(text, strlen(text), /* strict= */ true, max, ret, ret_size);
}
