/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>

#include "util/error-message.h"

int error_setf(char **ret_error, int r, const char *format, ...) {
        va_list ap;

        if (!ret_error)
                return r;
        va_start(ap, format);
        if (vasprintf(ret_error, format, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return r;
}
