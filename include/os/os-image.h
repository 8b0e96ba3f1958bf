/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The `image` OS backend's install step: puts an already verified boot image (a UKI staged under
 * <stateDirectory>/staging/os/<version>/ by the artifact code) into osUpdate.image.installDirectory
 * as <namePrefix>-<version>+<bootTries>.efi, so that systemd-boot tries it bootTries times and
 * falls back to the previous entry if it is never blessed (boot-entry.h has the naming).
 *
 * Owns: one install job, i.e. the copy child process, the temporary file and their event sources.
 * Runs on the caller's sd_event loop; SIGCHLD must be blocked process-wide (sd_event_add_child).
 * Does not log.
 *
 * Order of effects in os_image_install_start(), all before anything new is written:
 *   1. validate names; refuse to install the version that runs (-EEXIST);
 *   2. list installDirectory, choose what to remove (boot_entry_select_removals(): never the
 *      running version nor the entry systemd-boot reports as booted in LoaderEntrySelected);
 *   3. space check: free space + what step 4 frees must cover the image + reserve (-ENOSPC
 *      otherwise, nothing touched);
 *   4. remove the chosen entries, fsync the directory;
 *   5. create the temporary file and start the copy child.
 * The child copies, fsyncs the file, renames it to its final name and fsyncs the directory; the
 * final name therefore only ever names a complete, durable image. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <systemd/sd-event.h>

#include "os/boot-entry.h"
#include "util/macro.h"

#define OS_IMAGE_SIZE_MAX (4ULL * 1024 * 1024 * 1024)
#define OS_IMAGE_RESERVE_DEFAULT (1ULL * 1024 * 1024)
#define OS_IMAGE_EFIVARS_DEFAULT "/sys/firmware/efi/efivars"
#define OS_IMAGE_LOADER_GUID "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"

typedef struct OsImage OsImage;

typedef struct OsImageInstallOptions {
        const char *source_path;       /* verified image file */
        const char *install_directory; /* osUpdate.image.installDirectory; created if missing */
        const char *name_prefix;       /* osUpdate.image.namePrefix */
        const char *version;           /* the target OS version, as named in the entry */
        unsigned boot_tries;           /* osUpdate.image.bootTries; 0: no boot counting */
        const char *running_version;   /* OS version from osRelease; NULL: unknown (removes less) */
        const char *efivars_directory; /* NULL: OS_IMAGE_EFIVARS_DEFAULT; "": do not consult */
        uint64_t reserve_bytes;        /* free space to leave; 0: OS_IMAGE_RESERVE_DEFAULT */
        int (*statvfs)(const char *path, struct statvfs *ret); /* NULL: statvfs(3); for tests */
} OsImageInstallOptions;

/* error: 0, or -errno (-ENOSPC/-EDQUOT: out of space while copying). The OsImage may be freed
 * inside the callback. */
typedef void (*OsImageDone)(OsImage *image, int error, void *userdata);

/* Strings in `options` are copied. */
int os_image_install_new(sd_event *event, const OsImageInstallOptions *options, OsImageDone done,
                         void *userdata, OsImage **ret);

/* Kills a running copy (SIGKILL), reaps it and removes the temporary file; no callback. */
OsImage *os_image_free(OsImage *image);
DEFINE_CLEANUP_FUNC(OsImage, os_image_free);

/* Steps 1-5 above; one call per object (-EALREADY afterwards, even after a failure). 0: the copy
 * runs and `done` follows (never from inside this call). <0: nothing was started and `done` is not
 * called: -EINVAL (names, source not a regular file), -EFBIG
 * (source larger than OS_IMAGE_SIZE_MAX), -EEXIST (version is the running one), -ENOSPC (not
 * enough space; nothing was removed), -E2BIG (absurd directory), -EBUSY (SIGCHLD not blocked),
 * other -errno from the file system (removals done before the failure stay done). */
int os_image_install_start(OsImage *image);

/* Steps 1-3 only, touching nothing: would os_image_install_start() pass its checks now? For the
 * plan, before the drain (docs/contract.md §5: a plan that cannot succeed fails before the drain). Same
 * errors as os_image_install_start(); -ENOENT also when installDirectory does not exist yet.
 * Blocking: one directory listing and a statvfs(). */
int os_image_check(const OsImageInstallOptions *options);

/* Bytes written so far and the total, for progress reporting while the copy runs. */
int os_image_get_progress(OsImage *image, uint64_t *ret_done, uint64_t *ret_total);

/* After success: the full path of the installed entry (borrowed). NULL before. */
const char *os_image_get_installed_path(const OsImage *image);

/* File names removed by os_image_install_start() (borrowed, NULL-terminated, maybe empty). */
char *const *os_image_get_removed(const OsImage *image);

/* docs/contract.md §8.9: these errors mean "DiskSpace" (retriable). */
bool os_image_error_is_disk_space(int error);

/* The identity of the entry systemd-boot booted (EFI variable LoaderEntrySelected), e.g.
 * "os-1592.6.efi". -ENOENT without it (not booted by systemd-boot, or no EFI). Blocking: small
 * file read. efivars_directory NULL: OS_IMAGE_EFIVARS_DEFAULT. */
int os_image_read_booted_entry(const char *efivars_directory, char **ret);

/* State of the entry for `version` in `directory` (after a reboot: did the new one boot?).
 * Blocking: one directory listing. */
int os_image_entry_state(const char *directory, const char *name_prefix, const char *version,
                         BootEntryState *ret);
