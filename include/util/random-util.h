/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Non-cryptographic randomness for jitter and spreading load (backoff, watch timeouts, start-up
 * delays), from getrandom(2) without blocking. Not for secrets. Does not log. */

#include <stdint.h>

uint32_t random_u32(void);

/* Uniform in [0, n); 0 for n == 0. */
uint64_t random_below(uint64_t n);
