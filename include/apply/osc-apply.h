/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Runs the remaining work of an OscChanges (core/osc-diff.h) on the sd_event loop, one item after
 * the other in the persisted order (docs/node-protocol.md §6.4), as far as the items are its own
 * (osc_applier_handles()):
 * file items through apply/osc-files (containerd's config.toml rendered by core/containerd-config; one
 * it cannot render is UnsupportedChange naming the criConfig field), unit items over D-Bus through
 * systemd/unit-control (EnableUnitFiles/DisableUnitFiles, Reload, StopUnit, RestartUnit, each
 * confirmed by its reply or JobRemoved; no blind waits). It stops at the first item that needs the
 * world outside the node (a secretRef file needs an uncached GET, an imageRef file a registry pull,
 * the kubelet health check an HTTP poll, a registry with readinessProbe a probe of its hosts before
 * its hosts.toml): `stopped` names it, and the owner runs it, marks it done like any item and starts
 * a new applier for the items after it (update/osc-runner).
 *
 * After each item the applier marks it done in the OscChanges and hands it to `items_done`, where
 * the owner persists it (so a SIGKILL resumes exactly after the last persisted item): a unit item or
 * a job at once; writes and removals of files, which are idempotent, together with the ones before
 * them once the applier returns to the event loop or stops (at the latest every 50 ms, so a
 * 10,000-file OSC never blocks the loop, and costs one fdatasync per batch, not per file). The one
 * exception is the agent restarting itself (a restart of `self_unit`): systemd stops us while that
 * job runs, so it is marked done and persisted first, and happens at most once. The first failing
 * item stops the run: `stopped` gets the failure code (FileApplyFailed, UnitApplyFailed,
 * UnsupportedChange), the path or unit, and the errno / D-Bus message; the item stays not done, so
 * the owner's retry (with backoff) starts there again. Unit commands are the exception, as upstream
 * runs them all at once: a failed restart or stop does not hold back the other units' commands; the
 * run fails with the first failed one after the last command, and only the failed ones are left.
 * A restart of the kubelet after containerd's (core/osc-diff.h orders containerd's first) is sent
 * only once containerd's socket accepts a connection, tried every 100 ms for up to 30 s
 * (docs/node-protocol.md §6.4 step 15).
 *
 * Ownership: the OscApplier borrows the UnitControl and the OscChanges (both must outlive it) and
 * owns its copies of the paths. Does not log: outcomes go to the owner. Callbacks never run from
 * inside the call that started the work. */

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "core/node-update.h"
#include "core/osc-diff.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct OscApplier OscApplier;

typedef struct OscApplyFailure {
        UpdateFailureCode code; /* FileApplyFailed, UnitApplyFailed, UnsupportedChange */
        const char *subject;    /* the path, unit or upstream */
        int error;              /* -errno */
        const char *detail;     /* human: "enable: Unit file x does not exist", "Permission denied" */
} OscApplyFailure;

typedef struct OscApplierCallbacks {
        /* Items `indices[0..n)` are done (in order); persist that now. A negative return stops the
         * run (the items stay done in memory but the owner knows they are not persisted). */
        int (*items_done)(OscApplier *a, const size_t *indices, size_t n, void *userdata);
        /* The run stopped at item `at`. `failure` NULL: at == n_items, every item is done; or item `at`
         * is not the applier's (osc_applier_handles() says no), every item before it is done and
         * persisted. Else the run failed at `at` (borrowed pointers, valid during the call). The
         * applier may be freed from here. */
        void (*stopped)(OscApplier *a, size_t at, const OscApplyFailure *failure, void *userdata);
        /* Optional: `path`, a unit file or drop-in, is masked (a symlink to /dev/null) and stays so;
         * `left_out` says what the applier did not do for it ("not written", "not written or
         * enabled", "not restarted"). Once per file and item (the owner names each file once per
         * OSC: core/osc-masked.h); the item is done all the same. */
        void (*masked)(OscApplier *a, const char *path, const char *left_out, void *userdata);
        /* Optional: containerd was restarted by this work list, and its socket did not answer within
         * `waited_usec`: the kubelet's restart is sent all the same. */
        void (*containerd_late)(OscApplier *a, const char *socket, uint64_t waited_usec, void *userdata);
} OscApplierCallbacks;

typedef struct OscApplierParams {
        const char *root_directory; /* osc.rootDirectory */
        const char *unit_directory; /* systemd.unitDirectory */
        const char *self_unit;      /* restart.selfUnit: its restart is marked done before it runs */
        const char *kubelet_unit;   /* kubelet.unit: its restart after containerd's waits for
                                     * <root>/run/containerd/containerd.sock to accept (NULL: never) */
        bool restore;               /* a drift repair: a unit's files are restored, nothing else in
                                     * its <name>.d removed (osc_restore_unit_files()) */
} OscApplierParams;

int osc_applier_new(sd_event *event, UnitControl *uc, OscChanges *changes, const OscApplierParams *p,
                    const OscApplierCallbacks *cb, void *userdata, OscApplier **ret);
OscApplier *osc_applier_free(OscApplier *a);
DEFINE_CLEANUP_FUNC(OscApplier, osc_applier_free);

/* Whether the applier runs `w` itself: everything but a secretRef file, an imageRef file, the kubelet
 * health check and a registry with readinessProbe. */
bool osc_applier_handles(const OscWork *w);

/* Starts at the first item not done (from a deferred event source, so callbacks never run inside). */
int osc_applier_start(OscApplier *a);
