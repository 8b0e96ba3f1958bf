/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Names of the boot images the `image` OS backend installs into osUpdate.image.installDirectory
 * (a systemd-boot type #2 directory such as /boot/efi/EFI/Linux), and the choice of which old
 * ones to remove. Pure: no I/O, no logging; callers pass directory listings in.
 *
 * Naming follows systemd-boot's Automatic Boot Assessment (systemd.io/AUTOMATIC_BOOT_ASSESSMENT):
 *   <prefix>-<version>.efi                 "good": blessed, or installed without counting
 *   <prefix>-<version>+<left>.efi          fresh: <left> tries remain, none used
 *   <prefix>-<version>+<left>-<done>.efi   systemd-boot renames on every attempt; left == 0 is "bad"
 * The counter is not part of the entry identity: systemd-boot and systemd-bless-boot strip it.
 *
 * Versions are restricted so that names parse back unambiguously and never collide with files
 * that are not ours: `v?[0-9][A-Za-z0-9._~-]*`, at most BOOT_ENTRY_VERSION_MAX bytes, no '+'. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define BOOT_ENTRY_VERSION_MAX 128
#define BOOT_ENTRY_PREFIX_MAX 64
#define BOOT_ENTRY_TRIES_MAX 999
/* Bound on directory entries considered; an ESP with more is not ours to reason about. */
#define BOOT_ENTRY_LISTING_MAX 4096

typedef struct BootEntryName {
        char *version; /* owned */
        bool has_counter;
        unsigned tries_left; /* valid if has_counter */
        unsigned tries_done; /* valid if has_counter; 0 when the name has only "+<left>" */
} BootEntryName;

typedef enum BootEntryState {
        BOOT_ENTRY_ABSENT,  /* no entry for that version */
        BOOT_ENTRY_PENDING, /* counting, tries left: not yet booted successfully */
        BOOT_ENTRY_GOOD,    /* no counter: blessed by systemd-bless-boot (or never counted) */
        BOOT_ENTRY_BAD,     /* tries exhausted: systemd-boot will not pick it by default */
        _BOOT_ENTRY_STATE_MAX,
        _BOOT_ENTRY_STATE_INVALID = -EINVAL,
} BootEntryState;

bool boot_entry_prefix_is_valid(const char *prefix);
bool boot_entry_version_is_valid(const char *version);

/* "<prefix>-<version>+<tries>.efi", or "<prefix>-<version>.efi" when tries == 0.
 * -EINVAL if prefix, version or tries are not acceptable. */
int boot_entry_name_format(const char *prefix, const char *version, unsigned tries, char **ret);

/* Parses a file name of ours. -EINVAL if it is not "<prefix>-<valid version>[+N[-M]].efi" (the
 * ".efi" suffix is matched case-insensitively, as the ESP is FAT). *ret is written on success
 * only; release it with boot_entry_name_done(). */
int boot_entry_name_parse(const char *prefix, const char *filename, BootEntryName *ret);
void boot_entry_name_done(BootEntryName *n);

/* The entry identity: the file name without the boot counter ("os-1.2+2-1.efi" -> "os-1.2.efi").
 * Works on any name; one without a counter is returned as is. */
int boot_entry_strip_counter(const char *filename, char **ret);

/* Temporary names used while installing: ".<final name>.tmp-XXXXXX" (a mkostemp() template).
 * They do not end in ".efi", so a boot loader never considers a half-written file. */
int boot_entry_temp_template(const char *final_name, char **ret);
bool boot_entry_is_temp_name(const char *prefix, const char *filename);

/* Conservative equality for "is this the version that runs": the leading dotted numeric cores are
 * compared with trailing ".0" components ignored and an optional leading 'v' skipped; anything
 * after the core ("-rc1", "~x") is ignored. So "1592.6" == "1592.6.0" == "v1592.6.0-foo". Errs
 * towards "equal", which only ever keeps more entries, never deletes the running one. */
bool boot_entry_version_equivalent(const char *a, const char *b);

/* Chooses what to delete from `names` (a directory listing) before installing `install_version`:
 *   - our stale temporary files;
 *   - our entries whose version is neither equivalent to `running_version` nor the entry whose
 *     identity equals `booted_id` (LoaderEntrySelected; compared case-insensitively, counter
 *     stripped on both sides), including stale entries of `install_version` itself.
 * If both running_version and booted_id are NULL, nothing but temporary files and entries of
 * install_version is selected: without knowing what runs, nothing else is safe to delete.
 * Files that are not ours are never selected. Returns a NULL-terminated list (possibly empty). */
int boot_entry_select_removals(const char *prefix, char *const *names, size_t n_names,
                               const char *install_version, const char *running_version,
                               const char *booted_id, char ***ret);

/* State of the entry for `version` among `names`; with several (should not happen), the best
 * one wins (GOOD > PENDING > BAD). */
BootEntryState boot_entry_state_of(const char *prefix, char *const *names, size_t n_names,
                                   const char *version);

/* Decodes an EFI variable as exposed by efivarfs (4 bytes of attributes, then UTF-16LE, usually
 * NUL-terminated) into ASCII, e.g. LoaderEntrySelected. -EBADMSG if malformed or not ASCII. */
int boot_entry_decode_efivar_string(const void *data, size_t size, char **ret);

const char *boot_entry_state_to_string(BootEntryState s);
BootEntryState boot_entry_state_from_string(const char *s);
