/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fake-systemd.h"

#define FAKE_UNITS_MAX 16
#define MANAGER_PATH "/org/freedesktop/systemd1"
#define MANAGER_IFACE "org.freedesktop.systemd1.Manager"
#define UNIT_PREFIX "/org/freedesktop/systemd1/unit"

typedef struct FakeUnit {
        char *name; /* owned */
        FakeBehaviour behaviour;
        sd_id128_t invocation;
        const char *active_state; /* static */
        const char *sub_state;    /* static */
        const char *result;       /* static: Service.Result */
        unsigned n_jobs;
        uint32_t held_job;    /* FAKE_HELD: the job waiting for fake_systemd_finish_held() */
        char held_member[32]; /* its method */
} FakeUnit;

struct FakeSystemd {
        sd_event *event;                /* ref held */
        sd_bus *server;                 /* ref held; NULL while "the bus is down" */
        sd_bus_slot *slot_manager;      /* owned */
        sd_bus_slot *slot_unit;         /* owned */
        sd_bus_slot *slot_service;      /* owned */
        sd_bus_slot *slot_daemon;       /* owned: org.freedesktop.DBus, for a bus client (listen mode) */
        int listen_fd;                  /* owned; -EBADF unless listening */
        sd_event_source *accept_source; /* owned */
        FakeUnit units[FAKE_UNITS_MAX];
        size_t n_units;
        FakeUnit not_found;    /* what systemd shows for a name with no unit file */
        char *subscribe_error; /* owned */
        bool swallow_replies;  /* carry out job requests, but never answer them */
        char *calls;           /* owned */
        uint32_t next_job;
};

static FakeUnit *find(FakeSystemd *f, const char *name) {
        for (size_t i = 0; i < f->n_units; i++)
                if (streq(f->units[i].name, name))
                        return &f->units[i];
        return NULL;
}

static void log_call(FakeSystemd *f, const char *member, const char *unit) {
        char *s;

        if (asprintf(&s, "%s%s%s%s%s", strempty(f->calls), f->calls ? " " : "", member, unit ? ":" : "",
                     strempty(unit)) >= 0) {
                free(f->calls);
                f->calls = s;
        }
}

static void set_state(FakeUnit *u, const char *active, const char *sub, const char *result) {
        u->active_state = active;
        u->sub_state = sub;
        u->result = result;
}

/* Applies a job the way systemd would, and returns the JobRemoved result (NULL: never finishes). */
static const char *apply_job(FakeUnit *u, const char *member) {
        bool starts = streq(member, "StartUnit") || streq(member, "RestartUnit");

        if (u->behaviour == FAKE_HANG)
                return NULL;
        if (u->behaviour == FAKE_HELD && u->held_job == 0)
                return NULL; /* fake_systemd_finish_held() carries it out */
        if (streq(member, "StopUnit")) {
                set_state(u, "inactive", "dead", "success");
                return "done";
        }
        if (!starts)
                return "done"; /* ReloadUnit */

        if (u->behaviour != FAKE_NO_RESTART)
                (void) sd_id128_randomize(&u->invocation);
        switch (u->behaviour) {
        case FAKE_JOB_FAILED:
                set_state(u, "failed", "failed", "exit-code");
                return "failed";
        case FAKE_DIES:
                set_state(u, "failed", "failed", "signal");
                return "done";
        default:
                set_state(u, "active", "running", "success");
                return "done";
        }
}

static int emit_job_removed(FakeSystemd *f, uint32_t id, const char *unit, const char *result) {
        char path[64];

        snprintf(path, sizeof(path), MANAGER_PATH "/job/%u", id);
        return sd_bus_emit_signal(f->server, MANAGER_PATH, MANAGER_IFACE, "JobRemoved", "uoss", id, path,
                                  unit, result);
}

