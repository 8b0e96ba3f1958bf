/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The persisted side of applying an OSC (docs/contract.md §9.2, docs/node-protocol.md §2.3 steps 1-2 and 6,
 * §6.4 step 19): <stateDirectory>/last-applied-osc.yaml          the OSC whose every change is applied
 * (0600) <stateDirectory>/last-computed-osc-changes.json the work list for one checksum, written once (0600)
 *   <stateDirectory>/last-computed-osc-changes.done which of its items are done: one line per item,
 *                                                   appended and fdatasync()ed as each one finishes
 *   <stateDirectory>/last-computed-osc-plan.json    the whole plan of the last computed work list
 * and the handover baseline <rootDirectory>/var/lib/gardener-node-agent/last-applied-osc.yaml when
 * this agent has applied nothing yet on a node gardener-node-agent ran on.
 *
 * Bookkeeping is O(n) bytes for n items: the list once, then a few bytes per item (upstream rewrites
 * its whole remaining-work file after every item; only the name is shared, the format is ours, and
 * a handover never reads upstream's file: the diff against its last-applied OSC covers the same).
 * A SIGKILL or power loss after any item resumes right after the last item in the done-log; a torn
 * last line (a kill in the middle of an append) counts as not done.
 *
 * osc_state_prepare() is "compute the changes" of upstream's reconcile: resume the saved work if it
 * is for this checksum, else diff against the baseline and save the new work before returning.  A work
 * list with a file among the agent's own (core/osc-protected.h) is refused (-EPERM, *ret_error naming
 * it) before it is saved, so nothing of that OSC is ever written; so is one with a file whose directory
 * cannot be resolved below the root (a dangling symlink: -ENOENT, retried by the owner). Both only
 * with `protected` set. A
 * corrupt bookkeeping file (truncated, not decodable, a done-log that does not match its list) is
 * renamed to <name>.corrupt and the work starts over from the last good state (applying an item is
 * idempotent); *ret_warning then says which file and why. The owner runs the work with
 * apply/osc-apply (osc_state_save_done() with the items it hands over) and, once every item is done, calls
 * osc_state_commit(). Small blocking reads and atomic writes of local files; does not log (-errno and
 * *ret_error). Owns nothing between calls. */

#include <stdbool.h>
#include <stddef.h>

#include "core/osc-diff.h"
#include "core/osc-protected.h"

#define OSC_STATE_LAST_APPLIED "last-applied-osc.yaml"
#define OSC_STATE_CHANGES "last-computed-osc-changes.json"
#define OSC_STATE_DONE "last-computed-osc-changes.done"
#define OSC_STATE_PLAN "last-computed-osc-plan.json"
#define OSC_STATE_CORRUPT_SUFFIX ".corrupt"
#define OSC_STATE_GNA_LAST_APPLIED "/var/lib/gardener-node-agent/last-applied-osc.yaml"

typedef struct OscPrepareInput {
        const char *state_directory;
        const char *root_directory; /* for the GNA handover file */
        const OscModel *model;      /* the new OSC, decoded once at intake (borrowed); NULL:
                                     * decoded here from yaml with model_options */
        const char *yaml;           /* the new osc.yaml */
        size_t size;
        const char *checksum;          /* the Secret's checksum/data-script */
        OscModelOptions model_options; /* hostname, PATH for the containerd drop-in */
        const char *current_os_version;
        char *const *replaced_units;
        const OscProtected *protected; /* the agent's own files; NULL: no check at all */
        const char *self_unit;         /* restart.selfUnit */
} OscPrepareInput;

typedef enum OscBaseline {
        OSC_BASELINE_RESUMED,      /* saved work for this checksum */
        OSC_BASELINE_LAST_APPLIED, /* diffed against our last-applied OSC */
        OSC_BASELINE_HANDOVER,     /* diffed against gardener-node-agent's */
        OSC_BASELINE_NONE,         /* first apply */
} OscBaseline;

/* *ret_warning (may be NULL): set when a corrupt file was moved aside, else NULL. Errors: the new
 * OSC does not decode (-EINVAL, -EBADMSG, -EFBIG, -ENODATA, naming the field), or a file cannot be
 * read or written (-errno naming the path: retriable). */
int osc_state_prepare(const OscPrepareInput *in, OscChanges **ret, OscBaseline *ret_baseline,
                      char **ret_warning, char **ret_error);
/* The whole work list, written once: replaces the saved list and forgets its done-log. */
int osc_state_save_changes(const char *state_directory, const OscChanges *c);
/* Whether an OSC was ever applied on this node: a last-applied OSC exists, ours or (below
 * `root_directory`) gardener-node-agent's. False on a fresh node, until its first OSC is committed;
 * an error reading counts as "applied" (the cautious answer: the first-OSC rules do not apply). */
bool osc_state_any_applied(const char *state_directory, const char *root_directory);
/* The last-applied OSC as the readers after an apply see it (the units check, the success rule's
 * units check): ours, else gardener-node-agent's below `root_directory`, decoded with `opts` into
 * *ret, its path in *ret_path. -ENOENT when neither exists (no message); another read or decode
 * error sets *ret_error naming the file. Unlike osc_state_prepare(), nothing is moved aside: a reader
 * does not repair, the next apply does. */
int osc_state_read_applied(const char *state_directory, const char *root_directory,
                           const OscModelOptions *opts, OscModel **ret, char **ret_path, char **ret_error);
/* Items `indices[0..n)` of the saved list `c` are done: a line each appended to the done-log, in one
 * write, and fdatasync()ed. */
int osc_state_save_done(const char *state_directory, const OscChanges *c, const size_t *indices, size_t n);
/* Every item is done: the new OSC becomes the last-applied one and the saved work goes away. */
int osc_state_commit(const char *state_directory, const char *yaml, size_t size);
