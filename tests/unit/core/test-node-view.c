/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/node-view.h"
#include "tests.h"
#include "util/fileio.h"

static json_t *load_fixture(const char *name) {
        _cleanup_free_ char *path = NULL;
        json_error_t e;
        json_t *j;

        assert_non_null(getenv("TEST_DATA"));
        assert_true(asprintf(&path, "%s/node/%s", getenv("TEST_DATA"), name) > 0);
        j = json_load_file(path, 0, &e);
        if (!j)
                fail_msg("%s: %s", path, e.text);
        return j;
}

static NodeView *decode(const char *json) {
        _cleanup_free_ char *err = NULL;
        NodeView *v = NULL;
        json_t *j = json_loads(json, JSON_ALLOW_NUL, NULL);

        assert_non_null(j);
        if (node_view_decode(j, &v, &err) < 0)
                fail_msg("%s: %s", json, strempty(err));
        json_decref(j);
        return v;
}

static void test_ready_node(void **state) {
        _cleanup_(node_view_freep) NodeView *v = NULL;
        json_t *j = load_fixture("ready-for-update.json");

        assert_int_equal(node_view_decode(j, &v, NULL), 0);
        json_decref(j);

        assert_string_equal(v->name, "shoot--dev--a-worker-a-z1-5d7f8-xk2lp");
        assert_string_equal(v->uid, "0f3c2e6c-9a1b-4c39-8d0e-1f2a3b4c5d6e");
        assert_string_equal(v->resource_version, "48213");
        assert_true(v->candidate);
        assert_true(v->selected);
        assert_int_equal(v->update_result, NODE_UPDATE_RESULT_NONE);
        assert_null(v->update_result_value);
        assert_true(v->in_place_update.present);
        assert_string_equal(v->in_place_update.status, "True");
        assert_string_equal(v->in_place_update.reason, "ReadyForUpdate");
        assert_string_equal(v->in_place_update.message, "Node is ready for in-place update");
        assert_string_equal(v->in_place_update.last_transition_time, "2025-03-01T10:04:00Z");
        assert_true(v->agent.present);
        assert_string_equal(v->agent.reason, "WaitingForDrain");
        assert_string_equal(v->restart_services, "kubelet,containerd");
        assert_string_equal(v->applied_checksum, "5d41402abc4b2a76b9719d911017c592");
        assert_null(v->updating_os_version);
        assert_null(v->update_failed_reason);
        assert_string_equal(v->progress, "{\"phase\":\"WaitingForDrain\"}");
        assert_string_equal(v->plan, "[]");
        assert_null(v->failure);
        assert_string_equal(v->secret_name, "gardener-node-agent-worker-a");
        assert_string_equal(v->kubernetes_version, "1.31.4");
        assert_null(v->warning);

        assert_true(node_view_ready_for_update(v));
        assert_true(node_view_gate_open(v));
}

static void test_plain_node(void **state) {
        _cleanup_(node_view_freep) NodeView *v = NULL;
        json_t *j = load_fixture("plain.json");

        assert_int_equal(node_view_decode(j, &v, NULL), 0);
        json_decref(j);
        assert_string_equal(v->name, "n1");
        assert_false(v->candidate);
        assert_false(v->selected);
        assert_false(v->in_place_update.present);
        assert_false(v->agent.present);
        assert_null(v->restart_services);
        assert_null(v->secret_name);
        assert_false(node_view_ready_for_update(v));
        assert_false(node_view_gate_open(v));
}

static void test_labels_and_result(void **state) {
        static const struct {
                const char *labels;
                bool candidate, selected;
                NodeUpdateResult result;
                bool warning;
        } table[] = {
                { "{}", false, false, NODE_UPDATE_RESULT_NONE, false },
                { "{\"node.machine.sapcloud.io/candidate-for-update\":\"True\"}", false, false,
                  NODE_UPDATE_RESULT_NONE, false }, /* MCM writes "true"; nothing else counts */
                { "{\"node.machine.sapcloud.io/selected-for-update\":\"true\"}", false, true,
                  NODE_UPDATE_RESULT_NONE, false },
                { "{\"node.machine.sapcloud.io/update-result\":\"successful\"}", false, false,
                  NODE_UPDATE_RESULT_SUCCESSFUL, false },
                { "{\"node.machine.sapcloud.io/update-result\":\"failed\"}", false, false,
                  NODE_UPDATE_RESULT_FAILED, false },
                { "{\"node.machine.sapcloud.io/update-result\":\"Failed\"}", false, false,
                  NODE_UPDATE_RESULT_INVALID, true },
                { "{\"node.machine.sapcloud.io/update-result\":\"\"}", false, false,
                  NODE_UPDATE_RESULT_INVALID, true },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *json = NULL;
                _cleanup_(node_view_freep) NodeView *v = NULL;

                assert_true(asprintf(&json, "{\"metadata\":{\"name\":\"n\",\"labels\":%s}}",
                                     table[i].labels) > 0);
                v = decode(json);
                assert_int_equal(v->candidate, table[i].candidate);
                assert_int_equal(v->selected, table[i].selected);
                assert_int_equal(v->update_result, table[i].result);
                assert_int_equal(!!v->warning, table[i].warning);
                /* an invalid result never opens the gate */
                assert_int_equal(node_view_gate_open(v), table[i].result == NODE_UPDATE_RESULT_FAILED);
        }
}

