/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The file side of applying an OSC (docs/node-protocol.md §6.2, §6.4 steps 5, 9, 17; docs/contract.md §9.5):
 * OSC files below osc.rootDirectory, unit files and drop-ins in systemd.unitDirectory, containerd's
 * hosts.toml, the kubelet's cpu_manager_state. Small blocking operations on local files, like the state
 * file; each is idempotent, so the one that a SIGKILL interrupted can simply run again. Every write is
 * atomic (temporary file in the same directory, fsync, rename, fsync of the directory) with its mode set
 * explicitly, so a reader never sees half a file and the umask does not matter.
 *
 * Symlinks (never written through): a target's directory is resolved below the root it belongs to (the root
 * directory, or the unit directory for unit files) as in a chroot (util/in-root.h), so a parent that
 * is a symlink never leads outside; the target itself is never followed: a symlink there is replaced
 * by the file (renamed over), a mode is set on the file only, a removal removes the link. A unit
 * file or drop-in that is masked (a symlink to /dev/null) is the one exception: it is left masked.
 *
 * Does not log: -errno comes back, the caller names the path. Owns nothing between calls. */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/osc-model.h"

#define OSC_CONTAINERD_CERTS_DIR "/etc/containerd/certs.d"
#define OSC_CPU_MANAGER_STATE "/var/lib/kubelet/cpu_manager_state"

/* Writes `data` to root+path with `mode`, creating missing parent directories 0755. With
 * `if_changed`, a file that already has this content only gets its mode enforced.
 * Returns 1 if the content was written, 0 if it was already there. */
int osc_write_file(const char *root, const char *path, const void *data, size_t size, mode_t mode,
                   bool if_changed);

/* Installs the verified file `source` (an imageRef file staged from its image) as root+path with
 * `mode`: hard-linked under a temporary name in the target's directory (copied when `source` is on
 * another filesystem), fsynced, renamed over the target, the directory fsynced. `source` keeps its
 * content; its mode becomes `mode` too when linked. */
int osc_install_file(const char *root, const char *path, const char *source, mode_t mode);

/* Removes root+path (a symlink there: the link); a missing file or directory is success. */
int osc_remove_file(const char *root, const char *path);

/* Unit file (only when the unit has content) and drop-ins, mode 0600, written only when they differ;
 * the drop-ins in `deleted` are removed, and a unit without drop-ins loses its whole <name>.d
 * directory (upstream's RemoveAll). A masked unit file or drop-in is neither written nor removed:
 * its path is appended to *masked (if not NULL) for the caller to report. Returns 1 if anything on
 * disk changed. */
int osc_write_unit_files(const char *unit_dir, const OscUnit *u, char *const *deleted, char ***masked);

/* A drift repair's: the unit file and drop-ins written where they differ, nothing removed (another
 * file in <name>.d is not the OSC's to take). Masked ones as above. 1 if anything changed. */
int osc_restore_unit_files(const char *unit_dir, const OscUnit *u, char ***masked);

/* Whether the unit file of `name` in unit_dir is masked (0/1). */
int osc_unit_masked(const char *unit_dir, const char *name);

/* For a deleted unit: whether its unit file exists in unit_dir (0/1), then removing it and its
 * drop-ins (and <name>.d once empty); masked ones stay. */
int osc_unit_file_exists(const char *unit_dir, const char *name);
int osc_remove_unit_files(const char *unit_dir, const OscUnit *u);

/* root/etc/containerd/certs.d/<upstream>/hosts.toml (0644, as upstream), and its removal. */
int osc_write_registry(const char *root, const OscRegistry *g);
int osc_remove_registry(const char *root, const char *upstream);

/* The directories containerd's config lives in (docs/node-protocol.md §6.4 step 5). */
int osc_ensure_containerd_dirs(const char *root);

/* rm -rf of `path`, not following symlinks. A missing directory is success. */
int osc_remove_tree(const char *path);
