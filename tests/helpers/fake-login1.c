/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for systemd-logind on a test bus: claims org.freedesktop.login1 on the "system" bus
 * (DBUS_SYSTEM_BUS_ADDRESS), serves org.freedesktop.login1.Manager.Reboot(b) at
 * /org/freedesktop/login1 and appends "Reboot interactive=<true|false>" to RECORD_FILE for every
 * call. Prints "READY" on stdout once the name is owned; exits on SIGTERM/SIGINT.
 *
 *   fake-login1 RECORD_FILE [--deny]     --deny: answer every call with AccessDenied */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

static const char *record_file;
static bool deny;

static int append_record(const char *line) {
        int fd = open(record_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = write(fd, line, strlen(line));
        (void) close(fd);
        return n == (ssize_t) strlen(line) ? 0 : -EIO;
}

static int method_reboot(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        char line[64];
        int interactive, r;

        r = sd_bus_message_read(m, "b", &interactive);
        if (r < 0)
                return r;
        (void) snprintf(line, sizeof(line), "Reboot interactive=%s\n", interactive ? "true" : "false");
        r = append_record(line);
        if (r < 0)
                return r;
        if (deny)
                return sd_bus_error_set(ret_error, SD_BUS_ERROR_ACCESS_DENIED, "fake-login1 denies reboots");
        return sd_bus_reply_method_return(m, NULL);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Reboot", "b", "", method_reboot, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

int main(int argc, char *argv[]) {
        sd_event *event = NULL;
        sd_bus *bus = NULL;
        sigset_t ss;
        int r;

        if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--deny") != 0)) {
                fprintf(stderr, "usage: %s RECORD_FILE [--deny]\n", argv[0]);
                return 2;
        }
        record_file = argv[1];
        deny = argc == 3;

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
                return 1;

        r = sd_event_default(&event);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, NULL, NULL);
        if (r >= 0)
                r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/login1",
                                             "org.freedesktop.login1.Manager", manager_vtable, NULL);
        if (r >= 0)
                r = sd_bus_request_name(bus, "org.freedesktop.login1", 0);
        if (r >= 0)
                r = sd_bus_attach_event(bus, event, 0);
        if (r < 0) {
                fprintf(stderr, "fake-login1: setup failed: %s\n", strerror(-r));
                return 1;
        }

        printf("READY\n");
        fflush(stdout);

        r = sd_event_loop(event);
        sd_bus_flush_close_unref(bus);
        sd_event_unref(event);
        return r < 0 ? 1 : 0;
}
