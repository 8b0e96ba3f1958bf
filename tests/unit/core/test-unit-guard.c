/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/unit-guard.h"
#include "tests.h"

#define SELF "inplace-agent.service"
#define KUBELET "kubelet.service"
#define CONTAINERD "containerd.service"

static const char *const replaced[] = { "gardener-node-agent.service", NULL };

/* What systemd says in the sandbox's user manager (tests/integration/lib/sandbox.py): all three in
 * app.slice, each Requires=basic.target app.slice and Conflicts=shutdown.target; plus a few edges
 * of our own to test the rules with. */
static void sandbox_facts(UnitGuard *g) {
        static const char *const names[] = { SELF, KUBELET, CONTAINERD };

        assert_int_equal(unit_guard_init(g, SELF, (char *const *) replaced, KUBELET, CONTAINERD), 0);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                assert_int_equal(unit_guard_set_slice(g, i, "app.slice"), 0);
                assert_int_equal(unit_guard_add_edge(g, i, UNIT_GUARD_REACHES, "basic.target", names[i],
                                                     "Requires", "basic.target"),
                                 0);
                assert_int_equal(unit_guard_add_edge(g, i, UNIT_GUARD_REACHES, "app.slice", names[i],
                                                     "Requires", "app.slice"),
                                 0);
                assert_int_equal(unit_guard_add_edge(g, i, UNIT_GUARD_CONFLICTS, "shutdown.target", names[i],
                                                     "Conflicts", "shutdown.target"),
                                 0);
        }
        assert_int_equal(unit_guard_add_edge(g, UNIT_GUARD_AGENT, UNIT_GUARD_REACHES, "bound.service", SELF,
                                             "BindsTo", "bound.service"),
                         0);
        assert_int_equal(unit_guard_add_edge(g, UNIT_GUARD_KUBELET, UNIT_GUARD_REACHES, CONTAINERD, KUBELET,
                                             "Requires", CONTAINERD),
                         0);
        assert_int_equal(unit_guard_add_edge(g, UNIT_GUARD_KUBELET, UNIT_GUARD_REACHES, "kube.target",
                                             KUBELET, "PartOf", "kube.target"),
                         0);
        assert_int_equal(unit_guard_add_edge(g, UNIT_GUARD_KUBELET, UNIT_GUARD_REACHES, "dep.service",
                                             KUBELET, "Requires", "dep.service"),
                         0);
        assert_int_equal(unit_guard_add_edge(g, UNIT_GUARD_CONTAINERD, UNIT_GUARD_CONFLICTS, "rival.service",
                                             "rival.service", "Conflicts", CONTAINERD),
                         0);
}

/* The first apply of an OSC whose `units` are YAML flow-style units. */
static OscChanges *first_apply(const char *units) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        _cleanup_free_ char *yaml = NULL, *err = NULL;
        OscChanges *c = NULL;

        assert_true(asprintf(&yaml, "spec: {units: [%s]}", units) >= 0);
        if (osc_model_decode_yaml(yaml, strlen(yaml), &(OscModelOptions) { .host_name = "node" }, &m, &err) <
            0)
                fail_msg("decode: %s\n%s", strempty(err), yaml);
        assert_int_equal(osc_diff(&(OscDiffInput) { .new = m,
                                                    .self_unit = SELF,
                                                    .replaced_units = (char *const *) replaced },
                                  &c, NULL),
                         0);
        return c;
}

typedef struct Case {
        const char *units;   /* YAML flow-style units of the OSC */
        const char *refused; /* the refused item's target, NULL: all may run */
        const char *why;     /* a substring of the reason */
} Case;

static void run(const Case *t) {
        _cleanup_(osc_changes_freep) OscChanges *c = first_apply(t->units);
        _cleanup_free_ char *why = NULL;
        UnitGuard g;
        size_t index = SIZE_MAX;
        int r;

        sandbox_facts(&g);
        assert_int_equal(unit_guard_learn_osc(&g, c), 0);
        r = unit_guard_check_changes(&g, c, &index, &why);
        unit_guard_done(&g);
        if (!t->refused) {
                if (r != 0)
                        fail_msg("%s: refused %s: %s", t->units, osc_work_target(&c->items[index]),
                                 strempty(why));
                return;
        }
        if (r != 1)
                fail_msg("%s: not refused (%d)", t->units, r);
        if (!streq(osc_work_target(&c->items[index]), t->refused) || !strstr(why, t->why))
                fail_msg("%s:\n  expected %s: ...%s...\n  got      %s: %s", t->units, t->refused, t->why,
                         osc_work_target(&c->items[index]), why);
}

