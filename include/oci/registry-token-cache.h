/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The registry client's bearer tokens, one per endpoint and scope, kept until a little before they
 * expire. Pure: the caller passes the time (CLOCK_MONOTONIC, µs); no I/O, does not log. A cache is
 * owned by its RegistryClient; the strings it returns are borrowed until the next store or clear. */

#include <stdint.h>

#include "util/macro.h"

typedef struct RegistryToken RegistryToken;

typedef struct RegistryTokenCache {
        RegistryToken *tokens; /* owned list */
} RegistryTokenCache;

/* The Authorization header value ("Bearer ...") for endpoint and scope, or NULL when there is none or
 * it has expired at now_usec. */
const char *registry_token_cache_lookup(const RegistryTokenCache *c, const char *endpoint, const char *scope,
                                        uint64_t now_usec);

/* Stores or replaces it. It counts as expired early, so that it never expires in the middle of a
 * request: 10 s before lifetime_usec is over, or at half of it when that is 20 s or less. -ENOMEM. */
int registry_token_cache_store(RegistryTokenCache *c, const char *endpoint, const char *scope,
                               const char *authorization, uint64_t lifetime_usec,
                               uint64_t now_usec) _warn_unused_result_;

void registry_token_cache_clear(RegistryTokenCache *c);
