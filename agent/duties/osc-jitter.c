/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "core/go-duration.h"
#include "duties/osc-jitter.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/time-util.h"

struct OscJitter {
        sd_event *event; /* borrowed */
        OscJitterDeliver deliver;
        void *userdata;
        bool seen;              /* an OSC was handed over since the (re)start */
        char *checksum;         /* owned: of the last OSC handed over or waiting */
        uint64_t delay_usec;    /* the last valid annotation value */
        LogOnce delay_value;    /* its raw value, to log a change once */
        OscDesired *waiting;    /* owned */
        sd_event_source *timer; /* owned: while an OSC waits */
};

int osc_jitter_new(sd_event *event, OscJitterDeliver deliver, void *userdata, OscJitter **ret) {
        OscJitter *j;

        assert(event);
        assert(deliver);
        assert(ret);
        j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (OscJitter) { .event = event, .deliver = deliver, .userdata = userdata };
        (void) log_once_check(&j->delay_value, 0, NULL); /* no annotation, the start: no news */
        *ret = j;
        return 0;
}

static void osc_jitter_drop_waiting(OscJitter *j) {
        j->timer = sd_event_source_disable_unref(j->timer);
        j->waiting = osc_desired_free(j->waiting);
}

OscJitter *osc_jitter_free(OscJitter *j) {
        if (!j)
                return NULL;
        osc_jitter_drop_waiting(j);
        free(j->checksum);
        log_once_done(&j->delay_value);
        free(j);
        return NULL;
}

static void osc_jitter_hand_over(OscJitter *j, OscDesired *osc) {
        j->timer = sd_event_source_disable_unref(j->timer);
        j->waiting = NULL;
        j->seen = true;
        j->deliver(osc, j->userdata);
}

static int osc_jitter_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        OscJitter *j = userdata;

        log_info("Reconciliation delay over; applying OSC %s.",
                 strempty(j->waiting ? j->waiting->checksum : NULL));
        osc_jitter_hand_over(j, j->waiting);
        return 0;
}

/* The delay as the Node says now; an unusable annotation keeps the previous one (logged once). */
static uint64_t osc_jitter_delay(OscJitter *j, const NodeView *node) {
        const char *value = node ? node->reconciliation_delay : NULL;
        bool changed;
        int r;

        r = reconciliation_delay_update(value, &j->delay_usec);
        changed = log_once_check(&j->delay_value, 0, value);
        if (changed && r == -EINVAL)
                log_warning(
                        "Annotation %s=\"%s\" is not a duration; keeping the previous reconciliation delay.",
                        NODE_ANNOTATION_RECONCILE_DELAY, value);
        else if (changed && r >= 0) {
                char d[DURATION_MAX_STR];

                log_info("Reconciliation delay for OSC updates: %s (annotation %s).",
                         format_duration(d, sizeof(d), j->delay_usec), NODE_ANNOTATION_RECONCILE_DELAY);
        }
        return j->delay_usec;
}

void osc_jitter_submit(OscJitter *j, OscDesired *osc, const NodeView *node) {
        char d[DURATION_MAX_STR];
        bool same;
        uint64_t delay;
        int r;

        assert(j);

        same = osc && osc->checksum && streq_ptr(osc->checksum, j->checksum);
        if (osc && free_and_strdup(&j->checksum, osc->checksum) < 0)
                log_oom();
        delay = osc_jitter_delay(j, node);
        if (!osc || !j->seen || node_view_gate_open(node) || delay == 0 || (same && !j->waiting)) {
                osc_jitter_drop_waiting(j);
                osc_jitter_hand_over(j, osc);
                return;
        }
        if (j->waiting) {
                /* Replaces the waiting one; its deadline stays (upstream's queue keeps one entry). */
                osc_desired_free(j->waiting);
                j->waiting = osc;
                return;
        }
        r = sd_event_add_time_relative(j->event, &j->timer, CLOCK_MONOTONIC, delay, USEC_PER_SEC,
                                       osc_jitter_on_timer, j);
        if (r < 0) {
                log_warning_errno(r, "Cannot delay the OSC update, applying it now: %m");
                osc_jitter_hand_over(j, osc);
                return;
        }
        (void) sd_event_source_set_description(j->timer, "osc-jitter");
        j->waiting = osc;
        log_info("OSC %s changed; waiting the reconciliation delay of %s (annotation %s).",
                 strempty(osc->checksum), format_duration(d, sizeof(d), delay),
                 NODE_ANNOTATION_RECONCILE_DELAY);
}

void osc_jitter_node_changed(OscJitter *j, const NodeView *node) {
        assert(j);
        (void) osc_jitter_delay(j, node); /* follows the annotation as it changes, logged once */
        if (j->waiting && node_view_gate_open(node)) {
                log_info("The in-place gate is open; applying OSC %s without waiting.",
                         strempty(j->waiting->checksum));
                osc_jitter_hand_over(j, j->waiting);
        }
}

void osc_jitter_reset(OscJitter *j) {
        assert(j);
        osc_jitter_drop_waiting(j);
        j->seen = false;
        free(j->checksum);
        j->checksum = NULL;
}
