/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A fake org.freedesktop.systemd1 for unit tests: a real sd-bus server on one end of a socketpair
 * (the test-bus-server.c pattern), the client end handed to the code under test. Both are attached
 * to the caller's sd_event loop, so a test drives everything from one thread. It serves Subscribe,
 * Start/Stop/Restart/ReloadUnit, Reload, Enable/DisableUnitFiles (logged, nothing changed) and the
 * unit properties InvocationID, LoadState ("loaded"), ActiveState, SubState and Service.Result, and emits
 * JobRemoved the way systemd does, plus a decoy JobRemoved for a different job of the same unit before each
 * real one. Unknown units get NoSuchUnit. */

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

typedef enum FakeBehaviour {
        FAKE_OK,         /* job "done", new InvocationID, active/running */
        FAKE_NO_RESTART, /* job "done", but the InvocationID stays the same */
        FAKE_JOB_FAILED, /* job "failed", unit failed/failed, Result "exit-code" */
        FAKE_DIES,       /* job "done", but the unit is failed right after (Type=simple crash) */
        FAKE_HANG,       /* the job never finishes */
        FAKE_HELD,       /* the job stays queued (Unit.Job) until fake_systemd_finish_held() */
} FakeBehaviour;

typedef struct FakeSystemd FakeSystemd;

/* *ret_client: a started client connection (not a bus client: no Hello), attached to `event`. */
int fake_systemd_new(sd_event *event, FakeSystemd **ret, sd_bus **ret_client);
FakeSystemd *fake_systemd_free(FakeSystemd *f);
/* Listen mode: the fake as the system bus at `path` (DBUS_SYSTEM_BUS_ADDRESS=unix:path=<path>) for code
 * that opens the bus itself (sd_bus_open_system()): it also answers the bus daemon's Hello and match
 * rules; one client at a time, a new connection replaces the old. */
int fake_systemd_listen(sd_event *event, const char *path, FakeSystemd **ret);
/* "The bus restarts": the server end closes (the client sees Disconnected); fake_systemd_connect()
 * then serves a new client connection with the same units and jobs. */
void fake_systemd_disconnect(FakeSystemd *f);
int fake_systemd_connect(FakeSystemd *f, sd_bus **ret_client);
DEFINE_CLEANUP_FUNC(FakeSystemd, fake_systemd_free);

int fake_systemd_add_unit(FakeSystemd *f, const char *name, FakeBehaviour b);
/* Job requests are carried out but never answered (the answer is "lost" when the connection goes). */
void fake_systemd_set_swallow_replies(FakeSystemd *f, bool b);
/* Subscribe() answers with this D-Bus error (NULL: success). */
void fake_systemd_set_subscribe_error(FakeSystemd *f, const char *error_name);

/* Carries out the held job of `unit` (as FAKE_OK would) and, if `signal`, sends its JobRemoved; without
 * it the signal is lost, as one sent by systemd while the bus was down or around a re-exec. */
int fake_systemd_finish_held(FakeSystemd *f, const char *unit, bool signal);
/* Manager.Reloading(active), as around a daemon-reload. */
int fake_systemd_emit_reloading(FakeSystemd *f, bool active);

/* Jobs of any kind received for `unit`. */
unsigned fake_systemd_n_jobs(const FakeSystemd *f, const char *unit);
/* Every Manager method call so far, space-separated: "Subscribe RestartUnit:a.service Reload". */
const char *fake_systemd_calls(const FakeSystemd *f);
