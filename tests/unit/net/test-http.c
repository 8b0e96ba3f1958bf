/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

#include "fake-http.h"
#include "net/http.h"
#include "test-loop.h"
#include "tests.h"

typedef struct Ctx {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        char url[128];
        int error;
        long status;
        bool done;
        char streamed[65536];
        size_t n_streamed;
        unsigned n_chunks;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        assert_int_equal(sd_event_new(&c->event), 0);
        assert_int_equal(fake_http_new(c->event, &c->fake), 0);
        assert_int_equal(http_new(c->event, &c->http), 0);
        snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%u/path?x=1", fake_http_port(c->fake));
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        http_free(c->http);
        fake_http_free(c->fake);
        sd_event_unref(c->event);
        free(c);
        return 0;
}

static void on_done(HttpRequest *req, int error, long status, void *userdata) {
        Ctx *c = userdata;
        c->error = error;
        c->status = status;
        c->done = true;
}

static void run_until_done(Ctx *c) {
        TEST_LOOP_UNTIL(c->event, c->done, 100 * USEC_PER_SEC);
}

static void test_get_buffered(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        size_t size;

        assert_int_equal(
                fake_http_push(c->fake,
                               &(FakeResponse) { .status = 200,
                                                 .headers = "X-Test: a\r\nX-Test: b\r\nX-Pad: \t v w  \r\n",
                                                 .body = "{\"ok\":true}" }),
                0);
        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        assert_int_equal(http_request_add_header(req, "Accept: application/json"), 0);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        assert_int_equal(http_active(c->http), 1);
        run_until_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->status, 200);
        assert_string_equal(http_request_get_body(req, &size), "{\"ok\":true}");
        assert_int_equal(size, 11);
        assert_string_equal(http_request_get_header(req, "x-test"), "b");
        assert_null(http_request_get_header(req, "X-Missing"));
        assert_string_equal(http_request_get_header(req, "x-pad"), "v w");
        assert_string_equal(http_request_get_header(req, "Content-Length"), "11");
        assert_non_null(strstr(fake_http_last_request(c->fake), "GET /path?x=1 HTTP/1.1"));
        assert_non_null(strstr(fake_http_last_request(c->fake), "Accept: application/json"));
        assert_int_equal(http_active(c->http), 0);
}

static void test_headers_of_final_response(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        char location[192];

        snprintf(location, sizeof(location), "Location: %s&hop=2\r\nX-Old: 1\r\nX-Test: old\r\n", c->url);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 302, .headers = location }), 0);
        assert_int_equal(fake_http_push(c->fake,
                                        &(FakeResponse) {
                                                .status = 200, .headers = "X-Test: new\r\n", .body = "ok" }),
                         0);
        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        http_request_set_follow(req, true);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->status, 200);
        assert_non_null(strstr(fake_http_last_request(c->fake), "GET /path?x=1&hop=2 HTTP/1.1"));
        /* Only the final response's headers count. */
        assert_string_equal(http_request_get_header(req, "X-Test"), "new");
        assert_null(http_request_get_header(req, "X-Old"));
}

static void test_patch_body_and_errors(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;

        assert_int_equal(
                fake_http_push(c->fake,
                               &(FakeResponse) { .status = 429,
                                                 .headers = "Retry-After: 7\r\nContent-Type: text/plain\r\n",
                                                 .body = "Too many requests, please try again later." }),
                0);
        assert_int_equal(http_request_new(c->http, "PATCH", c->url, &req), 0);
        assert_int_equal(http_request_set_body(req, "{\"a\":1}", 7), 0);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->status, 429);
        assert_int_equal(http_error_from_result(CURLE_OK, c->status), -EAGAIN);
        assert_int_equal(http_request_get_retry_after_usec(req), 7 * USEC_PER_SEC);
        assert_non_null(strstr(fake_http_last_request(c->fake), "PATCH /path"));
        assert_non_null(strstr(fake_http_last_request(c->fake), "{\"a\":1}"));
}

