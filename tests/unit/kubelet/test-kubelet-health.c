/* SPDX-License-Identifier: Apache-2.0 */
/* The kubelet's probe options from the configuration, the node health duty's one probe, and
 * upstream's reason text. The probing itself is test-http-probe.c's. */
#include "kubelet/kubelet-health.h"
#include "tests.h"

static void test_probe_from_config(void **state) {
        _cleanup_(config_freep) Config *c = NULL;
        HttpProbeOptions o;

        assert_int_equal(config_new(&c), 0);
        assert_int_equal(config_finalize(c, &(ConfigOverrides) { .node_name = "node-1" }, NULL), 0);
        o = kubelet_health_probe(c);
        assert_string_equal(o.url, c->kubelet.healthz_url);
        assert_int_equal(o.timeout_usec, c->kubelet.health_timeout_usec);
        assert_int_equal(o.interval_usec,
                         MIN(HTTP_PROBE_INTERVAL_DEFAULT_USEC, c->kubelet.health_timeout_usec / 4));
        assert_int_equal(o.request_timeout_usec, 0); /* the probe's default, 10 s */
        assert_false(o.any_status);

        /* A short window is probed four times at least. */
        c->kubelet.health_timeout_usec = 8 * USEC_PER_SEC;
        o = kubelet_health_probe(c);
        assert_int_equal(o.interval_usec, 2 * USEC_PER_SEC);
}

static void test_probe_once(void **state) {
        HttpProbeOptions o = kubelet_health_probe_once("http://127.0.0.1:10248/healthz", 3 * USEC_PER_SEC);

        assert_string_equal(o.url, "http://127.0.0.1:10248/healthz");
        assert_int_equal(o.timeout_usec, 3 * USEC_PER_SEC);
        assert_int_equal(o.request_timeout_usec, 3 * USEC_PER_SEC);
        assert_true(o.once); /* a 500 or a refused connection fails at once: no 3 s wait */
}

static void test_failure_reason(void **state) {
        _cleanup_free_ char *reason = NULL;

        assert_int_equal(kubelet_health_failure_reason("HTTP 500", &reason), 0);
        assert_string_equal(reason, "kubelet is not healthy after in-place update: HTTP 500");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_probe_from_config),
                cmocka_unit_test(test_probe_once),
                cmocka_unit_test(test_failure_reason),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
