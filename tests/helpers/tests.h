/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Common includes for cmocka unit tests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/macro.h"
