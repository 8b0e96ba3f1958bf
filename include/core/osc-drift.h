/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The node's drift from its last-applied OSC (docs/node-protocol.md §8 item 7, upstream
 * bootstrappers/file_consistency_bootstrapper.go from gardener#13678; docs/contract.md §9.8): what the
 * last-applied OSC put on the node compared with what is there now, as a list of findings. The
 * duty (duties/drift-repair) turns them into a repair (core/osc-drift-plan.h) and one Warning Event
 * per round; the journal gets each finding with upstream's reason and message:
 *   FileMissing      "File <path> is missing"
 *   FileReadError    "Failed to read file <path>"
 *   FileDecodeError  "Failed to decode base64 content for file <path>"  (kept for completeness: the
 *                    OSC decoder already rejects bad base64, as it rejects other encodings)
 *   FileMismatch     "File <path> mismatch: expected <sha256 hex>, actual <sha256 hex>"
 *   UnitFileMissing  "Unit file <unit> is missing"  (then its drop-ins and dependencies are skipped)
 *   UnitMismatch     "Unit <unit> content mismatch"
 *   DropInMissing    "Drop-in <name> for unit <unit> is missing"
 *   DropInMismatch   "Drop-in <name> for unit <unit> mismatch"
 *   DependencyMissing "Dependency file <path> for unit <unit> is missing"
 *   UnitEnableMismatch "Unit <unit> enable state mismatch: expected <bool>, actual <bool>"
 * and these of the agent's own, for what upstream does not compare:
 *   FileModeMismatch "File <path> mode mismatch: expected 0644, actual 0600"
 *   UnitInactive     "Unit <unit> is inactive but should be active"
 *
 * Two passes, both pure:
 *   - osc_drift_check_disk(), through the caller's `read` callback: every file of the OSC (presence
 *     and permission bits; the content of inline files too: a secretRef file's content would cost a
 *     GET of its Secret each round, an imageRef file's a hash of a binary), the unit files and
 *     drop-ins, the units' filePaths, containerd's config.toml and each registry's hosts.toml as the
 *     applier renders them;
 *   - osc_drift_check_units(), from what systemd says about each unit (the caller reads it):
 *     enablement (as the applier left it: enabled unless `enable: false`; a unit file state other
 *     than enabled/disabled, e.g. static, indirect or masked, is no drift) and units the OSC starts
 *     that are "inactive (dead)" (not a oneshot or triggered unit resting between runs; a failed unit
 *     is SystemdUnitsReady's, not drift).
 * The model is the merged one the applier writes (spec and status; upstream looks at spec only).
 * Other differences from upstream, each to avoid a false finding:
 *   - units inplace-agent replaces (docs/contract.md §9.4; it never writes them) are skipped with their
 *     dependencies; so is the kubelet binary (the kubelet store's: staged, switched, rolled back);
 *   - unit files and drop-ins are looked up where the applier writes them (the unit directory; a
 *     unit without content also in the OS's directories), not next to wherever the unit file was
 *     found; a masked one (a symlink to /dev/null) is the admin's decision, no drift;
 *   - empty inline files are compared too (upstream skips them; the applier writes them). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/osc-model.h"
#include "core/unit-health.h"
#include "util/macro.h"

typedef enum OscDriftPlace {
        OSC_DRIFT_NODE_FILE, /* an absolute OSC path (files, filePaths, config.toml, hosts.toml): below
                                osc.rootDirectory */
        OSC_DRIFT_UNIT_FILE, /* a unit name: the unit directory, else (`fallback`) the OS's */
        OSC_DRIFT_DROP_IN,   /* "<unit>.d/<drop-in>" in the unit directory */
} OscDriftPlace;

/* A read's answer besides 0 and -errno: the unit file or drop-in is masked. */
#define OSC_DRIFT_MASKED 1
/* The most a read returns (-EFBIG beyond): more than any content an OSC carries (core/osc.h). */
#define OSC_DRIFT_READ_MAX (4 * 1024 * 1024)

/* Reads one place: 0 with its permission bits in *ret_mode (if not NULL) and, when ret is not NULL,
 * its content in *ret (NUL-terminated, size in *ret_size); OSC_DRIFT_MASKED for a unit file or
 * drop-in that is a symlink to /dev/null; -ENOENT when absent; -EFBIG when larger than
 * OSC_DRIFT_READ_MAX; another -errno when it cannot be read.
 * For a unit file `fallback` says whether the OS's unit directories count too. */
typedef int (*OscDriftRead)(OscDriftPlace place, const char *name, bool fallback, char **ret,
                            size_t *ret_size, uint32_t *ret_mode, void *userdata);

/* What a finding is about, and so what restoring it means. */
typedef enum OscDriftKind {
        OSC_DRIFT_FILE,              /* subject: an OSC file's path */
        OSC_DRIFT_CONTAINERD_CONFIG, /* subject: config.toml's path */
        OSC_DRIFT_REGISTRY,          /* subject: the registry's upstream (its hosts.toml) */
        OSC_DRIFT_UNIT_FILES,        /* subject: the unit whose file or drop-in drifted */
        OSC_DRIFT_UNIT_ENABLEMENT,   /* subject: the unit */
        OSC_DRIFT_UNIT_INACTIVE,     /* subject: the unit */
        OSC_DRIFT_REPORT_ONLY,       /* nothing the OSC lets the agent restore: a file it cannot
                                      * read, a dependency that is no OSC file, an OS unit that is
                                      * gone (subject: the path or unit) */
        _OSC_DRIFT_KIND_MAX,
        _OSC_DRIFT_KIND_INVALID = -EINVAL,
} OscDriftKind;

typedef struct OscDriftFinding {
        const char *reason; /* static */
        char *message;      /* owned */
        OscDriftKind kind;
        char *subject; /* owned */
} OscDriftFinding;

typedef struct OscDrift {
        OscDriftFinding *items; /* owned; in the order found */
        size_t n_items;
} OscDrift;

void osc_drift_done(OscDrift *d);

typedef struct OscDriftParams {
        const OscModel *model;
        char *const *skip_units; /* osc.replacedUnits (NULL: none) */
        const char *skip_file;   /* kubelet.binaryPath (NULL: none) */
} OscDriftParams;

/* Whether the units pass leaves `unit` out (the caller reads systemd only about the others). */
bool osc_drift_skips_unit(const OscDriftParams *p, const char *unit);

/* The disk pass, findings appended to *d in upstream's order (files, containerd, then per unit: unit
 * file, drop-ins, dependencies). -ENOMEM; read errors are findings. */
int osc_drift_check_disk(const OscDriftParams *p, OscDriftRead read, void *userdata, OscDrift *d);

/* The units pass over what systemd said (`states[i].name` names the unit; .enabled is not used;
 * unit_file_state NULL: not read). Findings appended to *d in the order of `states`. -ENOMEM. */
int osc_drift_check_units(const OscDriftParams *p, const UnitHealthState *states, size_t n, OscDrift *d);
