/* SPDX-License-Identifier: Apache-2.0 */
#include <systemd/sd-event.h>
#include <time.h>

#include "util/event-util.h"
#include "util/time-util.h"

uint64_t event_now_usec(sd_event *e) {
        uint64_t now;

        if (sd_event_now(e, CLOCK_MONOTONIC, &now) < 0)
                return clock_now_usec(CLOCK_MONOTONIC);
        return now;
}

int event_timer_arm(sd_event_source *s, uint64_t delay_usec) {
        int r;

        r = sd_event_source_set_time_relative(s, delay_usec);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}
