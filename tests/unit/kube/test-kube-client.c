/* SPDX-License-Identifier: Apache-2.0 */
/* The Kubernetes client against the canned-response server (plain HTTP on loopback): what goes on
 * the wire (method, path, headers, patch content types), how answers map to -errno and Status
 * fields, the 429/503 Retry-After rules, and the token re-read after a 401. TLS and the real API
 * server are the kube-* integration tests' part. */
#include <stdio.h>
#include <unistd.h>

#include "test-kube.h"

typedef struct Ctx {
        TestKube k;
        char dir[64];
        char token_file[128];

        unsigned calls;
        int error;
        json_t *object;
        long status;
        char reason[64], message[256];
        unsigned attempts;
} Ctx;

static void write_file(const char *path, const char *content) {
        FILE *f = fopen(path, "we");

        assert_non_null(f);
        assert_true(fputs(content, f) >= 0);
        assert_int_equal(fclose(f), 0);
}

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        strcpy(c->dir, "/tmp/test-kube-client-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(c->token_file, sizeof(c->token_file), "%s/token", c->dir);
        write_file(c->token_file, "token-1\n");
        test_kube_init(&c->k, &(KubeConfig) { .token_file = c->token_file }, NULL);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        test_kube_done(&c->k);
        json_decref(c->object);
        assert_int_equal(unlink(c->token_file), 0);
        assert_int_equal(rmdir(c->dir), 0);
        free(c);
        return 0;
}

static void on_done(KubeRequest *req, int error, json_t *object, void *userdata) {
        Ctx *c = userdata;

        c->calls++;
        c->error = error;
        json_decref(c->object);
        c->object = json_incref(object);
        c->status = kube_request_get_status(req);
        snprintf(c->reason, sizeof(c->reason), "%s", strempty(kube_request_get_reason(req)));
        snprintf(c->message, sizeof(c->message), "%s", strempty(kube_request_get_message(req)));
        c->attempts = kube_request_get_attempts(req);
}

static void wait_done(Ctx *c) {
        TEST_LOOP_UNTIL(c->k.event, c->calls > 0, 10 * USEC_PER_SEC);
        assert_int_equal(c->calls, 1);
}

static const char *last(Ctx *c) {
        return fake_http_last_request(c->k.fake);
}

static void test_get_sends_credentials_and_decodes(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, "Content-Type: application/json\r\n",
                       "{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\"}}");
        /* Floating: owned by the client, freed after the callback (ASan/valgrind see a leak otherwise). */
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->status, 200);
        assert_int_equal(c->attempts, 1);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(c->object, "metadata"), "name")), "n1");
        assert_non_null(strstr(last(c), "GET /api/v1/nodes/n1 HTTP/1.1\r\n"));
        assert_non_null(strstr(last(c), "\r\nAccept: application/json\r\n"));
        assert_non_null(strstr(last(c), "\r\nAuthorization: Bearer token-1\r\n"));
        assert_non_null(strstr(last(c), "\r\nUser-Agent: inplace-agent/"));
        assert_null(strstr(last(c), "Expect:"));
}

static void test_patch_types(void **state) {
        Ctx *c = *state;
        static const struct {
                KubePatchType type;
                const char *content_type;
        } cases[] = {
                { KUBE_PATCH_MERGE, "application/merge-patch+json" },
                { KUBE_PATCH_STRATEGIC, "application/strategic-merge-patch+json" },
                { KUBE_PATCH_JSON, "application/json-patch+json" },
                { KUBE_PATCH_APPLY, "application/apply-patch+yaml" },
        };
        json_auto_t *body = json_pack("{s:{s:{s:s}}}", "metadata", "labels", "a", "b");

        assert_null(kube_patch_type_to_content_type(_KUBE_PATCH_TYPE_MAX));
        assert_null(kube_patch_type_to_content_type(_KUBE_PATCH_TYPE_INVALID));
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char ct[128];

                assert_string_equal(kube_patch_type_to_content_type(cases[i].type), cases[i].content_type);
                c->calls = 0;
                test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Node\"}");
                assert_int_equal(kube_client_patch(c->k.client, "/api/v1/nodes/n1", cases[i].type, body,
                                                   on_done, c, NULL),
                                 0);
                wait_done(c);
                assert_int_equal(c->error, 0);
                snprintf(ct, sizeof(ct), "\r\nContent-Type: %s\r\n", cases[i].content_type);
                assert_non_null(strstr(last(c), "PATCH /api/v1/nodes/n1 HTTP/1.1\r\n"));
                assert_non_null(strstr(last(c), ct));
                assert_non_null(strstr(last(c), "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}"));
        }
}

