/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>

#include "build-config.h"
#include "log.h"
#include "manager.h"

struct Manager {
        Config *config;         /* owned */
        sd_event *event;        /* ref held */
};

int manager_new(Config *config, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        assert(config);
        assert(ret);

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->config = config;

        r = sd_event_default(&m->event);
        if (r < 0)
                return r;

        /* SIGTERM/SIGINT end the loop with exit code 0; blocked first as sd-event requires. */
        r = sd_event_set_signal_exit(m->event, true);
        if (r < 0)
                return r;

        /* Pings WATCHDOG=1 at half of WatchdogSec= while the loop turns; no-op without it. */
        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        sd_event_unref(m->event);
        config_free(m->config);
        free(m);
        return NULL;
}

int manager_run(Manager *m) {
        int r;

        assert(m);

        log_info("Starting inplace-agent %s for node %s.", PACKAGE_VERSION, m->config->node_name);

        /* CONTRACT §8.14: READY=1 as soon as the loop runs, so an unreachable API server never
         * makes systemd restart-loop us; STATUS= says what we wait for. */
        (void) sd_notifyf(false, "READY=1\nSTATUS=Waiting for node %s", m->config->node_name);

        r = sd_event_loop(m->event);

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down");
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        log_info("Stopped.");
        return 0;
}
