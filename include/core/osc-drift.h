/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The start-up drift check (GNP §8 item 7, upstream bootstrappers/file_consistency_bootstrapper.go):
 * the files and unit files of the last-applied OSC compared with what is on the node, as a list of
 * findings that become core/v1 Warning Events with upstream's reasons and messages:
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
 * Only inline files with data are compared (secretRef and imageRef content is not at hand). Like
 * upstream nothing is repaired: the findings are reported, the next OSC change re-applies what it
 * changes. The files and units are the merged ones the applier writes (spec and status; upstream
 * looks at spec only). Other differences from upstream, each to avoid a false finding:
 *   - units inplace-agent replaces (CONTRACT §9.4; it never writes them) are skipped with their
 *     dependencies;
 *   - unit files and drop-ins are looked up where the applier writes them (the unit directory; a
 *     unit without content also in the OS's directories), not next to wherever the unit file was
 *     found;
 *   - UnitEnableMismatch is not checked: upstream's "listed by systemd" is not "enabled", and
 *     SystemdUnitsReady already reports the enable mismatches that matter.
 *
 * Pure: the caller's `read` callback does every read. */

#include <stdbool.h>
#include <stddef.h>

#include "core/osc-model.h"
#include "util/macro.h"

typedef enum OscDriftPlace {
        OSC_DRIFT_NODE_FILE,    /* an absolute OSC path (files, filePaths): below osc.rootDirectory */
        OSC_DRIFT_UNIT_FILE,    /* a unit name: the unit directory, else (`fallback`) the OS's */
        OSC_DRIFT_DROP_IN,      /* "<unit>.d/<drop-in>" in the unit directory */
} OscDriftPlace;

/* Reads one place: 0 with its content in *ret (NUL-terminated, size in *ret_size), or only whether
 * it exists when ret is NULL; -ENOENT when absent; another -errno when it cannot be read. For a unit
 * file `fallback` says whether the OS's unit directories count too. */
typedef int (*OscDriftRead)(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                            void *userdata);

typedef struct OscDriftFinding {
        const char *reason;     /* static */
        char *message;          /* owned */
} OscDriftFinding;

void osc_drift_findings_free(OscDriftFinding *f, size_t n);

/* The findings in upstream's order (files, then per unit: unit file, drop-ins, dependencies);
 * *ret is NULL and *ret_n 0 when nothing drifted. -ENOMEM; read errors are findings. */
int osc_drift_check(const OscModel *m, char *const *skip_units, OscDriftRead read, void *userdata,
                    OscDriftFinding **ret, size_t *ret_n);
