/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* libarchive, loaded when a layer is first extracted instead of at start-up. The daemon idles for days
 * between updates; linked directly, libarchive brings libxml2, ICU and libstdc++ into every idle
 * daemon (~0.3 MiB of private memory: their relocations and libstdc++'s exception pool) for a library
 * used only while staging. Once loaded it stays loaded (no dlclose: libstdc++ could not be unloaded
 * anyway). The functions are called through sym_* pointers, as systemd does for its optional libraries.
 *
 * Thread-safe: the extraction thread may be the first caller. Does not log: a failed load comes back
 * as -errno and dlerror()'s message. */

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>

#include "util/macro.h"

#define LIBARCHIVE_DLSYM(f) extern typeof(f) *sym_##f

LIBARCHIVE_DLSYM(archive_entry_filetype);
LIBARCHIVE_DLSYM(archive_entry_free);
LIBARCHIVE_DLSYM(archive_entry_hardlink);
LIBARCHIVE_DLSYM(archive_entry_new);
LIBARCHIVE_DLSYM(archive_entry_pathname);
LIBARCHIVE_DLSYM(archive_entry_perm);
LIBARCHIVE_DLSYM(archive_entry_set_filetype);
LIBARCHIVE_DLSYM(archive_entry_set_pathname);
LIBARCHIVE_DLSYM(archive_entry_set_perm);
LIBARCHIVE_DLSYM(archive_entry_set_size);
LIBARCHIVE_DLSYM(archive_entry_size);
LIBARCHIVE_DLSYM(archive_entry_size_is_set);
LIBARCHIVE_DLSYM(archive_entry_symlink);
LIBARCHIVE_DLSYM(archive_errno);
LIBARCHIVE_DLSYM(archive_error_string);
LIBARCHIVE_DLSYM(archive_filter_bytes);
LIBARCHIVE_DLSYM(archive_read_data_block);
LIBARCHIVE_DLSYM(archive_read_free);
LIBARCHIVE_DLSYM(archive_read_new);
LIBARCHIVE_DLSYM(archive_read_next_header);
LIBARCHIVE_DLSYM(archive_read_open);
LIBARCHIVE_DLSYM(archive_read_open_fd);
LIBARCHIVE_DLSYM(archive_read_support_filter_gzip);
LIBARCHIVE_DLSYM(archive_read_support_filter_zstd);
LIBARCHIVE_DLSYM(archive_read_support_format_tar);
LIBARCHIVE_DLSYM(archive_set_error);
LIBARCHIVE_DLSYM(archive_write_close);
LIBARCHIVE_DLSYM(archive_write_data_block);
LIBARCHIVE_DLSYM(archive_write_disk_new);
LIBARCHIVE_DLSYM(archive_write_disk_set_options);
LIBARCHIVE_DLSYM(archive_write_finish_entry);
LIBARCHIVE_DLSYM(archive_write_free);
LIBARCHIVE_DLSYM(archive_write_header);

/* Loads libarchive and resolves every symbol above, once. 0, or -EOPNOTSUPP when the library or a
 * symbol is missing; *ret_message (optional, owned by the caller) then says which (dlerror()). */
int dlopen_libarchive(char **ret_message) _warn_unused_result_;
