/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/kube-name.h"
#include "util/error-message.h"
#include "util/utf8.h"

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One label of [a-z0-9]([-a-z0-9]*[a-z0-9])? in s[0..n). */
static bool label_is_valid(const char *s, size_t n) {
        if (n == 0 || n > KUBE_NAME_LABEL_MAX || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        for (size_t i = 1; i + 1 < n; i++)
                if (!is_lower_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

const char *kube_name_invalid_reason(const char *name, KubeNameKind kind) {
        size_t n;

        assert(kind >= 0 && kind < _KUBE_NAME_KIND_MAX);

        if (isempty(name))
                return "must not be empty";
        n = strlen(name);
        if (kind == KUBE_NAME_PATH_SEGMENT) {
                if (n > KUBE_NAME_SUBDOMAIN_MAX)
                        return "must be no more than 253 characters";
                if (streq(name, ".") || streq(name, ".."))
                        return "may not be '.' or '..'";
                for (const char *p = name; *p; p++)
                        if (!is_lower_alnum(*p) && !(*p >= 'A' && *p <= 'Z') && !strchr("-._~", *p))
                                return "must consist of alphanumeric characters, '-', '.', '_' or '~'";
                return NULL;
        }
        if (kind == KUBE_NAME_LABEL) {
                if (n > KUBE_NAME_LABEL_MAX)
                        return "must be no more than 63 characters";
                if (!label_is_valid(name, n))
                        return "must consist of lower case alphanumeric characters or '-', and must start "
                               "and end with an alphanumeric character";
                return NULL;
        }
        if (n > KUBE_NAME_SUBDOMAIN_MAX)
                return "must be no more than 253 characters";
        /* apimachinery's regex: each dot-separated part is a label ("a..b", "a-.b" are not names). */
        for (const char *p = name;;) {
                const char *dot = strchrnul(p, '.');

                if (!label_is_valid(p, (size_t) (dot - p)))
                        return "must consist of lower case alphanumeric characters, '-' or '.', and must "
                               "start and end with an alphanumeric character";
                if (!*dot)
                        return NULL;
                p = dot + 1;
        }
}

int kube_name_check(const char *name, KubeNameKind kind, const char *field, char **ret_error) {
        const char *why = kube_name_invalid_reason(name, kind);
        _cleanup_free_ char *quoted = NULL;
        size_t n;

        if (!why)
                return 0;
        if (!ret_error)
                return -EINVAL;
        /* The name is untrusted: quoted (escapes) and cut before it goes into a message. */
        n = strlen(strempty(name));
        quoted = utf8_quote(strempty(name), MIN(n, (size_t) KUBE_NAME_DISPLAY_MAX));
        if (!quoted)
                return -ENOMEM;
        return error_setf(ret_error, -EINVAL, "%s: %s%s is not a valid %s: %s", field, quoted,
                          n > KUBE_NAME_DISPLAY_MAX ? "..." : "",
                          kind == KUBE_NAME_LABEL                ? "DNS-1123 label" :
                                  kind == KUBE_NAME_PATH_SEGMENT ? "name" :
                                                                   "DNS-1123 subdomain",
                          why);
}
