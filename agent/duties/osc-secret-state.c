/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "duties/osc-secret-state.h"
#include "util/log.h"
#include "util/time-util.h"

struct OscSecretState {
        Reporter *reporter;      /* borrowed */
        OscAvailability verdict; /* the last one said; UNKNOWN before the first */
        bool forbidden_once;     /* one 403 seen, not said yet */
        char *message;           /* owned: its text */
        const NodeView *node;    /* borrowed: the Node as last watched */
        bool event_pending;      /* the verdict's Event waits for the Node (a fresh node's) */
        bool warned;             /* a Warning went out: its clearing is said too */
};

int osc_secret_state_new(Reporter *reporter, OscSecretState **ret) {
        OscSecretState *s;

        assert(reporter);
        assert(ret);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->reporter = reporter;
        *ret = s;
        return 0;
}

OscSecretState *osc_secret_state_free(OscSecretState *s) {
        if (!s)
                return NULL;
        free(s->message);
        free(s);
        return NULL;
}

/* False while it is a problem; True only to clear a condition that is there (a Node that never had
 * a problem is not written to for it). */
static void write_condition(OscSecretState *s) {
        const NodeCondition *c = node_view_condition(s->node, NODE_CONDITION_OSC_SECRET);
        int r;

        if (s->verdict == OSC_AVAILABILITY_UNKNOWN ||
            (!osc_availability_is_problem(s->verdict) && !(c && c->present)))
                return;
        r = reporter_set_condition(
                s->reporter, NODE_CONDITION_OSC_SECRET, !osc_availability_is_problem(s->verdict),
                osc_availability_reason(s->verdict), s->message, clock_now_usec(CLOCK_REALTIME));
        if (r < 0 && r != -ENODEV)
                log_debug_errno(r, "Cannot write %s: %m", NODE_CONDITION_OSC_SECRET);
}

/* The Event is about the Node: on a fresh node (no Node before its kubelet, which the first OSC
 * brings) it waits for the Node, then says the verdict of that moment once. */
static void emit_event(OscSecretState *s) {
        if (!s->event_pending || !s->node)
                return;
        s->event_pending = false;
        s->warned = osc_availability_is_problem(s->verdict);
        (void) reporter_emit_event(s->reporter,
                                   osc_availability_is_problem(s->verdict) ? "Warning" : "Normal",
                                   osc_availability_reason(s->verdict), s->message);
}

void osc_secret_state_set(OscSecretState *s, OscAvailability a, const OscSecretRef *ref,
                          const char *detail) {
        _cleanup_free_ char *msg = NULL;
        bool was_problem;
        int r;

        assert(s);
        assert(ref);

        if (a == OSC_AVAILABILITY_UNKNOWN)
                return;
        /* A single 403 is not rare at a node's first boot (the node-agent authorizer looks the machine
         * up through a cache) and the watch retries it at once: said from the second in a row. */
        if (a == OSC_AVAILABILITY_FORBIDDEN && s->verdict != a && !s->forbidden_once) {
                s->forbidden_once = true;
                return;
        }
        s->forbidden_once = false;
        r = osc_availability_message(a, ref, detail, &msg);
        if (r < 0) {
                log_oom();
                return;
        }
        if (a == s->verdict && streq_ptr(msg, s->message))
                return;
        was_problem = osc_availability_is_problem(s->verdict);
        s->verdict = a;
        free(s->message);
        s->message = TAKE_PTR(msg);

        if (osc_availability_is_problem(a)) {
                log_warning("%s.", s->message);
                reporter_set_status_note(s->reporter, REPORTER_NOTE_OSC_SECRET, s->message);
        } else {
                if (was_problem)
                        log_info("%s.", s->message);
                reporter_set_status_note(s->reporter, REPORTER_NOTE_OSC_SECRET, NULL);
        }
        /* A problem that cleared before anyone was told (no Node yet) is not news. */
        s->event_pending = osc_availability_is_problem(a) || (was_problem && s->warned);
        emit_event(s);
        write_condition(s);
}

void osc_secret_state_sync(OscSecretState *s, const NodeView *v) {
        assert(s);
        s->node = v;
        emit_event(s);
        write_condition(s);
}