static void test_conditions(void **state) {
        static const struct {
                const char *conditions;
                bool present, ready;
                const char *reason;
                const char *since; /* node_view_ready_since() */
        } table[] = {
                /* status is not checked, only the reason (docs/node-protocol.md §1.2) */
                { "[{\"type\":\"InPlaceUpdate\",\"status\":\"False\",\"reason\":\"ReadyForUpdate\"}]", true,
                  true, "ReadyForUpdate", NULL },
                { "[{\"type\":\"InPlaceUpdate\",\"status\":\"True\",\"reason\":\"SelectedForUpdate\"}]",
                  true, false, "SelectedForUpdate", NULL },
                /* a condition without reason */
                { "[{\"type\":\"InPlaceUpdate\",\"status\":\"True\"}]", true, false, NULL, NULL },
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":null}]", true, false, NULL, NULL },
                /* docs/contract.md §9.9: any entry with ReadyForUpdate, with or without lastTransitionTime;
                 * the last such entry is the signal (a manual retry appends one) */
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":\"UpdateFailed\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\"}]",
                  true, true, "ReadyForUpdate", "status.conditions[1]" },
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\",\"lastTransitionTime\":\"T1\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"UpdateFailed\",\"lastTransitionTime\":\"T2\"}]",
                  true, true, "ReadyForUpdate", "T1" },
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\",\"lastTransitionTime\":\"T1\"},"
                  "{\"type\":\"Ready\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\",\"lastTransitionTime\":\"T3\"}]",
                  true, true, "ReadyForUpdate", "T3" },
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\",\"lastTransitionTime\":\"T1\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\"}]",
                  true, true, "ReadyForUpdate", "status.conditions[1]" },
                /* no ReadyForUpdate: the first one counts */
                { "[{\"type\":\"InPlaceUpdate\",\"reason\":\"UpdateFailed\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"SelectedForUpdate\"}]",
                  true, false, "UpdateFailed", NULL },
                /* what the agent does not use does not matter: other types, shapes, NUL characters */
                { "[1, null, {\"status\":\"True\"}, {\"type\":5}, {\"type\":\"Ready\",\"status\":[]},"
                  "{\"type\":\"MemoryPressure\",\"message\":\"a\\u0000b\"},"
                  "{\"type\":\"InPlaceUpdate\\u0000x\",\"reason\":\"SelectedForUpdate\"},"
                  "{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\",\"status\":7,"
                  "\"message\":\"x\\u0000y\",\"lastTransitionTime\":\"T\"}]",
                  true, true, "ReadyForUpdate", "T" },
                { "[{\"type\":\"Ready\",\"reason\":\"ReadyForUpdate\"}]", false, false, NULL, NULL },
                { "[]", false, false, NULL, NULL },
                { "null", false, false, NULL, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *json = NULL;
                _cleanup_(node_view_freep) NodeView *v = NULL;

                assert_true(asprintf(&json, "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":%s}}",
                                     table[i].conditions) > 0);
                v = decode(json);
                assert_int_equal(v->in_place_update.present, table[i].present);
                assert_int_equal(node_view_ready_for_update(v), table[i].ready);
                if (table[i].reason)
                        assert_string_equal(v->in_place_update.reason, table[i].reason);
                else
                        assert_null(v->in_place_update.reason);
                if (table[i].since)
                        assert_string_equal(node_view_ready_since(v), table[i].since);
                else if (!table[i].ready)
                        assert_null(node_view_ready_since(v));
        }
}

/* docs/node-protocol.md §9 scenario 8: only the transition to ReadyForUpdate counts. */
static void test_became_ready(void **state) {
        _cleanup_(node_view_freep) NodeView *plain = decode("{\"metadata\":{\"name\":\"n\"}}");
        _cleanup_(node_view_freep) NodeView *ready =
                decode("{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":"
                       "[{\"type\":\"InPlaceUpdate\",\"reason\":\"ReadyForUpdate\"}]}}");

        assert_true(node_view_became_ready(plain, ready));
        assert_true(node_view_became_ready(NULL, ready));   /* Create with it */
        assert_false(node_view_became_ready(ready, ready)); /* both have it */
        assert_false(node_view_became_ready(ready, plain));
        assert_false(node_view_became_ready(NULL, plain));
}

