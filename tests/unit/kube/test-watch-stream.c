/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "kube/watch-stream.h"
#include "tests.h"

typedef struct Seen {
        WatchEventType types[64];
        char rvs[64][32];
        unsigned n;
        int fail_at; /* return an error from the callback at this event (1-based) */
} Seen;

static int on_event(WatchEventType type, json_t *object, void *userdata) {
        Seen *s = userdata;
        const char *rv =
                json_string_value(json_object_get(json_object_get(object, "metadata"), "resourceVersion"));

        assert_true(s->n < ELEMENTSOF(s->types));
        s->types[s->n] = type;
        snprintf(s->rvs[s->n], sizeof(s->rvs[0]), "%s", rv ? rv : "");
        s->n++;
        if (s->fail_at > 0 && s->n == (unsigned) s->fail_at)
                return -ECANCELED;
        return 0;
}

#define EV(type, rv)                                                                  \
        "{\"type\":\"" type "\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\"," \
        "\"metadata\":{\"name\":\"n1\",\"resourceVersion\":\"" rv "\",\"labels\":{\"a\":\"x\\ny\"}}}}\n"

static const char stream[] = EV("ADDED", "10") EV(
        "MODIFIED",
        "11") "\n"
              "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":"
              "{\"resourceVersion\":\"15\",\"creationTimestamp\":null},\"spec\":{}}}\r\n" EV(
                      "DELETED",
                      "16") "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                            "\"status\":\"Failure\",\"message\":\"too old resource version: 4711 (5020)\",\"reason\":\"Expired\","
                            "\"code\":410}}\n";

static void check_full_stream(const Seen *s) {
        static const WatchEventType types[] = {
                WATCH_EVENT_ADDED,   WATCH_EVENT_MODIFIED, WATCH_EVENT_BOOKMARK,
                WATCH_EVENT_DELETED, WATCH_EVENT_ERROR,
        };
        static const char *const rvs[] = { "10", "11", "15", "16", "" };

        assert_int_equal(s->n, ELEMENTSOF(types));
        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                assert_int_equal(s->types[i], types[i]);
                assert_string_equal(s->rvs[i], rvs[i]);
        }
}

static void test_whole(void **state) {
        _cleanup_(watch_stream_freep) WatchStream *w = NULL;
        Seen s = {};

        assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, stream, strlen(stream)), 0);
        check_full_stream(&s);
        assert_int_equal(watch_stream_pending(w), 0);
}

static void test_random_chunkings(void **state) {
        size_t len = strlen(stream);

        /* Every split point for two pieces, then random chunkings down to single bytes: the server
         * flushes whenever its queue drains, so an event may be split anywhere. */
        for (size_t cut = 0; cut <= len; cut++) {
                _cleanup_(watch_stream_freep) WatchStream *w = NULL;
                Seen s = {};

                assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
                assert_int_equal(watch_stream_feed(w, stream, cut), 0);
                assert_int_equal(watch_stream_feed(w, stream + cut, len - cut), 0);
                check_full_stream(&s);
        }

        srandom(4711);
        for (unsigned round = 0; round < 500; round++) {
                _cleanup_(watch_stream_freep) WatchStream *w = NULL;
                size_t max_chunk = 1 + (size_t) random() % (round % 2 ? 7 : 200);
                Seen s = {};

                assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
                for (size_t off = 0; off < len;) {
                        size_t n = 1 + (size_t) random() % max_chunk; /* not inside MIN(): evaluated twice */

                        n = MIN(n, len - off);

                        assert_int_equal(watch_stream_feed(w, stream + off, n), 0);
                        off += n;
                }
                check_full_stream(&s);
                assert_int_equal(watch_stream_pending(w), 0);
        }
}

static void test_truncated_tail(void **state) {
        _cleanup_(watch_stream_freep) WatchStream *w = NULL;
        const char *ev = EV("MODIFIED", "12");
        Seen s = {};

        assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev)), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev) / 2), 0);
        assert_int_equal(s.n, 1);
        assert_int_equal(watch_stream_pending(w), strlen(ev) / 2);

        /* The next response starts from scratch: the half event is dropped, never applied. */
        watch_stream_reset(w);
        assert_int_equal(watch_stream_pending(w), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev)), 0);
        assert_int_equal(s.n, 2);
}

static void test_garbage(void **state) {
        static const char *const bad[] = {
                "this is not json\n",
                "[1,2]\n",
                "{\"type\":\"ADDED\"}\n",
                "{\"type\":\"ADDED\",\"object\":\"x\"}\n",
                "{\"type\":5,\"object\":{}}\n",
                "{\"type\":\"UNKNOWN\",\"object\":{\"metadata\":{}}}\n",
                "{\"type\":\"added\",\"object\":{}}\n",
                "{\"type\":\"ADDED\",\"object\":{},\"type\":\"DELETED\"}\n",
                "{\"type\":\"ADDED\",\"object\":{}} trailing\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(watch_stream_freep) WatchStream *w = NULL;
                const char *good = EV("ADDED", "1");
                Seen s = {};

                assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
                assert_int_equal(watch_stream_feed(w, good, strlen(good)), 0);
                assert_int_equal(watch_stream_feed(w, bad[i], strlen(bad[i])), -EBADMSG);
                assert_int_equal(s.n, 1);
        }
}

/* Issue 16: one \u0000 in any string (the API server accepts it) must not make the event
 * undecodable; the decoders judge the fields they use. */
static void test_nul_in_strings(void **state) {
        static const char ev[] =
                "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\","
                "\"resourceVersion\":\"12\",\"annotations\":{\"a\":\"x\\u0000y\"}},"
                "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"message\":\"\\u0000\"}]}}}\n";
        _cleanup_(watch_stream_freep) WatchStream *w = NULL;
        Seen s = {};

        assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev)), 0);
        assert_int_equal(s.n, 1);
        assert_string_equal(s.rvs[0], "12");
}

