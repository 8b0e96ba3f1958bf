/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "apply/osc-guard.h"
#include "core/unit-guard.h"
#include "systemd/unit-state.h"
#include "util/strv.h"

struct OscGuard {
        sd_bus *bus;               /* ref held */
        sd_bus_slot *slot;         /* owned: the read in flight */
        const OscChanges *changes; /* borrowed */
        UnitGuard facts;           /* owned */
        int role;                  /* the UnitGuardRole being read; -1 before the first */
        char **queue;              /* owned: that unit and those its stop reaches it through */
        size_t n_queue, next;      /* queue[next] is being read */
        OscGuardDone done;
        void *userdata;
};

/* The lists by which stopping or restarting the named unit reaches the unit that has them. */
static const UnitDeps reach_lists[] = {
        UNIT_DEPS_REQUIRES,
        UNIT_DEPS_REQUISITE,
        UNIT_DEPS_BINDS_TO,
        UNIT_DEPS_PART_OF,
};

bool osc_guard_needed(const OscChanges *c) {
        for (size_t i = 0; c && i < c->n_items; i++) {
                OscWorkKind k = c->items[i].kind;

                if (!c->items[i].done &&
                    (k == OSC_WORK_WRITE_UNIT || k == OSC_WORK_DELETE_UNIT || k == OSC_WORK_UNIT_COMMAND))
                        return true;
        }
        return false;
}

OscGuard *osc_guard_free(OscGuard *g) {
        if (!g)
                return NULL;
        sd_bus_slot_unref(g->slot);
        sd_bus_unref(g->bus);
        unit_guard_done(&g->facts);
        strv_free(g->queue);
        free(g);
        return NULL;
}

static void finish(OscGuard *g, int error, const char *unit, const char *why) {
        g->slot = sd_bus_slot_unref(g->slot);
        g->done(g, error, unit, why, g->userdata);
}

static void verdict(OscGuard *g) {
        _cleanup_free_ char *why = NULL;
        size_t index = 0;
        int r;

        r = unit_guard_learn_osc(&g->facts, g->changes);
        if (r >= 0)
                r = unit_guard_check_changes(&g->facts, g->changes, &index, &why);
        if (r == -E2BIG)
                return finish(g, -EPERM, "OSC units",
                              "too many dependencies on the agent, the kubelet or containerd to judge");
        if (r < 0)
                return finish(g, r, "OSC units", strerror(-r));
        if (r > 0)
                return finish(g, -EPERM, osc_work_target(&g->changes->items[index]), why);
        finish(g, 0, NULL, NULL);
}

static int enqueue(OscGuard *g, const char *unit) {
        char **q;

        if (strv_contains(g->queue, unit) || g->n_queue >= OSC_GUARD_UNITS_MAX)
                return 0;
        q = reallocarray(g->queue, g->n_queue + 2, sizeof(char *));
        if (!q)
                return -ENOMEM;
        g->queue = q;
        q[g->n_queue] = strdup(unit);
        if (!q[g->n_queue])
                return -ENOMEM;
        q[++g->n_queue] = NULL;
        return 0;
}

/* What the protected unit itself says: its slice and what starting stops it. */
static int take_own(OscGuard *g, const char *self, const UnitState *st) {
        int r = unit_guard_set_slice(&g->facts, g->role, st->slice);

        for (char **u = st->deps[UNIT_DEPS_CONFLICTS]; r >= 0 && u && *u; u++)
                r = unit_guard_add_edge(&g->facts, g->role, UNIT_GUARD_CONFLICTS, *u, self, "Conflicts", *u);
        /* Declared by the other unit: named as it wrote it. */
        for (char **u = st->deps[UNIT_DEPS_CONFLICTED_BY]; r >= 0 && u && *u; u++)
                r = unit_guard_add_edge(&g->facts, g->role, UNIT_GUARD_CONFLICTS, *u, *u, "Conflicts", self);
        for (char **u = st->deps[UNIT_DEPS_STOP_PROPAGATED_FROM]; r >= 0 && u && *u; u++)
                r = unit_guard_add_edge(&g->facts, g->role, UNIT_GUARD_REACHES, *u, *u, "PropagatesStopTo",
                                        self);
        return r;
}

static int take_reach(OscGuard *g, const char *unit, const UnitState *st) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(reach_lists); i++) {
                const char *property = unit_deps_to_string(reach_lists[i]);

                for (char **u = st->deps[reach_lists[i]]; r >= 0 && u && *u; u++) {
                        r = unit_guard_add_edge(&g->facts, g->role, UNIT_GUARD_REACHES, *u, unit, property,
                                                *u);
                        if (r >= 0)
                                r = enqueue(g, *u); /* what stops *u stops `unit` too */
                }
        }
        return r;
}

static void on_state(int error, const UnitState *st, void *userdata);

/* Sends the next read: the next unit of this role's closure, else the first of the next protected
 * unit. 0 with nothing sent once every role is read (the verdict is due). */
static int send_next(OscGuard *g) {
        while (g->next >= g->n_queue) {
                const char *name;
                int r;

                if (++g->role >= _UNIT_GUARD_ROLE_MAX)
                        return 0;
                g->queue = strv_free(g->queue);
                g->n_queue = g->next = 0;
                name = g->facts.units[g->role].name;
                if (name) {
                        r = enqueue(g, name);
                        if (r < 0)
                                return r;
                }
        }
        return unit_state_read(g->bus, g->queue[g->next], on_state, g, &g->slot);
}

static void read_next(OscGuard *g) {
        int r = send_next(g);

        if (r < 0)
                return finish(g, r, g->next < g->n_queue ? g->queue[g->next] : "OSC units", strerror(-r));
        if (!g->slot)
                verdict(g);
}

static void on_state(int error, const UnitState *st, void *userdata) {
        OscGuard *g = userdata;
        const char *unit = g->queue[g->next];
        _cleanup_free_ char *why = NULL;
        int r = error;

        g->slot = sd_bus_slot_unref(g->slot);
        if (r >= 0 && g->next == 0)
                r = take_own(g, unit, st);
        if (r >= 0)
                r = take_reach(g, unit, st);
        if (r == -E2BIG)
                return finish(g, -EPERM, unit, "too many units hang on it to judge the OSC's units");
        if (r < 0) {
                if (asprintf(&why, "cannot read what it depends on from systemd: %s", strerror(-r)) < 0)
                        why = NULL;
                return finish(g, r, unit, why ?: "cannot read what it depends on from systemd");
        }
        g->next++;
        read_next(g);
}

int osc_guard_start(sd_bus *bus, const OscGuardParams *p, const OscChanges *c, OscGuardDone done,
                    void *userdata, OscGuard **ret) {
        _cleanup_(osc_guard_freep) OscGuard *g = NULL;
        int r;

        assert(bus && p && c && done && ret);
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->bus = sd_bus_ref(bus);
        g->changes = c;
        g->done = done;
        g->userdata = userdata;
        g->role = -1;
        r = unit_guard_init(&g->facts, p->self_unit, p->replaced_units, p->kubelet_unit, p->containerd_unit);
        if (r < 0)
                return r;
        r = send_next(g);
        if (r < 0)
                return r;
        if (!g->slot)
                return -EINVAL; /* nothing to protect: a caller's mistake */
        *ret = TAKE_PTR(g);
        return 0;
}
