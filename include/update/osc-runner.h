/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The OSC's own work for the executor (docs/contract.md §9.2, docs/node-protocol.md §2.3 and §6.4):
 * everything an OSC asks for beyond the kubelet binary and the OS — files, unit files and drop-ins, unit
 * commands, containerd and registries.
 *
 *   osc_runner_prepare()  before every decision: for the current OSC, either "committed" (its osc.yaml
 *                         is the last-applied one), or the work list (apply/osc-state: the saved
 *                         remaining work of this checksum, else the diff against the baseline, saved
 *                         before anything runs; a corrupt bookkeeping file is moved aside with a
 *                         Warning Event and the work starts over). Fills the decider's OscWorkView;
 *                         its plan is a summary within a byte budget, the whole plan goes to the
 *                         journal and <stateDirectory>/last-computed-osc-plan.json.
 *   osc_runner_apply()    the APPLY_OSC action: walks the remaining items, persisting after each one
 *                         (a line in the done-log). A stretch of items apply/osc-apply does itself
 *                         (files, units over D-Bus) runs as one OscApplier, which stops at the next
 *                         item that needs the world outside the node; the runner does that one itself
 *                         (secretRef files: an uncached GET of the Secret; the kubelet's imageRef:
 *                         the kubelet store owns that binary; any other imageRef file: pulled and
 *                         verified by oci/file-stage into <stateDirectory>/osc-images, then linked
 *                         into place; the kubelet health check; a registry's readinessProbe), marks
 *                         it done like any item and goes on. Once every item is done it commits the
 *                         OSC as last applied. Only then does the decider get to write
 *                         checksum/cloud-config-data: the checksum is a promise.
 *
 * A file item at a controllers.token.syncConfigs[].path that removes the file (or, in a drift repair,
 * restores it) resyncs that config's token right after it (identity/token-sync.h).
 *
 * Before the first unit item runs, apply/osc-guard asks systemd what the agent, the kubelet and
 * containerd hang on: an item that would stop or restart them (core/unit-guard.h) fails the run
 * with UnitApplyFailed naming the unit and why, before anything of the OSC is written.
 *
 * A failing item stops the run with FileApplyFailed / UnitApplyFailed / UnsupportedChange and a
 * message naming the path or unit and the errno or D-Bus error; the item stays not done, so the
 * retry (the engine's back-off) starts there again.
 *
 * Ownership: the executor owns the OscRunner; the runner owns the work list, its plan JSON, the store of
 * imageRef files and the one operation of a run in flight (the guard, an applier's stretch, or the request,
 * probe or pull of one of its own items). The OSC it prepares it does not decode again: it holds a reference
 * to the OscDesired's model (decoded once at intake, immutable; core/osc.h) and a copy of its osc.yaml bytes
 * (what it commits as last applied), and never changes the executor's OscDesired. Everything in
 * OscRunnerDeps is borrowed and outlives the runner; the KubeClient comes later (osc_runner_set_kube()).
 * Logs what it decides: one journal line per prepared work list, per applied OSC, per item of its own done;
 * a failed run is the executor's to log (the `done` callback's code and message). */

#include "core/config.h"
#include "core/node-update.h"
#include "core/osc-protected.h"
#include "core/osc.h"
#include "identity/token-sync.h"
#include "kube/kube-client.h"
#include "net/http.h"
#include "oci/registry.h"
#include "report/reporter.h"
#include "systemd/unit-control.h"
#include "util/macro.h"

typedef struct OscRunner OscRunner;

typedef struct OscRunnerDeps {
        sd_event *event;
        const Config *config;
        Http *http;
        RegistryClient *registry; /* for imageRef files */
        UnitControl *units;       /* NULL until the bus was up: every run fails (UnitApplyFailed) */
        Reporter *reporter;       /* Warning Events (a corrupt state file moved aside); NULL: none */
        TokenSync *const *tokens; /* a removed token file resynced; NULL or *tokens NULL: none */
} OscRunnerDeps;

/* error >= 0: every item applied and the OSC committed. Else code and message say why. */
typedef void (*OscRunnerDone)(OscRunner *r, int error, UpdateFailureCode code, const char *message,
                              void *userdata);

int osc_runner_new(const OscRunnerDeps *deps, OscRunner **ret);
OscRunner *osc_runner_free(OscRunner *r);
DEFINE_CLEANUP_FUNC(OscRunner, osc_runner_free);

void osc_runner_set_kube(OscRunner *r, KubeClient *kube);
/* The UnitControl, once the system bus was first up (after start). */
void osc_runner_set_units(OscRunner *r, UnitControl *units);

/* The checksum of the newest OSC (NULL: none). While a run of an older one waits for a registry's
 * readinessProbe, that wait ends at once: the item fails (FileApplyFailed, "... supersedes this one")
 * and the newer OSC is decided on next, instead of after the probe's 5-minute deadline. */
void osc_runner_set_desired(OscRunner *r, const char *checksum);

/* Prepares the work of `osc` (NULL: none) if it is not prepared yet and fills *ret (pointers into
 * the runner, valid until the next call). `os_version` is the running OS version for the diff's
 * operatingSystem flag. Nothing is prepared while the Node already carries osc's checksum; `node`
 * NULL: the Node does not exist (a fresh node's first OSC is applied before it). A work
 * list that could not be computed for a reason that can go away (the state directory full or
 * unreadable) is computed again from `now_usec` >= ret->retry_usec (back-off 1 s doubling to 5 min;
 * a Warning Event per distinct error); one the desired state is at fault for, at every call. */
void osc_runner_prepare(OscRunner *r, const OscDesired *osc, const NodeView *node, const char *os_version,
                        uint64_t now_usec, OscWorkView *ret);

/* Applies the prepared work of `checksum`; `done` is called from the loop, never from inside. 0, or
 * -ESTALE when the prepared work is for another checksum (the OSC moved on), -ENODATA when its work
 * list could not be computed (osc_runner_error() says why), -EBUSY while a run is in flight, -errno
 * when it cannot start. */
int osc_runner_apply(OscRunner *r, const char *checksum, OscRunnerDone done, void *userdata);

/* Why the prepared OSC has no work list (NULL: it has one), and its failure code. */
const char *osc_runner_error(const OscRunner *r, UpdateFailureCode *ret_code);

/* Right before the checksum of an applied OSC is written (docs/node-protocol.md §6.4 step 22, upstream's
 * reconcile end "once the Node exists", docs/contract.md §9.6): the kubelet's bootstrap kubeconfig and GNA's
 * bootstrap token below osc.rootDirectory are removed — by then the kubelet registered with a certificate of
 * its own (a CA rotation's re-bootstrap included: it passed the health check) and the agent has its own. The
 * agent's own bootstrapKubeconfig is kept. Best effort: a failure is logged. */
void osc_runner_retire_bootstrap_credentials(OscRunner *r);

/* A drift repair (duties/drift-repair.h, core/osc-drift-plan.h): `c` (borrowed until `done`) runs
 * like the prepared work does — the OSC guard first, then the applier and the runner's own items (a
 * secretRef file's Secret fetched, an imageRef file pulled or linked again from the image store, the
 * kubelet health check) — but in restore mode (a unit's <name>.d keeps what
 * the OSC does not name), with nothing persisted and nothing committed: the next drift round sees
 * whatever is left. Items done are marked in `c`. 0, -EBUSY while a run is in flight, -ENOTCONN
 * without systemd, -errno when it cannot start. */
int osc_runner_repair(OscRunner *r, OscChanges *c, OscRunnerDone done, void *userdata);

/* Whether an OSC's work is prepared and not committed, or, before anything was prepared (at start),
 * saved (<stateDirectory>/last-computed-osc-changes.json): its items may be half applied, so nothing
 * may be restored to the last-applied OSC meanwhile. */
bool osc_runner_work_pending(const OscRunner *r);

/* How this runner decodes an OSC (the lower-case host name for files with a hostName, the agent's
 * PATH, Config.path, for containerd's injected drop-in) and the agent's own files no OSC file may
 * write: for the intake (update/osc-intake.h), which decodes the model the runner applies, and the
 * drift repair, which must read the last-applied OSC as it was applied. Valid while `r` lives. */
const OscModelOptions *osc_runner_model_options(const OscRunner *r);
const OscProtected *osc_runner_own_files(const OscRunner *r);

/* Stops a run in flight without callback (the item in flight stays not done). */
void osc_runner_cancel(OscRunner *r);
