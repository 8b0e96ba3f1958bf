/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <openssl/evp.h>
#include <stdio.h>

#include "oci/digest.h"

struct DigestContext {
        EVP_MD_CTX *md; /* owned */
        uint64_t size;
};

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -EINVAL;
}

static bool algorithm_is_wellformed(const char *s, size_t n) {
        /* OCI image-spec descriptor grammar: algorithm-component ([a-z0-9]+) joined by [+._-]. */
        if (n == 0 || n > 32)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '+' ||
                      s[i] == '.' || s[i] == '_' || s[i] == '-'))
                        return false;
        return true;
}

int digest_parse(const char *s, Digest *ret) {
        Digest d;
        const char *colon, *hex;

        assert(ret);

        if (!s)
                return -EINVAL;
        colon = strchr(s, ':');
        if (!colon || !algorithm_is_wellformed(s, (size_t) (colon - s)))
                return -EINVAL;
        if ((size_t) (colon - s) != 6 || strncmp(s, "sha256", 6) != 0)
                return -EPROTONOSUPPORT;

        hex = colon + 1;
        if (strlen(hex) != 2 * DIGEST_SHA256_SIZE)
                return -EINVAL;
        for (size_t i = 0; i < DIGEST_SHA256_SIZE; i++) {
                int hi = unhex(hex[2 * i]), lo = unhex(hex[2 * i + 1]);

                if (hi < 0 || lo < 0)
                        return -EINVAL;
                d.sha256[i] = (uint8_t) (hi << 4 | lo);
        }
        *ret = d;
        return 0;
}

char *digest_format_hex(const Digest *d, char *buf) {
        static const char digits[] = "0123456789abcdef";

        for (size_t i = 0; i < DIGEST_SHA256_SIZE; i++) {
                buf[2 * i] = digits[d->sha256[i] >> 4];
                buf[2 * i + 1] = digits[d->sha256[i] & 0xf];
        }
        buf[2 * DIGEST_SHA256_SIZE] = '\0';
        return buf;
}

char *digest_format(const Digest *d, char *buf) {
        snprintf(buf, 8, "sha256:");
        (void) digest_format_hex(d, buf + 7);
        return buf;
}

int digest_equal(const Digest *a, const Digest *b) {
        /* Digests are public values: no need for a constant-time compare. */
        return memcmp(a->sha256, b->sha256, DIGEST_SHA256_SIZE) == 0;
}

int digest_buffer(const void *data, size_t size, Digest *ret) {
        _cleanup_(digest_context_freep) DigestContext *c = NULL;
        int r;

        r = digest_context_new(&c);
        if (r < 0)
                return r;
        r = digest_context_update(c, data, size);
        if (r < 0)
                return r;
        return digest_context_final(c, ret);
}

int digest_context_new(DigestContext **ret) {
        _cleanup_(digest_context_freep) DigestContext *c = NULL;
        int r;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->md = EVP_MD_CTX_new();
        if (!c->md)
                return -ENOMEM;
        r = digest_context_reset(c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

DigestContext *digest_context_free(DigestContext *c) {
        if (!c)
                return NULL;
        EVP_MD_CTX_free(c->md);
        free(c);
        return NULL;
}

int digest_context_reset(DigestContext *c) {
        assert(c);
        c->size = 0;
        return EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) == 1 ? 0 : -EIO;
}

int digest_context_update(DigestContext *c, const void *data, size_t size) {
        assert(c);
        if (size == 0)
                return 0;
        if (EVP_DigestUpdate(c->md, data, size) != 1)
                return -EIO;
        c->size += size;
        return 0;
}

uint64_t digest_context_size(const DigestContext *c) {
        return c->size;
}

int digest_context_final(DigestContext *c, Digest *ret) {
        Digest d;
        unsigned n = 0;

        assert(c);
        assert(ret);

        if (EVP_DigestFinal_ex(c->md, d.sha256, &n) != 1 || n != DIGEST_SHA256_SIZE)
                return -EIO;
        *ret = d;
        return digest_context_reset(c);
}

int digest_verify(const Digest *expected, const Digest *actual, char **ret_message) {
        char e[DIGEST_STRING_MAX], a[DIGEST_STRING_MAX];

        assert(expected);
        assert(actual);

        if (digest_equal(expected, actual))
                return 0;
        if (ret_message &&
            asprintf(ret_message, "digest mismatch: expected %s, got %s", digest_format(expected, e),
                     digest_format(actual, a)) < 0)
                return -ENOMEM;
        return -EBADMSG;
}
