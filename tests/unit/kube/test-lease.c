/* SPDX-License-Identifier: Apache-2.0 */
/* The heartbeat Lease against the canned-response server: GET → 404 → POST, renewal by PUT of the
 * last object, 409 on PUT or POST → re-read, a deleted Lease re-created, failures retried with
 * backoff. The API server emulator is the kube-lease integration test's part. */
#include <stdio.h>

#include "kube/lease.h"
#include "test-kube.h"

#define TIMEOUT (10 * USEC_PER_SEC)
#define LEASES "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
#define LEASE_OBJ(rv)                                                                                  \
        "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"n1\"," \
        "\"namespace\":\"kube-node-lease\",\"resourceVersion\":\"" rv                                  \
        "\"},\"spec\":{\"holderIdentity\":\"n1\"}}"
#define CONFLICT "{\"kind\":\"Status\",\"code\":409,\"reason\":\"Conflict\"}"
#define NOT_FOUND "{\"kind\":\"Status\",\"code\":404,\"reason\":\"NotFound\"}"

typedef struct Ctx {
        TestKube k;
        Lease *lease;
        unsigned stopped;
        int stopped_error;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        test_kube_init(&c->k, NULL, NULL);
        /* 2 s: renewals every ~0.5 s, failures retried after 200 ms doubling up to 0.5 s. */
        assert_int_equal(lease_new(c->k.client, "kube-node-lease", "n1", "n1", 2 * USEC_PER_SEC, &c->lease),
                         0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        lease_free(c->lease);
        test_kube_done(&c->k);
        free(c);
        return 0;
}

static void on_stopped(Lease *l, int error, void *userdata) {
        Ctx *c = userdata;

        c->stopped++;
        c->stopped_error = error;
}

static LeaseStats stats(Ctx *c) {
        LeaseStats s;

        lease_get_stats(c->lease, &s);
        return s;
}

/* renewTime and acquireTime are MicroTime: 2006-01-02T15:04:05.000000Z. */
static void assert_micro_time(const char *req, const char *field) {
        char key[64], year[5];
        const char *p;
        int n = 0;

        snprintf(key, sizeof(key), "\"%s\":\"", field);
        p = strstr(req, key);
        assert_non_null(p);
        p += strlen(key);
        assert_int_equal(strcspn(p, "\""), strlen("2006-01-02T15:04:05.000000Z"));
        assert_int_equal(sscanf(p, "%4[0-9]-%*2d-%*2dT%*2d:%*2d:%*2d.%*6dZ%n", year, &n), 1);
        assert_int_equal(n, (int) strlen("2006-01-02T15:04:05.000000Z"));
}

static void test_create_then_renew(void **state) {
        Ctx *c = *state;
        const char *r;

        test_kube_push(&c->k, 404, NULL, NOT_FOUND);
        test_kube_push(&c->k, 201, NULL, LEASE_OBJ("10"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("11"));
        assert_int_equal(lease_set_owner(c->lease, "n1", "uid-1"), 0);
        assert_int_equal(lease_start(c->lease), 0);
        assert_int_equal(lease_start(c->lease), 0); /* already running: no second GET */

        test_kube_assert_request(&c->k, 0, "GET " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 1, "POST " LEASES " HTTP/1.1");
        r = test_kube_request(&c->k, 1);
        assert_non_null(strstr(r, "\"holderIdentity\":\"n1\""));
        assert_non_null(strstr(r, "\"leaseDurationSeconds\":2"));
        assert_non_null(
                strstr(r,
                       "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\","
                       "\"uid\":\"uid-1\",\"controller\":true,\"blockOwnerDeletion\":true}]"));
        assert_micro_time(r, "renewTime");
        assert_micro_time(r, "acquireTime");

        /* The renewal PUTs the object the server returned, with its resourceVersion. */
        test_kube_assert_request(&c->k, 2, "PUT " LEASES "/n1 HTTP/1.1");
        assert_non_null(strstr(test_kube_request(&c->k, 2), "\"resourceVersion\":\"10\""));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 2, TIMEOUT);
        assert_int_equal(stats(c).failures, 0);
        assert_int_equal(stats(c).last_error, 0);
        assert_int_equal(fake_http_requests(c->k.fake), 3);
}

static void test_existing_taken_over(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("8"));
        assert_int_equal(lease_start(c->lease), 0);
        test_kube_assert_request(&c->k, 1, "PUT " LEASES "/n1 HTTP/1.1");
        assert_non_null(strstr(test_kube_request(&c->k, 1), "\"resourceVersion\":\"7\""));
        /* No owner set: no ownerReferences written. */
        assert_null(strstr(test_kube_request(&c->k, 1), "ownerReferences"));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
}

static void test_conflict_rereads(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        test_kube_push(&c->k, 409, NULL, CONFLICT); /* someone else wrote it meanwhile */
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("9"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("10"));
        assert_int_equal(lease_start(c->lease), 0);
        test_kube_assert_request(&c->k, 1, "PUT " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 2, "GET " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 3, "PUT " LEASES "/n1 HTTP/1.1");
        assert_non_null(strstr(test_kube_request(&c->k, 3), "\"resourceVersion\":\"9\""));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
        /* A conflict is part of the protocol, not a failure. */
        assert_int_equal(stats(c).failures, 0);
}

static void test_create_conflict_rereads(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 404, NULL, NOT_FOUND);
        test_kube_push(&c->k, 409, NULL, CONFLICT); /* created by someone else between GET and POST */
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("3"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("4"));
        assert_int_equal(lease_start(c->lease), 0);
        test_kube_assert_request(&c->k, 1, "POST " LEASES " HTTP/1.1");
        test_kube_assert_request(&c->k, 2, "GET " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 3, "PUT " LEASES "/n1 HTTP/1.1");
        assert_non_null(strstr(test_kube_request(&c->k, 3), "\"resourceVersion\":\"3\""));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
}

