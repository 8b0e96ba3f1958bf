/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/go-duration.h"
#include "core/unit-health.h"
#include "util/string-util.h"
#include "util/strv.h"

void unit_health_verdict_done(UnitHealthVerdict *v) {
        if (!v)
                return;
        free(v->message);
        v->message = NULL;
}

/* Adds an item to a growing "; "-joined message. */
static int joined_add(char **j, const char *fmt, ...) _printf_(2, 3);
static int joined_add(char **j, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = strextendv_with_separator(j, "; ", fmt, ap);
        va_end(ap);
        return r;
}

bool unit_health_inactive_unexpected(const UnitHealthState *u) {
        if (!streq_ptr(u->active_state, "inactive"))
                return false;
        /* Oneshot services and timer/path-triggered ones rest "inactive (dead)" between runs. */
        return !(streq_ptr(u->sub_state, "dead") && (streq_ptr(u->service_type, "oneshot") || u->triggered));
}

/* 1: the unit is fine as it is; otherwise adds it to `unhealthy` or `progressing`. */
static int judge(const UnitHealthState *u, uint64_t now_usec, uint64_t stuck_usec, char **unhealthy,
                 char **progressing) {
        const char *a = strempty(u->active_state);
        char d[GO_DURATION_STR_MAX];

        if (!streq_ptr(u->load_state, "loaded"))
                return u->enabled ? joined_add(unhealthy, "%s: not loaded", u->name) : 1;
        if (streq(a, "active"))
                return u->enabled ? 1 : joined_add(unhealthy, "%s: active but should be disabled", u->name);
        if (streq(a, "failed"))
                return u->enabled ? joined_add(unhealthy, "%s: failed", u->name) : 1;
        if (streq(a, "activating") || streq(a, "deactivating")) {
                /* Restart=always services pass "activating (auto-restart)" between runs: normal. */
                uint64_t for_usec = now_usec > u->state_change_usec ? now_usec - u->state_change_usec : 0;

                if (streq_ptr(u->sub_state, "auto-restart"))
                        return 1;
                go_duration_format_seconds(d, sizeof(d), for_usec);
                if (for_usec >= stuck_usec)
                        return joined_add(unhealthy, "%s: stuck in %s for %s", u->name, a, d);
                return joined_add(progressing, "%s: %s for %s", u->name, a, d);
        }
        if (u->enabled && unit_health_inactive_unexpected(u))
                return joined_add(unhealthy, "%s: inactive but should be enabled", u->name);
        return 1;
}

int unit_health_evaluate(const UnitHealthState *units, size_t n, uint64_t now_usec, uint64_t stuck_usec,
                         UnitHealthVerdict *ret) {
        _cleanup_free_ char *unhealthy_s = NULL, *progressing_s = NULL;
        int r = 0;

        assert(units || n == 0);
        assert(ret);

        for (size_t i = 0; i < n && r >= 0; i++)
                r = judge(&units[i], now_usec, stuck_usec, &unhealthy_s, &progressing_s);
        if (r < 0)
                return r;

        if (unhealthy_s)
                *ret = (UnitHealthVerdict) { false, UNIT_HEALTH_REASON_UNHEALTHY, TAKE_PTR(unhealthy_s) };
        else if (progressing_s)
                *ret = (UnitHealthVerdict) { true, UNIT_HEALTH_REASON_PROGRESSING, TAKE_PTR(progressing_s) };
        else {
                char *m = strdup(UNIT_HEALTH_MESSAGE_HEALTHY);

                if (!m)
                        return -ENOMEM;
                *ret = (UnitHealthVerdict) { true, UNIT_HEALTH_REASON_HEALTHY, m };
        }
        return 0;
}

typedef struct Wanted {
        const char *name;
        bool enabled;
} Wanted;

static int wanted_by_name(const void *a, const void *b) {
        return strcmp(((const Wanted *) a)->name, ((const Wanted *) b)->name);
}

int unit_health_units_from_osc(const OscModel *m, char *const *replaced, const char ***ret_names,
                               bool **ret_enabled, size_t *ret_n) {
        _cleanup_free_ Wanted *units = NULL;
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ bool *enabled = NULL;
        size_t n = 0;

        assert(m);
        assert(ret_names);
        assert(ret_enabled);
        assert(ret_n);
        units = calloc(m->n_units + 1, sizeof(Wanted));
        names = calloc(m->n_units + 1, sizeof(char *));
        enabled = calloc(m->n_units + 1, sizeof(bool));
        if (!units || !names || !enabled)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_units; i++) {
                const OscUnit *u = &m->units[i];

                if (!strv_contains(replaced, u->name))
                        units[n++] = (Wanted) {
                                .name = u->name,
                                .enabled = u->enable >= 0 ? u->enable : u->content || u->n_drop_ins > 0,
                        };
        }
        qsort(units, n, sizeof(Wanted), wanted_by_name);
        for (size_t i = 0; i < n; i++) {
                names[i] = units[i].name;
                enabled[i] = units[i].enabled;
        }
        *ret_names = TAKE_PTR(names);
        *ret_enabled = TAKE_PTR(enabled);
        *ret_n = n;
        return 0;
}

UnitRunning unit_health_running(const UnitHealthState *u, const char **ret_why) {
        const char *a = strempty(u->active_state);

        assert(ret_why);
        *ret_why = a;
        if (!streq_ptr(u->load_state, "loaded")) {
                *ret_why = u->load_state ? u->load_state : "not loaded";
                return UNIT_NOT_RUNNING;
        }
        if (streq(a, "failed"))
                return UNIT_NOT_RUNNING;
        if (streq(a, "active") || (streq(a, "inactive") && !unit_health_inactive_unexpected(u)))
                return UNIT_RUNNING;
        return UNIT_WAITING;
}

int unit_health_units_started(const OscModel *m, char *const *replaced, const char ***ret_names,
                              size_t *ret_n) {
        _cleanup_free_ const char **names = NULL;
        _cleanup_free_ bool *enabled = NULL;
        size_t n, k = 0;
        int r;

        assert(ret_names);
        assert(ret_n);
        r = unit_health_units_from_osc(m, replaced, &names, &enabled, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (osc_unit_effective_command(osc_model_find_unit(m, names[i])) != OSC_UNIT_COMMAND_STOP)
                        names[k++] = names[i];
        *ret_names = TAKE_PTR(names);
        *ret_n = k;
        return 0;
}
