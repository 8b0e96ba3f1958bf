/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/unit-guard.h"
#include "core/unit-name.h"
#include "util/strv.h"

#define SLICE_SUFFIX ".slice"

static const char *const role_words[_UNIT_GUARD_ROLE_MAX] = {
        [UNIT_GUARD_AGENT] = "the agent's own unit",
        [UNIT_GUARD_KUBELET] = "the kubelet",
        [UNIT_GUARD_CONTAINERD] = "containerd",
};

int unit_guard_init(UnitGuard *g, const char *self_unit, char *const *replaced_units,
                    const char *kubelet_unit, const char *containerd_unit) {
        const char *names[_UNIT_GUARD_ROLE_MAX] = { self_unit, kubelet_unit, containerd_unit };

        *g = (UnitGuard) {};
        if (strv_copy(replaced_units, &g->replaced_units) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < _UNIT_GUARD_ROLE_MAX; i++)
                if (names[i] && !(g->units[i].name = strdup(names[i]))) {
                        unit_guard_done(g);
                        return -ENOMEM;
                }
        return 0;
}

static void edge_done(UnitGuardEdge *e) {
        free(e->unit);
        free(e->declared_by);
        free(e->named);
}

void unit_guard_done(UnitGuard *g) {
        if (!g)
                return;
        strv_freep(&g->replaced_units);
        for (size_t i = 0; i < _UNIT_GUARD_ROLE_MAX; i++) {
                UnitGuardUnit *u = &g->units[i];

                for (size_t k = 0; k < u->n_edges; k++)
                        edge_done(&u->edges[k]);
                free(u->edges);
                free(u->name);
                free(u->slice);
                *u = (UnitGuardUnit) {};
        }
}

int unit_guard_set_slice(UnitGuard *g, UnitGuardRole role, const char *slice) {
        assert(role >= 0 && role < _UNIT_GUARD_ROLE_MAX);
        return free_and_strdup(&g->units[role].slice, isempty(slice) ? NULL : slice);
}

int unit_guard_add_edge(UnitGuard *g, UnitGuardRole role, UnitGuardEdgeKind kind, const char *unit,
                        const char *declared_by, const char *property, const char *named) {
        UnitGuardUnit *u;
        UnitGuardEdge *edges, e;

        assert(role >= 0 && role < _UNIT_GUARD_ROLE_MAX);
        assert(unit && declared_by && property && named);
        u = &g->units[role];
        if (u->n_edges >= UNIT_GUARD_EDGES_MAX)
                return -E2BIG;
        e = (UnitGuardEdge) { .kind = kind,
                              .property = property,
                              .unit = strdup(unit),
                              .declared_by = strdup(declared_by),
                              .named = strdup(named) };
        if (!e.unit || !e.declared_by || !e.named) {
                edge_done(&e);
                return -ENOMEM;
        }
        edges = reallocarray(u->edges, u->n_edges + 1, sizeof(UnitGuardEdge));
        if (!edges) {
                edge_done(&e);
                return -ENOMEM;
        }
        u->edges = edges;
        u->edges[u->n_edges++] = e;
        return 0;
}

static bool is_slice(const char *unit) {
        return streq_ptr(unit_name_type(unit), SLICE_SUFFIX);
}

static bool is_slice_or_target(const char *unit) {
        const char *t = unit_name_type(unit);

        return streq_ptr(t, SLICE_SUFFIX) || streq_ptr(t, ".target");
}

bool unit_guard_slice_contains(const char *slice, const char *inner) {
        size_t n;

        if (!slice || !inner || !is_slice(slice) || !is_slice(inner))
                return false;
        if (streq(slice, "-" SLICE_SUFFIX))
                return true;
        /* systemd's slice hierarchy is in the name: a-b-c.slice is below a-b.slice and a.slice. */
        n = strlen(slice) - strlen(SLICE_SUFFIX);
        return strncmp(slice, inner, n) == 0 && (streq(inner + n, SLICE_SUFFIX) || inner[n] == '-');
}

/* ---- the OSC's own unit texts ---- */

typedef struct PropertyKind {
        const char *property;
        UnitGuardEdgeKind kind;
} PropertyKind;

/* The dependency properties of a protected unit's own text, and what each means for it. */
static const PropertyKind own_properties[] = {
        { "Requires", UNIT_GUARD_REACHES },    { "Requisite", UNIT_GUARD_REACHES },
        { "BindsTo", UNIT_GUARD_REACHES },     { "PartOf", UNIT_GUARD_REACHES },
        { "Conflicts", UNIT_GUARD_CONFLICTS },
};

/* Another unit's properties that act on the units they name. RequiredBy= (in [Install]) becomes
 * the named unit's Requires= when the OSC enables the unit. */
static const PropertyKind foreign_properties[] = {
        { "Conflicts", UNIT_GUARD_CONFLICTS },
        { "PropagatesStopTo", UNIT_GUARD_REACHES },
        { "RequiredBy", UNIT_GUARD_REACHES },
};