static void test_errors(void **state) {
        static const struct {
                const char *json, *error;
        } table[] = {
                { "[]", "node: expected an object" },
                { "{}", "metadata: expected an object" },
                { "{\"metadata\":{}}", "metadata.name: missing" },
                { "{\"metadata\":{\"name\":\"\"}}", "metadata.name: missing" },
                { "{\"metadata\":{\"name\":5}}", "metadata.name: expected a string" },
                { "{\"metadata\":{\"name\":\"n\",\"labels\":[]}}", "metadata.labels: expected an object" },
                { "{\"metadata\":{\"name\":\"n\",\"annotations\":\"x\"}}",
                  "metadata.annotations: expected an object" },
                { "{\"metadata\":{\"name\":\"n\",\"labels\":{\"node.machine.sapcloud.io/update-result\":true}}}",
                  "metadata.labels[\"node.machine.sapcloud.io/update-result\"]: expected a string" },
                { "{\"metadata\":{\"name\":\"n\",\"labels\":{\"worker.gardener.cloud/kubernetes-version\":"
                  "\"0123456789012345678901234567890123456789012345678901234567890123\"}}}",
                  "metadata.labels[\"worker.gardener.cloud/kubernetes-version\"]: longer than 63 bytes" },
                /* A NUL in a field the agent uses is an error naming it. */
                { "{\"metadata\":{\"name\":\"n\",\"annotations\":{\"checksum/cloud-config-data\":\"a\\u0000b\"}}}",
                  "metadata.annotations[\"checksum/cloud-config-data\"]: contains a NUL character (\\u0000)" },
                { "{\"metadata\":{\"name\":\"n\",\"annotations\":{\"worker.gardener.cloud/restart-systemd-services\":"
                  "\"kubelet\\u0000,system.slice\"}}}",
                  "metadata.annotations[\"worker.gardener.cloud/restart-systemd-services\"]: contains a NUL character (\\u0000)" },
                { "{\"metadata\":{\"name\":\"n\\u0000\"}}",
                  "metadata.name: contains a NUL character (\\u0000)" },
                { "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":[{\"type\":\"InPlaceUpdate\","
                  "\"reason\":\"ReadyForUpdate\\u0000\"}]}}",
                  "status.conditions[0].reason: contains a NUL character (\\u0000)" },
                { "{\"metadata\":{\"name\":\"n\"},\"status\":[]}", "status: expected an object" },
                { "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":{}}}",
                  "status.conditions: expected a list" },
                { "{\"metadata\":{\"name\":\"n\"},\"status\":{\"conditions\":[{\"type\":\"InPlaceUpdate\",\"reason\":1}]}}",
                  "status.conditions[0].reason: expected a string" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                NodeView *v = NULL;
                json_t *j = json_loads(table[i].json, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
                int r;

                assert_non_null(j);
                r = node_view_decode(j, &v, &err);
                json_decref(j);
                if (r != -EINVAL || !err || !streq(err, table[i].error))
                        fail_msg("%s: %d \"%s\"", table[i].json, r, strempty(err));
                assert_null(v);
        }
}

/* Unused annotations and labels with NUL characters, any number of them, do not matter. */
static void test_nul_where_unused(void **state) {
        _cleanup_(node_view_freep) NodeView *v = decode(
                "{\"metadata\":{\"name\":\"n\",\"annotations\":{\"x\":\"\\u0000\",\"checksum/cloud-config-data\":\"c\"},"
                "\"labels\":{\"z\":\"a\\u0000b\"}}}");

        assert_string_equal(v->applied_checksum, "c");
        assert_null(v->warning);
}

/* More conditions than the limit: the excess is ignored with a warning naming the limit, not the
 * Node. Table: how many conditions, where the ReadyForUpdate entry is, whether it is seen. */
static void test_condition_limit(void **state) {
        static const struct {
                int n, ready_at;
                bool ready, warning;
        } table[] = {
                { 10, 5, true, false },
                { 300, 299, true, false }, /* the old limit was 256 */
                { NODE_CONDITIONS_MAX, NODE_CONDITIONS_MAX - 1, true, false },
                { NODE_CONDITIONS_MAX + 1, 3, true, true },
                { NODE_CONDITIONS_MAX + 1, NODE_CONDITIONS_MAX, false, true },
                { 5000, 4999, false, true },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL, *expect = NULL;
                _cleanup_(node_view_freep) NodeView *v = NULL;
                json_t *conds = json_array(), *node;

                for (int k = 0; k < table[i].n; k++)
                        json_array_append_new(conds,
                                              k == table[i].ready_at ?
                                                      json_pack("{s:s, s:s}", "type", "InPlaceUpdate",
                                                                "reason", "ReadyForUpdate") :
                                                      json_pack("{s:s}", "type", "Ready"));
                node = json_pack("{s:{s:s}, s:{s:o}}", "metadata", "name", "n", "status", "conditions",
                                 conds);
                assert_non_null(node);
                assert_int_equal(node_view_decode(node, &v, &err), 0);
                json_decref(node);
                assert_int_equal(node_view_ready_for_update(v), table[i].ready);
                if (!table[i].warning) {
                        assert_null(v->warning);
                        continue;
                }
                assert_true(asprintf(&expect,
                                     "status.conditions has %d entries; only the first 1024 are looked at",
                                     table[i].n) > 0);
                assert_string_equal(v->warning, expect);
        }
}

static void test_limits(void **state) {
        assert_string_equal(node_update_result_to_string(NODE_UPDATE_RESULT_FAILED), "failed");
        assert_int_equal(node_update_result_from_string("successful"), NODE_UPDATE_RESULT_SUCCESSFUL);
        assert_int_equal(node_update_result_from_string("bogus"), -EINVAL);
}

static void test_duties(void **state) {
        _cleanup_(node_view_freep) NodeView *v = decode(
                "{\"metadata\":{\"name\":\"n\",\"labels\":{\"node-role.kubernetes.io/worker\":\"\","
                "\"node-role.kubernetes.io/control-plane\":\"\",\"topology.kubernetes.io/zone\":\"z1\"},\"annotations\":{"
                "\"node-agent.gardener.cloud/reconciliation-delay\":\"1m30s\","
                "\"inplace-agent/min-version-for-update\":\"1.30.0\"}},"
                "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                "{\"type\":\"SystemdUnitsReady\",\"status\":\"False\",\"reason\":\"UnhealthyUnits\","
                "\"message\":\"a.service: failed\"},{\"type\":\"SystemdUnitsReady\",\"status\":\"True\"}]}}");
        _cleanup_(node_view_freep) NodeView *plain = decode("{\"metadata\":{\"name\":\"n\"}}");

        assert_string_equal(v->role_worker, "");
        assert_string_equal(v->role_control_plane, "");
        assert_string_equal(v->zone, "z1");
        assert_string_equal(v->reconciliation_delay, "1m30s");
        assert_string_equal(v->min_version_for_update, "1.30.0");
        assert_ptr_equal(node_view_condition(v, "SystemdUnitsReady"), &v->units_ready);
        assert_ptr_equal(node_view_condition(v, "InPlaceUpdateAgent"), &v->agent);
        assert_ptr_equal(node_view_condition(v, "Ready"), &v->ready);
        assert_string_equal(v->ready.status, "True");
        assert_null(node_view_condition(v, "MemoryPressure"));
        assert_null(node_view_condition(NULL, "SystemdUnitsReady"));
        assert_true(v->units_ready.present);
        assert_string_equal(v->units_ready.status, "False"); /* the first one counts */
        assert_string_equal(v->units_ready.message, "a.service: failed");

        assert_null(plain->role_worker);
        assert_null(plain->role_control_plane);
        assert_null(plain->zone);
        assert_false(plain->units_ready.present);
}

static void test_addresses(void **state) {
        _cleanup_(node_view_freep) NodeView *v = decode(
                "{\"metadata\":{\"name\":\"n\"},\"status\":{\"addresses\":[\"junk\",{\"type\":\"Hostname\","
                "\"address\":\"n\"},{\"type\":\"InternalIP\",\"address\":7},{\"type\":\"InternalIP\","
                "\"address\":\"10.0.0.\\u00001\"},{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"},"
                "{\"type\":\"InternalIP\",\"address\":\"10.0.0.3\"}]}}");
        _cleanup_(node_view_freep) NodeView *ext =
                decode("{\"metadata\":{\"name\":\"n\"},\"status\":{\"addresses\":[{\"type\":\"ExternalIP\","
                       "\"address\":\"203.0.113.9\"}]}}");
        _cleanup_(node_view_freep) NodeView *none = decode("{\"metadata\":{\"name\":\"n\"},\"status\":{}}");

        /* Kubelet's to write: what is not a clean address is skipped, the first good InternalIP counts. */
        assert_string_equal(v->internal_ip, "10.0.0.2");
        assert_false(v->external_ip);
        assert_null(ext->internal_ip);
        assert_true(ext->external_ip);
        assert_null(none->internal_ip);
        assert_false(none->external_ip);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ready_node),
                cmocka_unit_test(test_plain_node),
                cmocka_unit_test(test_labels_and_result),
                cmocka_unit_test(test_conditions),
                cmocka_unit_test(test_became_ready),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_nul_where_unused),
                cmocka_unit_test(test_condition_limit),
                cmocka_unit_test(test_duties),
                cmocka_unit_test(test_addresses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
