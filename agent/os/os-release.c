/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "os/os-release.h"
#include "util/macro.h"
#include "util/utf8.h"

static const char key[] = "PRETTY_NAME=";

int os_release_pretty_name(const char *text, size_t size, char **ret) {
        const char *value = NULL, *end;
        size_t kl = strlen(key);
        char *out;

        assert(text || size == 0);
        assert(ret);

        if (size > OS_RELEASE_MAX)
                return -EFBIG;

        /* Unanchored like the Go regex: the key may appear anywhere, even mid-line. memmem() and
         * not strstr(), because the text may contain NUL bytes. */
        if (size >= kl) {
                const char *k = memmem(text, size, key, kl);
                if (k)
                        value = k + kl;
        }
        if (!value) {
                out = strdup("");
                if (!out)
                        return -ENOMEM;
                *ret = out;
                return 0;
        }

        /* (.*) stops at the first newline; strings.Trim(s, "\"") removes every leading and
         * trailing '"'. */
        end = memchr(value, '\n', size - (size_t) (value - text));
        if (!end)
                end = text + size;
        while (value < end && *value == '"')
                value++;
        while (end > value && end[-1] == '"')
                end--;

        out = strndup(value, (size_t) (end - value));
        if (!out)
                return -ENOMEM;
        /* strndup() stops at an embedded NUL; the version search below must not see past it
         * either way, and Go would treat NUL as a non-word character, so the result is the same. */
        *ret = out;
        return 0;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_word(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* The first match of \b\d+(?:\.\d+)*\b with Perl/RE2 leftmost-first semantics. Backtracking into a
 * digit run can never succeed (the next character would be a digit: no boundary, no '.'), so only
 * whole runs D0 . D1 . ... . Dm matter. The greedy star prefers the longest chain; a chain ending
 * before a '.' always has a boundary, so the match is D0..Dm if Dm ends at a boundary, else
 * D0..Dm-1 (if m >= 1), else nothing at this start. */
static bool find_version(const char *s, size_t n, size_t *ret_start, size_t *ret_len) {
        for (size_t i = 0; i < n; i++) {
                size_t end, prev_end = 0;
                bool have_prev = false;

                if (!is_digit(s[i]) || (i > 0 && is_word(s[i - 1])))
                        continue;

                end = i;
                for (;;) {
                        while (end < n && is_digit(s[end]))
                                end++;
                        if (end + 1 < n && s[end] == '.' && is_digit(s[end + 1])) {
                                prev_end = end;
                                have_prev = true;
                                end++;
                                continue;
                        }
                        break;
                }

                if (end == n || !is_word(s[end])) {
                        *ret_start = i;
                        *ret_len = end - i;
                        return true;
                }
                if (have_prev) {
                        *ret_start = i;
                        *ret_len = prev_end - i;
                        return true;
                }
        }
        return false;
}

int os_release_version(const char *text, size_t size, char **ret_version, char **ret_error) {
        _cleanup_free_ char *pretty = NULL;
        size_t start, len;
        char *v;
        int r;

        assert(text || size == 0);
        assert(ret_version);

        r = os_release_pretty_name(text, size, &pretty);
        if (r == -EFBIG) {
                if (ret_error &&
                    asprintf(ret_error, "os-release is larger than %d bytes", OS_RELEASE_MAX) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r < 0)
                return r;

        if (!find_version(pretty, strlen(pretty), &start, &len)) {
                if (ret_error) {
                        _cleanup_free_ char *q = utf8_quote(pretty, strlen(pretty));

                        if (!q ||
                            asprintf(ret_error, "unable to find version in %s with regex: %s", q,
                                     OS_RELEASE_VERSION_REGEX) < 0)
                                *ret_error = NULL;
                }
                return -ENODATA;
        }

        v = strndup(pretty + start, len);
        if (!v)
                return -ENOMEM;
        *ret_version = v;
        return 0;
}

char *os_release_read_error(const char *path, int error) {
        _cleanup_free_ char *q = NULL;
        char *s;

        assert(path);

        q = utf8_quote(path, strlen(path));
        if (!q)
                return NULL;
        if (asprintf(&s, "unable to get operating system name: error opening file %s: open %s: %s", q, path,
                     error == -ENOENT ? "file does not exist" : strerror(error < 0 ? -error : error)) < 0)
                return NULL;
        return s;
}
