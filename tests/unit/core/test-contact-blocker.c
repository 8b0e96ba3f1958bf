/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/contact-blocker.h"
#include "tests.h"

#define S USEC_PER_SEC
#define REAL 1700000000ULL * USEC_PER_SEC
#define EVENT_MIN (10 * S)

static int said(ContactBlocker *b, const char *reason, uint64_t now) {
        int r = contact_blocker_set(b, reason, now, REAL + now, NULL);

        if (r > 0)
                contact_blocker_console_written(b, now);
        return r;
}

static void test_console_rate_limit(void **state) {
        _cleanup_(contact_blocker_done) ContactBlocker b = {};
        bool changed;

        assert_int_equal(contact_blocker_set(&b, "connection refused", 1 * S, REAL, &changed), 1);
        assert_true(changed);
        contact_blocker_console_written(&b, 1 * S);
        /* the same reason at every retry: once, again only after CONTACT_CONSOLE_REPEAT_USEC */
        assert_int_equal(contact_blocker_set(&b, "connection refused", 2 * S, REAL, &changed), 0);
        assert_false(changed);
        assert_int_equal(said(&b, "connection refused", 1 * S + CONTACT_CONSOLE_REPEAT_USEC - 1), 0);
        assert_int_equal(said(&b, "connection refused", 1 * S + CONTACT_CONSOLE_REPEAT_USEC), 1);
        /* a new reason at once; two alternating ones each once per interval */
        assert_int_equal(said(&b, "unauthorized", 400 * S), 1);
        assert_int_equal(said(&b, "connection refused", 401 * S), 0);
        assert_int_equal(said(&b, "unauthorized", 402 * S), 0);
        assert_string_equal(b.reason, "unauthorized");
        assert_string_equal(b.first_reason, "connection refused");
        assert_int_equal(b.since_usec, 1 * S);
        assert_int_equal(b.since_realtime_usec, REAL);
}

static void test_many_reasons_forget_the_oldest(void **state) {
        _cleanup_(contact_blocker_done) ContactBlocker b = {};
        char reason[32];

        for (unsigned i = 0; i <= CONTACT_CONSOLE_REMEMBER; i++) {
                (void) snprintf(reason, sizeof(reason), "reason %u", i);
                assert_int_equal(said(&b, reason, (i + 1) * S), 1);
        }
        /* reason 0 was forgotten (the oldest), reason 1 is still remembered */
        assert_int_equal(said(&b, "reason 0", 20 * S), 1);
        assert_int_equal(said(&b, "reason 2", 21 * S), 0);
}

static void test_contact_says_what_and_how_long(void **state) {
        _cleanup_(contact_blocker_done) ContactBlocker b = {}, brief = {}, none = {};
        _cleanup_free_ char *msg = NULL, *same = NULL;
        char *m = (char *) "x";

        assert_int_equal(said(&b, "cannot list node n1: connection refused", 10 * S), 1);
        assert_int_equal(said(&b, "cannot list node n1: unauthorized (HTTP 401)", 70 * S), 1);
        assert_int_equal(contact_blocker_contact(&b, 143 * S + 456 * USEC_PER_MSEC, EVENT_MIN, &msg), 1);
        assert_string_equal(msg,
                            "no access to the API server for 2m13s before the first successful contact: "
                            "cannot list node n1: unauthorized (HTTP 401) (at first: cannot list node n1: "
                            "connection refused)");
        /* tracking ends with the first contact */
        assert_true(b.contacted);
        assert_null(b.reason);
        assert_int_equal(contact_blocker_set(&b, "later", 200 * S, REAL, NULL), 0);
        assert_null(b.reason);

        /* a moment's wait is no Event */
        assert_int_equal(said(&brief, "connection refused", 1 * S), 1);
        assert_int_equal(contact_blocker_contact(&brief, 1 * S + EVENT_MIN - 1, EVENT_MIN, &m), 1);
        assert_null(m);
        assert_int_equal(said(&brief, "connection refused", 20 * S), 0); /* after the contact */

        assert_int_equal(contact_blocker_contact(&none, 5 * S, EVENT_MIN, &m), 0);
        assert_null(m);

        {
                _cleanup_(contact_blocker_done) ContactBlocker one = {};

                assert_int_equal(said(&one, "no kubeconfig", 0), 1);
                assert_int_equal(contact_blocker_contact(&one, EVENT_MIN, EVENT_MIN, &same), 1);
                assert_string_equal(
                        same,
                        "no access to the API server for 10s before the first successful contact: "
                        "no kubeconfig");
        }
}

static void test_reason_is_cut_and_valid(void **state) {
        _cleanup_(contact_blocker_done) ContactBlocker b = {};
        char long_reason[2000];

        memset(long_reason, 'x', sizeof(long_reason) - 1);
        long_reason[sizeof(long_reason) - 1] = 0;
        long_reason[5] = '\xff';
        assert_int_equal(contact_blocker_set(&b, long_reason, 1, REAL, NULL), 1);
        assert_int_equal(strlen(b.reason), CONTACT_REASON_MAX);
        assert_int_equal(b.reason[5], '?');
}

static void test_phrases(void **state) {
        assert_string_equal(contact_error_phrase(-ECONNREFUSED), "connection refused");
        assert_string_equal(
                contact_error_phrase(-EACCES),
                "unauthorized (HTTP 401): the API server does not accept the agent's credentials");
        assert_string_equal(contact_error_phrase(-EPERM), "forbidden (HTTP 403)");
        assert_string_equal(contact_error_phrase(-EIO), strerror(EIO));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_console_rate_limit),
                cmocka_unit_test(test_many_reasons_forget_the_oldest),
                cmocka_unit_test(test_contact_says_what_and_how_long),
                cmocka_unit_test(test_reason_is_cut_and_valid),
                cmocka_unit_test(test_phrases),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
