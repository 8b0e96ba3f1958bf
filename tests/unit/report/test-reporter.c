/* SPDX-License-Identifier: Apache-2.0 */
/* The reporter against the canned-response server: what each of the core's report actions puts on
 * the wire (patch type, path, labels and annotations in one merge patch, the condition on /status),
 * write-on-change of the condition against the watched Node, completion once every write of an
 * action finished, the conditional removal of an annotation, -ENODEV before a client exists, and
 * the bound on the agent's annotations together for huge inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/annotation-budget.h"
#include "report/reporter.h"
#include "test-kube.h"

typedef struct Ctx {
        TestKube k;
        Reporter *r;
        UpdateTransaction *tx;
        unsigned done_calls;
        int done_error;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        test_kube_init(&c->k, NULL, NULL);
        assert_int_equal(reporter_new("node-1", &c->r), 0);
        reporter_attach(c->r, c->k.client, NULL);
        assert_int_equal(update_transaction_new(&c->tx), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        reporter_free(c->r);
        update_transaction_free(c->tx);
        test_kube_done(&c->k);
        free(c);
        return 0;
}

static void on_done(int error, void *userdata) {
        Ctx *c = userdata;

        c->done_calls++;
        c->done_error = error;
}

static const UpdateAction result_action = {
        .type = UPDATE_ACTION_REPORT_RESULT,
        .phase = UPDATE_PHASE_SUCCEEDED,
        .result = NODE_UPDATE_RESULT_SUCCESSFUL,
        .clear_marker = true,
        .condition_status = true,
        .condition_reason = "Succeeded",
        .message = (char *) "In-place update t1 succeeded.",
};

static void test_result_is_one_metadata_patch_and_the_condition(void **state) {
        Ctx *c = *state;
        const char *req;

        test_kube_push(&c->k, 200, NULL, "{}");
        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_report(c->r, c->tx, &result_action, 1700000000 * USEC_PER_SEC, on_done, c),
                         0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 0, 10 * USEC_PER_SEC);
        assert_int_equal(c->done_calls, 1);
        assert_int_equal(c->done_error, 0);
        assert_int_equal(fake_http_requests(c->k.fake), 2);

        req = fake_http_request(c->k.fake, 0);
        assert_non_null(strstr(req, "PATCH /api/v1/nodes/node-1 "));
        assert_non_null(strstr(req, "application/merge-patch+json"));
        assert_non_null(strstr(req, "\"node.machine.sapcloud.io/update-result\":\"successful\""));
        assert_non_null(strstr(req, "\"node-agent.gardener.cloud/updating-operating-system-version\":null"));
        assert_non_null(strstr(req, "\"inplace-agent/failure\":null"));

        req = fake_http_request(c->k.fake, 1);
        assert_non_null(strstr(req, "PATCH /api/v1/nodes/node-1/status "));
        assert_non_null(strstr(req, "application/strategic-merge-patch+json"));
        assert_non_null(strstr(req, "\"type\":\"InPlaceUpdateAgent\""));
        assert_non_null(strstr(req, "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\""));
}

/* A string of `n` bytes that JSON escapes at length. */
static char *huge_string(size_t n) {
        char *s = malloc(n + 1);

        assert_non_null(s);
        for (size_t i = 0; i < n; i++)
                s[i] = "\"\\x\n"[i % 4];
        s[n] = 0;
        return s;
}

/* Every annotation the reporter can write, each from a huge input: what the Node holds of ours
 * afterwards (the last value of each key, key and value) stays within ANNOTATION_BUDGET_TOTAL. */
