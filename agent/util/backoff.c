/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "util/backoff.h"

void backoff_init(Backoff *b, uint64_t base_usec, uint64_t cap_usec, uint64_t reset_usec) {
        assert(b);

        *b = (Backoff) {
                .base_usec = base_usec > 0 ? base_usec : BACKOFF_BASE_USEC_DEFAULT,
                .cap_usec = cap_usec > 0 ? cap_usec : BACKOFF_CAP_USEC_DEFAULT,
                .reset_usec = reset_usec > 0 ? reset_usec : BACKOFF_RESET_USEC_DEFAULT,
        };
        b->cap_usec = MAX(b->cap_usec, b->base_usec);
}

void backoff_reset(Backoff *b) {
        assert(b);

        b->attempt = 0;
        b->last_usec = 0;
}

uint64_t backoff_exponential(uint64_t base_usec, uint64_t cap_usec, unsigned n) {
        uint64_t d = base_usec;

        for (unsigned i = 0; i < n && d < cap_usec; i++)
                d = d > UINT64_MAX / 2 ? UINT64_MAX : d * 2;
        return MIN(d, cap_usec);
}

uint64_t backoff_next_spread(Backoff *b, uint64_t now_usec, uint32_t random, uint64_t spread_usec) {
        uint64_t d, window;

        assert(b);

        /* Like client-go's backoff manager: the reset clock runs from the previous step, so a
         * failure after a long healthy stretch starts at the base again. */
        if (b->last_usec > 0 && now_usec > b->last_usec && now_usec - b->last_usec > b->reset_usec)
                b->attempt = 0;
        b->last_usec = now_usec;

        d = backoff_exponential(b->base_usec, b->cap_usec, b->attempt);
        if (d < b->cap_usec)
                b->attempt++;

        /* Jitter factor 1.0: d + uniform[0,1)·d, or over the wider spread window when asked. The
         * 32-bit fraction keeps this in integers. */
        window = MAX(d, spread_usec);
        return d + (uint64_t) (((unsigned __int128) window * random) >> 32);
}

uint64_t backoff_next(Backoff *b, uint64_t now_usec, uint32_t random) {
        return backoff_next_spread(b, now_usec, random, 0);
}
