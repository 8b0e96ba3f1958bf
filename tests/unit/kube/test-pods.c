/* SPDX-License-Identifier: Apache-2.0 */
/* Deleting the node's Pods against the canned-response server: the LIST, a DELETE for each Pod the
 * selection picks and none for the others, 404 as deleted, every other failure (a DELETE that cannot
 * even be sent included) failing the run only once every request has ended. */
#include <stdio.h>

#include "kube/pods.h"
#include "test-kube.h"

#define TIMEOUT (10 * USEC_PER_SEC)
#define LIST_PATH "GET /api/v1/pods?fieldSelector=spec.nodeName%3Dn1 HTTP/1.1"
#define POD(ns, name, extra) "{\"metadata\":{\"namespace\":\"" ns "\",\"name\":\"" name "\"" extra "}}"
#define GRM ",\"labels\":{\"app\":\"gardener-resource-manager\"}"
#define MIRROR ",\"annotations\":{\"kubernetes.io/config.mirror\":\"abc\"}"
#define STATIC \
        ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\",\"uid\":\"u\"}]"
#define STATUS(code, reason, message)                                                         \
        "{\"kind\":\"Status\",\"status\":\"Failure\",\"code\":" #code ",\"reason\":\"" reason \
        "\",\"message\":\"" message "\"}"

typedef struct Ctx {
        TestKube k;
        PodCleanup *pc;
        unsigned calls;
        int error;
        char *message;
        size_t n_pods, n_delete;
        unsigned requests_at_done;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        test_kube_init(&c->k, NULL, NULL);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        pod_cleanup_free(c->pc);
        test_kube_done(&c->k);
        free(c->message);
        free(c);
        return 0;
}

static void on_done(PodCleanup *pc, int error, const char *message, const PodSelection *selection,
                    void *userdata) {
        Ctx *c = userdata;

        c->calls++;
        c->error = error;
        c->message = message ? strdup(message) : NULL;
        c->n_pods = selection ? selection->n_pods : SIZE_MAX;
        c->n_delete = selection ? selection->n_delete : SIZE_MAX;
        c->requests_at_done = fake_http_requests(c->k.fake);
        /* The caller frees it from here, as the executor does. */
        c->pc = pod_cleanup_free(c->pc);
}

static void start(Ctx *c) {
        assert_int_equal(pod_cleanup_start(c->k.client, "n1", on_done, c, &c->pc), 0);
}

/* Which of requests [from, to) is the DELETE of `path`. */
static bool requested(Ctx *c, unsigned from, unsigned to, const char *path) {
        char line[512];

        snprintf(line, sizeof(line), "DELETE %s HTTP/1.1", path);
        for (unsigned i = from; i < to; i++)
                if (strstr(test_kube_request(&c->k, i), line))
                        return true;
        return false;
}

/* gardener PR #15030: gardener-resource-manager, mirror and static Pods are listed but never
 * deleted; the others are, a 404 counting as deleted. */
static void test_deletes_the_selection(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL,
                       "{\"kind\":\"PodList\",\"items\":[" POD("default", "web-1", "") "," POD(
                               "garden", "grm-1",
                               GRM) "," POD("kube-system", "etcd-n1",
                                            MIRROR) "," POD("kube-system", "apiserver-n1",
                                                            STATIC) "," POD("kube-system", "kube-proxy-x",
                                                                            "") "]}");
        test_kube_push(&c->k, 200, NULL, POD("default", "web-1", ""));
        test_kube_push(&c->k, 404, NULL, STATUS(404, "NotFound", "pods \\\"kube-proxy-x\\\" not found"));
        start(c);
        TEST_LOOP_UNTIL(c->k.event, c->calls == 1, TIMEOUT);
        assert_int_equal(c->error, 0);
        assert_null(c->message);
        assert_int_equal(c->n_pods, 5);
        assert_int_equal(c->n_delete, 2);
        test_kube_assert_request(&c->k, 0, LIST_PATH);
        assert_int_equal(fake_http_requests(c->k.fake), 3);
        assert_true(requested(c, 1, 3, "/api/v1/namespaces/default/pods/web-1"));
        assert_true(requested(c, 1, 3, "/api/v1/namespaces/kube-system/pods/kube-proxy-x"));
        TEST_LOOP_NOT(c->k.event, fake_http_requests(c->k.fake) > 3, 200 * USEC_PER_MSEC);
}

