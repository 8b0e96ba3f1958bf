/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "core/health-tracker.h"

HealthVerdict health_tracker_observe(HealthTracker *t, bool healthy, uint64_t now_usec, uint64_t grace_usec,
                                     HealthOwner owner) {
        assert(t);

        if (healthy) {
                bool was_failing = t->failing;

                t->failing = false;
                return was_failing ? HEALTH_RECOVERED : HEALTH_OK;
        }
        /* The update's own restart takes the unit down for a moment; its health check decides. */
        if (!t->failing && owner == HEALTH_OWNER_UPDATE)
                return HEALTH_OWNED;
        if (!t->failing) {
                t->failing = true;
                t->first_failure_usec = now_usec;
                return HEALTH_FIRST_FAILURE;
        }
        if (owner == HEALTH_OWNER_CHECK && now_usec >= t->first_failure_usec + grace_usec)
                return HEALTH_RESTART;
        return HEALTH_FAILING;
}

void health_tracker_restarted(HealthTracker *t, uint64_t now_usec) {
        assert(t);
        if (t->failing)
                t->first_failure_usec = now_usec;
}

bool toggle_tracker_observe(ToggleTracker *t, bool ready, uint64_t now_usec) {
        bool toggled, oldest_in_window;

        assert(t);
        toggled = t->known && ready && !t->ready;
        t->known = true;
        t->ready = ready;
        if (!toggled)
                return false;

        t->became_ready[t->next] = now_usec;
        t->next = (t->next + 1) % HEALTH_TOGGLES_MAX;
        if (t->n < HEALTH_TOGGLES_MAX)
                t->n++;
        /* With the ring full, t->next is the oldest of the last HEALTH_TOGGLES_MAX turns. */
        oldest_in_window = now_usec - t->became_ready[t->next] <= HEALTH_TOGGLE_WINDOW_USEC;
        return t->n == HEALTH_TOGGLES_MAX && oldest_in_window;
}
