/* SPDX-License-Identifier: Apache-2.0 */
/* reboot.c against a fake peer on a socketpair (the sd-bus test-bus-server pattern): the fake
 * serves login1.Manager.Reboot and systemd1.Manager.StartUnit and records what it got. */
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "systemd/reboot.h"
#include "test-loop.h"
#include "tests.h"

typedef struct Fake {
        unsigned n_reboot, n_start_unit;
        int interactive;
        char unit[64], mode[64];
        const char *fail_with; /* D-Bus error name to reply with, NULL: succeed */
} Fake;

typedef struct Peer {
        sd_event *event;
        sd_bus *server, *client;
        sd_bus_slot *login1_slot, *systemd_slot;
        Fake fake;

        bool done;
        int error;
        char *message;
        RebootRequest *request;
        bool free_in_callback;
} Peer;

static int fake_reboot(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Fake *f = userdata;
        int interactive, r;

        r = sd_bus_message_read(m, "b", &interactive);
        if (r < 0)
                return r;
        f->n_reboot++;
        f->interactive = interactive;
        if (f->fail_with)
                return sd_bus_error_set(ret_error, f->fail_with, "denied by the test");
        return sd_bus_reply_method_return(m, NULL);
}

static int fake_start_unit(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        Fake *f = userdata;
        const char *unit, *mode;
        int r;

        r = sd_bus_message_read(m, "ss", &unit, &mode);
        if (r < 0)
                return r;
        f->n_start_unit++;
        (void) snprintf(f->unit, sizeof(f->unit), "%s", unit);
        (void) snprintf(f->mode, sizeof(f->mode), "%s", mode);
        if (f->fail_with)
                return sd_bus_error_set(ret_error, f->fail_with, "denied by the test");
        return sd_bus_reply_method_return(m, "o", "/org/freedesktop/systemd1/job/42");
}

static const sd_bus_vtable login1_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Reboot", "b", "", fake_reboot, 0),
        SD_BUS_VTABLE_END,
};

static const sd_bus_vtable systemd_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("StartUnit", "ss", "o", fake_start_unit, 0),
        SD_BUS_VTABLE_END,
};

static void peer_init(Peer *p) {
        sd_id128_t id;
        int fds[2];

        *p = (Peer) {};
        assert_int_equal(sd_event_new(&p->event), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
        assert_int_equal(sd_id128_randomize(&id), 0);

        assert_int_equal(sd_bus_new(&p->server), 0);
        assert_int_equal(sd_bus_set_fd(p->server, fds[0], fds[0]), 0);
        assert_int_equal(sd_bus_set_server(p->server, 1, id), 0);
        assert_int_equal(sd_bus_set_anonymous(p->server, 1), 0);
        assert_int_equal(sd_bus_add_object_vtable(p->server, &p->login1_slot, "/org/freedesktop/login1",
                                                  "org.freedesktop.login1.Manager", login1_vtable, &p->fake),
                         0);
        assert_int_equal(sd_bus_add_object_vtable(p->server, &p->systemd_slot, "/org/freedesktop/systemd1",
                                                  "org.freedesktop.systemd1.Manager", systemd_vtable,
                                                  &p->fake),
                         0);
        assert_int_equal(sd_bus_start(p->server), 0);
        assert_int_equal(sd_bus_attach_event(p->server, p->event, 0), 0);

        assert_int_equal(sd_bus_new(&p->client), 0);
        assert_int_equal(sd_bus_set_fd(p->client, fds[1], fds[1]), 0);
        assert_int_equal(sd_bus_set_anonymous(p->client, 1), 0);
        assert_int_equal(sd_bus_start(p->client), 0);
        assert_int_equal(sd_bus_attach_event(p->client, p->event, 0), 0);
}

static void peer_done(Peer *p) {
        reboot_request_free(p->request);
        free(p->message);
        sd_bus_slot_unref(p->login1_slot);
        sd_bus_slot_unref(p->systemd_slot);
        sd_bus_flush_close_unref(p->client);
        sd_bus_flush_close_unref(p->server);
        sd_event_unref(p->event);
}

static void on_done(RebootRequest *r, int error, void *userdata) {
        Peer *p = userdata;
        const char *m = reboot_request_get_error_message(r);

        assert_false(p->done);
        p->done = true;
        p->error = error;
        p->message = m ? strdup(m) : NULL;
        if (p->free_in_callback)
                p->request = reboot_request_free(p->request);
}

static void peer_wait(Peer *p) {
        TEST_LOOP_UNTIL(p->event, p->done, 10 * USEC_PER_SEC);
}

static void test_login1(void **state) {
        Peer p;

        peer_init(&p);
        assert_int_equal(reboot_request_new(p.client, REBOOT_METHOD_LOGIN1, &p.request), 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), 0);
        assert_false(p.done); /* asynchronous: nothing happened yet */
        assert_int_equal(p.fake.n_reboot, 0);
        peer_wait(&p);
        assert_int_equal(p.error, 0);
        assert_null(p.message);
        assert_int_equal(p.fake.n_reboot, 1);
        assert_int_equal(p.fake.interactive, 0);
        assert_int_equal(p.fake.n_start_unit, 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), -EALREADY);
        peer_done(&p);
}

