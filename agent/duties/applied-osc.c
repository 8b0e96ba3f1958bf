/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/osc-drift.h"
#include "core/osc-model.h"
#include "core/osc.h"
#include "core/unit-health.h"
#include "duties/applied-osc.h"
#include "util/fileio.h"
#include "util/log.h"

/* The OS's own unit directories, below osc.rootDirectory, where a unit the OSC only adds drop-ins
 * to lives (upstream's resolveUnitPath). */
static const char *const os_unit_dirs[] = { "/usr/lib/systemd/system", "/lib/systemd/system" };

struct AppliedOsc {
        sd_event *event;                /* borrowed */
        AppliedOscOptions opts;         /* strings borrowed */
        UnitsCheck *units_check;        /* borrowed; NULL until the system bus was up */
        Reporter *reporter;             /* borrowed */
        sd_event_source *watch;         /* owned: inotify on the state directory; NULL if unavailable */
        char *error;                    /* owned: the last read/decode error, logged once */
        bool drift_checked;
};

/* A path the OSC names, below osc.rootDirectory (NULL on -ENOMEM; OSC paths are absolute). */
static char *below_root(const AppliedOsc *a, const char *path) {
        char *p = NULL;

        (void) path_below_root(a->opts.root_directory ?: "/", path, &p);
        return p;
}

/* Reads our last-applied OSC, else GNA's; -ENOENT when neither exists. */
static int applied_osc_read(AppliedOsc *a, OscModel **ret, char **ret_path, char **ret_error) {
        _cleanup_free_ char *ours = NULL, *gna = below_root(a, OSC_STATE_GNA_LAST_APPLIED), *data = NULL;
        char **path = &ours;
        size_t size;
        int r;

        if (!gna || asprintf(&ours, "%s/%s", a->opts.state_directory, OSC_STATE_LAST_APPLIED) < 0)
                return -ENOMEM;
        r = read_full_file(ours, OSC_YAML_MAX, &data, &size);
        if (r == -ENOENT) {
                path = &gna;
                r = read_full_file(gna, OSC_YAML_MAX, &data, &size);
        }
        if (r < 0) {
                if (r != -ENOENT && asprintf(ret_error, "cannot read %s: %s", *path, strerror(-r)) < 0)
                        return -ENOMEM;
                return r;
        }
        r = osc_model_decode_yaml(data, size, NULL, ret, ret_error);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(*path);
        return 0;
}

/* Logs a read problem once per distinct message. */
static void applied_osc_note_error(AppliedOsc *a, int r, char *error) {
        if (r == -ENOMEM) {
                log_oom();
                return;
        }
        if (!error)
                return;
        if (!streq_ptr(error, a->error))
                log_warning_errno(r, "Ignoring the last-applied OSC: %s", error);
        free(a->error);
        a->error = error;
}

void applied_osc_reload(AppliedOsc *a) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ bool *enabled = NULL;
        _cleanup_free_ char *path = NULL;
        char *error = NULL;
        size_t n;
        int r;

        assert(a);
        if (!a->units_check)
                return;
        r = applied_osc_read(a, &m, &path, &error);
        if (r < 0) {
                applied_osc_note_error(a, r, error);
                return;
        }
        free(a->error);
        a->error = NULL;
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

/* ---- the drift check ---------------------------------------------------------------------------- */

static int read_or_stat(const char *path, char **ret, size_t *ret_size) {
        struct stat st;

        if (ret)
                return read_full_file(path, OSC_YAML_MAX, ret, ret_size);
        return stat(path, &st) < 0 ? -errno : 0;
}

static int applied_osc_drift_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                                  void *userdata) {
        AppliedOsc *a = userdata;
        _cleanup_free_ char *path = NULL;
        int r;

        if (place == OSC_DRIFT_NODE_FILE)
                path = below_root(a, name);
        else if (asprintf(&path, "%s/%s", a->opts.unit_directory, name) < 0)
                path = NULL;
        if (!path)
                return -ENOMEM;
        r = read_or_stat(path, ret, ret_size);
        for (size_t i = 0; r == -ENOENT && fallback && i < ELEMENTSOF(os_unit_dirs); i++) {
                _cleanup_free_ char *dir = below_root(a, os_unit_dirs[i]), *os_path = NULL;

                if (!dir || asprintf(&os_path, "%s/%s", dir, name) < 0)
                        return -ENOMEM;
                r = read_or_stat(os_path, ret, ret_size);
        }
        return r;
}

void applied_osc_check_drift(AppliedOsc *a) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ char *path = NULL;
        OscDriftFinding *f = NULL;
        char *error = NULL;
        size_t n = 0;
        int r;

        assert(a);
        if (a->drift_checked)
                return;
        a->drift_checked = true;
        r = applied_osc_read(a, &m, &path, &error);
        if (r == -ENOENT)
                log_info("No last-applied OSC; skipping the drift check.");
        if (r < 0) {
                applied_osc_note_error(a, r, error);
                return;
        }
        r = osc_drift_check(m, a->opts.replaced_units, applied_osc_drift_read, a, &f, &n);
        if (r < 0) {
                log_oom();
                return;
        }
        for (size_t i = 0; i < n; i++) {
                log_warning("Drift from %s: %s: %s", path, f[i].reason, f[i].message);
                (void) reporter_emit_event(a->reporter, "Warning", f[i].reason, f[i].message);
        }
        log_info("Drift check against %s: %zu finding%s.", path, n, n == 1 ? "" : "s");
        osc_drift_findings_free(f, n);
}

/* ---- lifecycle ------------------------------------------------------------------------------------- */

int applied_osc_new(sd_event *event, const AppliedOscOptions *opts, UnitsCheck *units_check, Reporter *reporter,
                    AppliedOsc **ret) {
        _cleanup_(applied_osc_freep) AppliedOsc *a = NULL;

        assert(event);
        assert(opts && opts->state_directory && opts->unit_directory);
        assert(reporter);
        assert(ret);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->event = event;
        a->opts = *opts;
        a->reporter = reporter;
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
                                         IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR, applied_osc_on_inotify, a);
                if (r < 0)
                        log_warning_errno(r, "Cannot watch %s; SystemdUnitsReady follows a new last-applied OSC "
                                          "only after a restart: %m", a->opts.state_directory);
        }
        applied_osc_reload(a);
}

AppliedOsc *applied_osc_free(AppliedOsc *a) {
        if (!a)
                return NULL;
        sd_event_source_disable_unref(a->watch);
        free(a->error);
        free(a);
        return NULL;
}
