/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The versioned kubelet store on the node (docs/contract.md §7, §8.1–8.3), an oci/file-store.h of the
 * kubelet's binaries with the kubelet.binaryPath symlink on top:
 *   <stateDirectory>/kubelet/<version>/kubelet       0755, fsynced; <version> without a leading "v"
 *   <stateDirectory>/kubelet/<version>/source.json   where it came from (image, digests)
 *   kubelet.binaryPath -> <stateDirectory>/kubelet/<version>/kubelet   switched atomically
 *   <stateDirectory>/staging/                        scratch space on the same filesystem
 * Owns its FileStore and paths. Blocking local file I/O (renames, fsyncs, small files; adoption may
 * copy one binary once); no event loop, does not log. */

#include <stdbool.h>

#include "oci/file-store.h"
#include "util/macro.h"

#define KUBELET_ADOPTED_VERSION "adopted"

typedef struct KubeletStore KubeletStore;

/* Creates <stateDirectory>/kubelet and <stateDirectory>/staging if missing. keep_versions >= 1. */
int kubelet_store_new(const char *state_directory, const char *binary_path, unsigned keep_versions,
                      KubeletStore **ret);
KubeletStore *kubelet_store_free(KubeletStore *s);
DEFINE_CLEANUP_FUNC(KubeletStore, kubelet_store_free);

/* The store of the binaries (where oci/file-stage.h stages a version), borrowed while `s` lives. */
FileStore *kubelet_store_files(const KubeletStore *s);
const char *kubelet_store_root(const KubeletStore *s); /* <stateDirectory>/kubelet */
const char *kubelet_store_binary_path(const KubeletStore *s);

/* The version binaryPath points at. -ENOENT if binaryPath does not exist, -EMEDIUMTYPE if it is a
 * regular file (not yet adopted), -EXDEV if it is a symlink that does not point into the store. */
int kubelet_store_current(const KubeletStore *s, char **ret_version);

/* Points binaryPath at <root>/<version>/kubelet: a new symlink under a temporary name in binaryPath's
 * directory, renamed over binaryPath, directory fsynced; binaryPath never is missing or partial.
 * *ret_previous (optional) is the version it pointed at before, NULL if none. -ENOENT if the version
 * is not in the store. Switching back is the same call with the previous version. `version` NULL:
 * back to no kubelet at all (a fresh node's first one failed): binaryPath, our link into the store,
 * is removed (-EMEDIUMTYPE, -EXDEV: it is not ours, and stays; nothing there: done). */
int kubelet_store_switch(const KubeletStore *s, const char *version, char **ret_previous);

/* Removes stored versions beyond keep_versions, oldest installed first. Never removes the version
 * binaryPath points at nor any in `protect` (NULL-terminated, may be NULL; the rollback version goes
 * here). Returns the number of versions removed. */
int kubelet_store_gc(const KubeletStore *s, const char *const *protect);

/* 1 if binaryPath is a regular file that adoption would take over, 0 otherwise. */
int kubelet_store_needs_adoption(const KubeletStore *s);
/* docs/contract.md §8.2: moves the regular file at binaryPath into the store under `version` (what its
 * --version reported; NULL or invalid → "adopted"), then replaces binaryPath by a symlink atomically.
 * The file is hard-linked into the store when it shares the filesystem, else copied (fsynced) first,
 * so binaryPath stays valid throughout. *ret_version (optional) is the version used. */
int kubelet_store_adopt(const KubeletStore *s, const char *version, char **ret_version);
