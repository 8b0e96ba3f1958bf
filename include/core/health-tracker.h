/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The decisions of GNA's kubelet and containerd health checks (docs/node-protocol.md §8 item 2, upstream
 * healthcheck/{kubelet,containerd}.go), without the probing: each probe result goes in, what to tell
 * and whether to restart comes out. Pure; times on CLOCK_MONOTONIC.
 *
 *  - the first failed probe: a Warning (FIRST_FAILURE);
 *  - failing for at least the grace time (1 min): a Warning and a restart (RESTART); the clock starts
 *    again only when the restart worked (health_tracker_restarted());
 *  - the first good probe after failures: a Normal "healthy" Event (RECOVERED);
 *  - a failed probe while an update step owns the unit (it restarts and checks it itself): not this
 *    check's to judge, nothing said or counted (OWNED);
 *  - the Node's Ready condition turning True 5 times within 10 min: a Warning (toggle tracker). */

#include <stdbool.h>
#include <stdint.h>

#include "util/macro.h"

#define HEALTH_GRACE_USEC (60 * USEC_PER_SEC)
#define HEALTH_TOGGLES_MAX 5
#define HEALTH_TOGGLE_WINDOW_USEC (10 * 60 * USEC_PER_SEC)

typedef enum HealthVerdict {
        HEALTH_OK,            /* healthy, and was */
        HEALTH_RECOVERED,     /* healthy again */
        HEALTH_FIRST_FAILURE, /* unhealthy, newly */
        HEALTH_FAILING,       /* unhealthy, within the grace time (or a restart is refused) */
        HEALTH_RESTART,       /* unhealthy for the grace time: restart the unit */
        HEALTH_OWNED,         /* unhealthy, newly, while an update step owns the unit: not
                               * said, not counted (its own health check judges it) */
} HealthVerdict;

/* Who may restart the unit when a probe comes in. */
typedef enum HealthOwner {
        HEALTH_OWNER_CHECK,            /* this check: judge, and restart after the grace time */
        HEALTH_OWNER_CHECK_RESTARTING, /* this check, whose restart is in flight: judge, no second one */
        HEALTH_OWNER_UPDATE,           /* an update step restarts the unit itself and checks it */
} HealthOwner;

typedef struct HealthTracker {
        bool failing;
        uint64_t first_failure_usec;
} HealthTracker;

/* `now_usec`: when the round whose probe this is began (upstream: every 30 s, the first failure
 * remembered, a restart at the first round that finds it failing for >= grace_usec — the third round,
 * 60 s after the first failed one). RESTART only with HEALTH_OWNER_CHECK. With HEALTH_OWNER_UPDATE a
 * failure that is new is OWNED (a unit failing before the update took it over stays FAILING). */
HealthVerdict health_tracker_observe(HealthTracker *t, bool healthy, uint64_t now_usec, uint64_t grace_usec,
                                     HealthOwner owner);
/* The restart worked: the grace time starts again from `now_usec`. */
void health_tracker_restarted(HealthTracker *t, uint64_t now_usec);

typedef struct ToggleTracker {
        bool known, ready;
        uint64_t became_ready[HEALTH_TOGGLES_MAX]; /* a ring of the latest NotReady→Ready times */
        unsigned n, next;
} ToggleTracker;

/* The Node's Ready status as watched. True when this turn to Ready is the HEALTH_TOGGLES_MAX-th
 * within HEALTH_TOGGLE_WINDOW_USEC (a Warning is due). The first observation is no toggle. */
bool toggle_tracker_observe(ToggleTracker *t, bool ready, uint64_t now_usec);
