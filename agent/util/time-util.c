/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <time.h>

#include "util/macro.h"
#include "util/time-util.h"

static const struct {
        const char *suffix;
        uint64_t usec;
} units[] = {
        /* longest suffix first so "ms" is not read as "m" followed by garbage */
        { "ms", USEC_PER_MSEC },
        { "h", 3600 * USEC_PER_SEC },
        { "m", 60 * USEC_PER_SEC },
        { "s", USEC_PER_SEC },
};

int parse_duration(const char *s, uint64_t *ret_usec) {
        uint64_t total = 0;

        assert(ret_usec);

        if (isempty(s))
                return -EINVAL;

        while (*s) {
                uint64_t n = 0, mult = 0;

                if (!isdigit((unsigned char) *s))
                        return -EINVAL;
                for (; isdigit((unsigned char) *s); s++) {
                        if (n > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        n = n * 10 + (uint64_t) (*s - '0');
                }
                for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                        size_t l = strlen(units[i].suffix);
                        if (strncmp(s, units[i].suffix, l) == 0) {
                                mult = units[i].usec;
                                s += l;
                                break;
                        }
                }
                if (mult == 0)
                        return -EINVAL;
                if (n > UINT64_MAX / mult || total > UINT64_MAX - n * mult)
                        return -ERANGE;
                total += n * mult;
        }

        *ret_usec = total;
        return 0;
}

char *format_duration(char *buf, size_t size, uint64_t usec) {
        uint64_t h = usec / (3600 * USEC_PER_SEC), m = usec / (60 * USEC_PER_SEC) % 60,
                 s = usec / USEC_PER_SEC % 60, ms = usec / USEC_PER_MSEC % 1000;
        size_t off = 0;

        assert(buf && size > 0);
        buf[0] = '\0';

#define APPEND(v, unit)            \
        if ((v) > 0 && off < size) \
                off += (size_t) snprintf(buf + off, size - off, "%llu" unit, (unsigned long long) (v));
        APPEND(h, "h");
        APPEND(m, "m");
        APPEND(s, "s");
        APPEND(ms, "ms");
#undef APPEND
        if (off == 0)
                snprintf(buf, size, "0s");
        return buf;
}

uint64_t clock_now_usec(clockid_t clock) {
        struct timespec ts;

        if (clock_gettime(clock, &ts) < 0)
                return 0;
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

char *format_rfc3339(char buf[static RFC3339_MAX], uint64_t realtime_usec, bool micro) {
        time_t t = (time_t) (realtime_usec / USEC_PER_SEC);
        struct tm tm;
        size_t n;

        if (!gmtime_r(&t, &tm))
                return NULL;
        n = strftime(buf, RFC3339_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0)
                return NULL;
        if (micro)
                (void) snprintf(buf + n, RFC3339_MAX - n, ".%06uZ",
                                (unsigned) (realtime_usec % USEC_PER_SEC));
        else
                (void) snprintf(buf + n, RFC3339_MAX - n, "Z");
        return buf;
}
