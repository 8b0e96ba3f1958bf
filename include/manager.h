/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The Manager owns the one sd_event loop and every long-lived object (bus, HTTP multi handle,
 * watches, the update state machine). It feeds inputs to the pure core and performs the actions
 * the core returns. Logs (it is one of the two layers that may). */

#include "config.h"

typedef struct Manager Manager;

/* Takes ownership of `config`. */
int manager_new(Config *config, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_CLEANUP_FUNC(Manager, manager_free);

/* Runs until SIGTERM/SIGINT or a fatal error. Returns 0 on a clean stop, -errno otherwise. */
int manager_run(Manager *m);