static void test_post_put_delete(void **state) {
        Ctx *c = *state;
        json_auto_t *body = json_pack("{s:s}", "kind", "Lease");
        KubeRequest *req = NULL;

        test_kube_push(&c->k, 201, NULL, "{\"kind\":\"Lease\"}");
        assert_int_equal(kube_client_post(c->k.client, "/apis/x/leases", body, on_done, c, &req), 0);
        wait_done(c);
        assert_int_equal(c->error, 0);
        assert_string_equal(kube_request_get_method(req), "POST");
        assert_string_equal(kube_request_get_path(req), "/apis/x/leases");
        assert_non_null(strstr(last(c), "POST /apis/x/leases HTTP/1.1\r\n"));
        assert_non_null(strstr(last(c), "\r\nContent-Type: application/json\r\n"));
        req = kube_request_free(req);

        c->calls = 0;
        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Lease\"}");
        assert_int_equal(kube_client_put(c->k.client, "/apis/x/leases/l", body, on_done, c, NULL), 0);
        wait_done(c);
        assert_non_null(strstr(last(c), "PUT /apis/x/leases/l HTTP/1.1\r\n"));

        c->calls = 0;
        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Status\",\"status\":\"Success\"}");
        assert_int_equal(kube_client_delete(c->k.client, "/apis/x/leases/l", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, 0);
        assert_non_null(strstr(last(c), "DELETE /apis/x/leases/l HTTP/1.1\r\n"));
}

static void test_error_mapping(void **state) {
        Ctx *c = *state;
        static const struct {
                int status;
                int error;
        } cases[] = {
                { 400, -EINVAL }, { 401, -EACCES }, { 403, -EPERM },  { 404, -ENOENT },
                { 409, -EBUSY },  { 410, -ESTALE }, { 422, -EINVAL }, { 500, -EIO },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char body[256];

                snprintf(
                        body, sizeof(body),
                        "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"R%d\",\"message\":\"m %d\",\"code\":%d}",
                        cases[i].status, cases[i].status, cases[i].status);
                c->calls = 0;
                test_kube_push(&c->k, cases[i].status, NULL, body);
                assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
                wait_done(c);
                assert_int_equal(c->error, cases[i].error);
                assert_int_equal(c->status, cases[i].status);
                assert_int_equal(c->attempts, 1);
                snprintf(body, sizeof(body), "R%d", cases[i].status);
                assert_string_equal(c->reason, body);
                snprintf(body, sizeof(body), "m %d", cases[i].status);
                assert_string_equal(c->message, body);
                assert_non_null(c->object); /* the Status is handed over */
        }
}

static void test_plain_text_and_bad_json(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 404, NULL, "404 page not found\nmore");
        assert_int_equal(kube_client_get(c->k.client, "/nope", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, -ENOENT);
        assert_string_equal(c->reason, "");
        assert_string_equal(c->message, "404 page not found");
        assert_null(c->object);

        /* A 2xx that is not a JSON object is an error, not a success with nothing. */
        c->calls = 0;
        test_kube_push(&c->k, 200, NULL, "[1,2]");
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, -EBADMSG);
}

static void test_429_retry_after(void **state) {
        Ctx *c = *state;
        json_auto_t *body = json_pack("{s:s}", "kind", "Event");
        KubeRequest *req = NULL;
        uint64_t t0 = test_now_usec();

        /* Even a POST: a 429 was rejected before any handler ran. */
        test_kube_push(&c->k, 429, "Retry-After: 1\r\n", "Too many requests, please try again later.\n");
        test_kube_push(&c->k, 201, NULL, "{\"kind\":\"Event\"}");
        assert_int_equal(
                kube_client_post(c->k.client, "/api/v1/namespaces/default/events", body, on_done, c, &req),
                0);
        TEST_LOOP_UNTIL(c->k.event,
                        kube_request_get_attempts(req) == 1 && kube_request_get_status(req) == 429,
                        5 * USEC_PER_SEC);
        assert_int_equal(kube_request_get_retry_after_usec(req), USEC_PER_SEC);
        assert_string_equal(kube_request_get_message(req), "Too many requests, please try again later.");
        assert_int_equal(c->calls, 0);
        wait_done(c);
        assert_true(test_now_usec() - t0 >= 900 * USEC_PER_MSEC);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->attempts, 2);
        assert_int_equal(fake_http_requests(c->k.fake), 2);
        kube_request_free(req);
}

static void test_503_not_retried_for_post(void **state) {
        Ctx *c = *state;
        json_auto_t *body = json_pack("{s:s}", "kind", "Event");

        test_kube_push(&c->k, 503, "Retry-After: 1\r\n", "{\"kind\":\"Status\",\"code\":503}");
        assert_int_equal(
                kube_client_post(c->k.client, "/api/v1/namespaces/default/events", body, on_done, c, NULL),
                0);
        wait_done(c);
        assert_int_equal(c->error, -EAGAIN);
        assert_int_equal(c->attempts, 1);

        /* A GET is safe to repeat. */
        c->calls = 0;
        test_kube_push(&c->k, 503, "Retry-After: 1\r\n", "{\"kind\":\"Status\",\"code\":503}");
        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Node\"}");
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->attempts, 2);
}

