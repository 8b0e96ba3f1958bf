/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build-config.h"
#include "oci/libarchive-dl.h"

#define DLSYM_DEFINE(f) typeof(f) *sym_##f
#define DLSYM_ENTRY(f) \
        { #f, (void **) &sym_##f }

DLSYM_DEFINE(archive_entry_filetype);
DLSYM_DEFINE(archive_entry_free);
DLSYM_DEFINE(archive_entry_hardlink);
DLSYM_DEFINE(archive_entry_new);
DLSYM_DEFINE(archive_entry_pathname);
DLSYM_DEFINE(archive_entry_perm);
DLSYM_DEFINE(archive_entry_set_filetype);
DLSYM_DEFINE(archive_entry_set_pathname);
DLSYM_DEFINE(archive_entry_set_perm);
DLSYM_DEFINE(archive_entry_set_size);
DLSYM_DEFINE(archive_entry_size);
DLSYM_DEFINE(archive_entry_size_is_set);
DLSYM_DEFINE(archive_entry_symlink);
DLSYM_DEFINE(archive_errno);
DLSYM_DEFINE(archive_error_string);
DLSYM_DEFINE(archive_filter_bytes);
DLSYM_DEFINE(archive_read_data_block);
DLSYM_DEFINE(archive_read_free);
DLSYM_DEFINE(archive_read_new);
DLSYM_DEFINE(archive_read_next_header);
DLSYM_DEFINE(archive_read_open);
DLSYM_DEFINE(archive_read_open_fd);
DLSYM_DEFINE(archive_read_support_filter_gzip);
DLSYM_DEFINE(archive_read_support_filter_zstd);
DLSYM_DEFINE(archive_read_support_format_tar);
DLSYM_DEFINE(archive_set_error);
DLSYM_DEFINE(archive_write_close);
DLSYM_DEFINE(archive_write_data_block);
DLSYM_DEFINE(archive_write_disk_new);
DLSYM_DEFINE(archive_write_disk_set_options);
DLSYM_DEFINE(archive_write_finish_entry);
DLSYM_DEFINE(archive_write_free);
DLSYM_DEFINE(archive_write_header);

static const struct {
        const char *name;
        void **ptr;
} symbols[] = {
        DLSYM_ENTRY(archive_entry_filetype),
        DLSYM_ENTRY(archive_entry_free),
        DLSYM_ENTRY(archive_entry_hardlink),
        DLSYM_ENTRY(archive_entry_new),
        DLSYM_ENTRY(archive_entry_pathname),
        DLSYM_ENTRY(archive_entry_perm),
        DLSYM_ENTRY(archive_entry_set_filetype),
        DLSYM_ENTRY(archive_entry_set_pathname),
        DLSYM_ENTRY(archive_entry_set_perm),
        DLSYM_ENTRY(archive_entry_set_size),
        DLSYM_ENTRY(archive_entry_size),
        DLSYM_ENTRY(archive_entry_size_is_set),
        DLSYM_ENTRY(archive_entry_symlink),
        DLSYM_ENTRY(archive_errno),
        DLSYM_ENTRY(archive_error_string),
        DLSYM_ENTRY(archive_filter_bytes),
        DLSYM_ENTRY(archive_read_data_block),
        DLSYM_ENTRY(archive_read_free),
        DLSYM_ENTRY(archive_read_new),
        DLSYM_ENTRY(archive_read_next_header),
        DLSYM_ENTRY(archive_read_open),
        DLSYM_ENTRY(archive_read_open_fd),
        DLSYM_ENTRY(archive_read_support_filter_gzip),
        DLSYM_ENTRY(archive_read_support_filter_zstd),
        DLSYM_ENTRY(archive_read_support_format_tar),
        DLSYM_ENTRY(archive_set_error),
        DLSYM_ENTRY(archive_write_close),
        DLSYM_ENTRY(archive_write_data_block),
        DLSYM_ENTRY(archive_write_disk_new),
        DLSYM_ENTRY(archive_write_disk_set_options),
        DLSYM_ENTRY(archive_write_finish_entry),
        DLSYM_ENTRY(archive_write_free),
        DLSYM_ENTRY(archive_write_header),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *load_error; /* NULL once loaded; set for the process lifetime otherwise */

static void load(void) {
        void *dl;

        /* Never dlclose()d: the sym_* pointers stay valid for the process lifetime. */
        dl = dlopen(LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!dl) {
                load_error = strdup(dlerror() ?: "cannot load " LIBARCHIVE_SONAME);
                return;
        }
        for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
                *symbols[i].ptr = dlsym(dl, symbols[i].name);
                if (!*symbols[i].ptr) {
                        if (asprintf(&load_error, "%s has no symbol %s", LIBARCHIVE_SONAME,
                                     symbols[i].name) < 0)
                                load_error = NULL;
                        return;
                }
        }
}

int dlopen_libarchive(char **ret_message) {
        bool loaded;

        (void) pthread_once(&once, load);
        loaded = sym_archive_write_header && !load_error;
        if (!loaded && ret_message)
                *ret_message = strdup(load_error ?: "cannot load " LIBARCHIVE_SONAME);
        return loaded ? 0 : -EOPNOTSUPP;
}
