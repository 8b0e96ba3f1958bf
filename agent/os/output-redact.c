/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "os/output-redact.h"
#include "util/macro.h"

/* A growing output buffer; `failed` once an allocation failed. */
typedef struct Buf {
        char *data;
        size_t size, alloc;
        bool failed;
} Buf;

static void buf_add(Buf *b, const char *p, size_t n) {
        if (b->failed)
                return;
        if (b->size + n + 1 > b->alloc) {
                size_t na = MAX(b->alloc * 2, b->size + n + 64);
                char *d = realloc(b->data, na);

                if (!d) {
                        b->failed = true;
                        return;
                }
                b->data = d;
                b->alloc = na;
        }
        memcpy(b->data + b->size, p, n);
        b->size += n;
        b->data[b->size] = '\0';
}

static void buf_str(Buf *b, const char *s) {
        buf_add(b, s, strlen(s));
}

static char lower(char c) {
        return c >= 'A' && c <= 'Z' ? (char) (c - 'A' + 'a') : c;
}

static bool is_alnum(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_key_char(char c) {
        return is_alnum(c) || c == '_' || c == '-' || c == '.';
}

static bool is_space(char c) {
        return c == ' ' || c == '\t';
}

/* Where a secret value ends: at white space, a quote or a separator. */
static bool is_value_end(char c) {
        return is_space(c) || c == '"' || c == '\'' || c == ',' || c == ';' || c == '&' || c == '`';
}

static size_t value_end(const char *p, size_t i, size_t n) {
        while (i < n && !is_value_end(p[i]))
                i++;
        return i;
}

/* Case-insensitive: does p[i..n) start with `word`? */
static bool at_word(const char *p, size_t i, size_t n, const char *word) {
        size_t l = strlen(word);

        if (n - i < l)
                return false;
        for (size_t k = 0; k < l; k++)
                if (lower(p[i + k]) != word[k])
                        return false;
        return true;
}

static bool contains_ci(const char *p, size_t n, const char *word) {
        for (size_t i = 0; i < n; i++)
                if (at_word(p, i, n, word))
                        return true;
        return false;
}

static const char *const secret_keys[] = {
        "password",   "passwd",     "passphrase", "secret",      "token",
        "apikey",     "api_key",    "api-key",    "accesskey",   "access_key",
        "access-key", "credential", "privatekey", "private_key", "private-key",
};

/* "Bearer <x>" / "Basic <x>" at i (a word start): the end of what to redact, 0 if none. */
static size_t auth_scheme(const char *p, size_t i, size_t n, size_t *ret_value) {
        static const char *const schemes[] = { "bearer", "basic" };

        for (size_t k = 0; k < ELEMENTSOF(schemes); k++) {
                size_t j = i + strlen(schemes[k]);

                if (!at_word(p, i, n, schemes[k]) || j >= n || !is_space(p[j]))
                        continue;
                while (j < n && is_space(p[j]))
                        j++;
                if (j < n && !is_value_end(p[j])) {
                        *ret_value = j;
                        return value_end(p, j, n);
                }
        }
        return 0;
}

/* "://user:pw@" at i: the end of the user information (the '@'), 0 if none. */
static size_t url_userinfo(const char *p, size_t i, size_t n) {
        bool colon = false;
        size_t j;

        if (!at_word(p, i, n, "://"))
                return 0;
        for (j = i + 3; j < n && p[j] != '@' && p[j] != '/' && !is_value_end(p[j]); j++)
                if (p[j] == ':')
                        colon = true;
        return j < n && p[j] == '@' && colon && j > i + 3 ? j : 0;
}

/* A key naming a secret at i (a key start): where its value starts, 0 if none. *ret_key_end: the
 * end of the key itself. */
static size_t secret_key_value(const char *p, size_t i, size_t n, size_t *ret_key_end) {
        size_t j = i, k;

        while (j < n && is_key_char(p[j]))
                j++;
        *ret_key_end = j;
        for (k = 0; k < ELEMENTSOF(secret_keys); k++)
                if (contains_ci(p + i, j - i, secret_keys[k]))
                        break;
        if (k == ELEMENTSOF(secret_keys))
                return 0;
        if (j < n && (p[j] == '"' || p[j] == '\''))
                j++;
        while (j < n && is_space(p[j]))
                j++;
        if (j >= n || (p[j] != '=' && p[j] != ':'))
                return 0;
        j++;
        while (j < n && (is_space(p[j]) || p[j] == '"' || p[j] == '\''))
                j++;
        return j < n && !is_value_end(p[j]) ? j : 0;
}

static size_t run_of(const char *p, size_t i, size_t n, bool (*ok)(char)) {
        while (i < n && ok(p[i]))
                i++;
        return i;
}

static bool is_token_char(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z');
}

static bool is_jwt_char(char c) {
        return is_alnum(c) || c == '_' || c == '-';
}

/* A bootstrap token "[a-z0-9]{6}.[a-z0-9]{16}" or a JWT "eyJ….….…" at i (a word start): its end,
 * 0 if none. */
static size_t token_at(const char *p, size_t i, size_t n) {
        size_t j = run_of(p, i, n, is_token_char);

        if (j == i + 6 && j < n && p[j] == '.') {
                size_t e = run_of(p, j + 1, n, is_token_char);

                if (e == j + 17 && (e == n || !is_key_char(p[e])))
                        return e;
        }
        if (at_word(p, i, n, "eyj") && p[i + 2] == 'J') {
                size_t e = i;

                for (unsigned part = 0; part < 3; part++) {
                        size_t s = e;

                        e = run_of(p, e, n, is_jwt_char);
                        if (e == s || (part < 2 && (e >= n || p[e] != '.')))
                                return 0;
                        if (part < 2)
                                e++;
                }
                return e;
        }
        return 0;
}

static bool private_key_marker(const char *p, size_t n, const char *which) {
        return contains_ci(p, n, which) && contains_ci(p, n, "private key-----");
}

int output_redact_line(OutputRedact *r, const char *line, size_t n, char **ret) {
        Buf b = {};

        assert(r);
        assert(line || n == 0);
        assert(ret);

        *ret = NULL;
        if (r->in_private_key) {
                if (private_key_marker(line, n, "-----end "))
                        r->in_private_key = false;
                return 0;
        }
        if (private_key_marker(line, n, "-----begin ")) {
                r->in_private_key = !private_key_marker(line, n, "-----end ");
                *ret = strdup(OUTPUT_REDACTED_KEY);
                return *ret ? 0 : -ENOMEM;
        }

        buf_add(&b, "", 0);
        for (size_t i = 0; i < n;) {
                bool word_start = i == 0 || !is_key_char(line[i - 1]);
                size_t value, end, key_end = i;

                if (word_start && (end = auth_scheme(line, i, n, &value)) > 0) {
                        buf_add(&b, line + i, value - i);
                        buf_str(&b, OUTPUT_REDACTED);
                        i = end;
                } else if ((end = url_userinfo(line, i, n)) > 0) {
                        buf_str(&b, "://" OUTPUT_REDACTED);
                        i = end;
                } else if (word_start && (end = token_at(line, i, n)) > 0) {
                        buf_str(&b, OUTPUT_REDACTED);
                        i = end;
                } else if (word_start && is_key_char(line[i]) &&
                           (value = secret_key_value(line, i, n, &key_end)) > 0) {
                        buf_add(&b, line + i, value - i);
                        buf_str(&b, OUTPUT_REDACTED);
                        i = value_end(line, value, n);
                } else if (word_start && is_key_char(line[i])) {
                        /* A plain word: copied whole, so no later pattern starts inside it. */
                        buf_add(&b, line + i, key_end - i);
                        i = key_end;
                } else {
                        buf_add(&b, line + i, 1);
                        i++;
                }
        }
        if (b.failed) {
                free(b.data);
                return -ENOMEM;
        }
        *ret = b.data;
        return 0;
}

char *output_redact_text(const char *text) {
        OutputRedact r = {};
        const char *p = strempty(text);
        Buf b = {};

        buf_add(&b, "", 0);
        while (*p) {
                const char *nl = strchr(p, '\n');
                size_t len = nl ? (size_t) (nl - p) : strlen(p);
                _cleanup_free_ char *line = NULL;

                if (output_redact_line(&r, p, len, &line) < 0) {
                        free(b.data);
                        return NULL;
                }
                if (line) {
                        buf_str(&b, line);
                        if (nl)
                                buf_add(&b, "\n", 1);
                }
                p += len + (nl ? 1 : 0);
        }
        if (b.failed) {
                free(b.data);
                return NULL;
        }
        return b.data;
}
