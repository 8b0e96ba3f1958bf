/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/osc-model.h"
#include "core/osc.h"
#include "core/unit-health.h"
#include "duties/applied-osc.h"
#include "util/log-once.h"
#include "util/log.h"

struct AppliedOsc {
        sd_event *event;         /* borrowed */
        AppliedOscOptions opts;  /* strings borrowed */
        UnitsCheck *units_check; /* borrowed; NULL until the system bus was up */
        sd_event_source *watch;  /* owned: inotify on the state directory; NULL if unavailable */
        LogOnce error;           /* the last read/decode error, logged once */
};

int applied_osc_load(AppliedOsc *a, const OscModelOptions *opts, OscModel **ret, char **ret_path) {
        _cleanup_free_ char *error = NULL;
        int r;

        assert(a && ret && ret_path);
        r = osc_state_read_applied(a->opts.state_directory, a->opts.root_directory, opts, ret, ret_path,
                                   &error);
        if (r == -ENOMEM)
                return log_oom();
        /* A read problem once per distinct message; none (ENOENT) is no news. */
        if (r < 0 && error && log_once_check(&a->error, r, error))
                log_warning_errno(r, "Ignoring the last-applied OSC: %s", error);
        if (r < 0)
                return r;
        log_once_clear(&a->error);
        return 0;
}

void applied_osc_reload(AppliedOsc *a) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ bool *enabled = NULL;
        _cleanup_free_ char *path = NULL;
        size_t n;
        int r;

        assert(a);
        if (!a->units_check)
                return;
        r = applied_osc_load(a, NULL, &m, &path);
        if (r < 0)
                return;
        r = unit_health_units_from_osc(m, a->opts.replaced_units, &names, &enabled, &n);
        if (r >= 0)
                r = units_check_set_units(a->units_check, names, enabled, n);
        if (r < 0)
                log_warning_errno(r, "Cannot check the units of %s: %m", path);
        else
                log_debug("Checking the %zu units of %s.", n, path);
}

static int applied_osc_on_inotify(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        AppliedOsc *a = userdata;

        if ((ev->mask & IN_Q_OVERFLOW) || (ev->len > 0 && streq(ev->name, OSC_STATE_LAST_APPLIED)))
                applied_osc_reload(a);
        return 0;
}

/* ---- lifecycle ------------------------------------------------------------------------------------- */

int applied_osc_new(sd_event *event, const AppliedOscOptions *opts, UnitsCheck *units_check,
                    AppliedOsc **ret) {
        _cleanup_(applied_osc_freep) AppliedOsc *a = NULL;

        assert(event);
        assert(opts && opts->state_directory);
        assert(ret);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->event = event;
        a->opts = *opts;
        applied_osc_set_units_check(a, units_check);
        *ret = TAKE_PTR(a);
        return 0;
}

void applied_osc_set_units_check(AppliedOsc *a, UnitsCheck *units_check) {
        int r;

        assert(a);
        a->units_check = units_check;
        if (units_check && !a->watch) {
                r = sd_event_add_inotify(a->event, &a->watch, a->opts.state_directory,
                                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR, applied_osc_on_inotify,
                                         a);
                if (r < 0)
                        log_warning_errno(
                                r,
                                "Cannot watch %s; SystemdUnitsReady follows a new last-applied OSC "
                                "only after a restart: %m",
                                a->opts.state_directory);
        }
        applied_osc_reload(a);
}

AppliedOsc *applied_osc_free(AppliedOsc *a) {
        if (!a)
                return NULL;
        sd_event_source_disable_unref(a->watch);
        log_once_done(&a->error);
        free(a);
        return NULL;
}
