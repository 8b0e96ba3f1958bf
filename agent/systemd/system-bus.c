/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "systemd/system-bus.h"
#include "util/backoff.h"
#include "util/event-util.h"
#include "util/random-util.h"

#define LOCAL_INTERFACE "org.freedesktop.DBus.Local"

struct SystemBus {
        sd_event *event; /* ref held */
        SystemBusOptions opts;
        SystemBusChanged changed;
        void *userdata; /* borrowed */
        Backoff backoff;
        sd_bus *bus;            /* ref held: the connection while up (its handshake may still run) */
        sd_bus_slot *filter;    /* owned: sees Local.Disconnected of `bus` */
        sd_event_source *retry; /* owned: the next attempt */
        bool up;
        bool said_down; /* "down" was reported since the last "up" */
};

static int system_bus_open_default(sd_bus **ret, void *userdata) {
        return sd_bus_open_system(ret);
}

static void system_bus_drop(SystemBus *sb) {
        sb->up = false;
        sb->filter = sd_bus_slot_unref(sb->filter);
        if (sb->bus) {
                (void) sd_bus_detach_event(sb->bus);
                sb->bus = sd_bus_flush_close_unref(sb->bus);
        }
}

static void system_bus_set_up(SystemBus *sb) {
        if (sb->up)
                return;
        sb->up = true;
        sb->said_down = false;
        sb->changed(sb, /* up= */ true, 0, sb->userdata);
}

/* The connection closed or could not be opened: report it once, try again after the backoff. */
static void system_bus_lost(SystemBus *sb, int error) {
        bool report = sb->up || !sb->said_down;
        uint64_t delay;

        system_bus_drop(sb);
        delay = backoff_next(&sb->backoff, event_now_usec(sb->event), random_u32());
        /* A timer that cannot be armed means the loop is finishing: nothing to reconnect for. */
        (void) event_timer_arm(sb->retry, delay);
        if (report) {
                sb->said_down = true;
                sb->changed(sb, /* up= */ false, error, sb->userdata);
        }
}

static int system_bus_on_message(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        SystemBus *sb = ASSERT_PTR(userdata);

        if (sd_bus_message_get_bus(m) == sb->bus &&
            sd_bus_message_is_signal(m, LOCAL_INTERFACE, "Disconnected"))
                system_bus_lost(sb, -ECONNRESET);
        return 0; /* every message goes on to its handlers */
}

static void system_bus_attempt(SystemBus *sb) {
        sd_bus *b = NULL;
        int r;

        system_bus_drop(sb);
        r = sb->opts.open(&b, sb->opts.open_userdata);
        if (r < 0)
                return system_bus_lost(sb, r);
        sb->bus = b;
        r = sd_bus_attach_event(sb->bus, sb->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_add_filter(sb->bus, &sb->filter, system_bus_on_message, sb);
        if (r < 0)
                return system_bus_lost(sb, r);
        /* Up already while the handshake (the Hello) is still under way: requests queue behind it, and
         * a handshake that fails ends in Disconnected like any other loss. */
        system_bus_set_up(sb);
}

static int system_bus_on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        system_bus_attempt(userdata);
        return 0;
}

int system_bus_new(sd_event *event, const SystemBusOptions *o, SystemBusChanged changed, void *userdata,
                   SystemBus **ret) {
        _cleanup_(system_bus_freep) SystemBus *sb = NULL;
        int r;

        assert(event);
        assert(changed);
        assert(ret);

        sb = calloc(1, sizeof(*sb));
        if (!sb)
                return -ENOMEM;
        sb->event = sd_event_ref(event);
        sb->opts = o ? *o : (SystemBusOptions) {};
        if (!sb->opts.open)
                sb->opts.open = system_bus_open_default;
        sb->changed = changed;
        sb->userdata = userdata;
        backoff_init(&sb->backoff, sb->opts.retry_base_usec ?: SYSTEM_BUS_RETRY_BASE_USEC,
                     sb->opts.retry_cap_usec ?: SYSTEM_BUS_RETRY_CAP_USEC, 0);
        r = sd_event_add_time_relative(event, &sb->retry, CLOCK_MONOTONIC, 0, 0, system_bus_on_retry, sb);
        if (r >= 0)
                r = sd_event_source_set_enabled(sb->retry, SD_EVENT_OFF);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(sb->retry, "system-bus-retry");
        *ret = TAKE_PTR(sb);
        return 0;
}

SystemBus *system_bus_free(SystemBus *sb) {
        if (!sb)
                return NULL;
        system_bus_drop(sb);
        sd_event_source_disable_unref(sb->retry);
        sd_event_unref(sb->event);
        free(sb);
        return NULL;
}

int system_bus_start(SystemBus *sb) {
        assert(sb);

        if (sb->bus || sd_event_source_get_enabled(sb->retry, NULL) > 0)
                return -EALREADY;
        system_bus_attempt(sb);
        return 0;
}

sd_bus *system_bus_get(const SystemBus *sb) {
        return sb && sb->up ? sb->bus : NULL;
}