static int method_job(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        FakeSystemd *f = userdata;
        const char *name, *mode, *member = sd_bus_message_get_member(m), *result;
        char path[64];
        uint32_t id;
        FakeUnit *u;
        int r;

        r = sd_bus_message_read(m, "ss", &name, &mode);
        if (r < 0)
                return r;
        log_call(f, member, name);
        u = find(f, name);
        if (!u)
                return sd_bus_error_setf(error, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not found.",
                                         name);
        u->n_jobs++;

        id = ++f->next_job;
        snprintf(path, sizeof(path), MANAGER_PATH "/job/%u", id);
        r = f->swallow_replies ? 0 : sd_bus_reply_method_return(m, "o", path);
        if (r < 0)
                return r;

        /* Noise the client must ignore: someone else's job of the same unit, and a malformed signal. */
        (void) emit_job_removed(f, id + 1000, name, "canceled");
        (void) sd_bus_emit_signal(f->server, MANAGER_PATH, MANAGER_IFACE, "JobRemoved", "s", "garbage");

        if (u->behaviour == FAKE_HELD) {
                u->held_job = id;
                snprintf(u->held_member, sizeof(u->held_member), "%s", member);
                return 1;
        }
        result = apply_job(u, member);
        if (result)
                (void) emit_job_removed(f, id, name, result);
        return 1;
}

static int method_subscribe(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        FakeSystemd *f = userdata;

        log_call(f, "Subscribe", NULL);
        if (f->subscribe_error)
                return sd_bus_error_setf(error, f->subscribe_error, "Subscribe refused by the test.");
        return sd_bus_reply_method_return(m, "");
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        log_call(userdata, "Reload", NULL);
        return sd_bus_reply_method_return(m, "");
}

/* EnableUnitFiles(as, runtime, force) / DisableUnitFiles(as, runtime): logged per unit, nothing
 * changed is reported (the caller only waits for the reply). */
static int method_unit_files(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        FakeSystemd *f = userdata;
        const char *member = sd_bus_message_get_member(m), *name;
        bool enable = streq(member, "EnableUnitFiles");
        int r;

        r = sd_bus_message_enter_container(m, 'a', "s");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(m, "s", &name)) > 0)
                log_call(f, member, name);
        if (r < 0)
                return r;
        return enable ? sd_bus_reply_method_return(m, "ba(sss)", false, 0) :
                        sd_bus_reply_method_return(m, "a(sss)", 0);
}

static int get_invocation(sd_bus *bus, const char *path, const char *interface, const char *property,
                          sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const FakeUnit *u = userdata;

        return sd_bus_message_append_array(reply, 'y', u->invocation.bytes,
                                           sd_id128_is_null(u->invocation) ? 0 : sizeof(u->invocation));
}

static int get_job(sd_bus *bus, const char *path, const char *interface, const char *property,
                   sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const FakeUnit *u = userdata;
        char job[64];

        snprintf(job, sizeof(job), MANAGER_PATH "/job/%u", u->held_job);
        return sd_bus_message_append(reply, "(uo)", u->held_job, u->held_job ? job : "/");
}

static int find_unit(sd_bus *bus, const char *path, const char *interface, void *userdata, void **found,
                     sd_bus_error *error) {
        FakeSystemd *f = userdata;
        _cleanup_free_ char *name = NULL;
        FakeUnit *u;

        if (sd_bus_path_decode(path, UNIT_PREFIX, &name) <= 0)
                return 0;
        u = find(f, name);
        *found = u ? u : &f->not_found;
        return 1;
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Subscribe", "", "", method_subscribe, 0),
        SD_BUS_METHOD("StartUnit", "ss", "o", method_job, 0),
        SD_BUS_METHOD("StopUnit", "ss", "o", method_job, 0),
        SD_BUS_METHOD("RestartUnit", "ss", "o", method_job, 0),
        SD_BUS_METHOD("ReloadUnit", "ss", "o", method_job, 0),
        SD_BUS_METHOD("Reload", "", "", method_reload, 0),
        SD_BUS_METHOD("EnableUnitFiles", "asbb", "ba(sss)", method_unit_files, 0),
        SD_BUS_METHOD("DisableUnitFiles", "asb", "a(sss)", method_unit_files, 0),
        SD_BUS_SIGNAL("JobRemoved", "uoss", 0),
        SD_BUS_SIGNAL("Reloading", "b", 0),
        SD_BUS_VTABLE_END
};

static int get_loaded(sd_bus *bus, const char *path, const char *interface, const char *property,
                      sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", "loaded");
}

static const sd_bus_vtable unit_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("InvocationID", "ay", get_invocation, 0, 0),
        SD_BUS_PROPERTY("LoadState", "s", get_loaded, 0, 0), /* every unit the fake knows is */
        SD_BUS_PROPERTY("ActiveState", "s", NULL, offsetof(FakeUnit, active_state), 0),
        SD_BUS_PROPERTY("SubState", "s", NULL, offsetof(FakeUnit, sub_state), 0),
        SD_BUS_PROPERTY("Job", "(uo)", get_job, 0, 0),
        SD_BUS_VTABLE_END
};

