/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>

#include "oci/registry-token-cache.h"
#include "util/macro.h"
#include "util/time-util.h"

struct RegistryToken {
        char *endpoint;        /* owned */
        char *scope;           /* owned */
        char *authorization;   /* owned: the whole header value */
        uint64_t expires_usec; /* CLOCK_MONOTONIC */
        RegistryToken *next;   /* owned */
};

static void token_free_all(RegistryToken *t) {
        while (t) {
                RegistryToken *next = t->next;
                free(t->endpoint);
                free(t->scope);
                free(t->authorization);
                free(t);
                t = next;
        }
}

static RegistryToken *token_find(const RegistryTokenCache *c, const char *endpoint, const char *scope) {
        for (RegistryToken *t = c->tokens; t; t = t->next)
                if (streq(t->endpoint, endpoint) && streq(t->scope, scope))
                        return t;
        return NULL;
}

const char *registry_token_cache_lookup(const RegistryTokenCache *c, const char *endpoint, const char *scope,
                                        uint64_t now_usec) {
        const RegistryToken *t = token_find(c, endpoint, scope);

        return t && t->expires_usec > now_usec ? t->authorization : NULL;
}

int registry_token_cache_store(RegistryTokenCache *c, const char *endpoint, const char *scope,
                               const char *authorization, uint64_t lifetime_usec, uint64_t now_usec) {
        RegistryToken *t = token_find(c, endpoint, scope);

        if (!t) {
                t = calloc(1, sizeof(*t));
                if (!t)
                        return -ENOMEM;
                t->endpoint = strdup(endpoint);
                t->scope = strdup(scope);
                if (!t->endpoint || !t->scope) {
                        token_free_all(t);
                        return -ENOMEM;
                }
                t->next = c->tokens;
                c->tokens = t;
        }
        if (free_and_strdup(&t->authorization, authorization) < 0)
                return -ENOMEM;
        t->expires_usec = now_usec +
                (lifetime_usec > 20 * USEC_PER_SEC ? lifetime_usec - 10 * USEC_PER_SEC : lifetime_usec / 2);
        return 0;
}

void registry_token_cache_clear(RegistryTokenCache *c) {
        token_free_all(c->tokens);
        c->tokens = NULL;
}