static void test_annotations_bounded_for_huge_inputs(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *big = huge_string(4 * 1024 * 1024);
        _cleanup_(json_decrefp) json_t *plan = json_array(), *failure = NULL, *progress = NULL,
                                       *held = json_object();
        UpdateAction actions[] = {
                { .type = UPDATE_ACTION_PUBLISH_PLAN },
                { .type = UPDATE_ACTION_SET_MARKER, .version = big },
                { .type = UPDATE_ACTION_SET_CHECKSUM, .checksum = big },
                { .type = UPDATE_ACTION_REPORT_RESULT,
                  .phase = UPDATE_PHASE_FAILED,
                  .result = NODE_UPDATE_RESULT_FAILED,
                  .reason = big,
                  .message = big },
        };
        const char *key;
        json_t *value;
        size_t total = 0;
        unsigned n = 0;

        for (int i = 0; i < 50000; i++)
                assert_int_equal(json_array_append_new(plan,
                                                       json_pack("{s:s, s:s}", "action", "write-file",
                                                                 "target", "/etc/some/file/of/the/osc")),
                                 0);
        failure = json_pack("{s:s, s:s}", "code", "FileApplyFailed", "message", big);
        progress = json_pack("{s:s, s:s}", "phase", "Failed", "step", big);
        actions[0].json = plan;
        actions[3].json = progress;
        actions[3].failure = failure;
        for (size_t i = 0; i < ELEMENTSOF(actions); i++) {
                unsigned before = c->done_calls;

                test_kube_push(&c->k, 200, NULL, "{}");
                test_kube_push(&c->k, 200, NULL, "{}");
                assert_int_equal(
                        reporter_report(c->r, c->tx, &actions[i], 1700000000 * USEC_PER_SEC, on_done, c), 0);
                TEST_LOOP_UNTIL(c->k.event, c->done_calls > before, 10 * USEC_PER_SEC);
                assert_int_equal(c->done_error, 0);
        }
        for (unsigned i = 0; i < fake_http_requests(c->k.fake); i++) {
                const char *body = strstr(fake_http_request(c->k.fake, i), "\r\n\r\n");
                _cleanup_(json_decrefp) json_t *j = NULL;

                assert_non_null(body);
                j = json_loads(body + 4, 0, NULL);
                assert_non_null(j);
                json_object_foreach(json_object_get(json_object_get(j, "metadata"), "annotations"), key,
                                    value) {
                        assert_int_equal(json_object_set(held, key, value), 0);
                        n++;
                }
        }
        assert_int_equal(n, 6);
        assert_int_equal(json_object_size(held), 6);
        json_object_foreach(held, key, value) {
                size_t len = json_is_string(value) ? json_string_length(value) : 0;

                assert_true(len <= annotation_budget(key));
                total += strlen(key) + len;
        }
        assert_true(total > 8 * 1024); /* the huge inputs did arrive, cut */
        assert_true(total <= ANNOTATION_BUDGET_TOTAL);
}

static void test_condition_only_on_change(void **state) {
        Ctx *c = *state;
        NodeView node = {
                .agent = {
                        .present = true,
                        .status = (char *) "True",
                        .reason = (char *) "Succeeded",
                        .message = (char *) "In-place update t1 succeeded.",
                        .last_transition_time = (char *) "2020-01-01T00:00:00Z",
                },
        };
        UpdateAction a = result_action;

        reporter_set_node(c->r, &node);
        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_report(c->r, c->tx, &a, 1700000000 * USEC_PER_SEC, on_done, c), 0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 0, 10 * USEC_PER_SEC);
        /* The Node already says exactly this: only the metadata patch goes out. */
        assert_int_equal(fake_http_requests(c->k.fake), 1);

        /* Same status, new message: written, and lastTransitionTime stays the Node's. */
        a.message = (char *) "Something else.";
        test_kube_push(&c->k, 200, NULL, "{}");
        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_report(c->r, c->tx, &a, 1700000000 * USEC_PER_SEC, on_done, c), 0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 1, 10 * USEC_PER_SEC);
        assert_int_equal(fake_http_requests(c->k.fake), 3);
        assert_non_null(
                strstr(fake_http_request(c->k.fake, 2), "\"lastTransitionTime\":\"2020-01-01T00:00:00Z\""));
}

static void test_first_error_of_an_action_is_reported(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 422, NULL,
                       "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":\"no\"}");
        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_report(c->r, c->tx, &result_action, 1700000000 * USEC_PER_SEC, on_done, c),
                         0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 0, 10 * USEC_PER_SEC);
        assert_int_equal(c->done_calls, 1);
        assert_true(c->done_error < 0);
}

static void test_remove_annotation_is_conditional(void **state) {
        Ctx *c = *state;
        const char *req;

        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_remove_annotation(c->r, "worker.gardener.cloud/restart-systemd-services",
                                                    "a.service", on_done, c),
                         0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 0, 10 * USEC_PER_SEC);
        req = fake_http_request(c->k.fake, 0);
        assert_non_null(strstr(req, "application/json-patch+json"));
        assert_non_null(strstr(req, "\"op\":\"test\""));
        assert_non_null(
                strstr(req, "/metadata/annotations/worker.gardener.cloud~1restart-systemd-services"));
        assert_non_null(strstr(req, "\"value\":\"a.service\""));
}

