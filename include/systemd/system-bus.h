/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The connection to the system bus, kept open. Opened at start and whenever it closed, with backoff
 * (util/backoff.h) between attempts: a restarted dbus-daemon (dbus.service) ends every client's
 * connection, and sd-bus never reconnects by itself, so without this the agent stayed deaf to systemd
 * until its own restart. A closed connection is noticed by the org.freedesktop.DBus.Local.Disconnected
 * message sd-bus synthesizes (not sd_bus_set_exit_on_disconnect(), which would end the loop).
 *
 * One owner hears of every change once: "up" when a connection was opened (requests queue behind its
 * handshake), "down" with the reason when it closed or, while down, when the first attempt failed. Failed
 * attempts while already down are retried quietly. Nothing else keeps the sd_bus: readers take
 * system_bus_get() at each call. Logs nothing. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

#define SYSTEM_BUS_RETRY_BASE_USEC (200 * USEC_PER_MSEC)
#define SYSTEM_BUS_RETRY_CAP_USEC (10 * USEC_PER_SEC)

typedef struct SystemBus SystemBus;

/* Opens a started connection, not attached to a loop. NULL in the options: sd_bus_open_system()
 * ($DBUS_SYSTEM_BUS_ADDRESS, else /run/dbus/system_bus_socket). */
typedef int (*SystemBusOpen)(sd_bus **ret, void *userdata);

/* `up`: system_bus_get() is the new connection. Otherwise it is NULL and `error` says why. */
typedef void (*SystemBusChanged)(SystemBus *sb, bool up, int error, void *userdata);

typedef struct SystemBusOptions {
        SystemBusOpen open; /* NULL: the system bus */
        void *open_userdata;
        uint64_t retry_base_usec; /* 0: SYSTEM_BUS_RETRY_BASE_USEC */
        uint64_t retry_cap_usec;  /* 0: SYSTEM_BUS_RETRY_CAP_USEC */
} SystemBusOptions;

/* `o` may be NULL (the system bus, default backoff). Does not connect yet. */
int system_bus_new(sd_event *event, const SystemBusOptions *o, SystemBusChanged changed, void *userdata,
                   SystemBus **ret) _warn_unused_result_;
SystemBus *system_bus_free(SystemBus *sb);
DEFINE_CLEANUP_FUNC(SystemBus, system_bus_free);

/* The first attempt, now: its outcome is reported from inside this call. Later attempts run on the
 * loop. */
int system_bus_start(SystemBus *sb) _warn_unused_result_;

/* The connection while up, else NULL. Borrowed: valid until the next change is reported. */
sd_bus *system_bus_get(const SystemBus *sb);