static int on_data(HttpRequest *req, const void *data, size_t size, void *userdata) {
        Ctx *c = userdata;

        if (c->n_streamed + size >= sizeof(c->streamed))
                return -EFBIG;
        memcpy(c->streamed + c->n_streamed, data, size);
        c->n_streamed += size;
        c->n_chunks++;
        return 0;
}

static void test_stream_chunked(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        const char *body = "{\"type\":\"ADDED\"}\n{\"type\":\"MODIFIED\"}\n";

        assert_int_equal(
                fake_http_push(
                        c->fake,
                        &(FakeResponse) { .status = 200, .body = body, .chunked = true, .chunk_size = 5 }),
                0);
        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        http_request_set_stream(req, on_data);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->n_streamed, strlen(body));
        assert_memory_equal(c->streamed, body, strlen(body));
}

static void test_stream_dropped(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;

        assert_int_equal(fake_http_push(c->fake,
                                        &(FakeResponse) { .status = 200,
                                                          .body = "{\"type\":\"ADD",
                                                          .chunked = true,
                                                          .close_early = true }),
                         0);
        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        http_request_set_stream(req, on_data);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->error, -ECONNRESET);
}

static void test_body_cap(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;

        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 200, .body = "0123456789" }),
                         0);
        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        http_request_set_max_body(req, 5);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->error, -EFBIG);
}

static void test_connection_refused(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;

        /* Port 1 on loopback: nothing listens there in a test environment. */
        assert_int_equal(http_request_new(c->http, "GET", "http://127.0.0.1:1/", &req), 0);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_int_equal(c->error, -ECONNREFUSED);
}

/* A server that accepts (the kernel's backlog does) and never answers: silence detection ends the
 * request with -ETIMEDOUT after the silence period, not before. */
static void test_silence(void **state) {
        Ctx *c = *state;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        uint64_t t0, t1;
        char url[64];

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 4), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/watch", ntohs(sa.sin_port));
        assert_int_equal(http_request_new(c->http, "GET", url, &req), 0);
        http_request_set_silence(req, 1500 * USEC_PER_MSEC);
        assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t0) >= 0);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        run_until_done(c);
        assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t1) >= 0);
        assert_int_equal(c->error, -ETIMEDOUT);
        assert_true(t1 - t0 >= 1500 * USEC_PER_MSEC);
        assert_int_equal(http_active(c->http), 0);
}

static void test_cancel_by_free(void **state) {
        Ctx *c = *state;
        HttpRequest *req = NULL;

        assert_int_equal(http_request_new(c->http, "GET", c->url, &req), 0);
        assert_int_equal(http_request_start(req, on_done, c), 0);
        http_request_free(req);
        assert_int_equal(http_active(c->http), 0);
        assert_int_equal(sd_event_run(c->event, 50 * USEC_PER_MSEC) >= 0, 1);
        assert_false(c->done);
}

static void test_error_mapping(void **state) {
        assert_int_equal(http_error_from_result(CURLE_OK, 200), 0);
        assert_int_equal(http_error_from_result(CURLE_OK, 201), 0);
        assert_int_equal(http_error_from_result(CURLE_OK, 401), -EACCES);
        assert_int_equal(http_error_from_result(CURLE_OK, 403), -EPERM);
        assert_int_equal(http_error_from_result(CURLE_OK, 404), -ENOENT);
        assert_int_equal(http_error_from_result(CURLE_OK, 409), -EBUSY);
        assert_int_equal(http_error_from_result(CURLE_OK, 410), -ESTALE);
        assert_int_equal(http_error_from_result(CURLE_OK, 500), -EIO);
        assert_int_equal(http_error_from_result(CURLE_OPERATION_TIMEDOUT, 0), -ETIMEDOUT);
        assert_int_equal(http_error_from_result(CURLE_PEER_FAILED_VERIFICATION, 0), -EKEYREJECTED);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_get_buffered, setup, teardown),
                cmocka_unit_test_setup_teardown(test_headers_of_final_response, setup, teardown),
                cmocka_unit_test_setup_teardown(test_patch_body_and_errors, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_chunked, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stream_dropped, setup, teardown),
                cmocka_unit_test_setup_teardown(test_body_cap, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_silence, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cancel_by_free, setup, teardown),
                cmocka_unit_test(test_error_mapping),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
