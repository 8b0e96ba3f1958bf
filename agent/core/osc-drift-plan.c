/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/containerd-config.h"
#include "core/osc-drift-plan.h"
#include "util/strv.h"
#include "util/utf8.h"

/* The shares of the summary (bytes), so that what was done is never crowded out by what drifted. */
#define SUMMARY_FINDINGS_MAX 360
#define SUMMARY_DONE_MAX 360
#define SUMMARY_SKIPPED_MAX 110
#define SUMMARY_DETAIL_MAX 100

/* One finding in the index (a struct, so sizeof() names what is sorted). */
typedef struct FindingRef {
        const OscDriftFinding *f;
} FindingRef;

typedef struct Plan {
        const OscDriftPlanParams *p;
        const OscDrift *d;
        FindingRef *index; /* the findings by kind and subject, for drifted() */
        OscChanges *c;
        char **skipped;
        const char **restored; /* sorted paths (the model's) that got an item: their units restart */
        size_t n_restored;
        const char **replaced_only; /* the replaced units' own files (never restored) */
} Plan;

static int finding_compare(const void *a, const void *b) {
        const OscDriftFinding *x = ((const FindingRef *) a)->f, *y = ((const FindingRef *) b)->f;

        if (x->kind != y->kind)
                return x->kind < y->kind ? -1 : 1;
        return strcmp(x->subject, y->subject);
}

