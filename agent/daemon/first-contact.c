/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>
#include <time.h>

#include "core/contact-blocker.h"
#include "daemon/first-contact.h"
#include "daemon/status.h"
#include "report/console.h"
#include "util/log.h"
#include "util/string-util.h"
#include "util/time-util.h"

struct FirstContact {
        const Config *config; /* borrowed */
        Reporter *reporter;   /* borrowed */
        uint64_t event_min_usec;
        ContactBlocker contact; /* what keeps us from the API server before the first contact */
        Console *console;       /* owned: the kernel console; NULL when console.enabled=false */
};

int first_contact_new(const Config *config, Reporter *reporter, uint64_t event_min_usec,
                      FirstContact **ret) {
        _cleanup_(first_contact_freep) FirstContact *f = NULL;
        int r;

        assert(config && reporter && ret);

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->config = config;
        f->reporter = reporter;
        f->event_min_usec = event_min_usec;
        if (config->console.enabled) {
                r = console_new(config->console.path, &f->console);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(f);
        return 0;
}

FirstContact *first_contact_free(FirstContact *f) {
        if (!f)
                return NULL;
        contact_blocker_done(&f->contact);
        console_free(f->console);
        free(f);
        return NULL;
}

/* Until the API server answered once, the logs are out of reach from outside: each failed attempt
 * (the caller logs it once) also goes to the status file `inplace-agent status` reads and, rate-
 * limited (core/contact-blocker.h), to the kernel console. */
void first_contact_blocked(FirstContact *f, const char *reason) {
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
        bool changed;
        int r, k;

        r = contact_blocker_set(&f->contact, reason, now, clock_now_usec(CLOCK_REALTIME), &changed);
        if (r < 0) {
                log_oom();
                return;
        }
        if (changed) {
                k = status_blocker_save(f->config->state_directory, f->contact.reason,
                                        f->contact.first_reason, f->contact.since_realtime_usec);
                if (k < 0)
                        log_debug_errno(k, "Cannot write %s: %m", STATUS_BLOCKER_FILE);
        }
        if (r == 0 || !f->console)
                return;
        k = console_write(f->console, f->contact.reason);
        if (k < 0)
                log_debug_errno(k, "Cannot write to the console %s: %m", strempty(f->config->console.path));
        else
                contact_blocker_console_written(&f->contact, now);
}

/* Best effort, like writing it: `inplace-agent status` then shows a stale blocker, which says when it
 * was written. */
void first_contact_clear_stale(FirstContact *f) {
        int r;

        r = status_blocker_remove(f->config->state_directory);
        if (r < 0)
                log_debug_errno(r, "Cannot remove %s: %m", STATUS_BLOCKER_FILE);
}

/* The first answer of the API server since start: one Warning says what blocked us and how long. */
void first_contact_reached(FirstContact *f) {
        _cleanup_free_ char *msg = NULL;
        bool told = contact_blocker_told_console(&f->contact);
        int r;

        if (f->contact.contacted)
                return;
        r = contact_blocker_contact(&f->contact, clock_now_usec(CLOCK_MONOTONIC), f->event_min_usec, &msg);
        if (r < 0)
                log_oom();
        if (r <= 0)
                return;
        first_contact_clear_stale(f);
        if (msg) {
                log_warning("%s.", msg);
                (void) reporter_emit_event(f->reporter, "Warning", "NoAPIServerAccess", msg);
        }
        if (told && f->console) {
                r = console_write(f->console, "reached the API server; the reason above no longer holds");
                if (r < 0)
                        log_debug_errno(r, "Cannot write to the console %s: %m",
                                        strempty(f->config->console.path));
        }
}
