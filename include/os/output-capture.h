/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Bounded capture of a child process's output: the first `head_max` bytes, the last `tail_max`
 * bytes and a count of what was dropped in between, plus splitting into lines for the journal.
 * The output of an OS update command is untrusted and unbounded; this keeps memory fixed however
 * much it prints. Pure: no I/O, no logging. */

#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

#define OUTPUT_CAPTURE_HEAD_DEFAULT (64U * 1024U)
#define OUTPUT_CAPTURE_TAIL_DEFAULT (64U * 1024U)
/* Longer lines are handed out in pieces of this size, each its own "line". */
#define OUTPUT_CAPTURE_LINE_DEFAULT 4096U

typedef struct OutputCapture OutputCapture;

/* Called for each complete line (without '\n' and a trailing '\r'), NUL-terminated, with NUL
 * bytes inside replaced by '?'. `line` is only valid during the call. */
typedef void (*OutputCaptureLine)(const char *line, size_t size, void *userdata);

/* Zero for a limit picks its default. */
int output_capture_new(size_t head_max, size_t tail_max, size_t line_max, OutputCapture **ret);
OutputCapture *output_capture_free(OutputCapture *c);
DEFINE_CLEANUP_FUNC(OutputCapture, output_capture_free);

/* Forgets everything captured (for the next attempt); the limits stay. */
void output_capture_reset(OutputCapture *c);

/* Appends bytes; `on_line` may be NULL. */
void output_capture_feed(OutputCapture *c, const void *data, size_t size, OutputCaptureLine on_line,
                         void *userdata);

/* Hands out a final line without '\n', if any. */
void output_capture_flush(OutputCapture *c, OutputCaptureLine on_line, void *userdata);

uint64_t output_capture_total(const OutputCapture *c);
uint64_t output_capture_dropped(const OutputCapture *c);

/* head, then "\n[... <n> bytes omitted ...]\n" if bytes were dropped, then tail, as a new
 * NUL-terminated string; NUL bytes of the output become '?'. */
int output_capture_summary(const OutputCapture *c, char **ret);
