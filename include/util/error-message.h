/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Decoders report failures as -errno plus a human message naming the field. Pure; does not log: the
 * layer that decides logs the message, once. */

#include "util/macro.h"

/* Sets *ret_error (when ret_error is not NULL) to the formatted message and returns `r`. On OOM the
 * message is NULL; `r` is returned all the same. */
int error_setf(char **ret_error, int r, const char *format, ...) _printf_(3, 4);
