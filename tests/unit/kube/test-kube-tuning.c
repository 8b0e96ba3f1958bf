/* SPDX-License-Identifier: Apache-2.0 */
#include "kube/kube-tuning.h"
#include "tests.h"

#define SEC USEC_PER_SEC

static void test_defaults(void **state) {
        KubeTuning t;

        kube_tuning_init(&t);
        assert_int_equal(t.watch_timeout_min_usec, 300 * SEC);
        assert_int_equal(t.watch_timeout_max_usec, 600 * SEC);
        assert_int_equal(t.backoff_base_usec, 800 * USEC_PER_MSEC);
        assert_int_equal(t.backoff_cap_usec, 30 * SEC);
        assert_int_equal(t.backoff_reset_usec, 120 * SEC);
        /* A fleet's reconnects after a server restart spread over at least 10 s (issue 17). */
        assert_true(t.reconnect_spread_usec >= 10 * SEC);
        assert_true(t.token_refresh_usec <= 60 * SEC);
        assert_true(t.cert_check_usec <= 300 * SEC);
        /* Silence detection must not fire between two regular bookmarks (about 60 s apart). */
        assert_true(t.watch_silence_usec > 60 * SEC);
        assert_int_equal(kube_tuning_parse(&t, NULL, NULL), 0);
        assert_int_equal(kube_tuning_parse(&t, "", NULL), 0);
        assert_int_equal(t.watch_timeout_min_usec, 300 * SEC);
        /* The node duties: docs/node-protocol.md §8 / Appendix A timers. */
        assert_int_equal(t.units_check_usec, 60 * SEC);
        assert_int_equal(t.units_stuck_usec, 300 * SEC);
        assert_int_equal(t.health_check_usec, 30 * SEC);
        assert_int_equal(t.health_grace_usec, 60 * SEC);
}

static void test_parse(void **state) {
        KubeTuning t;

        kube_tuning_init(&t);
        assert_int_equal(
                kube_tuning_parse(&t,
                                  "watch-timeout=2s-4s, watch-silence=3s,startup-delay=0s,"
                                  "backoff-base=100ms,backoff-cap=2s,token-refresh=1s,cert-check=1s",
                                  NULL),
                0);
        assert_int_equal(t.watch_timeout_min_usec, 2 * SEC);
        assert_int_equal(t.watch_timeout_max_usec, 4 * SEC);
        assert_int_equal(t.watch_silence_usec, 3 * SEC);
        assert_int_equal(t.startup_delay_usec, 0);
        assert_int_equal(t.backoff_base_usec, 100 * USEC_PER_MSEC);
        assert_int_equal(t.backoff_cap_usec, 2 * SEC);
        assert_int_equal(t.token_refresh_usec, 1 * SEC);
        assert_int_equal(t.cert_check_usec, 1 * SEC);
        assert_int_equal(t.backoff_reset_usec, 120 * SEC);

        assert_int_equal(
                kube_tuning_parse(&t, "units-check=1s,units-stuck=4s,health-check=500ms,health-grace=3s",
                                  NULL),
                0);
        assert_int_equal(t.units_check_usec, 1 * SEC);
        assert_int_equal(t.units_stuck_usec, 4 * SEC);
        assert_int_equal(t.health_check_usec, 500 * USEC_PER_MSEC);
        assert_int_equal(t.health_grace_usec, 3 * SEC);
        assert_int_equal(kube_tuning_parse(&t, "health-check=0s", NULL), -EINVAL);
        assert_int_equal(t.node_registration_usec, 300 * SEC);
        assert_int_equal(kube_tuning_parse(&t, "node-registration=2s", NULL), 0);
        assert_int_equal(t.node_registration_usec, 2 * SEC);
        assert_int_equal(kube_tuning_parse(&t, "reconnect-spread=0s", NULL), 0);
        assert_int_equal(t.reconnect_spread_usec, 0);
}

static void test_errors(void **state) {
        static const char *const bad[] = {
                "nonsense",
                "bogus=1s",
                "watch-silence=0s",
                "watch-silence=3",
                "watch-timeout=4s",
                "watch-timeout=4s-2s",
                "watch-timeout=0s-2s",
                "watch-timeout=1500ms-3s",
                "token-refresh=",
                "backoff-base=1s,oops",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *error = NULL;
                KubeTuning t;

                kube_tuning_init(&t);
                assert_int_equal(kube_tuning_parse(&t, bad[i], &error), -EINVAL);
                assert_non_null(error);
                assert_non_null(strstr(error, "INPLACE_AGENT_KUBE_TUNING"));
                /* Nothing was applied, not even the valid items before the bad one. */
                assert_int_equal(t.backoff_base_usec, 800 * USEC_PER_MSEC);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