static const sd_bus_vtable service_vtable[] = {
        SD_BUS_VTABLE_START(0), SD_BUS_PROPERTY("Result", "s", NULL, offsetof(FakeUnit, result), 0),
        SD_BUS_VTABLE_END
};

/* What dbus-daemon answers a bus client (sd_bus_open_system()): its unique name, its match rules
 * taken, who owns a name (nothing is routed anywhere: systemd is the only peer). */
static int method_hello(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        log_call(userdata, "Hello", NULL);
        return sd_bus_reply_method_return(m, "s", ":1.1");
}

static int method_match(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "");
}

/* systemd (the one name there is) is on the bus. */
static int method_get_name_owner(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "s", ":1.0");
}

static const sd_bus_vtable daemon_vtable[] = { SD_BUS_VTABLE_START(0),
                                               SD_BUS_METHOD("Hello", "", "s", method_hello, 0),
                                               SD_BUS_METHOD("AddMatch", "s", "", method_match, 0),
                                               SD_BUS_METHOD("RemoveMatch", "s", "", method_match, 0),
                                               SD_BUS_METHOD("GetNameOwner", "s", "s", method_get_name_owner,
                                                             0),
                                               SD_BUS_VTABLE_END };

static int setup_bus(int fd, bool server, sd_bus **ret) {
        _cleanup_(sd_bus_unrefp) sd_bus *b = NULL;
        sd_id128_t id;
        int r;

        r = sd_bus_new(&b);
        if (r >= 0)
                r = sd_bus_set_fd(b, fd, fd);
        if (r >= 0 && server) {
                r = sd_id128_randomize(&id);
                if (r >= 0)
                        r = sd_bus_set_server(b, 1, id);
                /* A direct connection has no bus daemon to stamp the sender; the client's match
                 * filters on it, as it must on the real bus. */
                if (r >= 0)
                        r = sd_bus_set_sender(b, "org.freedesktop.systemd1");
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

static void fake_systemd_close_server(FakeSystemd *f) {
        f->slot_manager = sd_bus_slot_unref(f->slot_manager);
        f->slot_unit = sd_bus_slot_unref(f->slot_unit);
        f->slot_service = sd_bus_slot_unref(f->slot_service);
        f->slot_daemon = sd_bus_slot_unref(f->slot_daemon);
        /* No flush: the client is served by the same thread, which is not running its loop now. */
        f->server = sd_bus_close_unref(f->server);
}

/* f->server on `fd` (taken), serving systemd's objects, and the bus daemon's for a bus client. */
static int serve(FakeSystemd *f, int fd) {
        int r;

        assert(!f->server);
        r = setup_bus(fd, /* server= */ true, &f->server);
        if (r < 0) {
                close(fd);
                return r;
        }
        r = sd_bus_add_object_vtable(f->server, &f->slot_manager, MANAGER_PATH, MANAGER_IFACE,
                                     manager_vtable, f);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(f->server, &f->slot_unit, UNIT_PREFIX,
                                               "org.freedesktop.systemd1.Unit", unit_vtable, find_unit, f);
        if (r >= 0)
                r = sd_bus_add_fallback_vtable(f->server, &f->slot_service, UNIT_PREFIX,
                                               "org.freedesktop.systemd1.Service", service_vtable, find_unit,
                                               f);
        if (r >= 0)
                r = sd_bus_add_object_vtable(f->server, &f->slot_daemon, "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", daemon_vtable, f);
        if (r >= 0)
                r = sd_bus_start(f->server);
        if (r >= 0)
                r = sd_bus_attach_event(f->server, f->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                fake_systemd_close_server(f);
        return r;
}

int fake_systemd_connect(FakeSystemd *f, sd_bus **ret_client) {
        _cleanup_(sd_bus_unrefp) sd_bus *client = NULL;
        int fds[2] = { -EBADF, -EBADF }, r;

        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) < 0)
                return -errno;
        r = serve(f, fds[0]);
        if (r < 0) {
                close(fds[1]);
                return r;
        }
        r = setup_bus(fds[1], /* server= */ false, &client);
        if (r < 0) {
                close(fds[1]);
                fake_systemd_close_server(f);
                return r;
        }
        r = sd_bus_start(client);
        if (r >= 0)
                r = sd_bus_attach_event(client, f->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0) {
                fake_systemd_close_server(f);
                return r;
        }
        *ret_client = TAKE_PTR(client);
        return 0;
}

/* A new client (the code under test reconnecting) replaces the old one. */
static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeSystemd *f = userdata;
        int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (c < 0)
                return 0;
        fake_systemd_close_server(f);
        (void) serve(f, c);
        return 0;
}

