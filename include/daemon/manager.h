/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The Manager owns the one sd_event loop and every long-lived object (bus, HTTP multi handle,
 * Kubernetes client, the watch on our Node, Events, the Lease, the update state machine). It feeds
 * inputs to the pure core, hands the executor its dependencies (update/executor.h) and the reporter
 * the Node as watched (report/reporter.h). Logs (the daemon layer is where logging happens). */

#include "core/config.h"
#include "kube/kube-tuning.h"
#include "util/macro.h"

typedef struct Manager Manager;

/* Sets everything up; takes ownership of *config on success only (then *config is NULL). Does not
 * log: -errno and *ret_error (may be NULL) name what failed. */
int manager_new(Config **config, const KubeTuning *tuning, Manager **ret,
                char **ret_error) _warn_unused_result_;
Manager *manager_free(Manager *m);
DEFINE_CLEANUP_FUNC(Manager, manager_free);

/* Runs until SIGTERM/SIGINT or a fatal error. Returns 0 on a clean stop, -errno otherwise. */
int manager_run(Manager *m) _warn_unused_result_;
