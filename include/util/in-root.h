/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Directories below a root that the path resolution never leaves (osc.rootDirectory, docs/contract.md §9.5;
 * systemd.unitDirectory for unit files): every symlink met on the way, absolute or relative, and
 * every ".." are resolved as if the root were "/", like a chroot. An OSC file's directory that is a
 * symlink to /etc therefore stays <root>/etc, never the host's /etc. openat2(RESOLVE_IN_ROOT) does
 * the walk where the kernel has it (Linux 5.6); where it answers ENOSYS (older kernels, some seccomp
 * filters) the same walk runs here one component at a time with O_NOFOLLOW, each symlink read and
 * resolved against the root by hand. The last component of a file is never resolved here: callers
 * open the directory and act on the name with the *at() calls (a symlink there is replaced, not
 * followed). Does not log. */

#include <stdbool.h>
#include <sys/types.h>

#define IN_ROOT_SYMLINKS_MAX 40 /* as the kernel's MAXSYMLINKS: then -ELOOP */

/* Opens the directory `path` (absolute or relative: both start at the root) below `root_fd`,
 * O_RDONLY | O_DIRECTORY | O_CLOEXEC (a dirfd that fsync() and fdopendir() accept). -ENOENT if a
 * component is missing, -ENOTDIR if one is not a directory, -ELOOP after IN_ROOT_SYMLINKS_MAX
 * symlinks. */
int open_dir_in_root(int root_fd, const char *path, int *ret_fd);

/* The same, creating the missing directories with exactly `mode` (whatever the umask). A missing
 * component that is a dangling symlink is not created through: -ENOENT. */
int mkdir_p_in_root(int root_fd, const char *path, mode_t mode, int *ret_fd);

/* The canonical absolute path (as the host sees it) that `path` below `root_fd` names: its directory
 * resolved as open_dir_in_root() does, as far as it exists, then the components that do not exist
 * yet and the last one as written (it is never followed). -errno if the existing part cannot be
 * resolved (-ENOTDIR, -ELOOP, ...), -ENOENT if a component of the directory is a dangling symlink
 * (mkdir_p_in_root() creates nothing through it), or /proc is not mounted. */
int path_in_root_canonical(int root_fd, const char *path, char **ret);

/* Tests only: true makes every resolution take the component walk, as on a kernel without openat2. */
extern bool in_root_force_walk;
