/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the OSC model decoder, the replaced unit's component config, the checked
 * units, the drift check (against a made-up disk and systemd) with its repair plan and Event, and the
 * diff engine: the input is decoded as osc.yaml,
 * diffed against nothing (first apply), against itself and against a small fixed OSC in both
 * directions, every result goes through the persisted form and back, and containerd items are
 * rendered. JSON input is also tried as a persisted work list. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/containerd-config.h"
#include "core/osc-component-config.h"
#include "core/osc-diff.h"
#include "core/osc-drift-plan.h"
#include "core/osc-drift.h"
#include "core/unit-guard.h"
#include "core/unit-health.h"
#include "util/strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base[] =
        "spec:\n  files:\n  - path: /var/lib/kubelet/config/kubelet\n    content: {inline: {data: 'cpuManagerPolicy: none'}}\n"
        "  - path: /etc/a\n    content: {inline: {data: a}}\n"
        "  units: [{name: a.service, content: x, filePaths: [/etc/a], dropIns: [{name: d.conf, content: y}]}]\n"
        "  criConfig: {name: containerd, containerd: {sandboxImage: p, registries: [{upstream: r}]}}\n"
        "  inPlaceUpdates: {operatingSystemVersion: '1.0', kubelet: '1.30.0'}\n";

static const char *const replaced[] = { "gardener-node-agent.service", NULL };

/* A disk where a third of the paths are absent, a third unreadable and the rest hold "x" (mode
 * 0644; unit files ending in "m" are masked). */
static int fake_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                     uint32_t *ret_mode, void *userdata) {
        switch (strlen(name) % 3) {
        case 0:
                return -ENOENT;
        case 1:
                return place != OSC_DRIFT_NODE_FILE && name[strlen(name) - 1] == 'm' ? OSC_DRIFT_MASKED :
                                                                                       -EACCES;
        }
        if (ret) {
                *ret = strdup("x");
                if (!*ret)
                        return -ENOMEM;
                *ret_size = 1;
        }
        if (ret_mode)
                *ret_mode = 0644;
        return 0;
}

static int canonical(const char *path, char **ret, void *userdata) {
        *ret = strdup(path);
        return *ret ? 0 : -ENOMEM;
}

/* The drift of `m` on that disk, with systemd saying a unit is in one of a few states, planned as
 * a repair and summarized for each outcome. */
static void drift_one(const OscModel *m) {
        static const char *const actives[] = { "inactive", "active", "failed" };
        static const char *const files[] = { "enabled", "disabled", "static" };
        OscDriftParams p = { .model = m,
                             .skip_units = (char *const *) replaced,
                             .skip_file = "/opt/bin/kubelet" };
        UnitHealthState *states = calloc(m->n_units + 1, sizeof(UnitHealthState));
        OscProtected own = {};
        OscChanges *plan = NULL;
        char **skipped = NULL;
        OscDrift d = {};

        if (!states || osc_protected_add(&own, "/var/lib/inplace-agent", "state directory") < 0)
                goto finish;
        for (size_t i = 0; i < m->n_units; i++)
                states[i] = (UnitHealthState) { .name = m->units[i].name,
                                                .load_state = "loaded",
                                                .active_state = actives[i % 3],
                                                .sub_state = "dead",
                                                .unit_file_state = files[(i / 3) % 3] };
        if (osc_drift_check_disk(&p, fake_read, NULL, &d) < 0 ||
            osc_drift_check_units(&p, states, m->n_units, &d) < 0)
                goto finish;
        if (osc_drift_plan(&(OscDriftPlanParams) { .model = m,
                                                   .self_unit = "inplace-agent.service",
                                                   .replaced_units = (char *const *) replaced,
                                                   .protected = &own,
                                                   .canonicalize = canonical },
                           &d, &plan, &skipped) < 0)
                goto finish;
        for (size_t i = 0; plan && i < plan->n_items; i += 2)
                osc_changes_mark_done(plan, i);
        for (OscDriftOutcome o = 0; o < _OSC_DRIFT_OUTCOME_MAX; o++) {
                char *s = NULL;

                if (osc_drift_summary(&d, plan, skipped, o, "detail", &s) == 0 &&
                    strlen(s) > OSC_DRIFT_SUMMARY_MAX)
                        abort();
                free(s);
        }
finish:
        strv_free(skipped);
        osc_changes_free(plan);
        osc_drift_done(&d);
        osc_protected_done(&own);
        free(states);
}