/* A failed DELETE fails the run, naming the Pod and the server's reason, after the others ended. */
static void test_delete_failure(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL,
                       "{\"items\":[" POD("default", "a", "") "," POD("default", "b", "") "]}");
        test_kube_push(&c->k, 500, NULL, STATUS(500, "InternalError", "etcdserver: request timed out"));
        test_kube_push(&c->k, 500, NULL, STATUS(500, "InternalError", "etcdserver: request timed out"));
        start(c);
        TEST_LOOP_UNTIL(c->k.event, c->calls == 1, TIMEOUT);
        assert_int_equal(c->requests_at_done, 3);
        assert_true(c->error < 0);
        assert_non_null(c->message);
        assert_true(streq(c->message, "deleting Pod default/a failed: etcdserver: request timed out") ||
                    streq(c->message, "deleting Pod default/b failed: etcdserver: request timed out"));
}

/* A DELETE that cannot even be sent (here: a URL longer than libcurl takes, from a Pod name no API
 * server would allow) used to pass for deleted; it fails the run, naming the Pod in bounded form. */
static void test_delete_not_sent(void **state) {
        Ctx *c = *state;
        size_t long_name = 8000000;
        _cleanup_free_ char *body = malloc(long_name + 256);
        char *p;

        assert_non_null(body);
        p = body +
                sprintf(body,
                        "{\"items\":[" POD("default", "a", "") ",{\"metadata\":{\"namespace\":\"default\","
                                                               "\"name\":\"");
        memset(p, 'x', long_name);
        strcpy(p + long_name, "\"}}]}");
        test_kube_push(&c->k, 200, NULL, body);
        test_kube_push(&c->k, 200, NULL, POD("default", "a", ""));
        start(c);
        TEST_LOOP_UNTIL(c->k.event, c->calls == 1, TIMEOUT);
        assert_true(c->error < 0);
        assert_non_null(c->message);
        assert_non_null(strstr(c->message, "failed: the request could not be sent"));
        assert_true(strlen(c->message) < 600);
        assert_int_equal(c->n_delete, 2);
        /* The other Pod's DELETE was sent and answered before the run ended. */
        assert_int_equal(c->requests_at_done, 2);
        test_kube_assert_request(&c->k, 1, "DELETE /api/v1/namespaces/default/pods/a HTTP/1.1");
}

static void test_list_failures(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 403, NULL,
                       STATUS(403, "Forbidden", "pods is forbidden: node-agent may not list pods"));
        start(c);
        TEST_LOOP_UNTIL(c->k.event, c->calls == 1, TIMEOUT);
        assert_int_equal(c->error, -EPERM);
        assert_string_equal(c->message,
                            "listing the Pods bound to node n1 failed: pods is forbidden: node-agent may "
                            "not list pods");
        assert_int_equal(c->n_pods, SIZE_MAX); /* no selection */

        /* An item that cannot be named: nothing deleted, the list refused. */
        free(c->message);
        c->calls = 0;
        test_kube_push(&c->k, 200, NULL,
                       "{\"items\":[" POD("default", "a", "") ",{\"metadata\":{\"name\":\"b\"}}]}");
        start(c);
        TEST_LOOP_UNTIL(c->k.event, c->calls == 1, TIMEOUT);
        assert_int_equal(c->error, -EBADMSG);
        assert_string_equal(c->message,
                            "listing the Pods bound to node n1 failed: item 1 of the Pod list has no "
                            "metadata.namespace and metadata.name");
        TEST_LOOP_NOT(c->k.event, fake_http_requests(c->k.fake) > 2, 200 * USEC_PER_MSEC);
}

/* Freed while its requests run: no callback, nothing left behind. */
static void test_cancel(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, "{\"items\":[" POD("default", "a", "") "]}");
        /* The DELETE's answer never completes. */
        assert_int_equal(fake_http_push(c->k.fake,
                                        &(FakeResponse) { .status = 200,
                                                          .body = POD("default", "a", ""),
                                                          .stall = true,
                                                          .stall_after = 4 }),
                         0);
        start(c);
        TEST_LOOP_UNTIL(c->k.event, fake_http_requests(c->k.fake) >= 2, TIMEOUT);
        c->pc = pod_cleanup_free(c->pc);
        TEST_LOOP_NOT(c->k.event, c->calls > 0, 300 * USEC_PER_MSEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_deletes_the_selection, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_failure, setup, teardown),
                cmocka_unit_test_setup_teardown(test_delete_not_sent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