static void test_line_limit(void **state) {
        _cleanup_(watch_stream_freep) WatchStream *w = NULL;
        const char *ev = EV("ADDED", "1");
        char big[300];
        Seen s = {};

        /* A limit just big enough for one event passes it, one byte less refuses it, whether the
         * line arrives at once or piecewise. */
        assert_int_equal(watch_stream_new(strlen(ev) - 1, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev)), 0);
        assert_int_equal(s.n, 1);
        watch_stream_reset(w);
        assert_int_equal(watch_stream_feed(w, ev, 10), 0);
        assert_int_equal(watch_stream_feed(w, ev + 10, strlen(ev) - 10), 0);
        assert_int_equal(s.n, 2);
        w = watch_stream_free(w);

        assert_int_equal(watch_stream_new(strlen(ev) - 2, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, ev, strlen(ev)), -EMSGSIZE);
        watch_stream_reset(w);
        assert_int_equal(watch_stream_feed(w, ev, 10), 0);
        assert_int_equal(watch_stream_feed(w, ev + 10, strlen(ev) - 10), -EMSGSIZE);
        w = watch_stream_free(w);

        /* Without any newline the buffer never grows past the limit. */
        memset(big, 'x', sizeof(big));
        assert_int_equal(watch_stream_new(256, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, big, 200), 0);
        assert_int_equal(watch_stream_feed(w, big, 100), -EMSGSIZE);
}

static void test_callback_error_stops(void **state) {
        _cleanup_(watch_stream_freep) WatchStream *w = NULL;
        Seen s = { .fail_at = 2 };

        assert_int_equal(watch_stream_new(0, on_event, &s, &w), 0);
        assert_int_equal(watch_stream_feed(w, stream, strlen(stream)), -ECANCELED);
        assert_int_equal(s.n, 2);
}

static void test_status_helpers(void **state) {
        json_auto_t *expired =
                json_loads("{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}", 0, NULL);
        json_auto_t *large =
                json_loads("{\"kind\":\"Status\",\"code\":504,\"reason\":\"Timeout\",\"details\":"
                           "{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\",\"message\":\"x\"}],"
                           "\"retryAfterSeconds\":1}}",
                           0, NULL);
        json_auto_t *junk = json_loads("{\"code\":\"410\"}", 0, NULL);

        assert_int_equal(kube_status_code(expired), 410);
        assert_string_equal(kube_status_reason(expired), "Expired");
        assert_false(kube_status_is_too_large_rv(expired));
        assert_int_equal(kube_status_code(large), 504);
        assert_true(kube_status_is_too_large_rv(large));
        assert_int_equal(kube_status_code(junk), 0);
        assert_null(kube_status_reason(junk));
        assert_int_equal(kube_status_code(NULL), 0);
}

static void test_end_decisions(void **state) {
        /* Clean end: re-watch at once; very short and empty: back off and relist. */
        assert_int_equal(watch_end_decide(WATCH_END_CLEAN, 0, 3, 5 * USEC_PER_SEC), WATCH_NEXT_REWATCH);
        assert_int_equal(watch_end_decide(WATCH_END_CLEAN, 0, 0, 5 * USEC_PER_SEC), WATCH_NEXT_REWATCH);
        assert_int_equal(watch_end_decide(WATCH_END_CLEAN, 0, 1, 100), WATCH_NEXT_REWATCH);
        assert_int_equal(watch_end_decide(WATCH_END_CLEAN, 0, 0, 999 * USEC_PER_MSEC),
                         WATCH_NEXT_RELIST_BACKOFF);
        /* Dropped or unreachable: keep the position. */
        assert_int_equal(watch_end_decide(WATCH_END_DROPPED, 0, 5, 9 * USEC_PER_SEC),
                         WATCH_NEXT_REWATCH_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_CONNECT, 0, 0, 0), WATCH_NEXT_REWATCH_BACKOFF);
        /* 429 keeps the position; 410 and everything else relists. */
        assert_int_equal(watch_end_decide(WATCH_END_HTTP, 429, 0, 0), WATCH_NEXT_REWATCH_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_ERROR_EVENT, 429, 0, 0), WATCH_NEXT_REWATCH_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_ERROR_EVENT, 410, 4, 0), WATCH_NEXT_RELIST_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_HTTP, 410, 0, 0), WATCH_NEXT_RELIST_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_ERROR_EVENT, 500, 0, 0), WATCH_NEXT_RELIST_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_HTTP, 403, 0, 0), WATCH_NEXT_RELIST_BACKOFF);
        assert_int_equal(watch_end_decide(WATCH_END_DECODE, 0, 7, 60 * USEC_PER_SEC),
                         WATCH_NEXT_RELIST_BACKOFF);

        for (WatchEndKind k = 0; k < _WATCH_END_KIND_MAX; k++)
                assert_non_null(watch_end_kind_to_string(k));
        for (WatchNext n = 0; n < _WATCH_NEXT_MAX; n++)
                assert_non_null(watch_next_to_string(n));
        for (WatchEventType t = 0; t < _WATCH_EVENT_TYPE_MAX; t++)
                assert_int_equal(watch_event_type_from_string(watch_event_type_to_string(t)), t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_whole),
                cmocka_unit_test(test_random_chunkings),
                cmocka_unit_test(test_truncated_tail),
                cmocka_unit_test(test_garbage),
                cmocka_unit_test(test_nul_in_strings),
                cmocka_unit_test(test_line_limit),
                cmocka_unit_test(test_callback_error_stops),
                cmocka_unit_test(test_status_helpers),
                cmocka_unit_test(test_end_decisions),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