static void test_systemd(void **state) {
        Peer p;

        peer_init(&p);
        assert_int_equal(reboot_request_new(p.client, REBOOT_METHOD_SYSTEMD, &p.request), 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), 0);
        peer_wait(&p);
        assert_int_equal(p.error, 0);
        assert_int_equal(p.fake.n_start_unit, 1);
        assert_string_equal(p.fake.unit, "reboot.target");
        assert_string_equal(p.fake.mode, "replace-irreversibly");
        assert_int_equal(p.fake.n_reboot, 0);
        peer_done(&p);
}

static void test_denied(void **state) {
        Peer p;

        peer_init(&p);
        p.fake.fail_with = "org.freedesktop.DBus.Error.AccessDenied";
        p.free_in_callback = true;
        assert_int_equal(reboot_request_new(p.client, REBOOT_METHOD_LOGIN1, &p.request), 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), 0);
        peer_wait(&p);
        assert_int_equal(p.error, -EACCES);
        assert_string_equal(p.message, "org.freedesktop.DBus.Error.AccessDenied: denied by the test");
        assert_null(p.request); /* freed inside its own callback */
        peer_done(&p);
}

static void test_unknown_method_is_an_error(void **state) {
        Peer p;

        /* Drop the login1 object: the peer answers UnknownObject. */
        peer_init(&p);
        p.login1_slot = sd_bus_slot_unref(p.login1_slot);
        assert_int_equal(reboot_request_new(p.client, REBOOT_METHOD_LOGIN1, &p.request), 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), 0);
        peer_wait(&p);
        assert_true(p.error < 0);
        assert_non_null(p.message);
        peer_done(&p);
}

static void test_none(void **state) {
        RebootRequest *r = NULL;

        assert_int_equal(reboot_request_new(NULL, REBOOT_METHOD_NONE, &r), 0);
        assert_int_equal(reboot_request_start(r, NULL, NULL), REBOOT_DISABLED);
        assert_string_equal(REBOOT_DISABLED_MESSAGE, "reboot required but disabled");
        assert_int_equal(reboot_request_start(r, NULL, NULL), -EALREADY);
        reboot_request_free(r);
}

static void test_free_while_pending(void **state) {
        Peer p;

        peer_init(&p);
        assert_int_equal(reboot_request_new(p.client, REBOOT_METHOD_SYSTEMD, &p.request), 0);
        assert_int_equal(reboot_request_start(p.request, on_done, &p), 0);
        p.request = reboot_request_free(p.request);
        /* The fake still receives the call, but nobody is called back. */
        TEST_LOOP_UNTIL(p.event, p.fake.n_start_unit > 0, USEC_PER_SEC);
        assert_int_equal(p.fake.n_start_unit, 1);
        TEST_LOOP_NOT(p.event, p.done, 20 * USEC_PER_MSEC);
        peer_done(&p);
}

static void test_invalid(void **state) {
        RebootRequest *r = NULL;

        assert_int_equal(reboot_request_new(NULL, REBOOT_METHOD_LOGIN1, &r), -EINVAL);
        assert_int_equal(reboot_request_new(NULL, _REBOOT_METHOD_MAX, &r), -EINVAL);
        assert_int_equal(reboot_request_new(NULL, _REBOOT_METHOD_INVALID, &r), -EINVAL);
        assert_null(r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_login1),  cmocka_unit_test(test_systemd),
                cmocka_unit_test(test_denied),  cmocka_unit_test(test_unknown_method_is_an_error),
                cmocka_unit_test(test_none),    cmocka_unit_test(test_free_while_pending),
                cmocka_unit_test(test_invalid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