static void test_internal_ip_merged_by_type(void **state) {
        Ctx *c = *state;
        NodeView node = { .name = (char *) "node-1" };
        const char *req;

        assert_int_equal(reporter_set_internal_ip(c->r, "10.0.0.2", on_done, c), -ENODEV); /* no Node */
        reporter_set_node(c->r, &node);
        test_kube_push(&c->k, 200, NULL, "{}");
        assert_int_equal(reporter_set_internal_ip(c->r, "10.0.0.2", on_done, c), 0);
        TEST_LOOP_UNTIL(c->k.event, c->done_calls > 0, 10 * USEC_PER_SEC);
        assert_int_equal(c->done_error, 0);
        test_kube_assert_request(&c->k, 0, "PATCH /api/v1/nodes/node-1/status");
        req = fake_http_request(c->k.fake, 0);
        assert_non_null(strstr(req, "application/strategic-merge-patch+json"));
        assert_non_null(strstr(
                req, "{\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.0.2\"}]}}"));
}

static void test_no_client_yet(void **state) {
        Ctx *c = *state;
        _cleanup_(reporter_freep) Reporter *r = NULL;

        assert_int_equal(reporter_new("node-1", &r), 0);
        assert_int_equal(reporter_report(r, c->tx, &result_action, 0, on_done, c), -ENODEV);
        assert_int_equal(reporter_emit_event(r, "Normal", "X", "y"), -ENODEV);
        assert_int_equal(c->done_calls, 0);
}

static void test_free_drops_writes_in_flight(void **state) {
        Ctx *c = *state;

        /* No answer queued: the writes stay in flight; freeing the reporter must not call back. */
        assert_int_equal(reporter_report(c->r, c->tx, &result_action, 0, on_done, c), 0);
        c->r = reporter_free(c->r);
        TEST_LOOP_NOT(c->k.event, c->done_calls > 0, 200 * USEC_PER_MSEC);
}

/* The STATUS= lines a NOTIFY_SOCKET of ours received, "|"-separated. */
static char *notified(int fd) {
        char buf[4096], *all = strdup("");
        ssize_t n;

        while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
                char *next = NULL;

                buf[n] = 0;
                assert_true(asprintf(&next, "%s%s|", all, buf) > 0);
                free(all);
                all = next;
        }
        return all;
}

static void test_status_note_stays_on_the_line(void **state) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_(reporter_freep) Reporter *r = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        (void) snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/test-reporter-%d.sock", (int) getpid());
        (void) unlink(sa.sun_path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);

        assert_int_equal(reporter_new("node-1", &r), 0);
        reporter_set_status_note(r, REPORTER_NOTE_OSC_SECRET,
                                 "waiting for the Secret"); /* nothing to append it to yet */
        reporter_set_status(r, "Watching node %s", "node-1");
        reporter_set_status(r, "Node node-1: %s", "Idle.");
        a = notified(fd);
        assert_string_equal(a,
                            "STATUS=Watching node node-1; waiting for the Secret|"
                            "STATUS=Node node-1: Idle.; waiting for the Secret|");
        reporter_set_status_note(r, REPORTER_NOTE_OSC_SECRET,
                                 "waiting for the Secret"); /* unchanged: not sent again */
        reporter_set_status_note(r, REPORTER_NOTE_OSC_SECRET, NULL);
        b = notified(fd);
        assert_string_equal(b, "STATUS=Node node-1: Idle.|");
        reporter_set_status(r, "Node node-1: %s", "Idle.");
        c = notified(fd);
        assert_string_equal(c, "");
        (void) unlink(sa.sun_path);
        assert_int_equal(unsetenv("NOTIFY_SOCKET"), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_result_is_one_metadata_patch_and_the_condition, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_condition_only_on_change, setup, teardown),
                cmocka_unit_test_setup_teardown(test_annotations_bounded_for_huge_inputs, setup, teardown),
                cmocka_unit_test_setup_teardown(test_first_error_of_an_action_is_reported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_remove_annotation_is_conditional, setup, teardown),
                cmocka_unit_test_setup_teardown(test_internal_ip_merged_by_type, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_client_yet, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_drops_writes_in_flight, setup, teardown),
                cmocka_unit_test(test_status_note_stays_on_the_line),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
