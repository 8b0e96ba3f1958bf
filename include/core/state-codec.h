/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The text of the persisted update state (state.json, docs/contract.md §7): the current or last transaction
 * and the node-level memory of node-update.h's UpdateTransaction, as one versioned JSON document.
 * Pure: no files (update/state-file does the reading and the atomic writing). Does not log. */

#include <stddef.h>

#include "core/node-update.h"

#define STATE_FILE_VERSION 1
#define STATE_CODEC_MAX (1024 * 1024) /* the largest document decoded */

/* A JSON document (NUL-terminated, newline at the end). */
int state_codec_encode(const UpdateTransaction *tx, char **ret);

/* -EBADMSG with *ret_error (if not NULL) naming the field when the text is not a valid state;
 * -EPROTONOSUPPORT when it was written by a newer format version. */
int state_codec_decode(const char *data, size_t size, UpdateTransaction **ret, char **ret_error);
