/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the OSC model decoder, the replaced unit's component config, the checked
 * units, the drift check (against a made-up disk) and the diff engine: the input is decoded as osc.yaml,
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
#include "core/osc-drift.h"
#include "core/unit-guard.h"
#include "core/unit-health.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char base[] =
        "spec:\n  files:\n  - path: /var/lib/kubelet/config/kubelet\n    content: {inline: {data: 'cpuManagerPolicy: none'}}\n"
        "  - path: /etc/a\n    content: {inline: {data: a}}\n"
        "  units: [{name: a.service, content: x, filePaths: [/etc/a], dropIns: [{name: d.conf, content: y}]}]\n"
        "  criConfig: {name: containerd, containerd: {sandboxImage: p, registries: [{upstream: r}]}}\n"
        "  inPlaceUpdates: {operatingSystemVersion: '1.0', kubelet: '1.30.0'}\n";

static const char *const replaced[] = { "gardener-node-agent.service", NULL };

/* A disk where a third of the paths are absent, a third unreadable and the rest hold "x". */
static int fake_read(OscDriftPlace place, const char *name, bool fallback, char **ret, size_t *ret_size,
                     void *userdata) {
        switch (strlen(name) % 3) {
        case 0:
                return -ENOENT;
        case 1:
                return -EACCES;
        }
        if (ret) {
                *ret = strdup("x");
                if (!*ret)
                        return -ENOMEM;
                *ret_size = 1;
        }
        return 0;
}

static void check_applied(const OscModel *m) {
        OscDriftFinding *f = NULL;
        const char **names = NULL;
        bool *enabled = NULL;
        size_t n = 0;

        if (osc_drift_check(m, (char *const *) replaced, fake_read, NULL, &f, &n) == 0)
                osc_drift_findings_free(f, n);
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
        (void) unit_guard_add_edge(&g, UNIT_GUARD_KUBELET, UNIT_GUARD_REACHES, "basic.target", "kubelet.service",
                                   "Requires", "basic.target");
        if (unit_guard_learn_osc(&g, c) >= 0 && unit_guard_check_changes(&g, c, &index, &why) > 0)
                free(why);
        unit_guard_done(&g);
}

static void diff_one(const OscModel *old, const OscModel *new) {
        OscDiffInput in = { .old = old, .new = new, .checksum = "c", .current_os_version = "1.0",
                            .replaced_units = (char *const *) replaced, .self_unit = "inplace-agent.service" };
        OscChanges *c = NULL, *back = NULL;
        char *err = NULL;

        if (osc_diff(&in, &c, &err) == 0) {
                json_t *j = osc_changes_to_json(c), *plan = osc_changes_plan_json(c, OSC_PLAN_SUMMARY_BUDGET);

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
