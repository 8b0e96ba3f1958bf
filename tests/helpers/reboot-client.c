/* SPDX-License-Identifier: Apache-2.0 */
/* Drives reboot.c once against the "system" bus (DBUS_SYSTEM_BUS_ADDRESS), the way the manager
 * will: bus attached to an sd_event loop, asynchronous request, result from the callback.
 *
 *   reboot-client login1|systemd|none
 * Prints "accepted", "disabled: <message>" or "failed: <errno name> <D-Bus error>"; exits 0 when
 * accepted or disabled, 1 when the request failed, 2 on usage or setup errors. */
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "systemd/reboot.h"

typedef struct Client {
        bool done;
        int error;
} Client;

static void on_done(RebootRequest *r, int error, void *userdata) {
        Client *c = userdata;

        c->done = true;
        c->error = error;
        if (error < 0)
                printf("failed: %s %s\n", strerrorname_np(-error) ?: "?",
                       strempty(reboot_request_get_error_message(r)));
        else
                printf("accepted\n");
}

int main(int argc, char *argv[]) {
        _cleanup_(reboot_request_freep) RebootRequest *request = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        Client client = {};
        RebootMethod method;
        int r;

        if (argc != 2 || (method = reboot_method_from_string(argv[1])) < 0) {
                fprintf(stderr, "usage: %s login1|systemd|none\n", argv[0]);
                return 2;
        }

        r = sd_event_new(&event);
        if (r >= 0 && method != REBOOT_METHOD_NONE) {
                r = sd_bus_open_system(&bus);
                if (r >= 0)
                        r = sd_bus_attach_event(bus, event, 0);
        }
        if (r >= 0)
                r = reboot_request_new(bus, method, &request);
        if (r >= 0)
                r = reboot_request_start(request, on_done, &client);
        if (r < 0) {
                fprintf(stderr, "setup failed: %s\n", strerror(-r));
                return 2;
        }
        if (r == REBOOT_DISABLED) {
                printf("disabled: %s\n", REBOOT_DISABLED_MESSAGE);
                return 0;
        }

        for (int i = 0; !client.done && i < 100; i++) {
                r = sd_event_run(event, 100 * USEC_PER_MSEC);
                if (r < 0) {
                        fprintf(stderr, "event loop failed: %s\n", strerror(-r));
                        return 2;
                }
        }
        if (!client.done) {
                fprintf(stderr, "no reply within 10s\n");
                return 2;
        }
        return client.error < 0 ? 1 : 0;
}
