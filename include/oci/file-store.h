/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A versioned store of files pulled out of images (oci/file-stage.h), one file per version:
 *   <root>/<version>/<file name>     0755, fsynced
 *   <root>/<version>/source.json     where it came from (image, digests)
 *   <staging>/                       scratch space on the same filesystem (staged files are renamed in)
 * The kubelet's binaries are one such store (kubelet/kubelet-store.h adds the kubelet.binaryPath
 * symlink on top); the OSC's other imageRef files another (update/osc-runner, keyed by image and path).
 * Owns nothing but paths. Blocking local file I/O (renames, fsyncs, small files); no event loop, does
 * not log. */

#include <stdbool.h>

#include "util/macro.h"

#define FILE_STORE_VERSION_MAX 128

typedef struct FileStore FileStore;

/* Creates `root` (0755) and `staging` (0700) if missing. `file_name` is the name of the file in each
 * version's directory ("kubelet"). */
int file_store_new(const char *root, const char *staging, const char *file_name, FileStore **ret);
FileStore *file_store_free(FileStore *s);
DEFINE_CLEANUP_FUNC(FileStore, file_store_free);

const char *file_store_root(const FileStore *s);
const char *file_store_staging(const FileStore *s);
const char *file_store_file_name(const FileStore *s);

/* A version usable as a directory name: [A-Za-z0-9][A-Za-z0-9._+-]*, at most FILE_STORE_VERSION_MAX. */
bool file_store_version_is_valid(const char *v);

/* <root>/<version>/<file name>. */
int file_store_path(const FileStore *s, const char *version, char **ret);
/* 1 if <root>/<version>/<file name> is a regular executable file, 0 if not. */
int file_store_has(const FileStore *s, const char *version);

/* Moves `staged_path` (a verified file on the store's filesystem, e.g. under staging/) to
 * <root>/<version>/<file name> with mode 0755, replacing an older copy; fsyncs file and directories.
 * `source_json` (may be NULL) is written next to it as source.json. -EXDEV if staged_path lives on
 * another filesystem. */
int file_store_install(const FileStore *s, const char *version, const char *staged_path,
                       const char *source_json);
/* source.json of a stored version (-ENOENT if none). */
int file_store_read_source(const FileStore *s, const char *version, char **ret);

/* Removes stored versions beyond `keep`, oldest installed first; never one in `protect`
 * (NULL-terminated, may be NULL), and those count against `keep` first. Returns the number of
 * versions removed. */
int file_store_gc(const FileStore *s, unsigned keep, const char *const *protect);
