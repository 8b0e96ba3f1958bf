/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A KubeClient talking plain HTTP to the canned-response server, for the kube/ unit tests: one
 * loop, one FakeHttp, one Http, a tuning (the client borrows it: a test may change it later). */

#include <stdio.h>

#include "fake-http.h"
#include "kube/kube-client.h"
#include "test-loop.h"
#include "tests.h"

typedef struct TestKube {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        KubeTuning tuning;
        KubeClient *client;
        char server[64];
} TestKube;

/* `base`: credentials to use (its server is ignored); NULL for none. `tuning` NULL: the defaults. */
static inline void test_kube_init(TestKube *t, const KubeConfig *base, const KubeTuning *tuning) {
        KubeConfig kc = base ? *base : (KubeConfig) {};

        assert_int_equal(sd_event_new(&t->event), 0);
        assert_int_equal(fake_http_new(t->event, &t->fake), 0);
        assert_int_equal(http_new(t->event, &t->http), 0);
        snprintf(t->server, sizeof(t->server), "http://127.0.0.1:%u", fake_http_port(t->fake));
        kc.server = t->server;
        if (tuning)
                t->tuning = *tuning;
        else
                kube_tuning_init(&t->tuning);
        assert_int_equal(kube_client_new(t->event, t->http, &kc, &t->tuning, &t->client), 0);
}

static inline void test_kube_done(TestKube *t) {
        t->client = kube_client_free(t->client);
        t->http = http_free(t->http);
        t->fake = fake_http_free(t->fake);
        t->event = sd_event_unref(t->event);
}

static inline void test_kube_push(TestKube *t, int status, const char *headers, const char *body) {
        assert_int_equal(
                fake_http_push(t->fake,
                               &(FakeResponse) { .status = status, .headers = headers, .body = body }),
                0);
}

/* Request i (from 0), waiting for it with a deadline. */
static inline const char *test_kube_request(TestKube *t, unsigned i) {
        TEST_LOOP_UNTIL(t->event, fake_http_requests(t->fake) > i, 10 * USEC_PER_SEC);
        return fake_http_request(t->fake, i);
}

static inline void test_kube_assert_request(TestKube *t, unsigned i, const char *what) {
        const char *r = test_kube_request(t, i);

        if (!strstr(r, what))
                fail_msg("request %u lacks \"%s\":\n%s", i, what, r);
}
