/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "util/log-once.h"

bool log_once_check(LogOnce *o, int error, const char *message) {
        char *copy = NULL;

        assert(o);
        if (o->set && o->error == error && streq_ptr(o->message, message))
                return false;
        if (message) {
                copy = strdup(message);
                if (!copy) {
                        log_once_clear(o);
                        return true;
                }
        }
        free(o->message);
        *o = (LogOnce) { .set = true, .error = error, .message = copy };
        return true;
}

void log_once_clear(LogOnce *o) {
        assert(o);
        free(o->message);
        *o = (LogOnce) {};
}

void log_once_done(LogOnce *o) {
        if (o)
                log_once_clear(o);
}