static int string_compare(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* A wiped /etc under a large OSC has tens of thousands of findings: looked up, not scanned. */
static bool drifted(const Plan *pl, OscDriftKind kind, const char *subject) {
        const OscDriftFinding key = { .kind = kind, .subject = (char *) subject };
        const FindingRef k = { &key };

        return pl->d->n_items > 0 &&
                bsearch(&k, pl->index, pl->d->n_items, sizeof(FindingRef), finding_compare);
}

static int index_findings(Plan *pl) {
        pl->index = calloc(pl->d->n_items + 1, sizeof(FindingRef));
        if (!pl->index)
                return -ENOMEM;
        for (size_t i = 0; i < pl->d->n_items; i++)
                pl->index[i].f = &pl->d->items[i];
        qsort(pl->index, pl->d->n_items, sizeof(FindingRef), finding_compare);
        return 0;
}

static int skip(Plan *pl, const char *subject, const char *why) {
        char *s;

        if (asprintf(&s, "%s (%s)", subject, why) < 0)
                return -ENOMEM;
        if (strv_contains(pl->skipped, s)) {
                free(s);
                return 0;
        }
        return strv_consume(&pl->skipped, s);
}

/* core/osc-protected.h's rule for a repair too: nothing of the agent's own is written by an OSC. */
static bool agent_owns(const Plan *pl, const char *path) {
        _cleanup_free_ char *canonical = NULL;

        if (!pl->p->protected || pl->p->protected->n_items == 0 || !pl->p->canonicalize)
                return false;
        /* One that cannot be canonicalized cannot be written either: it fails when applied. */
        if (pl->p->canonicalize(path, &canonical, pl->p->userdata) < 0)
                return false;
        return osc_protected_find(pl->p->protected, canonical) != NULL;
}

/* The inline and secretRef files (`image` false), or the imageRef ones. */
static int add_files(Plan *pl, bool image) {
        const OscModel *m = pl->p->model;

        for (size_t i = 0; i < m->n_files; i++) {
                const OscFile *f = &m->files[i];
                OscWork *w;

                if ((f->source == OSC_FILE_IMAGE) != image || !drifted(pl, OSC_DRIFT_FILE, f->path) ||
                    strv_contains((char *const *) pl->replaced_only, f->path))
                        continue;
                if (agent_owns(pl, f->path)) {
                        if (skip(pl, f->path, "the agent's own file") < 0)
                                return -ENOMEM;
                        continue;
                }
                w = osc_changes_add_item(pl->c, image ? OSC_WORK_PULL_FILE : OSC_WORK_WRITE_FILE);
                if (!w || osc_file_copy(f, &w->file) < 0)
                        return -ENOMEM;
                pl->restored[pl->n_restored++] = f->path;
        }
        return 0;
}

static int add_registries(Plan *pl) {
        const OscModel *m = pl->p->model;

        for (size_t i = 0; m->has_containerd && i < m->n_registries; i++) {
                const OscRegistry *g = &m->registries[i];
                OscWork *w;

                if (!drifted(pl, OSC_DRIFT_REGISTRY, g->upstream))
                        continue;
                /* Probed when it was first applied; restoring its hosts.toml waits for nothing. */
                w = osc_changes_add_item(pl->c, OSC_WORK_REGISTRY);
                if (!w || osc_registry_copy(g, &w->registry) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static bool lists_restored_file(const Plan *pl, const OscUnit *u) {
        for (size_t i = 0; pl->n_restored > 0 && i < u->n_file_paths; i++)
                if (bsearch(&u->file_paths[i], pl->restored, pl->n_restored, sizeof(*pl->restored),
                            string_compare))
                        return true;
        return false;
}

static int add_command(OscChanges *cmds, const char *unit, OscUnitCommand command) {
        OscWork *w = osc_changes_add_item(cmds, OSC_WORK_UNIT_COMMAND);

        if (!w || !(w->name = strdup(unit)))
                return -ENOMEM;
        w->command = command;
        return 0;
}

/* Unit files and enablement into pl->c, the commands into `cmds` (they follow the daemon-reload). */
static int add_units(Plan *pl, OscChanges *cmds) {
        const OscModel *m = pl->p->model;

        for (size_t i = 0; i < m->n_units; i++) {
                const OscUnit *u = &m->units[i];
                bool files = drifted(pl, OSC_DRIFT_UNIT_FILES, u->name),
                     enablement = drifted(pl, OSC_DRIFT_UNIT_ENABLEMENT, u->name),
                     restart = files || drifted(pl, OSC_DRIFT_UNIT_INACTIVE, u->name) ||
                        lists_restored_file(pl, u);
                OscWork *w;

                /* A replaced unit is never written, enabled or restarted, whatever it lists: the agent
                 * runs in its place (docs/contract.md §9.4). */
                if ((!files && !enablement && !restart) || strv_contains(pl->p->replaced_units, u->name))
                        continue;
                if (streq_ptr(u->name, pl->p->self_unit)) {
                        if (skip(pl, u->name, "the agent's own unit") < 0)
                                return -ENOMEM;
                        continue;
                }
                if (files || enablement) {
                        w = osc_changes_add_item(pl->c, OSC_WORK_WRITE_UNIT);
                        if (!w || osc_unit_copy(u, &w->unit) < 0)
                                return -ENOMEM;
                }
                if (restart && add_command(cmds, u->name, osc_unit_effective_command(u)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Moves the items of `from` to the end of `to`. */
static int append(OscChanges *to, OscChanges *from) {
        for (size_t i = 0; i < from->n_items; i++) {
                OscWork *w = osc_changes_add_item(to, from->items[i].kind);

                if (!w)
                        return -ENOMEM;
                *w = from->items[i];
                from->items[i] = (OscWork) {};
        }
        return 0;
}

static int build(Plan *pl) {
        _cleanup_(osc_changes_freep) OscChanges *cmds = calloc(1, sizeof(OscChanges));
        const OscModel *m = pl->p->model;
        size_t units_before;
        bool containerd;
        int r;

        if (!cmds)
                return -ENOMEM;
        containerd = m->has_containerd && drifted(pl, OSC_DRIFT_CONTAINERD_CONFIG, CONTAINERD_CONFIG_FILE);
        if (containerd) {
                OscWork *w = osc_changes_add_item(pl->c, OSC_WORK_CONTAINERD_CONFIG);

                if (!w || !(w->containerd = json_deep_copy(m->containerd_config)))
                        return -ENOMEM;
        }
        pl->restored = calloc(m->n_files + 1, sizeof(*pl->restored));
        if (!pl->restored ||
            osc_model_files_only_for_units(m, pl->p->replaced_units, &pl->replaced_only) < 0)
                return -ENOMEM;
        r = add_files(pl, /* image= */ false);
        if (r >= 0)
                r = add_registries(pl);
        if (r >= 0)
                r = add_files(pl, /* image= */ true);
        qsort(pl->restored, pl->n_restored, sizeof(*pl->restored), string_compare);
        units_before = pl->c->n_items;
        if (r >= 0)
                r = add_units(pl, cmds);
        if (r < 0)
                return r;
        if (pl->c->n_items > units_before && !osc_changes_add_item(pl->c, OSC_WORK_DAEMON_RELOAD))
                return -ENOMEM;
        /* As executeUnitCommands: a new config.toml restarts containerd unless a command for it is there. */
        if (containerd && !osc_changes_has_command_for(cmds, OSC_CONTAINERD_UNIT) &&
            !strv_contains(pl->p->replaced_units, OSC_CONTAINERD_UNIT) &&
            add_command(cmds, OSC_CONTAINERD_UNIT, OSC_UNIT_COMMAND_RESTART) < 0)
                return -ENOMEM;
        r = append(pl->c, cmds);
        if (r < 0)
                return r;
        if (osc_changes_has_command_for(pl->c, "kubelet.service") &&
            !osc_changes_add_item(pl->c, OSC_WORK_KUBELET_HEALTH))
                return -ENOMEM;
        return 0;
}

int osc_drift_plan(const OscDriftPlanParams *p, const OscDrift *d, OscChanges **ret, char ***ret_skipped) {
        _cleanup_(osc_changes_freep) OscChanges *c = calloc(1, sizeof(OscChanges));
        Plan pl = { .p = p, .d = d, .c = c };
        int r;

        assert(p && p->model && d && ret && ret_skipped);
        if (!c)
                return -ENOMEM;
        r = index_findings(&pl);
        if (r >= 0)
                r = build(&pl);
        free(pl.index);
        free(pl.restored);
        free(pl.replaced_only);
        if (r < 0) {
                strv_free(pl.skipped);
                return r;
        }
        *ret = c->n_items > 0 ? TAKE_PTR(c) : NULL;
        *ret_skipped = pl.skipped;
        return 0;
}

/* ---- the Event ---------------------------------------------------------------------------------- */

static const char *const outcome_reasons[_OSC_DRIFT_OUTCOME_MAX] = {
        [OSC_DRIFT_REPAIRED] = "OSCDriftRepaired",
        [OSC_DRIFT_REPAIR_FAILED] = "OSCDriftRepairFailed",
        [OSC_DRIFT_WARNED] = "OSCDriftDetected",
        [OSC_DRIFT_NOTHING_TO_REPAIR] = "OSCDriftDetected",
};

const char *osc_drift_outcome_reason(OscDriftOutcome o) {
        return o >= 0 && o < _OSC_DRIFT_OUTCOME_MAX ? outcome_reasons[o] : NULL;
}

typedef struct Text {
        char *s;
        size_t len;
} Text;

static int text_add(Text *t, const char *fmt, ...) _printf_(2, 3);
static int text_add(Text *t, const char *fmt, ...) {
        _cleanup_free_ char *piece = NULL;
        va_list ap;
        char *n;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&piece, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        n = realloc(t->s, t->len + (size_t) k + 1);
        if (!n)
                return -ENOMEM;
        memcpy(n + t->len, piece, (size_t) k + 1);
        t->s = n;
        t->len += (size_t) k;
        return 0;
}

/* `items` joined with ", " within `budget` bytes; the rest counted as "(+N more)". Each item once. */
static int text_add_list(Text *t, char *const *items, size_t budget) {
        size_t used = 0, shown = 0, n = strv_length(items);
        int r = 0;

        if (!items)
                return 0;
        for (size_t i = 0; i < n && r >= 0; i++) {
                size_t l = strlen(items[i]);

                if (shown > 0 && used + 2 + l > budget)
                        break;
                if (shown == 0 && l > budget) { /* one too long for the share: cut it */
                        _cleanup_free_ char *cut = utf8_sanitize(items[i], l, budget);

                        r = cut ? text_add(t, "%s", cut) : -ENOMEM;
                } else
                        r = text_add(t, "%s%s", shown > 0 ? ", " : "", items[i]);
                used += (shown > 0 ? 2 : 0) + l;
                shown++;
        }
        if (r >= 0 && shown < n)
                r = text_add(t, " (+%zu more)", n - shown);
        return r;
}

static int findings_list(const OscDrift *d, char ***ret) {
        _cleanup_strv_free_ char **l = calloc(d->n_items + 1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < d->n_items; i++)
                if (asprintf(&l[i], "%s %s", d->items[i].reason, d->items[i].subject) < 0) {
                        l[i] = NULL;
                        return -ENOMEM;
                }
        if (strv_uniq(l) < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(l);
        return 0;
}

/* How many items of `plan` are done (refused false) or were left out (refused true). */
static size_t items_done(const OscChanges *plan, bool refused) {
        size_t n = 0;

        for (size_t i = 0; plan && i < plan->n_items; i++)
                n += plan->items[i].done && plan->items[i].refused == refused;
        return n;
}

static int done_list(const OscChanges *plan, char ***ret) {
        _cleanup_strv_free_ char **l = calloc((plan ? plan->n_items : 0) + 1, sizeof(char *));
        size_t n = 0;

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; plan && i < plan->n_items; i++)
                if (plan->items[i].done && !plan->items[i].refused &&
                    osc_work_describe(&plan->items[i], &l[n++]) < 0) {
                        l[--n] = NULL;
                        return -ENOMEM;
                }
        if (strv_uniq(l) < 0)
                return -ENOMEM;
        *ret = n > 0 ? TAKE_PTR(l) : NULL;
        return 0;
}

int osc_drift_summary(const OscDrift *d, const OscChanges *plan, char *const *skipped, OscDriftOutcome o,
                      const char *detail, char **ret) {
        _cleanup_strv_free_ char **findings = NULL, **done = NULL;
        _cleanup_free_ char *why = NULL;
        Text t = {};
        int r;

        assert(d && ret);
        r = findings_list(d, &findings);
        if (r >= 0)
                r = done_list(plan, &done);
        if (r >= 0)
                r = text_add(&t, "Drift from the last-applied OSC: ");
        if (r >= 0)
                r = text_add_list(&t, findings, SUMMARY_FINDINGS_MAX);
        switch (o) {
        case OSC_DRIFT_REPAIRED:
                if (r >= 0 && detail)
                        r = text_add(&t, ". Repaired %zu of %zu: ", items_done(plan, /* refused= */ false),
                                     plan ? plan->n_items : 0);
                else if (r >= 0)
                        r = text_add(&t, ". Repaired: ");
                if (r >= 0)
                        r = text_add_list(&t, done, SUMMARY_DONE_MAX - (detail ? SUMMARY_DETAIL_MAX : 0));
                if (r >= 0 && detail) {
                        why = utf8_sanitize(detail, strlen(detail), SUMMARY_DETAIL_MAX);
                        r = why ? text_add(&t, "; refused: %s", why) : -ENOMEM;
                }
                break;
        case OSC_DRIFT_REPAIR_FAILED:
                why = utf8_sanitize(strempty(detail), strlen(strempty(detail)), SUMMARY_DETAIL_MAX);
                if (r >= 0)
                        r = why ? text_add(&t, ". Repair failed: %s", why) : -ENOMEM;
                if (r >= 0 && done)
                        r = text_add(&t, "; done before: ");
                if (r >= 0 && done)
                        r = text_add_list(&t, done, SUMMARY_DONE_MAX - SUMMARY_DETAIL_MAX);
                break;
        case OSC_DRIFT_WARNED:
                if (r >= 0)
                        r = text_add(&t, ". Nothing was touched (osc.driftRepair: warn)");
                break;
        default:
                if (r >= 0)
                        r = text_add(&t, ". Nothing was touched: nothing of it is the agent's to restore");
                break;
        }
        if (r >= 0 && skipped)
                r = text_add(&t, ". Not repaired: ");
        if (r >= 0 && skipped)
                r = text_add_list(&t, skipped, SUMMARY_SKIPPED_MAX);
        if (r >= 0)
                r = text_add(&t, ".");
        if (r < 0) {
                free(t.s);
                return r;
        }
        *ret = t.s;
        return 0;
}
