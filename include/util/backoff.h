/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The one exponential backoff: backoff_exponential() is the bare doubling (attempt-indexed retries:
 * registry, OS update), Backoff adds jitter and a reset after a healthy period on top of it.
 *
 * Jittered exponential backoff as client-go's reflector uses it (docs/kube-api.md §3.6,
 * apimachinery wait.Backoff + NewExponentialBackoffManager): steps start at `base`, double up to
 * `cap`, and each sleep is d + uniform[0,1)·d, so the sleeps fall in [0.8,1.6), [1.6,3.2), …
 * [30,60) s with the defaults. The sequence starts over once more than `reset` has passed since the
 * previous step, i.e. after a healthy period without failures.
 *
 * Pure: the caller passes the current (monotonic) time and a random number, so tests can pin both.
 * No I/O, no logging, no event loop. */

#include <stdint.h>

#include "util/macro.h"

#define BACKOFF_BASE_USEC_DEFAULT (800 * USEC_PER_MSEC)
#define BACKOFF_CAP_USEC_DEFAULT (30 * USEC_PER_SEC)
#define BACKOFF_RESET_USEC_DEFAULT (120 * USEC_PER_SEC)

typedef struct Backoff {
        uint64_t base_usec;  /* first step (before jitter) */
        uint64_t cap_usec;   /* steps stop growing here (before jitter) */
        uint64_t reset_usec; /* a step more than this long after the previous one starts over */
        unsigned attempt;    /* steps taken since the start or the last reset */
        uint64_t last_usec;  /* time of the previous step; 0 = none */
} Backoff;

/* base·2^n, capped at cap (and never overflowing): the delay before retry n+1 when retry 1 waits
 * base. */
uint64_t backoff_exponential(uint64_t base_usec, uint64_t cap_usec, unsigned n);

/* Defaults are used for zero arguments. cap is raised to base if smaller. */
void backoff_init(Backoff *b, uint64_t base_usec, uint64_t cap_usec, uint64_t reset_usec);

/* The next sleep, in [d, 2d) for the current step d, where `random` is uniform over the full
 * uint32_t range and maps onto the jitter. Advances the step. */
uint64_t backoff_next(Backoff *b, uint64_t now_usec, uint32_t random);

/* Like backoff_next(), but the jitter covers at least `spread`: the sleep is in
 * [d, d + max(d, spread)). Never shorter than the step itself, only more spread out: for retries
 * that a whole fleet makes at the same moment (a restarted API server), so that they do not all
 * land within one small step of each other (no thundering herd). spread = 0 is backoff_next(). */
uint64_t backoff_next_spread(Backoff *b, uint64_t now_usec, uint32_t random, uint64_t spread_usec);

/* Forget the history: the next step is `base` again. */
void backoff_reset(Backoff *b);
