/* SPDX-License-Identifier: Apache-2.0 */
#include "core/unit-health.h"
#include "tests.h"

#define NOW (1000 * USEC_PER_SEC)
#define U(n, en, load, active, sub) \
        { .name = (n), .enabled = (en), .load_state = (load), .active_state = (active), .sub_state = (sub) }

static void expect(const UnitHealthState *units, size_t n, bool status, const char *reason,
                   const char *message) {
        UnitHealthVerdict v = {};

        assert_int_equal(unit_health_evaluate(units, n, NOW, UNIT_HEALTH_STUCK_USEC, &v), 0);
        assert_int_equal(v.status, status);
        assert_string_equal(v.reason, reason);
        assert_string_equal(v.message, message);
        unit_health_verdict_done(&v);
}

static void test_healthy(void **state) {
        UnitHealthState units[] = {
                U("a.service", true, "loaded", "active", "running"),
                U("b.service", false, "loaded", "inactive", "dead"),
                U("c.service", false, "loaded", "failed", "failed"), /* disabled: not our business */
                U("d.service", false, "not-found", "inactive", "dead"),
                U("e.service", true, "loaded", "activating", "auto-restart"),
                { .name = "f.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .service_type = "oneshot" },
                { .name = "g.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "inactive",
                  .sub_state = "dead",
                  .service_type = "simple",
                  .triggered = true },
        };

        expect(units, ELEMENTSOF(units), /* status= */ true, "AllUnitsHealthy", UNIT_HEALTH_MESSAGE_HEALTHY);
        expect(NULL, 0, /* status= */ true, "AllUnitsHealthy", UNIT_HEALTH_MESSAGE_HEALTHY);
}

static void test_unhealthy(void **state) {
        UnitHealthState units[] = {
                U("a.service", true, "loaded", "failed", "failed"),
                U("b.service", true, "not-found", "inactive", "dead"),
                U("c.service", false, "loaded", "active", "running"),
                U("d.service", true, "loaded", "inactive", "dead"), /* simple, not triggered */
                { .name = "e.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "activating",
                  .sub_state = "start",
                  .state_change_usec = NOW - UNIT_HEALTH_STUCK_USEC },
                { .name = "f.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "deactivating",
                  .sub_state = "stop-sigterm",
                  .state_change_usec = NOW - 12 * USEC_PER_SEC },
        };

        expect(units, ELEMENTSOF(units), /* status= */ false, "UnhealthyUnits",
               "a.service: failed; b.service: not loaded; c.service: active but should be disabled; "
               "d.service: inactive but should be enabled; e.service: stuck in activating for 5m0s");
}

static void test_progressing(void **state) {
        UnitHealthState units[] = {
                U("a.service", true, "loaded", "active", "running"),
                { .name = "b.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "activating",
                  .sub_state = "start",
                  .state_change_usec = NOW - 12 * USEC_PER_SEC - 1 },
                { .name = "c.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "deactivating",
                  .sub_state = "stop",
                  .state_change_usec = NOW - UNIT_HEALTH_STUCK_USEC + 1 },
                /* A timestamp in the future (another clock) counts as just now. */
                { .name = "d.service",
                  .enabled = true,
                  .load_state = "loaded",
                  .active_state = "activating",
                  .sub_state = "start",
                  .state_change_usec = NOW + USEC_PER_SEC },
        };

        expect(units, ELEMENTSOF(units), /* status= */ true, "ProgressingUnits",
               "b.service: activating for 12s; c.service: deactivating for 4m59s; d.service: activating for 0s");
}

/* Upstream readManagedUnits: spec + extension units merged, sorted, `enable` else "carries
 * configuration"; replaced units (docs/contract.md §9.4) left out. */
static void test_units_from_osc(void **state) {
        static const char yaml[] =
                "spec:\n"
                "  units:\n"
                "  - name: zz.service\n    enable: false\n    content: x\n"
                "  - name: kubelet.service\n    content: y\n"
                "  - name: plain.service\n"
                "  - name: gardener-node-agent.service\n    enable: true\n"
                "  - name: os.service\n    dropIns:\n    - name: 10-a.conf\n      content: z\n"
                "status:\n"
                "  extensionUnits:\n"
                "  - name: ext.timer\n    enable: true\n"
                "  - name: zz.service\n    enable: true\n";
        char *replaced[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ bool *enabled = NULL;
        static const char *const want[] = { "ext.timer", "kubelet.service", "os.service", "plain.service",
                                            "zz.service" };
        static const bool want_enabled[] = { true, true, true, false, true };
        size_t n;

        assert_int_equal(osc_model_decode_yaml(yaml, sizeof(yaml) - 1, NULL, &m, NULL), 0);
        assert_int_equal(unit_health_units_from_osc(m, replaced, &names, &enabled, &n), 0);
        assert_int_equal(n, ELEMENTSOF(want));
        for (size_t i = 0; i < n; i++) {
                assert_string_equal(names[i], want[i]);
                assert_int_equal(enabled[i], want_enabled[i]);
        }
}

/* The success rule's judgement (CheckOSCUnits): running, still coming, or not running. */
static void test_running(void **state) {
        static const struct {
                UnitHealthState u;
                UnitRunning want;
                const char *why;
        } cases[] = {
                { U("a.service", true, "loaded", "active", "running"), UNIT_RUNNING, "active" },
                { U("b.service", true, "loaded", "active", "exited"), UNIT_RUNNING, "active" },
                { { .name = "c.service",
                    .load_state = "loaded",
                    .active_state = "inactive",
                    .sub_state = "dead",
                    .service_type = "oneshot" },
                  UNIT_RUNNING,
                  "inactive" },
                { U("d.service", true, "loaded", "activating", "start"), UNIT_WAITING, "activating" },
                { U("e.service", true, "loaded", "activating", "auto-restart"), UNIT_WAITING, "activating" },
                { U("f.service", true, "loaded", "inactive", "dead"), UNIT_WAITING, "inactive" },
                { U("g.service", true, "not-found", "inactive", "dead"), UNIT_NOT_RUNNING, "not-found" },
                { U("h.service", true, "loaded", "failed", "failed"), UNIT_NOT_RUNNING, "failed" },
                { U("i.service", true, NULL, NULL, NULL), UNIT_NOT_RUNNING, "not loaded" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *why = NULL;

                assert_int_equal(unit_health_running(&cases[i].u, &why), cases[i].want);
                assert_string_equal(why, cases[i].why);
        }
}

/* The units an OSC starts: not those it disables or stops, not the replaced ones. */
static void test_units_started(void **state) {
        static const char yaml[] =
                "spec:\n"
                "  units:\n"
                "  - name: off.service\n    enable: false\n    content: x\n"
                "  - name: kubelet.service\n    content: y\n"
                "  - name: stopped.service\n    command: stop\n    content: y\n"
                "  - name: gardener-node-agent.service\n    enable: true\n"
                "  - name: os.service\n    dropIns:\n    - name: 10-a.conf\n      content: z\n";
        char *replaced[] = { (char *) "gardener-node-agent.service", NULL };
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ const char **names = NULL;
        size_t n;

        assert_int_equal(osc_model_decode_yaml(yaml, sizeof(yaml) - 1, NULL, &m, NULL), 0);
        assert_int_equal(unit_health_units_started(m, replaced, &names, &n), 0);
        assert_int_equal(n, 2);
        assert_string_equal(names[0], "kubelet.service");
        assert_string_equal(names[1], "os.service");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_healthy),     cmocka_unit_test(test_unhealthy),
                cmocka_unit_test(test_progressing), cmocka_unit_test(test_units_from_osc),
                cmocka_unit_test(test_running),     cmocka_unit_test(test_units_started),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
