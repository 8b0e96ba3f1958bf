/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Everything that talks to systemd: the system bus (systemd/system-bus.h, reopened when it closes)
 * and, once it was first up, the UnitControl, the restart annotation (daemon/restart-annotation.h),
 * the units check, the kubelet/containerd health checks, the replaced units' keeper and the hostname
 * check, kept across reconnects (the UnitControl is handed each new connection). It alone hears of
 * the bus and logs it: once per loss, once per return; unit jobs in flight wait meanwhile (bounded by
 * systemd.jobTimeout), the duties skip their D-Bus reads, and STATUS= says so.
 *
 * When the bus comes up only after start, the objects created without systemd are handed theirs (the
 * executor, the last-applied OSC's watcher, the drift repair) and the duties the Node's first sight
 * would have started start. A missing bus is not fatal: updates that restart nothing and all
 * reporting work, and the bus is retried in the background.
 *
 * Owns the bus and the objects above; borrows the loop, the configuration, the tuning, Http, the
 * reporter, the executor and what it is attached to. Free it after the executor, the AppliedOsc and
 * the DriftRepair, which borrow its objects. */

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/node-view.h"
#include "daemon/restart-annotation.h"
#include "duties/applied-osc.h"
#include "duties/drift-repair.h"
#include "duties/replaced-units.h"
#include "duties/units-check.h"
#include "kube/kube-tuning.h"
#include "net/http.h"
#include "report/reporter.h"
#include "systemd/system-bus.h"
#include "systemd/unit-control.h"
#include "update/executor.h"
#include "util/macro.h"

typedef struct SystemdSide SystemdSide;

/* The bus is created, not connected yet (systemd_side_start()). */
int systemd_side_new(sd_event *event, const Config *config, const KubeTuning *tuning, Http *http,
                     Reporter *reporter, SystemdSide **ret) _warn_unused_result_;
SystemdSide *systemd_side_free(SystemdSide *s);
DEFINE_CLEANUP_FUNC(SystemdSide, systemd_side_free);

/* For the executor (ExecutorDeps.bus): valid while `s` lives. */
SystemBus *systemd_side_bus(const SystemdSide *s);

/* The first attempt, now; what talks to systemd is set up from inside when the bus is up. Fails
 * (-errno, *ret_error says why) when the bus or, with the bus up, the objects cannot be set up. */
int systemd_side_start(SystemdSide *s, Executor *executor, char **ret_error) _warn_unused_result_;
/* What was created before systemd was known: handed theirs now, or when the bus comes up later. */
void systemd_side_attach(SystemdSide *s, AppliedOsc *applied, DriftRepair *drift);

/* NULL until the bus was first up. */
UnitControl *systemd_side_units(const SystemdSide *s);
UnitsCheck *systemd_side_units_check(const SystemdSide *s);
ReplacedUnits *systemd_side_replaced(const SystemdSide *s);
RestartAnnotation *systemd_side_restarts(const SystemdSide *s);

/* The Node is there (`view` its decoded form, borrowed until the next call; NULL while undecodable
 * or absent): the health checks follow it. */
void systemd_side_set_node(SystemdSide *s, bool present, const NodeView *view);
/* The Node was seen (first sight, or back): the units check and the health checks start, each a
 * no-op when running; one that cannot start is said once and tried again with the next call. */
void systemd_side_start_node_duties(SystemdSide *s);
