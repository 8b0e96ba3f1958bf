/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>

#include "fake-http.h"
#include "net/http-probe.h"
#include "test-loop.h"
#include "tests.h"
#include "util/event-util.h"
#include "util/time-util.h"

typedef struct Ctx {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        char url[128];
        bool done;
        int error;
        unsigned n_probes;
        char message[512];
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        assert_int_equal(sd_event_new(&c->event), 0);
        assert_int_equal(fake_http_new(c->event, &c->fake), 0);
        assert_int_equal(http_new(c->event, &c->http), 0);
        snprintf(c->url, sizeof(c->url), "http://127.0.0.1:%u/healthz", fake_http_port(c->fake));
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

static void on_done(HttpProbe *p, int error, const char *message, unsigned n_probes, void *userdata) {
        Ctx *c = userdata;

        c->done = true;
        c->error = error;
        c->n_probes = n_probes;
        snprintf(c->message, sizeof(c->message), "%s", strempty(message));
}

static void run(Ctx *c) {
        TEST_LOOP_UNTIL(c->event, c->done, 200 * USEC_PER_SEC);
}

static void test_healthy_after_failures(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = c->url,
                               .interval_usec = 20 * USEC_PER_MSEC,
                               .timeout_usec = 10 * USEC_PER_SEC };

        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 500, .body = "no" }), 0);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 503, .body = "no" }), 0);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 200, .body = "ok" }), 0);
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        assert_false(c->done); /* never from inside the start call */
        run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->n_probes, 3);
        assert_int_equal(fake_http_requests(c->fake), 3);
        assert_non_null(strstr(fake_http_last_request(c->fake), "GET /healthz"));
}

static void test_unhealthy_times_out(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = c->url,
                               .interval_usec = 50 * USEC_PER_MSEC,
                               .timeout_usec = 2 * USEC_PER_SEC };

        for (int i = 0; i < 50; i++)
                assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 500, .body = "bad" }),
                                 0);
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_int_equal(c->error, -ETIMEDOUT);
        assert_true(c->n_probes >= 2);
        assert_non_null(strstr(c->message, "HTTP 500"));
        assert_non_null(strstr(c->message, "within 2s"));
}

static void test_connection_refused(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = "http://127.0.0.1:1/healthz",
                               .interval_usec = 50 * USEC_PER_MSEC,
                               .timeout_usec = USEC_PER_SEC };

        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_int_equal(c->error, -ETIMEDOUT);
        assert_non_null(strstr(c->message, "refused"));
}

/* A reachability probe (a registry's readinessProbe): a 404 is an answer, like any status. */
static void test_any_status_is_an_answer(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = c->url,
                               .interval_usec = 20 * USEC_PER_MSEC,
                               .timeout_usec = 10 * USEC_PER_SEC,
                               .any_status = true };

        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 404, .body = "not here" }), 0);
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->n_probes, 1);
}

/* Unreachable stays unreachable: the message names the URL and the deadline, not "200". */
static void test_any_status_refused_times_out(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = "http://127.0.0.1:1/",
                               .interval_usec = 50 * USEC_PER_MSEC,
                               .timeout_usec = USEC_PER_SEC,
                               .any_status = true };

        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_int_equal(c->error, -ETIMEDOUT);
        assert_non_null(strstr(c->message, "http://127.0.0.1:1/ did not answer within 1s"));
        assert_non_null(strstr(c->message, "refused"));
}

/* The node health duty's probe (upstream's one GET): a 500 or a refused connection is a failure at
 * once, not after the window, which only a probe that hangs waits out. */
static void test_once_fails_fast(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = c->url, .timeout_usec = 10 * USEC_PER_SEC, .once = true };
        _cleanup_free_ char *want = NULL;
        uint64_t t0 = clock_now_usec(CLOCK_MONOTONIC);

        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 500, .body = "no" }), 0);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 200, .body = "ok" }), 0);
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_true(clock_now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC); /* not the 10 s window */
        assert_int_equal(c->error, -EIO);
        assert_int_equal(c->n_probes, 1);
        assert_int_equal(fake_http_requests(c->fake), 1);
        assert_int_equal(asprintf(&want, "Get \"%s\": HTTP 500", c->url) > 0, true);
        assert_string_equal(c->message, want);

        p = http_probe_free(p);
        c->done = false;
        t0 = clock_now_usec(CLOCK_MONOTONIC);
        o.url = "http://127.0.0.1:1/healthz";
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_true(clock_now_usec(CLOCK_MONOTONIC) - t0 < 5 * USEC_PER_SEC);
        assert_int_equal(c->error, -ECONNREFUSED);
        assert_non_null(strstr(c->message, "Get \"http://127.0.0.1:1/healthz\": "));
        assert_non_null(strstr(c->message, "refused"));
}

/* A server that accepts and never answers takes the whole window. */
static void test_once_hangs_for_the_window(void **state) {
        Ctx *c = *state;
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        char url[64];
        HttpProbeOptions o = { .url = url, .timeout_usec = 300 * USEC_PER_MSEC, .once = true };
        uint64_t t0;

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 4), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/healthz", ntohs(sa.sin_port));
        /* The window runs from the loop's time, which the probe takes as its start: the loop's cached
         * time may lie before a clock read here when the machine is busy. The one request gets the
         * rest of the window as curl's timeout, which curl counts in milliseconds from its own start:
         * it may end a fraction of a millisecond before the window does (seen: 299.9 ms). A fast
         * failure would take a few milliseconds. */
        t0 = event_now_usec(c->event);
        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        run(c);
        assert_true(clock_now_usec(CLOCK_MONOTONIC) - t0 >= 295 * USEC_PER_MSEC);
        assert_int_equal(c->error < 0, true);
        assert_int_equal(c->n_probes <= 1, true);
}

static void test_free_cancels(void **state) {
        Ctx *c = *state;
        HttpProbe *p = NULL;
        HttpProbeOptions o = { .url = c->url, .timeout_usec = USEC_PER_SEC };

        assert_int_equal(http_probe_start(c->event, c->http, &o, on_done, c, &p), 0);
        assert_null(http_probe_free(p));
        TEST_LOOP_NOT(c->event, c->done, 50 * USEC_PER_MSEC);
        assert_int_equal(http_active(c->http), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_healthy_after_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unhealthy_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_any_status_is_an_answer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_any_status_refused_times_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_once_fails_fast, setup, teardown),
                cmocka_unit_test_setup_teardown(test_once_hangs_for_the_window, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_cancels, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
