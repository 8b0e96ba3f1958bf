/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/kube-name.h"
#include "kube/event-cache.h"
#include "tests.h"

#define SEC USEC_PER_SEC
#define REAL0 (1700000000ULL * SEC)

static EventDecision observe(EventCache *c, const char *uid, const char *type, const char *reason,
                             const char *message, uint64_t now) {
        EventDecision d;

        assert_int_equal(event_cache_observe(c, "n1", uid, type, reason, message, now, REAL0 + now, &d), 0);
        return d;
}

static void test_dedup(void **state) {
        _cleanup_(event_cache_freep) EventCache *c = NULL;
        EventDecision a, b, other;
        char expected[64];

        assert_int_equal(event_cache_new(&c), 0);

        a = observe(c, "uid-1", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 10 * SEC);
        assert_int_equal(a.action, EVENT_ACTION_CREATE);
        assert_int_equal(a.count, 1);
        assert_int_equal(a.first_usec, REAL0 + 10 * SEC);
        snprintf(expected, sizeof(expected), "n1.%llx", (unsigned long long) (REAL0 + 10 * SEC) * 1000ULL);
        assert_string_equal(a.name, expected);

        /* Same key: patch the same Event, count grows, firstTimestamp stays. */
        b = observe(c, "uid-1", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 20 * SEC);
        assert_int_equal(b.action, EVENT_ACTION_PATCH);
        assert_string_equal(b.name, a.name);
        assert_int_equal(b.count, 2);
        assert_int_equal(b.first_usec, REAL0 + 10 * SEC);
        b = observe(c, "uid-1", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 21 * SEC);
        assert_int_equal(b.count, 3);

        /* Any difference in message, reason, type or object makes a new Event with a new name. */
        other = observe(c, "uid-1", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.2", 22 * SEC);
        assert_int_equal(other.action, EVENT_ACTION_CREATE);
        assert_string_not_equal(other.name, a.name);
        assert_int_equal(
                observe(c, "uid-1", "Warning", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 23 * SEC)
                        .action,
                EVENT_ACTION_CREATE);
        assert_int_equal(
                observe(c, "uid-2", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 24 * SEC)
                        .action,
                EVENT_ACTION_CREATE);

        /* After forgetting (the Event could not be created), the next occurrence creates again. */
        event_cache_forget(c, a.name);
        b = observe(c, "uid-1", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", 25 * SEC);
        assert_int_equal(b.action, EVENT_ACTION_CREATE);
        assert_int_equal(b.count, 1);
}

static void test_unique_names_within_one_tick(void **state) {
        _cleanup_(event_cache_freep) EventCache *c = NULL;
        EventDecision a, b;

        assert_int_equal(event_cache_new(&c), 0);
        a = observe(c, "u", "Normal", "A", "one", 5 * SEC);
        b = observe(c, "u", "Normal", "B", "two", 5 * SEC);
        assert_int_equal(b.action, EVENT_ACTION_CREATE);
        assert_string_not_equal(a.name, b.name);
}

static void test_spam_filter(void **state) {
        _cleanup_(event_cache_freep) EventCache *c = NULL;
        uint64_t now = 100 * SEC;
        char msg[32];

        assert_int_equal(event_cache_new(&c), 0);

        /* A burst of 25 per object and type, distinct or identical events alike. */
        for (unsigned i = 0; i < EVENT_SPAM_BURST; i++) {
                snprintf(msg, sizeof(msg), "m%u", i % 5);
                assert_int_not_equal(observe(c, "u", "Warning", "R", msg, now).action, EVENT_ACTION_DROP);
        }
        assert_int_equal(observe(c, "u", "Warning", "R", "m0", now).action, EVENT_ACTION_DROP);
        assert_int_equal(observe(c, "u", "Warning", "R", "new", now + 299 * SEC).action, EVENT_ACTION_DROP);
        /* The other type and other objects have their own buckets. */
        assert_int_equal(observe(c, "u", "Normal", "R", "m0", now).action, EVENT_ACTION_CREATE);
        assert_int_equal(observe(c, "v", "Warning", "R", "m0", now).action, EVENT_ACTION_CREATE);

        /* One token back every 300 s. */
        assert_int_not_equal(observe(c, "u", "Warning", "R", "m0", now + 300 * SEC).action,
                             EVENT_ACTION_DROP);
        assert_int_equal(observe(c, "u", "Warning", "R", "m0", now + 301 * SEC).action, EVENT_ACTION_DROP);
        assert_int_not_equal(observe(c, "u", "Warning", "R", "m0", now + 600 * SEC).action,
                             EVENT_ACTION_DROP);
        assert_int_equal(observe(c, "u", "Warning", "R", "m0", now + 600 * SEC).action, EVENT_ACTION_DROP);

        /* A long quiet period refills to the burst, not beyond. */
        now += 100000 * SEC;
        for (unsigned i = 0; i < EVENT_SPAM_BURST; i++)
                assert_int_not_equal(observe(c, "u", "Warning", "R", "m1", now).action, EVENT_ACTION_DROP);
        assert_int_equal(observe(c, "u", "Warning", "R", "m1", now).action, EVENT_ACTION_DROP);
}

static void test_bounded(void **state) {
        _cleanup_(event_cache_freep) EventCache *c = NULL;
        char msg[32];

        assert_int_equal(event_cache_new(&c), 0);
        assert_int_equal(observe(c, "u0", "Normal", "R", "x", 1).action, EVENT_ACTION_CREATE);
        /* More distinct events than entries (each on its own object, to stay clear of the spam
         * filter): the least recently used are evicted, memory stays bounded. */
        for (unsigned i = 1; i <= EVENT_CACHE_ENTRIES; i++) {
                snprintf(msg, sizeof(msg), "u%u", i);
                assert_int_equal(observe(c, msg, "Normal", "R", "x", 1 + i).action, EVENT_ACTION_CREATE);
        }
        assert_int_equal(observe(c, "u0", "Normal", "R", "x", 10000).action, EVENT_ACTION_CREATE);
}

/* A long node name is cut to fit the suffix; the cut must leave a valid name (no "-." or ".."). */
static void test_long_name_stays_valid(void **state) {
        _cleanup_(event_cache_freep) EventCache *c = NULL;
        static const char seps[] = { '-', '.' };
        char node[253], uid[32];
        EventDecision d;

        assert_int_equal(event_cache_new(&c), 0);
        for (size_t k = 0; k < ELEMENTSOF(seps); k++)
                for (size_t at = 230; at < 240; at++) {
                        memset(node, 'a', sizeof(node) - 1);
                        node[sizeof(node) - 1] = '\0';
                        for (size_t i = 49; i < 230; i += 50)
                                node[i] = '.';
                        node[at] = seps[k]; /* the cut lands on it for one of these */
                        assert_true(kube_name_is_valid(node, KUBE_NAME_SUBDOMAIN));
                        snprintf(uid, sizeof(uid), "uid-%zu-%zu", k, at); /* a new Event each */
                        assert_int_equal(event_cache_observe(c, node, uid, "Normal", "R", "m", at * SEC,
                                                             REAL0 + at * SEC, &d),
                                         0);
                        assert_int_equal(d.action, EVENT_ACTION_CREATE);
                        assert_true(strlen(d.name) <= EVENT_NAME_MAX);
                        if (!kube_name_is_valid(d.name, KUBE_NAME_SUBDOMAIN))
                                fail_msg("invalid Event name \"%s\": %s", d.name,
                                         kube_name_invalid_reason(d.name, KUBE_NAME_SUBDOMAIN));
                }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dedup),
                cmocka_unit_test(test_unique_names_within_one_tick),
                cmocka_unit_test(test_spam_filter),
                cmocka_unit_test(test_bounded),
                cmocka_unit_test(test_long_name_stays_valid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
