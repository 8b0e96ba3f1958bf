/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/go-duration.h"
#include "util/macro.h"

/* time.ParseDuration's units, longest suffix first where one is a prefix of another ("ms" vs "m"). */
static const struct {
        const char *suffix;
        uint64_t nsec;
} units[] = {
        { "ns", 1 },
        { "us", 1000 },
        { "\xc2\xb5s", 1000 }, /* U+00B5 micro sign */
        { "\xce\xbcs", 1000 }, /* U+03BC Greek mu */
        { "ms", 1000000 },
        { "s", 1000000000ULL },
        { "m", 60 * 1000000000ULL },
        { "h", 3600 * 1000000000ULL },
};

static uint64_t unit_of(const char **s) {
        size_t best = 0;
        uint64_t nsec = 0;

        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                size_t l = strlen(units[i].suffix);

                if (l > best && strncmp(*s, units[i].suffix, l) == 0) {
                        best = l;
                        nsec = units[i].nsec;
                }
        }
        *s += best;
        return nsec;
}

int go_duration_parse(const char *s, uint64_t *ret_usec) {
        long double total_nsec = 0; /* enough precision for any uint64 microsecond value we accept */

        assert(ret_usec);

        if (!s || !*s)
                return -EINVAL;
        if (*s == '-') {
                if (streq(s, "-0"))
                        s++;
                else
                        return -ERANGE;
        } else if (*s == '+')
                s++;
        if (streq(s, "0")) {
                *ret_usec = 0;
                return 0;
        }
        if (!*s)
                return -EINVAL;

        while (*s) {
                uint64_t whole = 0, nsec;
                long double frac = 0, scale = 1;
                bool digits = false;

                for (; isdigit((unsigned char) *s); s++, digits = true) {
                        if (whole > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        whole = whole * 10 + (uint64_t) (*s - '0');
                }
                if (*s == '.')
                        for (s++; isdigit((unsigned char) *s); s++, digits = true) {
                                scale /= 10;
                                frac += (long double) (*s - '0') * scale;
                        }
                if (!digits)
                        return -EINVAL;
                nsec = unit_of(&s);
                if (nsec == 0)
                        return -EINVAL;
                total_nsec += ((long double) whole + frac) * (long double) nsec;
                if (total_nsec / 1000 > (long double) UINT64_MAX / 2)
                        return -ERANGE;
        }
        *ret_usec = (uint64_t) (total_nsec / 1000);
        return 0;
}

char *go_duration_format_seconds(char *buf, size_t size, uint64_t usec) {
        uint64_t t = usec / USEC_PER_SEC, h = t / 3600, m = t / 60 % 60, sec = t % 60;

        assert(buf);
        if (h > 0)
                snprintf(buf, size, "%lluh%llum%llus", (unsigned long long) h, (unsigned long long) m,
                         (unsigned long long) sec);
        else if (m > 0)
                snprintf(buf, size, "%llum%llus", (unsigned long long) m, (unsigned long long) sec);
        else
                snprintf(buf, size, "%llus", (unsigned long long) sec);
        return buf;
}

int reconciliation_delay_update(const char *annotation, uint64_t *delay_usec) {
        uint64_t v;
        int r;

        assert(delay_usec);
        if (!annotation)
                return -ENODATA;
        r = go_duration_parse(annotation, &v);
        if (r < 0)
                return -EINVAL;
        *delay_usec = v;
        return 0;
}
