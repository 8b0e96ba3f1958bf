/* SPDX-License-Identifier: Apache-2.0 */
/* system-bus against the fake systemd (tests/helpers/fake-systemd.c), whose connections stand in for
 * the bus: up once opened, down once when the peer goes, reconnected with
 * backoff, every change reported once however many attempts fail. The real bus daemon restarting
 * under the agent is test_bus_restart.py. */
#include "fake-systemd.h"
#include "systemd/system-bus.h"
#include "test-loop.h"
#include "tests.h"

typedef struct Fixture {
        sd_event *event;
        FakeSystemd *fake;
        SystemBus *sb;
        unsigned fail_opens; /* the next N attempts fail with -ECONNREFUSED */
        unsigned n_opens;
        unsigned n_up, n_down;
        int last_error;
} Fixture;

static int open_fake(sd_bus **ret, void *userdata) {
        Fixture *f = userdata;
        sd_bus *client = NULL;
        int r;

        f->n_opens++;
        if (f->fail_opens > 0) {
                f->fail_opens--;
                return -ECONNREFUSED;
        }
        r = fake_systemd_connect(f->fake, &client);
        if (r < 0)
                return r;
        (void) sd_bus_detach_event(client); /* SystemBus attaches it */
        *ret = client;
        return 0;
}

static void on_changed(SystemBus *sb, bool up, int error, void *userdata) {
        Fixture *f = userdata;

        if (up) {
                f->n_up++;
                assert_non_null(system_bus_get(sb));
        } else {
                f->n_down++;
                f->last_error = error;
                assert_null(system_bus_get(sb));
        }
}

static int setup(void **state) {
        Fixture *f = calloc(1, sizeof(*f));
        sd_bus *first = NULL;
        SystemBusOptions o;

        assert_non_null(f);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(fake_systemd_new(f->event, &f->fake, &first), 0);
        sd_bus_close_unref(first);
        fake_systemd_disconnect(f->fake);
        o = (SystemBusOptions) { .open = open_fake,
                                 .open_userdata = f,
                                 .retry_base_usec = 10 * USEC_PER_MSEC,
                                 .retry_cap_usec = 40 * USEC_PER_MSEC };
        assert_int_equal(system_bus_new(f->event, &o, on_changed, f, &f->sb), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;

        /* The peer first: flushing a connection it no longer serves ends at once. */
        fake_systemd_free(f->fake);
        system_bus_free(f->sb);
        sd_event_unref(f->event);
        free(f);
        return 0;
}

static void test_up_when_opened(void **state) {
        Fixture *f = *state;

        assert_int_equal(system_bus_start(f->sb), 0);
        assert_int_equal(f->n_up, 1); /* from inside the call: the owner sets up with it */
        assert_non_null(system_bus_get(f->sb));
        assert_int_equal(system_bus_start(f->sb), -EALREADY);
        TEST_LOOP_NOT(f->event, f->n_down > 0 || f->n_up > 1, 100 * USEC_PER_MSEC);
        assert_int_equal(f->n_opens, 1);
}

static void test_first_attempts_fail(void **state) {
        Fixture *f = *state;

        f->fail_opens = 3;
        assert_int_equal(system_bus_start(f->sb), 0);
        assert_int_equal(f->n_down, 1); /* said at once, from the first attempt */
        assert_int_equal(f->last_error, -ECONNREFUSED);
        TEST_LOOP_UNTIL(f->event, f->n_up == 1, 5 * USEC_PER_SEC);
        assert_int_equal(f->n_opens, 4);
        assert_int_equal(f->n_down, 1); /* the failed retries were quiet */
}

static void test_reconnects_after_the_peer_goes(void **state) {
        Fixture *f = *state;
        uint64_t t0;

        assert_int_equal(system_bus_start(f->sb), 0);
        TEST_LOOP_UNTIL(f->event, f->n_up == 1, 5 * USEC_PER_SEC);

        /* The bus daemon restarts; it refuses the first two attempts. */
        f->fail_opens = 2;
        fake_systemd_disconnect(f->fake);
        t0 = test_now_usec();
        TEST_LOOP_UNTIL(f->event, f->n_down == 1, 5 * USEC_PER_SEC);
        assert_int_equal(f->last_error, -ECONNRESET);
        TEST_LOOP_UNTIL(f->event, f->n_up == 2, 5 * USEC_PER_SEC);
        assert_int_equal(f->n_down, 1);
        assert_int_equal(f->n_opens, 4);
        /* Backoff between the attempts: at least 10 + 20 + 40 ms (before jitter). */
        assert_true(test_now_usec() - t0 >= 70 * USEC_PER_MSEC);

        /* And again: each disconnect is one "down", each reconnect one "up". */
        fake_systemd_disconnect(f->fake);
        TEST_LOOP_UNTIL(f->event, f->n_up == 3, 5 * USEC_PER_SEC);
        assert_int_equal(f->n_down, 2);
}

static void test_free_while_down(void **state) {
        Fixture *f = *state;
        unsigned n;

        f->fail_opens = 1000;
        assert_int_equal(system_bus_start(f->sb), 0);
        TEST_LOOP_UNTIL(f->event, f->n_opens >= 3, 5 * USEC_PER_SEC);
        assert_int_equal(f->n_down, 1);
        n = f->n_opens;
        f->sb = system_bus_free(f->sb); /* the retry timer goes with it */
        TEST_LOOP_NOT(f->event, f->n_opens > n, 100 * USEC_PER_MSEC);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_up_when_opened, setup, teardown),
                cmocka_unit_test_setup_teardown(test_first_attempts_fail, setup, teardown),
                cmocka_unit_test_setup_teardown(test_reconnects_after_the_peer_goes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_while_down, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
