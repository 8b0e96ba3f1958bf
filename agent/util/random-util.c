/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "util/random-util.h"

static uint64_t random_u64(void) {
        static uint64_t fallback;
        uint64_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t) sizeof(v))
                return v;

        /* Entropy not initialised yet (early boot): jitter only needs to differ between nodes. */
        if (fallback == 0) {
                struct timespec ts;

                (void) clock_gettime(CLOCK_REALTIME, &ts);
                fallback =
                        ((uint64_t) ts.tv_nsec << 32) ^ (uint64_t) ts.tv_sec ^ ((uint64_t) getpid() << 16);
        }
        /* xorshift64* */
        fallback ^= fallback >> 12;
        fallback ^= fallback << 25;
        fallback ^= fallback >> 27;
        return fallback * 2685821657736338717ULL;
}

uint32_t random_u32(void) {
        return (uint32_t) (random_u64() >> 32);
}

uint64_t random_below(uint64_t n) {
        if (n == 0)
                return 0;
        return (uint64_t) (((unsigned __int128) random_u64() * n) >> 64);
}