static void test_401_rereads_token(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Node\"}");
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_non_null(strstr(last(c), "Bearer token-1\r\n"));

        /* The token was rotated on disk: the 401 makes the client read it and repeat once. */
        write_file(c->token_file, "token-2\n");
        c->calls = 0;
        test_kube_push(&c->k, 401, NULL, "{\"kind\":\"Status\",\"code\":401,\"reason\":\"Unauthorized\"}");
        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Node\"}");
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->attempts, 2);
        assert_non_null(strstr(last(c), "Bearer token-2\r\n"));

        /* Unchanged token: no point repeating, the 401 is the answer. */
        c->calls = 0;
        test_kube_push(&c->k, 401, NULL, "{\"kind\":\"Status\",\"code\":401,\"reason\":\"Unauthorized\"}");
        test_kube_push(&c->k, 200, NULL, "{\"kind\":\"Node\"}");
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, NULL), 0);
        wait_done(c);
        assert_int_equal(c->error, -EACCES);
        assert_int_equal(c->attempts, 1);
        assert_string_equal(c->reason, "Unauthorized");
}

static void on_reconnect(KubeClient *client, void *userdata) {
        (*(unsigned *) userdata)++;
}

static void test_certificate_change_reconnects(void **state) {
        TestKube k = {};
        KubeTuning tuning;
        char dir[] = "/tmp/test-kube-client-cert-XXXXXX", cert[64], key[64];
        unsigned reconnects = 0;

        /* The files' content does not matter over plain HTTP; that they changed does. */
        assert_non_null(mkdtemp(dir));
        snprintf(cert, sizeof(cert), "%s/client.crt", dir);
        snprintf(key, sizeof(key), "%s/client.key", dir);
        write_file(cert, "cert 1\n");
        write_file(key, "key 1\n");
        kube_tuning_init(&tuning);
        tuning.cert_check_usec = 50 * USEC_PER_MSEC;
        test_kube_init(&k, &(KubeConfig) { .cert_file = cert, .key_file = key }, &tuning);
        kube_client_set_reconnect_callback(k.client, on_reconnect, &reconnects);

        TEST_LOOP_NOT(k.event, reconnects > 0, 200 * USEC_PER_MSEC);
        write_file(cert, "cert 2, longer\n");
        TEST_LOOP_UNTIL(k.event, reconnects == 1, 5 * USEC_PER_SEC);
        /* Once per change. */
        TEST_LOOP_NOT(k.event, reconnects > 1, 200 * USEC_PER_MSEC);
        write_file(key, "key 2, longer\n");
        TEST_LOOP_UNTIL(k.event, reconnects == 2, 5 * USEC_PER_SEC);

        test_kube_done(&k);
        assert_int_equal(unlink(cert), 0);
        assert_int_equal(unlink(key), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* Issue 23: a path with a dot segment or a raw name is never sent (kube-path.h), whatever made it. */
static void test_unsafe_path_refused(void **state) {
        Ctx *c = *state;
        static const char *const bad[] = {
                "/api/v1/namespaces/kube-system/secrets/../../default/secrets/other",
                "/api/v1/namespaces/kube-system/secrets/ipa-good?labelSelector=x%",
                "/api/v1/nodes/n1/./status",
                "api/v1/nodes/n1",
        };
        json_auto_t *body = json_object();

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(kube_client_get(c->k.client, bad[i], on_done, c, NULL), -EINVAL);
                assert_int_equal(
                        kube_client_patch(c->k.client, bad[i], KUBE_PATCH_MERGE, body, on_done, c, NULL),
                        -EINVAL);
        }
        TEST_LOOP_NOT(c->k.event, c->calls > 0, 100 * USEC_PER_MSEC);
        assert_int_equal(fake_http_requests(c->k.fake), 0);
}

static void test_free_cancels_without_callback(void **state) {
        Ctx *c = *state;
        KubeRequest *req = NULL;

        /* No response queued yet: the request waits for the 404 of the empty queue; free it first. */
        assert_int_equal(kube_client_get(c->k.client, "/api/v1/nodes/n1", on_done, c, &req), 0);
        req = kube_request_free(req);
        TEST_LOOP_NOT(c->k.event, c->calls > 0, 300 * USEC_PER_MSEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_get_sends_credentials_and_decodes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_patch_types, setup, teardown),
                cmocka_unit_test_setup_teardown(test_post_put_delete, setup, teardown),
                cmocka_unit_test_setup_teardown(test_error_mapping, setup, teardown),
                cmocka_unit_test_setup_teardown(test_plain_text_and_bad_json, setup, teardown),
                cmocka_unit_test_setup_teardown(test_429_retry_after, setup, teardown),
                cmocka_unit_test_setup_teardown(test_503_not_retried_for_post, setup, teardown),
                cmocka_unit_test_setup_teardown(test_401_rereads_token, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unsafe_path_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_cancels_without_callback, setup, teardown),
                cmocka_unit_test(test_certificate_change_reconnects),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
