/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "systemd/unit-state.h"
#include "util/macro.h"

typedef struct UnitStateCall {
        UnitStateDone done;
        void *userdata;
} UnitStateCall;

static int read_string(sd_bus_message *m, const char **ret) {
        return sd_bus_message_read(m, "v", "s", ret);
}

static int read_triggered(sd_bus_message *m, bool *ret) {
        const char *s;
        int r;

        r = sd_bus_message_enter_container(m, 'v', "as");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r < 0)
                return r;
        *ret = false;
        while ((r = sd_bus_message_read(m, "s", &s)) > 0)
                *ret = true;
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int parse_properties(sd_bus_message *m, UnitState *st) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *name;

                r = sd_bus_message_read(m, "s", &name);
                if (r < 0)
                        return r;
                if (streq(name, "LoadState"))
                        r = read_string(m, &st->load_state);
                else if (streq(name, "ActiveState"))
                        r = read_string(m, &st->active_state);
                else if (streq(name, "SubState"))
                        r = read_string(m, &st->sub_state);
                else if (streq(name, "Type"))   /* only the Service interface has one */
                        r = read_string(m, &st->service_type);
                else if (streq(name, "TriggeredBy"))
                        r = read_triggered(m, &st->triggered);
                else if (streq(name, "StateChangeTimestampMonotonic"))
                        r = sd_bus_message_read(m, "v", "t", &st->state_change_usec);
                else
                        r = sd_bus_message_skip(m, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        UnitStateCall *c = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        UnitState st = {};
        int r;

        if (e) {
                r = sd_bus_error_get_errno(e);
                c->done(r > 0 ? -r : -EIO, NULL, c->userdata);
                return 0;
        }
        r = parse_properties(reply, &st);
        c->done(r < 0 ? r : 0, r < 0 ? NULL : &st, c->userdata);
        return 0;
}

int unit_state_read(sd_bus *bus, const char *unit, UnitStateDone done, void *userdata, sd_bus_slot **ret_slot) {
        _cleanup_free_ char *path = NULL;
        UnitStateCall *c;
        int r;

        assert(bus);
        assert(unit);
        assert(done);
        assert(ret_slot);

        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0)
                return r;
        c = malloc(sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (UnitStateCall) { done, userdata };
        /* An empty interface name: the properties of every interface of the object. */
        r = sd_bus_call_method_async(bus, ret_slot, "org.freedesktop.systemd1", path, "org.freedesktop.DBus.Properties",
                                     "GetAll", on_reply, c, "s", "");
        if (r < 0) {
                free(c);
                return r;
        }
        (void) sd_bus_slot_set_destroy_callback(*ret_slot, free);
        return 0;
}