static UnitGuardRole role_of(const UnitGuard *g, const char *unit) {
        for (size_t i = 0; i < _UNIT_GUARD_ROLE_MAX; i++)
                if (streq_ptr(g->units[i].name, unit))
                        return (UnitGuardRole) i;
        return _UNIT_GUARD_ROLE_INVALID;
}

/* Adds an edge for each word of `value` (a list of unit names) as `property` of `unit`. */
static int learn_words(UnitGuard *g, const char *unit, const char *property, const char *value) {
        UnitGuardRole own = role_of(g, unit);

        for (const char *p = value; *p;) {
                _cleanup_free_ char *word = NULL;
                size_t n;
                int r = 0;

                p += strspn(p, " \t");
                n = strcspn(p, " \t");
                if (n == 0)
                        break;
                word = strndup(p, n);
                if (!word)
                        return -ENOMEM;
                p += n;
                if (strchr(word, '%'))
                        continue; /* a specifier: not a unit we can name */
                /* A protected unit's own dependencies: what reaches it. */
                for (size_t i = 0; own >= 0 && i < ELEMENTSOF(own_properties) && r >= 0; i++)
                        if (streq(property, own_properties[i].property))
                                r = unit_guard_add_edge(g, own, own_properties[i].kind, word, unit,
                                                        own_properties[i].property, word);
                if (r < 0)
                        return r;
                /* Any unit's, a protected one's too (kubelet.service with RequiredBy=inplace-agent.service).
                 */
                for (size_t i = 0; i < ELEMENTSOF(foreign_properties); i++) {
                        if (!streq(property, foreign_properties[i].property))
                                continue;
                        /* Naming a protected unit or a slice it runs in. */
                        for (size_t k = 0; k < _UNIT_GUARD_ROLE_MAX && r >= 0; k++)
                                if ((int) k != own &&
                                    (streq_ptr(word, g->units[k].name) ||
                                     unit_guard_slice_contains(word, g->units[k].slice)))
                                        r = unit_guard_add_edge(g, (UnitGuardRole) k,
                                                                foreign_properties[i].kind, unit, unit,
                                                                foreign_properties[i].property, word);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static int learn_line(UnitGuard *g, const char *unit, char *line) {
        char *eq, *key, *value;

        line = strip(line);
        if (*line == '#' || *line == ';' || *line == '[')
                return 0;
        eq = strchr(line, '=');
        if (!eq)
                return 0;
        *eq = 0;
        key = strip(line);
        value = strip(eq + 1);
        if (streq(key, "Slice") && role_of(g, unit) >= 0)
                return unit_guard_set_slice(g, role_of(g, unit), value);
        return learn_words(g, unit, key, value);
}

/* One unit file or drop-in: "Key=value" lines, a trailing backslash continuing a line. */
static int learn_text(UnitGuard *g, const char *unit, const char *text) {
        _cleanup_free_ char *copy = NULL;
        char *line, *next;
        int r;

        if (!text)
                return 0;
        copy = strdup(text);
        if (!copy)
                return -ENOMEM;
        for (line = copy; line; line = next) {
                char *end;

                next = strchr(line, '\n');
                while (next && next > line && next[-1] == '\\') {
                        next[-1] = ' ';
                        *next = ' ';
                        next = strchr(next, '\n');
                }
                if (next)
                        *next++ = 0;
                end = line + strlen(line);
                if (end > line && end[-1] == '\\')
                        end[-1] = 0;
                r = learn_line(g, unit, line);
                if (r < 0)
                        return r;
        }
        return 0;
}

int unit_guard_learn_osc(UnitGuard *g, const OscChanges *c) {
        int r;

        for (size_t i = 0; i < c->n_items; i++) {
                const OscUnit *u = &c->items[i].unit;

                if (c->items[i].kind != OSC_WORK_WRITE_UNIT)
                        continue;
                r = learn_text(g, u->name, u->content);
                for (size_t k = 0; r >= 0 && k < u->n_drop_ins; k++)
                        r = learn_text(g, u->name, u->drop_ins[k].content);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- the verdict ---- */

typedef enum Act {
        ACT_STOP,
        ACT_RESTART,
        ACT_REMOVE, /* a unit the OSC no longer has: disabled, stopped or restarted */
} Act;

static const char *fixed_reason(const char *unit) {
        if (streq(unit, "-" SLICE_SUFFIX))
                return "the root slice contains every unit, the agent, the kubelet and containerd among them";
        if (streq(unit, "system" SLICE_SUFFIX))
                return "it contains the system's services, the agent, the kubelet and containerd among them";
        if (streq(unit, "init.scope"))
                return "it is systemd's own scope (PID 1)";
        return NULL;
}

/* "inplace-agent.service (the agent's own unit), kubelet.service (the kubelet)": the protected units
 * inside `slice`. NULL when there is none. */
static int slice_members(const UnitGuard *g, const char *slice, char **ret) {
        _cleanup_free_ char *list = NULL;

        *ret = NULL;
        for (size_t i = 0; i < _UNIT_GUARD_ROLE_MAX; i++) {
                const UnitGuardUnit *u = &g->units[i];
                char *grown;

                if (!u->name || !unit_guard_slice_contains(slice, u->slice))
                        continue;
                if (asprintf(&grown, "%s%s%s (%s)", strempty(list), list ? ", " : "", u->name,
                             role_words[i]) < 0)
                        return -ENOMEM;
                free(list);
                list = grown;
        }
        *ret = TAKE_PTR(list);
        return 0;
}

static int why_edge(const UnitGuardEdge *e, const char *unit, UnitGuardRole role, char **ret) {
        return asprintf(ret, "%s it %s %s (%s): %s has %s=%s",
                        e->kind == UNIT_GUARD_CONFLICTS ? "starting" : "stopping or restarting",
                        e->kind == UNIT_GUARD_CONFLICTS ? "stops" : "stops or restarts", unit,
                        role_words[role], e->declared_by, e->property, e->named) < 0 ?
                -ENOMEM :
                1;
}

static int check_edges(const UnitGuard *g, const char *unit, Act act, char **ret_why) {
        for (size_t i = 0; i < _UNIT_GUARD_ROLE_MAX; i++) {
                const UnitGuardUnit *p = &g->units[i];

                for (size_t k = 0; k < p->n_edges; k++) {
                        const UnitGuardEdge *e = &p->edges[k];

                        if (!streq(e->unit, unit))
                                continue;
                        if (e->kind == UNIT_GUARD_CONFLICTS) {
                                if (act == ACT_STOP)
                                        continue; /* only a start stops what conflicts */
                        } else if (i != UNIT_GUARD_AGENT && !is_slice_or_target(unit))
                                /* The kubelet's and containerd's services may hang on each other (and
                                 * on others) by design: restarting containerd may restart the kubelet.
                                 * Only a slice or target taking them down is refused. */
                                continue;
                        return why_edge(e, p->name, (UnitGuardRole) i, ret_why);
                }
        }
        return 0;
}

/* 1 with *ret_why when `act` on `unit` is refused, else 0. */
static int check_unit(const UnitGuard *g, const char *unit, Act act, char **ret_why) {
        _cleanup_free_ char *members = NULL;
        const char *fixed;
        int r;

        if (streq_ptr(unit, g->units[UNIT_GUARD_AGENT].name)) {
                if (act == ACT_RESTART)
                        return 0; /* the agent restarting itself: last, once (osc-diff, osc-apply) */
                return asprintf(
                               ret_why,
                               "%s the agent's own unit (restart.selfUnit) would stop the agent; "
                               "an OSC may change it (the agent then restarts itself) but not stop or remove it",
                               act == ACT_STOP ? "stopping" : "removing") < 0 ?
                        -ENOMEM :
                        1;
        }
        if (strv_contains(g->replaced_units, unit))
                return asprintf(ret_why,
                                "the agent runs in place of this unit (osc.replacedUnits); an OSC "
                                "never stops, restarts or removes it") < 0 ?
                        -ENOMEM :
                        1;
        fixed = fixed_reason(unit);
        if (fixed)
                return asprintf(ret_why, "%s", fixed) < 0 ? -ENOMEM : 1;
        r = slice_members(g, unit, &members);
        if (r < 0)
                return r;
        if (members)
                return asprintf(ret_why, "the slice contains %s; stopping or restarting it stops them",
                                members) < 0 ?
                        -ENOMEM :
                        1;
        return check_edges(g, unit, act, ret_why);
}

static int check_item(const UnitGuard *g, const OscWork *w, char **ret_why) {
        switch (w->kind) {
        case OSC_WORK_WRITE_UNIT:
                /* Every changed unit gets its command (osc-diff): judged here, before its file. */
                return check_unit(g, w->unit.name,
                                  osc_unit_effective_command(&w->unit) == OSC_UNIT_COMMAND_STOP ?
                                          ACT_STOP :
                                          ACT_RESTART,
                                  ret_why);
        case OSC_WORK_DELETE_UNIT:
                return check_unit(g, w->unit.name, ACT_REMOVE, ret_why);
        case OSC_WORK_UNIT_COMMAND:
                return check_unit(g, w->name, w->command == OSC_UNIT_COMMAND_STOP ? ACT_STOP : ACT_RESTART,
                                  ret_why);
        default:
                return 0;
        }
}

int unit_guard_check_changes(const UnitGuard *g, const OscChanges *c, size_t *ret_index, char **ret_why) {
        for (size_t i = 0; i < c->n_items; i++) {
                int r;

                if (c->items[i].done)
                        continue;
                r = check_item(g, &c->items[i], ret_why);
                if (r != 0) {
                        if (r > 0)
                                *ret_index = i;
                        return r;
                }
        }
        return 0;
}

bool unit_guard_is_self_restart(const char *self_unit, const OscWork *w) {
        return w->kind == OSC_WORK_UNIT_COMMAND && w->command != OSC_UNIT_COMMAND_STOP && self_unit &&
                streq_ptr(w->name, self_unit);
}
