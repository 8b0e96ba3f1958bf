/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Small blocking file helpers for local files (config, state.json, os-release, tokens).
 * Never used on network file systems or for large artifacts. Does not log. */

#include <stddef.h>
#include <sys/types.h>

/* Reads the whole file; NUL-terminates the buffer (size excludes the NUL).
 * -EFBIG if larger than max_size, -EISDIR for a directory, -EBADFD for anything else that is not a
 * regular file (a FIFO, socket or device: never waited on), -errno otherwise. */
int read_full_file(const char *path, size_t max_size, char **ret_data, size_t *ret_size);
/* The same for an open file (read from its current offset; the caller keeps the fd). */
int read_full_fd(int fd, size_t max_size, char **ret_data, size_t *ret_size);

/* write() until all of `data` is written (EINTR retried); -errno. */
int write_full(int fd, const void *data, size_t size);

/* Atomically replaces `path` with `data`: write to a temporary name in the same directory,
 * fsync, rename over the target, fsync the directory (docs/contract.md §7). */
int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode);
/* The same for `name` in the directory `dir_fd`: nothing but that directory is resolved, and a
 * symlink at `name` is replaced, never followed. */
int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t size, mode_t mode);
/* Creates the temporary file `tmp` in `dir_fd` afresh (O_EXCL, O_NOFOLLOW: whatever had that name,
 * a leftover of a kill or a symlink, is removed first). Returns the fd or -errno. */
int create_temp_at(int dir_fd, const char *tmp, mode_t mode);

/* The temporary name write_file_atomic() uses for `path`: "<dir>/.<name>.tmp" (for a bare name,
 * ".<name>.tmp"). */
int write_file_atomic_temp_name(const char *path, char **ret);

/* fsync() the directory that contains `path`. */
int fsync_parent_dir(const char *path);
/* fsync() the directory `dir` itself. */
int fsync_directory(const char *dir);

/* `path` (absolute) below `root` (osc.rootDirectory, docs/contract.md §9.5); "/" leaves it as it is. -EINVAL
 * for a relative path. */
int path_below_root(const char *root, const char *path, char **ret);

/* `to` (created or truncated) becomes a copy of `from` with exactly `mode`, fsynced. -EIO if `from`
 * shrank while being copied. */
int copy_file(const char *from, const char *to, mode_t mode);
/* The same into the open file `out` (empty, writable; the caller keeps it). */
int copy_file_to_fd(const char *from, int out, mode_t mode);

/* mkdir -p; the components it creates get exactly `mode`, whatever the umask. */
int mkdir_parents(const char *path, mode_t mode);
