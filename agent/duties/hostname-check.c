/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <stdlib.h>

#include "duties/hostname-check.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/log.h"

struct HostnameCheck {
        UnitControl *units; /* borrowed */
        char *self_unit;    /* owned */
        char *hostname;     /* owned: lower-cased, at start */
        uint64_t period_usec;
        sd_event_source *timer; /* owned */
        UnitJob *restart;       /* borrowed handle: our own restart, in flight */
};

static int read_hostname(char **ret) {
        _cleanup_free_ char *data = NULL;
        char *p;
        int r;

        r = read_full_file(HOSTNAME_PATH, 256, &data, NULL);
        if (r < 0)
                return r;
        for (p = data; *p && *p != '\n'; p++)
                *p = (char) tolower((unsigned char) *p);
        *p = 0;
        *ret = TAKE_PTR(data);
        return 0;
}

static void hostname_check_on_restart(const UnitJobResult *res, void *userdata) {
        HostnameCheck *h = userdata;

        /* On success systemd stops us before this runs; getting here means it did not happen. */
        h->restart = NULL;
        log_warning("Restarting %s after the hostname change failed: %s", h->self_unit,
                    strempty(res->detail ?: strerror(-res->error)));
}

static int hostname_check_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        HostnameCheck *h = userdata;
        _cleanup_free_ char *now = NULL;
        int r;

        if (event_timer_arm(s, h->period_usec) < 0)
                log_warning("Cannot re-arm the hostname check.");
        if (read_hostname(&now) < 0 || streq(now, h->hostname) || h->restart)
                return 0;
        log_notice("The hostname changed from \"%s\" to \"%s\"; restarting %s.", h->hostname, now,
                   h->self_unit);
        r = unit_control_restart_unit(h->units, h->self_unit, hostname_check_on_restart, h, &h->restart);
        if (r < 0)
                log_warning_errno(r, "Cannot restart %s after the hostname change: %m", h->self_unit);
        return 0;
}

int hostname_check_new(sd_event *event, UnitControl *units, const char *self_unit, uint64_t period_usec,
                       HostnameCheck **ret) {
        _cleanup_(hostname_check_freep) HostnameCheck *h = NULL;
        int r;

        assert(event && units && self_unit && ret);
        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->units = units;
        h->period_usec = period_usec;
        h->self_unit = strdup(self_unit);
        if (!h->self_unit)
                return -ENOMEM;
        r = read_hostname(&h->hostname);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(event, &h->timer, CLOCK_MONOTONIC, period_usec, USEC_PER_SEC,
                                       hostname_check_on_timer, h);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(h->timer, "hostname-check");
        *ret = TAKE_PTR(h);
        return 0;
}

HostnameCheck *hostname_check_free(HostnameCheck *h) {
        if (!h)
                return NULL;
        unit_job_cancel(h->restart);
        sd_event_source_disable_unref(h->timer);
        free(h->self_unit);
        free(h->hostname);
        free(h);
        return NULL;
}
