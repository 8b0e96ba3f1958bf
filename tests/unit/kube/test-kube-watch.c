/* SPDX-License-Identifier: Apache-2.0 */
/* List+watch of one Node against the canned-response server: the LIST → WATCH sequence and the
 * resourceVersions it sends, bookmarks, DELETED, 410 Gone (as an ERROR event and on the LIST),
 * dropped streams re-watched after a growing backoff, 429 with Retry-After, and reconnect(). The
 * decision table itself is pinned by test-watch-stream; this checks the module acts on it. The real
 * API server emulator is the kube-* integration tests' part. */
#include <stdio.h>

#include "kube/kube-watch.h"
#include "test-kube.h"

#define BACKOFF_BASE (100 * USEC_PER_MSEC)
#define TIMEOUT (10 * USEC_PER_SEC)

#define LIST_N1(rv)                                                                                            \
        "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"" rv "\"},"                                \
        "\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\",\"resourceVersion\":\"" rv \
        "\"}}]}"
#define LIST_EMPTY(rv) "{\"kind\":\"NodeList\",\"metadata\":{\"resourceVersion\":\"" rv "\"},\"items\":[]}"
#define EVENT(type, rv)                                                                  \
        "{\"type\":\"" type                                                              \
        "\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"uid\":\"u1\"," \
        "\"resourceVersion\":\"" rv "\"}}}\n"
#define BOOKMARK(rv)                                                                                   \
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"resourceVersion\":\"" rv \
        "\"}}}\n"
#define ERROR_410 \
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n"

typedef struct Ctx {
        TestKube k;
        KubeWatch *watch;

        unsigned objects, deleted, synced, stopped;
        int synced_error, stopped_error;
        char object_rv[32], deleted_rv[32];
} Ctx;

static void on_object(KubeWatch *w, json_t *object, void *userdata) {
        Ctx *c = userdata;

        c->objects++;
        snprintf(c->object_rv, sizeof(c->object_rv), "%s",
                 strempty(json_string_value(
                         json_object_get(json_object_get(object, "metadata"), "resourceVersion"))));
}

static void on_deleted(KubeWatch *w, json_t *last, void *userdata) {
        Ctx *c = userdata;

        c->deleted++;
        snprintf(c->deleted_rv, sizeof(c->deleted_rv), "%s",
                 strempty(json_string_value(
                         json_object_get(json_object_get(last, "metadata"), "resourceVersion"))));
}

static void on_synced(KubeWatch *w, int error, void *userdata) {
        Ctx *c = userdata;

        c->synced++;
        c->synced_error = error;
}

static void on_stopped(KubeWatch *w, int error, void *userdata) {
        Ctx *c = userdata;

        c->stopped++;
        c->stopped_error = error;
}

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        test_kube_init(&c->k, NULL, NULL);
        c->k.tuning.startup_delay_usec = USEC_PER_MSEC;
        c->k.tuning.backoff_base_usec = BACKOFF_BASE;
        c->k.tuning.backoff_cap_usec = 4 * BACKOFF_BASE;
        c->k.tuning.backoff_reset_usec = 60 * USEC_PER_SEC;
        c->k.tuning.watch_timeout_min_usec = 5 * USEC_PER_SEC;
        c->k.tuning.watch_timeout_max_usec = 6 * USEC_PER_SEC;
        assert_int_equal(kube_watch_new(c->k.client, KUBE_RESOURCE_NODES, NULL, "n1",
                                        &(KubeWatchCallbacks) { .on_object = on_object,
                                                                .on_deleted = on_deleted,
                                                                .on_synced = on_synced,
                                                                .on_stopped = on_stopped },
                                        c, &c->watch),
                         0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        kube_watch_free(c->watch);
        test_kube_done(&c->k);
        free(c);
        return 0;
}

static void push_stream(Ctx *c, const char *body, bool close_early, bool hold) {
        assert_int_equal(fake_http_push(c->k.fake,
                                        &(FakeResponse) { .status = 200,
                                                          .body = body,
                                                          .chunked = true,
                                                          .close_early = close_early,
                                                          .hold = hold }),
                         0);
}

static KubeWatchStats stats(Ctx *c) {
        KubeWatchStats s;

        kube_watch_get_stats(c->watch, &s);
        return s;
}

