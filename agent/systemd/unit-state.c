/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "systemd/unit-state.h"
#include "util/macro.h"
#include "util/strv.h"

static const char *const deps_table[_UNIT_DEPS_MAX] = {
        [UNIT_DEPS_REQUIRES] = "Requires",
        [UNIT_DEPS_REQUISITE] = "Requisite",
        [UNIT_DEPS_BINDS_TO] = "BindsTo",
        [UNIT_DEPS_PART_OF] = "PartOf",
        [UNIT_DEPS_STOP_PROPAGATED_FROM] = "StopPropagatedFrom",
        [UNIT_DEPS_CONFLICTS] = "Conflicts",
        [UNIT_DEPS_CONFLICTED_BY] = "ConflictedBy",
};

DEFINE_STRING_TABLE_LOOKUP(unit_deps, UnitDeps, deps_table);

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

static int read_deps(sd_bus_message *m, char ***ret) {
        int r;

        r = sd_bus_message_enter_container(m, 'v', "as");
        if (r < 0)
                return r;
        strv_freep(ret); /* a property seen twice (two interfaces): the last wins */
        r = sd_bus_message_read_strv(m, ret);
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int read_property(sd_bus_message *m, const char *name, UnitState *st) {
        UnitDeps d = unit_deps_from_string(name);

        if (d >= 0)
                return read_deps(m, &st->deps[d]);
        if (streq(name, "LoadState"))
                return read_string(m, &st->load_state);
        if (streq(name, "ActiveState"))
                return read_string(m, &st->active_state);
        if (streq(name, "SubState"))
                return read_string(m, &st->sub_state);
        if (streq(name, "UnitFileState"))
                return read_string(m, &st->unit_file_state);
        if (streq(name, "Type")) /* only the Service interface has one */
                return read_string(m, &st->service_type);
        /* Service, Socket, Scope, Mount, Swap and Slice have one. */
        if (streq(name, "Slice"))
                return read_string(m, &st->slice);
        if (streq(name, "TriggeredBy"))
                return read_triggered(m, &st->triggered);
        if (streq(name, "StateChangeTimestampMonotonic"))
                return sd_bus_message_read(m, "v", "t", &st->state_change_usec);
        return sd_bus_message_skip(m, "v");
}

static int read_property_cb(sd_bus_message *m, const char *name, void *userdata) {
        return read_property(m, name, userdata);
}

int unit_properties_parse(sd_bus_message *m, UnitPropertyReader reader, void *userdata) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *name;

                r = sd_bus_message_read(m, "s", &name);
                if (r >= 0)
                        r = reader(m, name, userdata);
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
        r = unit_properties_parse(reply, read_property_cb, &st);
        if (st.slice && !*st.slice)
                st.slice = NULL;
        c->done(r < 0 ? r : 0, r < 0 ? NULL : &st, c->userdata);
        for (size_t i = 0; i < _UNIT_DEPS_MAX; i++)
                strv_freep(&st.deps[i]);
        return 0;
}

int unit_state_read(sd_bus *bus, const char *unit, UnitStateDone done, void *userdata,
                    sd_bus_slot **ret_slot) {
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
        r = sd_bus_call_method_async(bus, ret_slot, "org.freedesktop.systemd1", path,
                                     "org.freedesktop.DBus.Properties", "GetAll", on_reply, c, "s", "");
        if (r < 0) {
                free(c);
                return r;
        }
        (void) sd_bus_slot_set_destroy_callback(*ret_slot, free);
        return 0;
}
