/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Finds one file in the layers of a container image and extracts only that file (libarchive) into a
 * staging directory the caller owns, on the filesystem where it will be installed. Blocking local
 * file I/O on a layer blob that is verified, or still downloading through a feed (then the caller
 * installs the result only after verification); no event loop, does not log.
 *
 * Safety (docs/contract.md §8.6): every entry of a layer that is read is checked, not only the one we want,
 * and one unsafe entry fails the whole layer with -EXDEV: an absolute path, a ".." component, a
 * hard link whose target is unsafe, a symbolic link whose relative target climbs above the image
 * root, any entry whose path runs through a symbolic link defined earlier in the same layer, and
 * device nodes. Absolute symlink targets are allowed: in an image they are relative to the image
 * root, and nothing here ever follows a link. The entry's own path never reaches the disk: the file is
 * written under a name the caller chooses, through archive_write_disk with the SECURE_* flags as a
 * second line of defence.
 *
 * Limits per layer (decompression bombs): number of entries (-E2BIG), path length (-ENAMETOOLONG),
 * sum of the entries' sizes and of the bytes coming out of the decompressor (-EFBIG, checked at each
 * header, so a single huge entry is refused before any of it is inflated), size of the wanted file
 * (-EFBIG). The wanted path must be a regular file (or a hard link to one): anything else is
 * -EMEDIUMTYPE. A layer that is not a tar (or gzip/zstd-compressed tar) is -EBADMSG; no room for the
 * file is -ENOSPC.
 *
 * Layer semantics (OCI image-spec "Applying Changesets"): layers are applied base first, so the top
 * layer wins; callers ask the top layer first and go down only while the result is
 * ARCHIVE_LOOKUP_ABSENT. Whiteouts ".wh.<name>" and opaque markers ".wh..wh..opq" hide lower layers'
 * files, but never files of their own layer; a non-directory at a parent path hides the lower
 * directory. */

#include <stdint.h>
#include <sys/types.h>

#include "oci/digest.h"
#include "oci/layer-feed.h"
#include "util/macro.h"

typedef struct ArchiveLimits {
        uint64_t max_entries;   /* per layer */
        size_t max_path;        /* bytes of one entry path (components at most NAME_MAX) */
        uint64_t max_unpacked;  /* sum of entry sizes per layer */
        uint64_t max_file_size; /* the extracted file */
} ArchiveLimits;

/* Generous for a kubelet/hyperkube image (a ~120 MB binary, a few hundred MB unpacked). */
#define ARCHIVE_LIMITS_DEFAULT                                     \
        ((ArchiveLimits) {                                         \
                .max_entries = 1000000,                            \
                .max_path = 4096,                                  \
                .max_unpacked = UINT64_C(4) * 1024 * 1024 * 1024,  \
                .max_file_size = UINT64_C(1) * 1024 * 1024 * 1024, \
        })

typedef enum ArchiveLookup {
        ARCHIVE_LOOKUP_ABSENT,        /* not in this layer: look in the next lower one */
        ARCHIVE_LOOKUP_FOUND,         /* extracted */
        ARCHIVE_LOOKUP_WHITEOUT,      /* deleted here by a .wh. entry for it or a parent */
        ARCHIVE_LOOKUP_OPAQUE,        /* a parent directory is opaque here */
        ARCHIVE_LOOKUP_NOT_DIRECTORY, /* a parent path is a non-directory here */
        _ARCHIVE_LOOKUP_MAX,
        _ARCHIVE_LOOKUP_INVALID = -EINVAL,
} ArchiveLookup;

typedef struct ArchiveExtractResult {
        ArchiveLookup lookup;
        uint64_t size;      /* FOUND: bytes of the extracted file */
        mode_t mode;        /* FOUND: permission bits in the image */
        Digest digest;      /* FOUND: SHA-256 of the extracted file, hashed as it was written */
        uint64_t n_entries; /* entries read */
        uint64_t unpacked;  /* sum of entry sizes read */
} ArchiveExtractResult;

/* Reads the layer at `layer_fd` (tar, tar+gzip or tar+zstd; the fd is not consumed and is read from
 * its current position) looking for `file_path` (absolute or relative to the image root, e.g.
 * "/kubelet"). When found, writes it to "<staging_dir>/<out_name>" (mode 0600, fsynced; replaced if it
 * exists). On failure nothing is left at that name, and *ret_message (optional, owned by the caller)
 * says which entry and why. */
int archive_extract_layer(int layer_fd, const char *file_path, const char *staging_dir, const char *out_name,
                          const ArchiveLimits *limits, ArchiveExtractResult *ret,
                          char **ret_message) _warn_unused_result_;

/* The same on a layer that is still being downloaded: reads wait on `feed` for bytes that are not
 * final yet (oci/layer-feed.h). A feed that is ended with an error or started over makes this fail
 * (its result is never to be installed). feed = NULL is archive_extract_layer(). */
int archive_extract_layer_fed(int layer_fd, LayerFeed *feed, const char *file_path, const char *staging_dir,
                              const char *out_name, const ArchiveLimits *limits, ArchiveExtractResult *ret,
                              char **ret_message) _warn_unused_result_;

/* Convenience over a whole stack of local layer files (base first): asks the top layer first and goes
 * down while ABSENT. *ret_layer is the index of the layer that decided (-1 if none had the path). */
int archive_extract_from_layers(const char *const *layer_paths, size_t n_layers, const char *file_path,
                                const char *staging_dir, const char *out_name, const ArchiveLimits *limits,
                                ArchiveExtractResult *ret, ssize_t *ret_layer,
                                char **ret_message) _warn_unused_result_;

/* Normalizes an entry or image path: strips "./" and leading "/" (if allow_absolute), collapses "//"
 * and "." components. -EXDEV for ".." or (without allow_absolute) a leading "/", -ENAMETOOLONG
 * beyond max_path or NAME_MAX per component, -EINVAL for an empty string. The root ("." or "./")
 * normalizes to "". */
int archive_path_normalize(const char *path, bool allow_absolute, size_t max_path,
                           char **ret) _warn_unused_result_;

const char *archive_lookup_to_string(ArchiveLookup l);
