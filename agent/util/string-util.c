/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include "util/string-util.h"

char *strdup_vprintf(const char *format, va_list ap) {
        char *s;

        return vasprintf(&s, format, ap) < 0 ? NULL : s;
}

int free_and_vprintf(char **s, const char *format, va_list ap) {
        char *t = strdup_vprintf(format, ap);

        if (!t)
                return -ENOMEM;
        free(*s);
        *s = t;
        return 0;
}

int strextendv_with_separator(char **s, const char *separator, const char *format, va_list ap) {
        _cleanup_free_ char *item = strdup_vprintf(format, ap);
        char *joined;

        if (!item)
                return -ENOMEM;
        if (isempty(*s)) {
                free(*s);
                *s = TAKE_PTR(item);
                return 0;
        }
        if (asprintf(&joined, "%s%s%s", *s, strempty(separator), item) < 0)
                return -ENOMEM;
        free(*s);
        *s = joined;
        return 0;
}

int strextendf_with_separator(char **s, const char *separator, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = strextendv_with_separator(s, separator, format, ap);
        va_end(ap);
        return r;
}
