/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The persisted update state on disk, <stateDirectory>/state.json (docs/contract.md §7), in the format of
 * core/state-codec. Blocking local file I/O (small file, written with write_file_atomic(): temp file,
 * fsync, rename, fsync of the directory). Does not log. */

#include "core/state-codec.h"

#define STATE_FILE_NAME "state.json"
#define STATE_FILE_CORRUPT_SUFFIX ".corrupt"
#define STATE_FILE_MAX STATE_CODEC_MAX

/* Loads <dir>/state.json. -ENOENT if there is none (nothing persisted yet). A corrupt file is not
 * dropped silently: it is renamed to state.json.corrupt (replacing an older one) and -EBADMSG is
 * returned with *ret_error saying so, so the caller logs it and starts from an empty record. A file of
 * a newer format is left in place (-EPROTONOSUPPORT). */
int state_file_load(const char *dir, UpdateTransaction **ret, char **ret_error);

/* Atomically replaces <dir>/state.json (mode 0600). A crash at any point leaves either the old or
 * the new content, never a mix. */
int state_file_save(const char *dir, const UpdateTransaction *tx);