static void test_own_and_replaced(void **state) {
        static const Case table[] = {
                { "{name: " SELF ", content: a}", NULL, NULL },
                { "{name: " SELF ", dropIns: [{name: 10.conf, content: d}]}", NULL, NULL },
                { "{name: " SELF ", enable: false, content: a}", SELF,
                  "stopping the agent's own unit (restart.selfUnit)" },
                { "{name: " SELF ", command: stop, content: a}", SELF, "would stop the agent" },
                { "{name: " KUBELET ", content: k}, {name: " CONTAINERD
                  ", dropIns: [{name: a.conf, content: x}]}",
                  NULL, NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_slices(void **state) {
        static const Case table[] = {
                { "{name: -.slice, dropIns: [{name: a.conf, content: x}]}", "-.slice",
                  "root slice contains every unit" },
                { "{name: system.slice, content: x}", "system.slice", "the system's services" },
                { "{name: init.scope, command: stop}", "init.scope", "PID 1" },
                { "{name: app.slice, command: stop}", "app.slice",
                  "the slice contains inplace-agent.service (the agent's own unit), kubelet.service (the kubelet), "
                  "containerd.service (containerd); stopping or restarting it stops them" },
                { "{name: app.slice, dropIns: [{name: a.conf, content: \"[Slice]\\nCPUQuota=1%\"}]}",
                  "app.slice", "contains" },
                /* New slices, and one below the agent's: allowed. */
                { "{name: new.slice, content: '[Slice]'}, {name: app-child.slice, content: '[Slice]'}", NULL,
                  NULL },
                /* The first refused item is named, nothing after it is judged. */
                { "{name: x.service, content: x}, {name: app.slice, command: stop}, {name: -.slice, command: stop}",
                  "app.slice", "contains" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_dependencies(void **state) {
        static const Case table[] = {
                { "{name: basic.target, content: t}", "basic.target",
                  "stopping or restarting it stops or restarts inplace-agent.service (the agent's own unit): "
                  "inplace-agent.service has Requires=basic.target" },
                { "{name: bound.service, content: b}", "bound.service",
                  "inplace-agent.service has BindsTo=bound.service" },
                /* The kubelet's own service dependencies are by design; a target taking it down is not. */
                { "{name: dep.service, content: d}", NULL, NULL },
                { "{name: kube.target, content: t}", "kube.target",
                  "kubelet.service has PartOf=kube.target" },
                /* Starting what conflicts: refused for a restart, a stop of it is fine. */
                { "{name: shutdown.target, content: t}", "shutdown.target",
                  "starting it stops inplace-agent.service (the agent's own unit): inplace-agent.service has "
                  "Conflicts=shutdown.target" },
                { "{name: shutdown.target, command: stop, content: t}", NULL, NULL },
                { "{name: rival.service, content: r}", "rival.service",
                  "starting it stops containerd.service (containerd): rival.service has Conflicts=containerd.service" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_osc_texts(void **state) {
        static const Case table[] = {
                /* What another unit of the OSC will declare once written. */
                { "{name: evil.service, content: \"[Unit]\\nConflicts=kubelet.service\"}", "evil.service",
                  "starting it stops kubelet.service (the kubelet): evil.service has Conflicts=kubelet.service" },
                { "{name: evil.service, content: \"[Unit]\\nPropagatesStopTo=other.service inplace-agent.service\"}",
                  "evil.service", "evil.service has PropagatesStopTo=inplace-agent.service" },
                { "{name: evil.service, content: \"[Install]\\nRequiredBy=app.slice\"}", "evil.service",
                  "evil.service has RequiredBy=app.slice" },
                { "{name: evil.service, dropIns: [{name: a.conf, content: \"[Unit]\\nConflicts=a.service \\\\\\n"
                  "  containerd.service\"}]}",
                  "evil.service", "Conflicts=containerd.service" },
                { "{name: fine.service, content: \"[Unit]\\nConflicts=other.service\\n# Conflicts=kubelet.service\\n"
                  "Description=PropagatesStopTo=kubelet.service\"}",
                  NULL, NULL },
                /* What a protected unit of the OSC will declare: a new target it is part of, a new slice. */
                { "{name: kubelet.service, content: \"[Unit]\\nPartOf=k8s.target\"}, {name: k8s.target, content: t}",
                  "k8s.target", "kubelet.service has PartOf=k8s.target" },
                /* A protected unit naming another: enabled, the agent Requires= the kubelet. */
                { "{name: kubelet.service, content: \"[Install]\\nRequiredBy=inplace-agent.service\"}",
                  "kubelet.service",
                  "stopping or restarting it stops or restarts inplace-agent.service (the agent's own unit): "
                  "kubelet.service has RequiredBy=inplace-agent.service" },
                { "{name: containerd.service, dropIns: [{name: s.conf, content: \"[Service]\\nSlice=cri.slice\"}]}, "
                  "{name: cri.slice, content: '[Slice]'}",
                  "cri.slice", "contains containerd.service (containerd)" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_done_items_and_deletes(void **state) {
        _cleanup_(osc_changes_freep) OscChanges *c = first_apply("{name: app.slice, command: stop}");
        _cleanup_free_ char *why = NULL;
        size_t index = SIZE_MAX;
        UnitGuard g;

        sandbox_facts(&g);
        for (size_t i = 0; i < c->n_items; i++)
                osc_changes_mark_done(c, i);
        assert_int_equal(unit_guard_check_changes(&g, c, &index, &why), 0);

        /* The OSC drops the agent's own unit: removing it is refused. */
        c->items[0].kind = OSC_WORK_DELETE_UNIT;
        c->items[0].done = false;
        free(c->items[0].unit.name);
        c->items[0].unit.name = strdup(SELF);
        assert_int_equal(unit_guard_check_changes(&g, c, &index, &why), 1);
        assert_int_equal(index, 0);
        assert_non_null(strstr(why, "removing the agent's own unit"));
        why = mfree(why);

        /* A replaced unit: never touched (the diff leaves it out; a saved list could still name it). */
        free(c->items[0].unit.name);
        c->items[0].unit.name = strdup(replaced[0]);
        assert_int_equal(unit_guard_check_changes(&g, c, &index, &why), 1);
        assert_non_null(strstr(why, "the agent runs in place of this unit (osc.replacedUnits)"));
        unit_guard_done(&g);
}

static void test_slice_contains(void **state) {
        static const struct {
                const char *slice, *inner;
                bool contains;
        } table[] = {
                { "-.slice", "system.slice", true },  { "-.slice", "-.slice", true },
                { "a.slice", "a.slice", true },       { "a.slice", "a-b.slice", true },
                { "a-b.slice", "a-b-c.slice", true }, { "a-b.slice", "a.slice", false },
                { "a.slice", "ab.slice", false },     { "a.slice", "b-a.slice", false },
                { "system.slice", NULL, false },      { "a.service", "a.slice", false },
                { "a.slice", "a-b.service", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (unit_guard_slice_contains(table[i].slice, table[i].inner) != table[i].contains)
                        fail_msg("%s contains %s: expected %d", table[i].slice, strempty(table[i].inner),
                                 table[i].contains);
}

static void test_self_restart(void **state) {
        OscWork w = { .kind = OSC_WORK_UNIT_COMMAND,
                      .name = (char *) SELF,
                      .command = OSC_UNIT_COMMAND_RESTART };

        assert_true(unit_guard_is_self_restart(SELF, &w));
        assert_false(unit_guard_is_self_restart(NULL, &w));
        assert_false(unit_guard_is_self_restart(KUBELET, &w));
        w.command = OSC_UNIT_COMMAND_STOP;
        assert_false(unit_guard_is_self_restart(SELF, &w));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_own_and_replaced),       cmocka_unit_test(test_slices),
                cmocka_unit_test(test_dependencies),           cmocka_unit_test(test_osc_texts),
                cmocka_unit_test(test_done_items_and_deletes), cmocka_unit_test(test_slice_contains),
                cmocka_unit_test(test_self_restart),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