static void check_applied(const OscModel *m) {
        const char **names = NULL;
        bool *enabled = NULL;
        size_t n = 0;

        drift_one(m);
        if (unit_health_units_from_osc(m, (char *const *) replaced, &names, &enabled, &n) == 0) {
                free(names);
                free(enabled);
        }
}

/* What the OSC guard makes of the unit items and their texts (core/unit-guard.h). */
static void guard_one(const OscChanges *c) {
        char *why = NULL;
        size_t index;
        UnitGuard g;

        if (unit_guard_init(&g, "inplace-agent.service", (char *const *) replaced, "kubelet.service",
                            "containerd.service") < 0)
                return;
        (void) unit_guard_set_slice(&g, UNIT_GUARD_AGENT, "system.slice");
        (void) unit_guard_add_edge(&g, UNIT_GUARD_KUBELET, UNIT_GUARD_REACHES, "basic.target",
                                   "kubelet.service", "Requires", "basic.target");
        if (unit_guard_learn_osc(&g, c) >= 0 && unit_guard_check_changes(&g, c, &index, &why) > 0)
                free(why);
        unit_guard_done(&g);
}

static void diff_one(const OscModel *old, const OscModel *new) {
        OscDiffInput in = { .old = old,
                            .new = new,
                            .checksum = "c",
                            .current_os_version = "1.0",
                            .replaced_units = (char *const *) replaced,
                            .self_unit = "inplace-agent.service" };
        OscChanges *c = NULL, *back = NULL;
        char *err = NULL;

        if (osc_diff(&in, &c, &err) == 0) {
                json_t *j = osc_changes_to_json(c),
                       *plan = osc_changes_plan_json(c, OSC_PLAN_SUMMARY_BUDGET);

                json_decref(plan);

                for (size_t i = 0; i < c->n_items; i++) {
                        char *d = NULL;

                        if (osc_work_describe(&c->items[i], &d) == 0)
                                free(d);
                        d = NULL;
                        if (c->items[i].kind == OSC_WORK_CONTAINERD_CONFIG &&
                            containerd_config_render(c->items[i].containerd, &d, NULL) == 0)
                                free(d);
                }
                guard_one(c);
                if (j && osc_changes_from_json(j, &back, NULL) == 0)
                        osc_changes_free(back);
                json_decref(j);
                osc_changes_free(c);
        }
        free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        OscModelOptions opts = { .host_name = "node", .containerd_path = "/usr/bin" };
        OscModel *m = NULL, *b = NULL;
        OscChanges *c = NULL;
        char *err = NULL;
        json_t *j;

        if (osc_model_decode_yaml(base, sizeof(base) - 1, &opts, &b, NULL) < 0)
                abort();
        if (osc_model_decode_yaml((const char *) data, size, &opts, &m, &err) == 0) {
                OscComponentConfig *cc = NULL;

                if (osc_component_config_from_model(m, (char *const *) replaced, &cc, NULL) == 0)
                        osc_component_config_free(cc);
                check_applied(m);
                diff_one(NULL, m);
                diff_one(m, m);
                diff_one(b, m);
                diff_one(m, b);
                for (size_t i = 0; i < m->n_registries; i++) {
                        char *toml = NULL;

                        if (osc_registry_hosts_toml(&m->registries[i], &toml) == 0)
                                free(toml);
                }
        }
        osc_model_free(m);
        osc_model_free(b);
        free(err);
        err = NULL;

        j = json_loadb((const char *) data, size, 0, NULL);
        if (j && osc_changes_from_json(j, &c, &err) == 0)
                osc_changes_free(c);
        free(err);
        json_decref(j);
        return 0;
}