static void test_list_watch_bookmark(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        /* A clean end after events: re-watch at once from the bookmark's RV, no relist. */
        push_stream(c, EVENT("MODIFIED", "6") BOOKMARK("7"), /* close_early= */ false, /* hold= */ false);
        push_stream(c, BOOKMARK("8"), /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);

        test_kube_assert_request(
                &c->k, 0, "GET /api/v1/nodes?fieldSelector=metadata.name%3Dn1&resourceVersion=0 HTTP/1.1");
        test_kube_assert_request(
                &c->k, 1,
                "GET /api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=5"
                "&allowWatchBookmarks=true&timeoutSeconds=5 HTTP/1.1");
        test_kube_assert_request(&c->k, 2, "watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=7&");
        TEST_LOOP_UNTIL(c->k.event, streq_ptr(kube_watch_get_resource_version(c->watch), "8"), TIMEOUT);

        assert_int_equal(stats(c).lists, 1);
        assert_int_equal(stats(c).watches, 2);
        assert_int_equal(stats(c).events, 3);
        /* LIST and MODIFIED; bookmarks move the RV only. */
        assert_int_equal(c->objects, 2);
        assert_string_equal(c->object_rv, "6");
        assert_int_equal(c->synced, 1);
        assert_int_equal(c->synced_error, 0);
        assert_int_equal(c->deleted, 0);
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(kube_watch_get_object(c->watch), "metadata"), "resourceVersion")),
                "6");
}

static void test_deleted(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        push_stream(c, EVENT("DELETED", "9"), /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);
        TEST_LOOP_UNTIL(c->k.event, c->deleted == 1, TIMEOUT);
        assert_string_equal(c->deleted_rv, "9");
        assert_null(kube_watch_get_object(c->watch));
        assert_string_equal(kube_watch_get_resource_version(c->watch), "9");
}

static void test_gone_relists(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        /* 410 as an ERROR event: relist from the last RV after a backoff step… */
        push_stream(c, EVENT("MODIFIED", "6") ERROR_410, /* close_early= */ false, /* hold= */ false);
        /* …the server no longer has it either: at once a consistent LIST (no resourceVersion)… */
        test_kube_push(&c->k, 410, NULL, "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}");
        /* …in which the Node is gone. */
        test_kube_push(&c->k, 200, NULL, LIST_EMPTY("20"));
        push_stream(c, "", /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);

        test_kube_assert_request(&c->k, 1, "watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=5&");
        test_kube_assert_request(
                &c->k, 2, "GET /api/v1/nodes?fieldSelector=metadata.name%3Dn1&resourceVersion=6 HTTP/1.1");
        test_kube_assert_request(&c->k, 3, "GET /api/v1/nodes?fieldSelector=metadata.name%3Dn1 HTTP/1.1");
        test_kube_assert_request(&c->k, 4, "watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=20&");
        assert_int_equal(stats(c).lists, 3);
        assert_int_equal(c->deleted, 1);
        assert_string_equal(c->deleted_rv, "6");
        assert_null(kube_watch_get_object(c->watch));
        /* The expired LIST is not a sync; the two others are. */
        assert_int_equal(c->synced, 2);
        assert_int_equal(c->synced_error, 0);
}

static void test_list_failure_reported_and_retried(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 500, NULL, "{\"kind\":\"Status\",\"code\":500}");
        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        push_stream(c, "", /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);
        TEST_LOOP_UNTIL(c->k.event, c->synced == 1, TIMEOUT);
        assert_int_equal(c->synced_error, -EIO);
        TEST_LOOP_UNTIL(c->k.event, c->synced == 2, TIMEOUT);
        assert_int_equal(c->synced_error, 0);
        assert_int_equal(c->objects, 1);
        test_kube_assert_request(&c->k, 2, "watch=1&");
}