static void test_deleted_recreated(void **state) {
        Ctx *c = *state;

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("8"));
        test_kube_push(&c->k, 404, NULL, NOT_FOUND); /* deleted behind our back */
        test_kube_push(&c->k, 201, NULL, LEASE_OBJ("20"));
        assert_int_equal(lease_start(c->lease), 0);
        test_kube_assert_request(&c->k, 2, "PUT " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 3, "POST " LEASES " HTTP/1.1");
        /* A new object: no resourceVersion of the deleted one. */
        assert_null(strstr(test_kube_request(&c->k, 3), "resourceVersion"));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 2, TIMEOUT);
        assert_int_equal(stats(c).failures, 0);
}

static void test_failure_backs_off(void **state) {
        Ctx *c = *state;
        uint64_t t0;

        test_kube_push(&c->k, 500, NULL, "{\"kind\":\"Status\",\"code\":500}");
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("8"));
        t0 = test_now_usec();
        assert_int_equal(lease_start(c->lease), 0);
        TEST_LOOP_UNTIL(c->k.event, stats(c).failures == 1, TIMEOUT);
        assert_int_equal(stats(c).last_error, -EIO);
        test_kube_assert_request(&c->k, 1, "GET " LEASES "/n1 HTTP/1.1");
        assert_true(test_now_usec() - t0 >= 200 * USEC_PER_MSEC);
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
        assert_int_equal(stats(c).last_error, 0);
}

/* A renewal whose answer never comes (a dead connection the kernel has not noticed) is cut when the
 * next one is due, a quarter of the duration, and retried: the Lease is renewed before it expires,
 * where the client's general request timeout (70 s) would have let a 40 s Lease lapse. */
static void test_hung_renewal_cut(void **state) {
        Ctx *c = *state;
        uint64_t t0;

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        assert_int_equal(fake_http_push(c->k.fake,
                                        &(FakeResponse) { .status = 200,
                                                          .body = LEASE_OBJ("8"),
                                                          .stall = true,
                                                          .stall_after = 1 }),
                         0);
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("9"));
        t0 = test_now_usec();
        assert_int_equal(lease_start(c->lease), 0);
        TEST_LOOP_UNTIL(c->k.event, stats(c).failures == 1, TIMEOUT);
        assert_true(test_now_usec() - t0 >= 2 * USEC_PER_SEC / 4);
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
        /* Within the Lease's duration (2 s), counted from the start. */
        assert_true(test_now_usec() - t0 < 2 * USEC_PER_SEC);
        test_kube_assert_request(&c->k, 2, "PUT " LEASES "/n1 HTTP/1.1");
}

/* The Node is gone: no renewal until it is back, then the Lease is read anew (it may have gone with
 * its owner). */
static void test_stopped_while_node_gone(void **state) {
        Ctx *c = *state;
        uint64_t t0;

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("7"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("8"));
        assert_int_equal(lease_start(c->lease), 0);
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 1, TIMEOUT);
        lease_stop(c->lease);
        t0 = test_now_usec();
        TEST_LOOP_UNTIL(c->k.event, test_now_usec() - t0 > 3 * USEC_PER_SEC / 2,
                        TIMEOUT); /* 3 renew periods */
        assert_int_equal(fake_http_requests(c->k.fake), 2);
        assert_false(stats(c).stopped); /* stopped on purpose: not a failure to report */

        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("20"));
        test_kube_push(&c->k, 200, NULL, LEASE_OBJ("21"));
        assert_int_equal(lease_set_owner(c->lease, "n1", "uid-2"), 0);
        assert_int_equal(lease_start(c->lease), 0);
        test_kube_assert_request(&c->k, 2, "GET " LEASES "/n1 HTTP/1.1");
        test_kube_assert_request(&c->k, 3, "PUT " LEASES "/n1 HTTP/1.1");
        assert_non_null(strstr(test_kube_request(&c->k, 3), "\"uid\":\"uid-2\""));
        TEST_LOOP_UNTIL(c->k.event, stats(c).renewals == 2, TIMEOUT);
}

static void test_start_failure_returned(void **state) {
        Ctx *c = *state;

        lease_set_stopped_callback(c->lease, on_stopped, c);
        /* The loop is finishing: the first step cannot be armed. The caller hears it from the return
         * alone (it logs, once), and it is visible in the stats. */
        assert_int_equal(sd_event_exit(c->k.event, 0), 0);
        while (sd_event_get_state(c->k.event) != SD_EVENT_FINISHED)
                assert_true(sd_event_run(c->k.event, 0) >= 0);
        assert_int_equal(lease_start(c->lease), -ESTALE);
        assert_int_equal(c->stopped, 0);
        assert_true(stats(c).stopped);
        assert_int_equal(stats(c).last_error, -ESTALE);
        /* Not running, so a second start tries (and fails) again instead of being a no-op. */
        assert_int_equal(lease_start(c->lease), -ESTALE);
        assert_int_equal(c->stopped, 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_create_then_renew, setup, teardown),
                cmocka_unit_test_setup_teardown(test_existing_taken_over, setup, teardown),
                cmocka_unit_test_setup_teardown(test_conflict_rereads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_create_conflict_rereads, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deleted_recreated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_backs_off, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hung_renewal_cut, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stopped_while_node_gone, setup, teardown),
                cmocka_unit_test_setup_teardown(test_start_failure_returned, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
