/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What one OSC run leaves as the admin masked it (a unit file or drop-in that is a symlink to
 * /dev/null: apply/osc-files): the applier meets a masked unit at each of its items (its write and
 * enable, its restart), in stretches apart; the run names it once, with everything left out of it:
 * "<unit dir>/x.service (not written or enabled, not restarted)". Pure. */

#include <stddef.h>

#include "util/macro.h"

typedef struct OscMaskedPath {
        char *path;      /* owned */
        char **left_out; /* owned: "not restarted", ...; each once, in the order met */
} OscMaskedPath;

typedef struct OscMasked {
        OscMaskedPath *paths; /* owned: each path once, in the order met */
        size_t n_paths;
} OscMasked;

/* Records that `left_out` was left out at `path` (each pair once). -ENOMEM. */
int osc_masked_add(OscMasked *m, const char *path, const char *left_out);

/* "<path> (<left out>, <left out>); <path> (...)"; *ret NULL when nothing is masked. -ENOMEM. */
int osc_masked_describe(const OscMasked *m, char **ret);

void osc_masked_done(OscMasked *m);