static FakeSystemd *fake_systemd_alloc(sd_event *event) {
        FakeSystemd *f = calloc(1, sizeof(*f));

        if (!f)
                return NULL;
        f->event = sd_event_ref(event);
        f->listen_fd = -EBADF;
        f->not_found = (FakeUnit) { .active_state = "inactive", .sub_state = "dead", .result = "success" };
        return f;
}

int fake_systemd_listen(sd_event *event, const char *path, FakeSystemd **ret) {
        _cleanup_(fake_systemd_freep) FakeSystemd *f = fake_systemd_alloc(event);
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (!f)
                return -ENOMEM;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (f->listen_fd < 0)
                return -errno;
        if (bind(f->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(f->listen_fd, 4) < 0)
                return -errno;
        if (sd_event_add_io(event, &f->accept_source, f->listen_fd, EPOLLIN, on_accept, f) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(f);
        return 0;
}

void fake_systemd_disconnect(FakeSystemd *f) {
        fake_systemd_close_server(f);
}

int fake_systemd_new(sd_event *event, FakeSystemd **ret, sd_bus **ret_client) {
        _cleanup_(fake_systemd_freep) FakeSystemd *f = NULL;
        int r;

        f = fake_systemd_alloc(event);
        if (!f)
                return -ENOMEM;
        r = fake_systemd_connect(f, ret_client);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(f);
        return 0;
}

FakeSystemd *fake_systemd_free(FakeSystemd *f) {
        if (!f)
                return NULL;
        fake_systemd_close_server(f);
        sd_event_source_disable_unref(f->accept_source);
        if (f->listen_fd >= 0)
                close(f->listen_fd);
        for (size_t i = 0; i < f->n_units; i++)
                free(f->units[i].name);
        free(f->subscribe_error);
        free(f->calls);
        sd_event_unref(f->event);
        free(f);
        return NULL;
}

int fake_systemd_add_unit(FakeSystemd *f, const char *name, FakeBehaviour b) {
        FakeUnit *u;

        assert(f->n_units < FAKE_UNITS_MAX);
        u = &f->units[f->n_units];
        *u = (FakeUnit) { .name = strdup(name), .behaviour = b };
        if (!u->name)
                return -ENOMEM;
        (void) sd_id128_randomize(&u->invocation);
        set_state(u, "active", "running", "success");
        f->n_units++;
        return 0;
}

void fake_systemd_set_swallow_replies(FakeSystemd *f, bool b) {
        f->swallow_replies = b;
}

void fake_systemd_set_subscribe_error(FakeSystemd *f, const char *error_name) {
        (void) free_and_strdup(&f->subscribe_error, error_name);
}

unsigned fake_systemd_n_jobs(const FakeSystemd *f, const char *unit) {
        for (size_t i = 0; i < f->n_units; i++)
                if (streq(f->units[i].name, unit))
                        return f->units[i].n_jobs;
        return 0;
}

const char *fake_systemd_calls(const FakeSystemd *f) {
        return strempty(f->calls);
}

int fake_systemd_finish_held(FakeSystemd *f, const char *unit, bool signal) {
        FakeUnit *u = find(f, unit);
        const char *result;
        uint32_t id;

        if (!u || u->held_job == 0)
                return -ENOENT;
        id = u->held_job;
        u->behaviour = FAKE_OK;
        result = apply_job(u, u->held_member);
        u->behaviour = FAKE_HELD;
        u->held_job = 0;
        if (!signal || !f->server)
                return 0; /* sent to nobody, as around a re-exec or a bus restart */
        return MIN(emit_job_removed(f, id, unit, result), 0);
}

int fake_systemd_emit_reloading(FakeSystemd *f, bool active) {
        if (!f->server)
                return -ENOTCONN;
        return MIN(sd_bus_emit_signal(f->server, MANAGER_PATH, MANAGER_IFACE, "Reloading", "b", active), 0);
}
