/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/utf8.h"

size_t utf8_sequence_length(const char *s, size_t n) {
        const unsigned char *u = (const unsigned char *) s;
        size_t len;
        unsigned cp;

        if (n == 0)
                return 0;
        if (u[0] < 0x80)
                return 1;
        if (u[0] >= 0xc2 && u[0] <= 0xdf) {
                len = 2;
                cp = u[0] & 0x1f;
        } else if (u[0] >= 0xe0 && u[0] <= 0xef) {
                len = 3;
                cp = u[0] & 0x0f;
        } else if (u[0] >= 0xf0 && u[0] <= 0xf4) {
                len = 4;
                cp = u[0] & 0x07;
        } else
                return 0;
        if (n < len)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((u[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (u[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

bool utf8_is_valid(const char *s, size_t n) {
        for (size_t i = 0; i < n;) {
                size_t l = utf8_sequence_length(s + i, n - i);
                if (l == 0)
                        return false;
                i += l;
        }
        return true;
}

/* One sanitised character at s[i]: its replacement byte in *ret_c when it is a single byte, and
 * its length in the input (= in the output). */
static size_t sanitize_one(const char *s, size_t n, size_t i, char *ret_c) {
        size_t l = utf8_sequence_length(s + i, n - i);
        char c = s[i];

        if (l == 0 || c == '\0')
                c = '?';
        else if (l == 1 && ((unsigned char) c < 0x20 || c == 0x7f) && c != '\n' && c != '\t')
                c = ' ';
        *ret_c = c;
        return l == 0 ? 1 : l;
}

char *utf8_sanitize(const char *s, size_t n, size_t max_bytes) {
        size_t o = 0, limit = max_bytes;
        bool cut = n > max_bytes; /* sanitising never changes the length */
        char *out;

        assert(s || n == 0);

        if (cut && max_bytes >= 3)
                limit = max_bytes - 3;
        out = malloc(MIN(n, max_bytes) + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n;) {
                char c;
                size_t l = sanitize_one(s, n, i, &c);

                if (o + l > limit)
                        break;
                if (l == 1)
                        out[o] = c;
                else
                        memcpy(out + o, s + i, l);
                o += l;
                i += l;
        }
        if (cut && max_bytes >= 3) {
                memcpy(out + o, "...", 3);
                o += 3;
        }
        out[o] = '\0';
        return out;
}

char *utf8_quote(const char *s, size_t n) {
        char *out, *p;

        assert(s || n == 0);

        out = malloc(n * 4 + 3); /* worst case: every byte becomes \xNN */
        if (!out)
                return NULL;
        p = out;
        *p++ = '"';
        for (size_t i = 0; i < n;) {
                unsigned char c = (unsigned char) s[i];
                size_t l = utf8_sequence_length(s + i, n - i);

                if (l > 1) {
                        memcpy(p, s + i, l);
                        p += l;
                        i += l;
                        continue;
                }
                i++;
                switch (c) {
                case '"':
                        p = stpcpy(p, "\\\"");
                        break;
                case '\\':
                        p = stpcpy(p, "\\\\");
                        break;
                case '\n':
                        p = stpcpy(p, "\\n");
                        break;
                case '\r':
                        p = stpcpy(p, "\\r");
                        break;
                case '\t':
                        p = stpcpy(p, "\\t");
                        break;
                default:
                        if (l == 0 || c < 0x20 || c == 0x7f)
                                p += sprintf(p, "\\x%02x", c);
                        else
                                *p++ = (char) c;
                }
        }
        *p++ = '"';
        *p = '\0';
        return out;
}
