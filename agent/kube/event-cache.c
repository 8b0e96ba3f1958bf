/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "kube/event-cache.h"

typedef struct Entry {
        char *key;  /* owned: uid \x1f type \x1f reason \x1f message; NULL = free slot */
        char *name; /* owned, set with key (a pointer, not an array: the idle cache is 256 slots) */
        unsigned count;
        uint64_t first_usec; /* realtime */
        uint64_t used_usec;  /* monotonic, for LRU */
} Entry;

typedef struct Bucket {
        char *key;              /* owned: uid \x1f type; NULL = free slot */
        uint64_t tokens_milli;  /* tokens × 1000, so partial refills accumulate */
        uint64_t refilled_usec; /* monotonic time the tokens were last brought up to date */
} Bucket;

struct EventCache {
        Entry entries[EVENT_CACHE_ENTRIES];
        Bucket buckets[EVENT_CACHE_BUCKETS];
        uint64_t last_name_nsec; /* names stay unique even within one clock tick */
};

static const char *const action_names[_EVENT_ACTION_MAX] = {
        [EVENT_ACTION_DROP] = "drop",
        [EVENT_ACTION_CREATE] = "create",
        [EVENT_ACTION_PATCH] = "patch",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(event_action, EventAction, action_names);

int event_cache_new(EventCache **ret) {
        assert(ret);

        *ret = calloc(1, sizeof(EventCache));
        return *ret ? 0 : -ENOMEM;
}

EventCache *event_cache_free(EventCache *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < EVENT_CACHE_ENTRIES; i++) {
                free(c->entries[i].key);
                free(c->entries[i].name);
        }
        for (size_t i = 0; i < EVENT_CACHE_BUCKETS; i++)
                free(c->buckets[i].key);
        free(c);
        return NULL;
}

/* Token bucket with a burst of EVENT_SPAM_BURST and one token per EVENT_SPAM_REFILL_USEC. */
static bool bucket_take(Bucket *b, uint64_t now_usec) {
        const uint64_t full = EVENT_SPAM_BURST * 1000;

        if (now_usec > b->refilled_usec) {
                uint64_t gained = (now_usec - b->refilled_usec) * 1000 / EVENT_SPAM_REFILL_USEC;

                if (gained > 0) {
                        b->tokens_milli = MIN(full, b->tokens_milli + gained);
                        /* Keep the remainder of the interval so slow trickles are not lost. */
                        b->refilled_usec = b->tokens_milli == full ?
                                now_usec :
                                b->refilled_usec + gained * EVENT_SPAM_REFILL_USEC / 1000;
                }
        }
        if (b->tokens_milli < 1000)
                return false;
        b->tokens_milli -= 1000;
        return true;
}

static Bucket *bucket_get(EventCache *c, const char *key, uint64_t now_usec) {
        Bucket *victim = &c->buckets[0];

        for (size_t i = 0; i < EVENT_CACHE_BUCKETS; i++) {
                Bucket *b = &c->buckets[i];

                if (b->key && streq(b->key, key))
                        return b;
                if (!b->key || (victim->key && b->refilled_usec < victim->refilled_usec))
                        victim = b;
        }

        free(victim->key);
        victim->key = strdup(key);
        if (!victim->key)
                return NULL;
        victim->tokens_milli = EVENT_SPAM_BURST * 1000;
        victim->refilled_usec = now_usec;
        return victim;
}

static Entry *entry_find(EventCache *c, const char *key) {
        for (size_t i = 0; i < EVENT_CACHE_ENTRIES; i++)
                if (c->entries[i].key && streq(c->entries[i].key, key))
                        return &c->entries[i];
        return NULL;
}

static Entry *entry_victim(EventCache *c) {
        Entry *victim = &c->entries[0];

        for (size_t i = 0; i < EVENT_CACHE_ENTRIES; i++) {
                Entry *e = &c->entries[i];

                if (!e->key)
                        return e;
                if (e->used_usec < victim->used_usec)
                        victim = e;
        }
        return victim;
}

static char *make_name(EventCache *c, const char *object_name, uint64_t realtime_usec) {
        /* client-go: "<name>.<hex(UnixNano)>"; a name too long for a DNS subdomain gets truncated,
         * keeping the unique suffix. Two events in the same microsecond (one loop iteration) would
         * collide, so the stamp only ever moves forward. */
        uint64_t nsec = MAX(realtime_usec * 1000ULL, c->last_name_nsec + 1);
        char suffix[32];
        int n = snprintf(suffix, sizeof(suffix), ".%llx", (unsigned long long) nsec);
        size_t keep = MIN(strlen(object_name), (size_t) (EVENT_NAME_MAX - n));
        char *name;

        /* A cut inside the name must not leave "-." or "..": the name would not be valid. */
        while (keep > 0 && (object_name[keep - 1] == '-' || object_name[keep - 1] == '.'))
                keep--;

        if (asprintf(&name, "%.*s%s", (int) keep, object_name, suffix) < 0)
                return NULL;
        c->last_name_nsec = nsec;
        return name;
}

int event_cache_observe(EventCache *c, const char *object_name, const char *uid, const char *type,
                        const char *reason, const char *message, uint64_t now_usec, uint64_t realtime_usec,
                        EventDecision *ret) {
        _cleanup_free_ char *spam_key = NULL, *key = NULL, *name = NULL;
        Bucket *b;
        Entry *e;

        assert(c);
        assert(object_name);
        assert(type);
        assert(reason);
        assert(ret);

        if (asprintf(&spam_key, "%s\x1f%s", strempty(uid), type) < 0 ||
            asprintf(&key, "%s\x1f%s\x1f%s\x1f%s", strempty(uid), type, reason, strempty(message)) < 0)
                return -ENOMEM;

        b = bucket_get(c, spam_key, now_usec);
        if (!b)
                return -ENOMEM;
        if (!bucket_take(b, now_usec)) {
                *ret = (EventDecision) { .action = EVENT_ACTION_DROP };
                return 0;
        }

        e = entry_find(c, key);
        if (e) {
                e->count++;
                e->used_usec = now_usec;
                *ret = (EventDecision) { .action = EVENT_ACTION_PATCH,
                                         .count = e->count,
                                         .first_usec = e->first_usec };
                snprintf(ret->name, sizeof(ret->name), "%s", e->name);
                return 0;
        }

        name = make_name(c, object_name, realtime_usec);
        if (!name)
                return -ENOMEM;
        e = entry_victim(c);
        free(e->key);
        free(e->name);
        *e = (Entry) { .key = TAKE_PTR(key),
                       .name = TAKE_PTR(name),
                       .count = 1,
                       .first_usec = realtime_usec,
                       .used_usec = now_usec };
        *ret = (EventDecision) { .action = EVENT_ACTION_CREATE, .count = 1, .first_usec = realtime_usec };
        snprintf(ret->name, sizeof(ret->name), "%s", e->name);
        return 0;
}

void event_cache_forget(EventCache *c, const char *name) {
        assert(c);

        for (size_t i = 0; name && i < EVENT_CACHE_ENTRIES; i++)
                if (c->entries[i].key && streq(c->entries[i].name, name)) {
                        c->entries[i].key = mfree(c->entries[i].key);
                        c->entries[i].name = mfree(c->entries[i].name);
                }
}
