/* SPDX-License-Identifier: Apache-2.0 */
/* Boot entry names come from a directory anyone with write access to the ESP can fill, and the
 * booted entry from an EFI variable. Nothing may crash, and what parses must round-trip. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "os/boot-entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name) {
        _cleanup_free_ char *stripped = NULL;
        BootEntryName e;

        (void) boot_entry_is_temp_name("os", name);
        if (boot_entry_strip_counter(name, &stripped) == 0)
                assert(strlen(stripped) <= strlen(name));

        if (boot_entry_name_parse("os", name, &e) < 0)
                return;
        assert(boot_entry_version_is_valid(e.version));
        if (!e.has_counter ||
            (e.tries_done == 0 && e.tries_left <= BOOT_ENTRY_TRIES_MAX && e.tries_left > 0)) {
                _cleanup_free_ char *again = NULL;
                BootEntryName f;

                if (boot_entry_name_format("os", e.version, e.has_counter ? e.tries_left : 0, &again) == 0) {
                        assert(boot_entry_name_parse("os", again, &f) == 0);
                        assert(strcmp(f.version, e.version) == 0);
                        boot_entry_name_done(&f);
                }
        }
        assert(boot_entry_version_equivalent(e.version, e.version));
        boot_entry_name_done(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *efivar = NULL;
        _cleanup_strv_free_ char **removals = NULL;
        char *names[64];
        size_t n = 0;

        if (size > 64 * 1024)
                return 0;

        (void) boot_entry_decode_efivar_string(data, size, &efivar);

        text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = '\0';

        /* One name per line, as a directory listing. */
        for (char *line = text, *next; line && n < 64; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                names[n++] = line;
                check_name(line);
        }

        if (n >= 2)
                (void) boot_entry_version_equivalent(names[0], names[1]);
        if (boot_entry_select_removals("os", names, n, n > 0 ? names[0] : NULL, n > 1 ? names[1] : NULL,
                                       efivar, &removals) == 0)
                for (char **r = removals; *r; r++) {
                        BootEntryName e;
                        /* Only our own files are ever selected. */
                        if (boot_entry_name_parse("os", *r, &e) == 0)
                                boot_entry_name_done(&e);
                        else
                                assert(boot_entry_is_temp_name("os", *r));
                }
        (void) boot_entry_state_of("os", names, n, n > 0 ? names[0] : "1");
        return 0;
}
