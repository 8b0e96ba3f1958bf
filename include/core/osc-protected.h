/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's own files, which no OSC file may write or remove: its state directory (the
 * kubelet store, state.json, the saved work list), its configuration directory, its binary, and its
 * unit files and drop-in directories. An OSC file at /var/lib/inplace-agent/kubelet/1.31.4/kubelet
 * once overwrote the verified kubelet in the store, and nothing could roll that back.
 *
 * Each entry is a canonical absolute path as the host sees it (the owner resolves them when the agent
 * starts); a path is protected when it is an entry or lies below one. The check runs when the work
 * list is prepared, before anything of the OSC is written, on the canonical path each file item
 * would be written at (the owner's `canonicalize`: below osc.rootDirectory, its directory's
 * symlinks resolved), so a refused OSC writes nothing. Pure: the I/O is the caller's callback. */

#include <stddef.h>

#include "core/osc-diff.h"
#include "util/macro.h"

typedef struct OscProtectedPath {
        char *path;       /* owned: canonical, absolute, without a trailing slash */
        const char *what; /* static: "state directory", "binary", ... */
} OscProtectedPath;

typedef struct OscProtected {
        OscProtectedPath *items; /* owned */
        size_t n_items;
} OscProtected;

/* Adds `canonical` (an absolute path; "/" and relative paths are refused with -EINVAL: they would
 * protect everything or nothing). A duplicate is not added twice. */
int osc_protected_add(OscProtected *p, const char *canonical, const char *what);
void osc_protected_done(OscProtected *p);

/* The entry `canonical` is or lies below; NULL if none. */
const OscProtectedPath *osc_protected_find(const OscProtected *p, const char *canonical);

/* Where root+`path` would be written: a canonical absolute path (*ret owned by the caller), or
 * -errno. */
typedef int (*OscCanonicalize)(const char *path, char **ret, void *userdata);

/* Every file item not done yet (write, imageRef, removal) whose canonical path is protected: -EPERM
 * with *ret_error "<path>: inside the agent's <what> <entry> ...", naming the OSC path. A write whose
 * path cannot be canonicalized (a component of its directory is a dangling symlink, no directory,
 * -ELOOP) could not be written either: that -errno with *ret_error naming the path, so the OSC fails
 * before its first item rather than at this one (a removal there passes: nothing to remove).
 * -ENOMEM. */
int osc_changes_check_protected(const OscChanges *c, const OscProtected *p, OscCanonicalize canonicalize,
                                void *userdata, char **ret_error);