static void test_dropped_stream_backs_off(void **state) {
        Ctx *c = *state;
        uint64_t t1, t2, t3;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        push_stream(c, EVENT("MODIFIED", "6"), /* close_early= */ true, /* hold= */ false);
        push_stream(c, BOOKMARK("7"), /* close_early= */ true, /* hold= */ false);
        push_stream(c, "", /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);

        TEST_LOOP_UNTIL(c->k.event, stats(c).watches == 1, TIMEOUT);
        t1 = test_now_usec();
        TEST_LOOP_UNTIL(c->k.event, stats(c).watches == 2, TIMEOUT);
        t2 = test_now_usec();
        TEST_LOOP_UNTIL(c->k.event, stats(c).watches == 3, TIMEOUT);
        t3 = test_now_usec();

        /* A dropped stream re-watches from the last RV (no relist) after the backoff: base, then twice
         * that (each plus up to 100 % jitter). */
        assert_int_equal(stats(c).lists, 1);
        test_kube_assert_request(&c->k, 2, "resourceVersion=6&");
        test_kube_assert_request(&c->k, 3, "resourceVersion=7&");
        assert_true(t2 - t1 >= BACKOFF_BASE);
        assert_true(t3 - t2 >= 2 * BACKOFF_BASE);
}

static void test_429_retry_after(void **state) {
        Ctx *c = *state;
        uint64_t t1, t2;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        test_kube_push(&c->k, 429, "Retry-After: 1\r\n", "{\"kind\":\"Status\",\"code\":429}");
        push_stream(c, "", /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);
        TEST_LOOP_UNTIL(c->k.event, stats(c).watches == 1, TIMEOUT);
        t1 = test_now_usec();
        TEST_LOOP_UNTIL(c->k.event, stats(c).watches == 2, TIMEOUT);
        t2 = test_now_usec();
        /* Throttled: the position is fine, so no relist, but wait as long as the server asked. */
        assert_int_equal(stats(c).lists, 1);
        assert_true(t2 - t1 >= 900 * USEC_PER_MSEC);
        test_kube_assert_request(&c->k, 2, "watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=5&");
}

static void test_reconnect(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        push_stream(c, BOOKMARK("6"), /* close_early= */ false, /* hold= */ true);
        push_stream(c, "", /* close_early= */ false, /* hold= */ true);
        /* Without a watch in flight, there is nothing to reconnect. */
        kube_watch_reconnect(c->watch);
        assert_int_equal(kube_watch_start(c->watch), 0);
        TEST_LOOP_UNTIL(c->k.event, streq_ptr(kube_watch_get_resource_version(c->watch), "6"), TIMEOUT);
        kube_watch_reconnect(c->watch);
        test_kube_assert_request(&c->k, 2, "watch=1&fieldSelector=metadata.name%3Dn1&resourceVersion=6&");
        assert_int_equal(stats(c).lists, 1);
        assert_int_equal(stats(c).watches, 2);
}

/* The loop is finishing: nothing can be scheduled on it any more. */
static void finish_loop(sd_event *e) {
        assert_int_equal(sd_event_exit(e, 0), 0);
        while (sd_event_get_state(e) != SD_EVENT_FINISHED)
                assert_true(sd_event_run(e, 0) >= 0);
}

static void test_stop_reported(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LIST_N1("5"));
        push_stream(c, BOOKMARK("6"), /* close_early= */ false, /* hold= */ true);
        assert_int_equal(kube_watch_start(c->watch), 0);
        TEST_LOOP_UNTIL(c->k.event, streq_ptr(kube_watch_get_resource_version(c->watch), "6"), TIMEOUT);
        assert_int_equal(stats(c).stop_error, 0);

        /* The next step cannot be armed: the owner is told, once, instead of the watch going quiet. */
        finish_loop(c->k.event);
        kube_watch_reconnect(c->watch);
        assert_int_equal(c->stopped, 1);
        assert_int_equal(c->stopped_error, -ESTALE);
        assert_int_equal(stats(c).stop_error, -ESTALE);
}

static void test_start_failure_returned(void **state) {
        Ctx *c = *state;

        /* The caller hears it from the return alone (it logs, once); on_stopped is for the loop's stops. */
        finish_loop(c->k.event);
        assert_int_equal(kube_watch_start(c->watch), -ESTALE);
        assert_int_equal(c->stopped, 0);
        assert_int_equal(stats(c).stop_error, -ESTALE);
        assert_int_equal(fake_http_requests(c->k.fake), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_list_watch_bookmark, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deleted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gone_relists, setup, teardown),
                cmocka_unit_test_setup_teardown(test_list_failure_reported_and_retried, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dropped_stream_backs_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_429_retry_after, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_reported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_failure_returned, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
