/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "systemd/reboot.h"

struct RebootRequest {
        sd_bus *bus; /* ref held */
        RebootMethod method;
        sd_bus_slot *slot; /* owned: the pending call */
        RebootRequestDone done;
        void *userdata; /* borrowed */
        bool started;
        char *error_message; /* owned */
};

int reboot_request_new(sd_bus *bus, RebootMethod method, RebootRequest **ret) {
        RebootRequest *r;

        assert(ret);

        if (method < 0 || method >= _REBOOT_METHOD_MAX)
                return -EINVAL;
        if (!bus && method != REBOOT_METHOD_NONE)
                return -EINVAL;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->bus = bus ? sd_bus_ref(bus) : NULL;
        r->method = method;

        *ret = r;
        return 0;
}

RebootRequest *reboot_request_free(RebootRequest *r) {
        if (!r)
                return NULL;
        sd_bus_slot_unref(r->slot);
        sd_bus_unref(r->bus);
        free(r->error_message);
        free(r);
        return NULL;
}

const char *reboot_request_get_error_message(const RebootRequest *r) {
        return r ? r->error_message : NULL;
}

static int reboot_request_on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        RebootRequest *r = ASSERT_PTR(userdata);
        const sd_bus_error *e;
        int error = 0;

        r->slot = sd_bus_slot_unref(r->slot); /* the call is over either way */

        e = sd_bus_message_get_error(m);
        if (e) {
                error = -sd_bus_error_get_errno(e);
                if (error == 0)
                        error = -EIO;
                free(r->error_message);
                if (asprintf(&r->error_message, "%s: %s", strempty(e->name), strempty(e->message)) < 0)
                        r->error_message = NULL;
        }

        if (r->done)
                r->done(r, error, r->userdata); /* may free r */
        return 0;
}

int reboot_request_start(RebootRequest *r, RebootRequestDone done, void *userdata) {
        int q;

        assert(r);

        if (r->started)
                return -EALREADY;

        switch (r->method) {
        case REBOOT_METHOD_NONE:
                r->started = true;
                return REBOOT_DISABLED;

        case REBOOT_METHOD_LOGIN1:
                q = sd_bus_call_method_async(r->bus, &r->slot, "org.freedesktop.login1",
                                             "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                             "Reboot", reboot_request_on_reply, r, "b",
                                             /* interactive= */ 0);
                break;

        case REBOOT_METHOD_SYSTEMD:
                /* replace-irreversibly: no job queued later (a unit restart, say) may cancel it. */
                q = sd_bus_call_method_async(r->bus, &r->slot, "org.freedesktop.systemd1",
                                             "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                             "StartUnit", reboot_request_on_reply, r, "ss", "reboot.target",
                                             "replace-irreversibly");
                break;

        default:
                return -EINVAL;
        }
        if (q < 0)
                return q;

        r->started = true;
        r->done = done;
        r->userdata = userdata;
        return 0;
}
