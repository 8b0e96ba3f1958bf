/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/osc-diff.h"
#include "tests.h"

/* OSCs in YAML flow style, composed from parts: F_* are files, U_* units. */
#define F_A "{path: /etc/a, content: {inline: {data: a}}}"
#define F_A2 "{path: /etc/a, content: {inline: {data: a2}}}"
#define F_A_MODE "{path: /etc/a, permissions: 420, content: {inline: {data: a}}}"
#define F_B "{path: /etc/b, content: {inline: {data: b}}}"
#define F_A_NONE "{path: /etc/a, content: {}}"
#define F_APISERVER "{path: /etc/kubernetes/manifests/kube-apiserver.yaml, content: {}}"
#define F_GNA_BIN \
        "{path: /opt/bin/gardener-node-agent, content: {imageRef: {image: 'r/gna:v1', filePathInImage: /gna}}}"
#define F_GNA_BIN2 \
        "{path: /opt/bin/gardener-node-agent, content: {imageRef: {image: 'r/gna:v2', filePathInImage: /gna}}}"
#define F_GNA_CFG "{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: c1}}}"
#define F_GNA_CFG2 "{path: /var/lib/gardener-node-agent/config.yaml, content: {inline: {data: c2}}}"
#define KCFG(d) "{path: /var/lib/kubelet/config/kubelet, content: {inline: {data: \"" d "\"}}}"
#define K_BASE \
        "cpuManagerPolicy: none\\nevictionHard: {memory.available: 100Mi}\\nkubeReserved: {cpu: 80m}\\n"
#define U_X "{name: x.service, content: '[Service]', filePaths: [/etc/a]}"
#define U_X2 "{name: x.service, content: '[Service]\\nX=1', filePaths: [/etc/a]}"
#define U_X_D \
        "{name: x.service, content: '[Service]', filePaths: [/etc/a], dropIns: [{name: 10.conf, content: d}]}"
#define U_X_OFF "{name: x.service, enable: false, content: '[Service]', filePaths: [/etc/a]}"
#define U_X_START "{name: x.service, command: start, content: '[Service]', filePaths: [/etc/a]}"
#define U_Y "{name: y.service, content: '[Service]'}"
#define U_GNA \
        "{name: gardener-node-agent.service, content: g, filePaths: [/opt/bin/gardener-node-agent, /var/lib/gardener-node-agent/config.yaml]}"
#define U_GNA2 \
        "{name: gardener-node-agent.service, content: g2, filePaths: [/opt/bin/gardener-node-agent, /var/lib/gardener-node-agent/config.yaml]}"
#define U_K "{name: kubelet.service, content: k, filePaths: [/var/lib/kubelet/config/kubelet]}"
#define U_SELF "{name: inplace-agent.service, content: s, filePaths: [/etc/a]}"
#define U_SELF_D "{name: inplace-agent.service, dropIns: [{name: 10.conf, content: d}]}"
#define OSC(files, units) "spec: {files: [" files "], units: [" units "]}"
#define IPU(files, units, ipu) "spec: {files: [" files "], units: [" units "], inPlaceUpdates: {" ipu "}}"
#define IPU_V(os, k) "operatingSystemVersion: '" os "', kubelet: '" k "'"
#define CRI(c) "spec: {criConfig: {name: containerd, containerd: {" c "}}}"
#define REG(u, extra) "{upstream: " u ", hosts: [{url: 'https://" u "'}]" extra "}"

static OscModel *decode(const char *yaml) {
        _cleanup_free_ char *err = NULL;
        OscModel *m = NULL;
        int r;

        if (!yaml)
                return NULL;
        r = osc_model_decode_yaml(yaml, strlen(yaml), &(OscModelOptions) { .host_name = "node" }, &m, &err);
        if (r < 0)
                fail_msg("decode: %d %s\n%s", r, strempty(err), yaml);
        return m;
}

/* One token per item, "; "-separated: compact and readable in a failure message. */
static char *signature(const OscChanges *c) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        for (size_t i = 0; i < c->n_items; i++) {
                const OscWork *w = &c->items[i];

                fputs(i > 0 ? "; " : "", f);
                switch (w->kind) {
                case OSC_WORK_WRITE_FILE:
                case OSC_WORK_SKIP_FILE:
                case OSC_WORK_PULL_FILE:
                case OSC_WORK_DELETE_FILE:
                        fprintf(f, "%s %s", osc_work_kind_to_string(w->kind), w->file.path);
                        break;
                case OSC_WORK_WRITE_UNIT:
                case OSC_WORK_DELETE_UNIT:
                        fprintf(f, "%s %s", osc_work_kind_to_string(w->kind), w->unit.name);
                        for (char **d = w->drop_ins_deleted; d && *d; d++)
                                fprintf(f, " -%s", *d);
                        if (w->remove_cpu_manager_state)
                                fputs(" cpu", f);
                        break;
                case OSC_WORK_UNIT_COMMAND:
                        fprintf(f, "%s %s", osc_unit_command_to_string(w->command), w->name);
                        break;
                case OSC_WORK_REGISTRY:
                        fprintf(f, "registry %s%s", w->registry.upstream, w->probe ? " probe" : "");
                        break;
                case OSC_WORK_DELETE_REGISTRY:
                        fprintf(f, "delete-registry %s", w->name);
                        break;
                default:
                        fputs(osc_work_kind_to_string(w->kind), f);
                }
        }
        fclose(f);
        return buf;
}

static char *flag_string(const OscInPlaceFlags *f) {
        char *s = NULL;

        assert_true(asprintf(&s, "%s%s%s%s%s%s%s", f->operating_system ? "os " : "",
                             f->kubelet_minor_version ? "minor " : "", f->kubelet_config ? "config " : "",
                             f->cpu_manager_policy ? "cpu " : "",
                             f->ca_rotation_kubelet ? "ca-kubelet " : "",
                             f->ca_rotation_node_agent ? "ca-agent " : "",
                             f->sa_key_rotation ? "sa " : "") >= 0);
        return s;
}

typedef struct Case {
        const char *name;
        const char *old, *new;
        const char *items;
        const char *flags;
        const char *error; /* substring of the expected error */
} Case;

static const char *const replaced[] = { "gardener-node-agent.service", NULL };

static void run(const Case *t) {
        _cleanup_(osc_model_freep) OscModel *old = decode(t->old), *new = decode(t->new);
        _cleanup_(osc_changes_freep) OscChanges *c = NULL, *back = NULL;
        _cleanup_free_ char *err = NULL, *sig = NULL, *flags = NULL, *sig2 = NULL;
        OscDiffInput in = {
                .old = old,
                .new = new,
                .checksum = "sum",
                .current_os_version = "1592.6.0",
                .replaced_units = (char *const *) replaced,
                .self_unit = "inplace-agent.service",
        };
        json_t *j;
        int r;

        r = osc_diff(&in, &c, &err);
        if (t->error) {
                if (r >= 0 || !err || !strstr(err, t->error))
                        fail_msg("%s: expected error \"%s\", got %d %s", t->name, t->error, r,
                                 strempty(err));
                return;
        }
        if (r < 0)
                fail_msg("%s: %d %s", t->name, r, strempty(err));
        sig = signature(c);
        if (!streq(sig, t->items))
                fail_msg("%s:\n  expected %s\n  got      %s", t->name, t->items, sig);
        flags = flag_string(&c->in_place);
        if (!streq(flags, strempty(t->flags)))
                fail_msg("%s: flags expected \"%s\", got \"%s\"", t->name, strempty(t->flags), flags);
        assert_int_equal(c->first_apply, !old);

        /* every result survives persistence unchanged */
        j = osc_changes_to_json(c);
        assert_non_null(j);
        assert_int_equal(osc_changes_from_json(j, &back, NULL), 0);
        json_decref(j);
        sig2 = signature(back);
        assert_string_equal(sig2, sig);
        assert_string_equal(back->checksum, "sum");
        assert_memory_equal(&back->in_place, &c->in_place, sizeof(c->in_place));
        /* the containerd item carries the new config itself, so a resumed item needs no OSC */
        for (size_t i = 0; i < c->n_items; i++)
                if (c->items[i].kind == OSC_WORK_CONTAINERD_CONFIG) {
                        assert_true(json_equal(c->items[i].containerd, new->containerd_config));
                        assert_true(json_equal(back->items[i].containerd, new->containerd_config));
                }
}

static void test_files_and_units(void **state) {
        static const Case table[] = {
                { "first apply: everything, no in-place flags", NULL,
                  IPU(F_A "," F_B "," KCFG(K_BASE), U_X_D "," U_Y, IPU_V("1", "1.30.0")),
                  "write-file /etc/a; write-file /etc/b; write-file /var/lib/kubelet/config/kubelet; write-unit x.service; "
                  "write-unit y.service; daemon-reload; restart x.service; restart y.service",
                  .error = NULL },
                { "unchanged", OSC(F_A, U_X), OSC(F_A, U_X), "", .error = NULL },
                { "file content change restarts the unit listing it", OSC(F_A "," F_B, U_X "," U_Y),
                  OSC(F_A2 "," F_B, U_X "," U_Y),
                  "write-file /etc/a; write-unit x.service; daemon-reload; restart x.service",
                  .error = NULL },
                { "file mode change restarts the unit listing it", OSC(F_A, U_X), OSC(F_A_MODE, U_X),
                  "write-file /etc/a; write-unit x.service; daemon-reload; restart x.service",
                  .error = NULL },
                { "a file nobody lists", OSC(F_A, U_X), OSC(F_A "," F_B, U_X), "write-file /etc/b",
                  .error = NULL },
                { "unit content change", OSC(F_A, U_X), OSC(F_A, U_X2),
                  "write-unit x.service; daemon-reload; restart x.service", .error = NULL },
                { "unit added", OSC(F_A, U_X), OSC(F_A, U_X "," U_Y),
                  "write-unit y.service; daemon-reload; restart y.service", .error = NULL },
                { "unit deleted", OSC(F_A, U_X "," U_Y), OSC(F_A, U_X),
                  "delete-unit y.service; daemon-reload", .error = NULL },
                { "drop-in added", OSC(F_A, U_X), OSC(F_A, U_X_D),
                  "write-unit x.service; daemon-reload; restart x.service", .error = NULL },
                { "drop-in removed", OSC(F_A, U_X_D), OSC(F_A, U_X),
                  "write-unit x.service -10.conf; daemon-reload; restart x.service", .error = NULL },
                { "enable: false stops", OSC(F_A, U_X), OSC(F_A, U_X_OFF),
                  "write-unit x.service; daemon-reload; stop x.service", .error = NULL },
                { "command: start restarts", OSC(F_A, U_X), OSC(F_A, U_X_START),
                  "write-unit x.service; daemon-reload; restart x.service", .error = NULL },
                { "file deleted last", OSC(F_A "," F_B, U_X), OSC(F_A, U_X), "delete-file /etc/b",
                  .error = NULL },
                { "file moved from spec to status is no change", OSC(F_A "," F_B, U_X),
                  "spec: {files: [" F_A "], units: [" U_X "]}\nstatus: {extensionFiles: [" F_B "]}", "",
                  .error = NULL },
                { "extension unit merged: its drop-in is a change", OSC(F_A, U_X),
                  "spec: {files: [" F_A "], units: [" U_X "]}\nstatus: {extensionUnits: "
                  "[{name: x.service, dropIns: [{name: 20.conf, content: e}]}]}",
                  "write-unit x.service; daemon-reload; restart x.service", .error = NULL },
                /* Issue 30: upstream skips a file without content and applies the rest. */
                { "a file without content is skipped, in its place", NULL, OSC(F_APISERVER "," F_B, U_Y),
                  "skip-file /etc/kubernetes/manifests/kube-apiserver.yaml; write-file /etc/b; write-unit y.service; "
                  "daemon-reload; restart y.service",
                  .error = NULL },
                { "content removed: skipped (the old file stays, as upstream), its unit restarted",
                  OSC(F_A, U_X), OSC(F_A_NONE, U_X),
                  "skip-file /etc/a; write-unit x.service; daemon-reload; restart x.service",
                  .error = NULL },
                { "a file without content that goes is removed", OSC(F_APISERVER "," F_B, ""), OSC(F_B, ""),
                  "delete-file /etc/kubernetes/manifests/kube-apiserver.yaml", .error = NULL },
                { "host-filtered file is deleted",
                  "spec: {files: [{path: /h, hostName: node, content: {inline: {data: h}}}]}",
                  "spec: {files: [{path: /h, hostName: other, content: {inline: {data: h}}}]}",
                  "delete-file /h", .error = NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_replaced_units(void **state) {
        static const Case table[] = {
                { "first apply: GNA never written nor started, its binary not pulled", NULL,
                  OSC(F_GNA_BIN "," F_GNA_CFG, U_GNA "," U_Y),
                  "write-file /var/lib/gardener-node-agent/config.yaml; write-unit y.service; daemon-reload; restart y.service",
                  .error = NULL },
                { "GNA's config changes: written, nothing restarted", OSC(F_GNA_BIN "," F_GNA_CFG, U_GNA),
                  OSC(F_GNA_BIN "," F_GNA_CFG2, U_GNA),
                  "write-file /var/lib/gardener-node-agent/config.yaml", .error = NULL },
                { "GNA's unit and binary change: nothing", OSC(F_GNA_BIN, U_GNA), OSC(F_GNA_BIN2, U_GNA2),
                  "", .error = NULL },
                { "a binary another unit lists too is pulled", OSC(F_GNA_BIN, U_GNA),
                  OSC(F_GNA_BIN2, U_GNA ",{name: z.service, filePaths: [/opt/bin/gardener-node-agent]}"),
                  "pull-file /opt/bin/gardener-node-agent; write-unit z.service; daemon-reload; restart z.service",
                  .error = NULL },
                { "GNA removed from the OSC: not deleted", OSC(F_A, U_GNA "," U_X), OSC(F_A, U_X), "",
                  .error = NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_self_unit(void **state) {
        static const Case table[] = {
                { "the agent's own unit: its restart is the very last item, after the kubelet health check "
                  "and the deleted files",
                  OSC(F_A "," F_B, U_X "," U_K), OSC(F_A2 "," KCFG(K_BASE), U_SELF "," U_X "," U_K),
                  "write-file /etc/a; write-file /var/lib/kubelet/config/kubelet; write-unit inplace-agent.service; "
                  "write-unit x.service; write-unit kubelet.service; daemon-reload; restart x.service; "
                  "restart kubelet.service; kubelet-health; delete-file /etc/b; restart inplace-agent.service",
                  .error = NULL },
                { "a drop-in for it: the same", OSC(F_A, U_X), OSC(F_A, U_X "," U_SELF_D),
                  "write-unit inplace-agent.service; daemon-reload; restart inplace-agent.service",
                  .error = NULL },
                { "unchanged: nothing", OSC(F_A, U_SELF), OSC(F_A, U_SELF), "", .error = NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_containerd(void **state) {
        static const Case table[] = {
                { "first apply with containerd", NULL,
                  CRI("sandboxImage: p1, registries: [" REG("a", ", readinessProbe: true") "]"),
                  "containerd-config; restart containerd.service; registry a probe", .error = NULL },
                { "a probed registry waits for the units and the kubelet health check, the others do not",
                  CRI("sandboxImage: p1"),
                  "spec: {criConfig: {name: containerd, containerd: {sandboxImage: p1, registries: [" REG(
                          "m",
                          ", readinessProbe: true") "," REG("n",
                                                            "") "]}}, units: [{name: kubelet.service, content: k}]}",
                  "registry n; write-unit kubelet.service; daemon-reload; restart kubelet.service; kubelet-health; "
                  "registry m probe",
                  .error = NULL },
                { "sandbox image change restarts containerd", CRI("sandboxImage: p1"),
                  CRI("sandboxImage: p2"), "containerd-config; restart containerd.service", .error = NULL },
                { "cgroup driver change", CRI("sandboxImage: p1"),
                  "spec: {criConfig: {name: containerd, cgroupDriver: systemd, containerd: {sandboxImage: p1}}}",
                  "containerd-config; restart containerd.service", .error = NULL },
                { "containerd config added", "spec: {criConfig: {name: containerd}}",
                  "spec: {criConfig: {name: containerd, containerd: {sandboxImage: p1, plugins: [{path: [a], values: {k: 1}}]}}}",
                  "containerd-config; restart containerd.service", .error = NULL },
                { "registries: unchanged probe not repeated, changed one probed, removed one deleted",
                  CRI("sandboxImage: p, registries: [" REG("a", ", readinessProbe: true") "," REG(
                          "b", ", readinessProbe: true") "," REG("c", "") "]"),
                  CRI("sandboxImage: p, registries: [" REG("a", ", readinessProbe: true") "," REG(
                          "b", ", readinessProbe: true, server: 'https://s'") "]"),
                  "registry a; registry b probe; delete-registry c", .error = NULL },
                /* Issue 30 item 5: containerd before the kubelet, whatever the OSC's order. */
                { "containerd's restart comes before the kubelet's and the other units'",
                  "spec: {criConfig: {name: containerd, containerd: {sandboxImage: p1}}, units: [" U_K
                  "," U_Y "]}",
                  "spec: {criConfig: {name: containerd, containerd: {sandboxImage: p2}}, units: ["
                  "{name: kubelet.service, content: k2}, {name: y.service, content: y2}]}",
                  "containerd-config; write-unit kubelet.service; write-unit y.service; daemon-reload; "
                  "restart containerd.service; restart kubelet.service; restart y.service; kubelet-health",
                  .error = NULL },
                { "a containerd unit listed after the kubelet's: its command first all the same", NULL,
                  "spec: {units: [" U_K
                  ", {name: containerd.service, dropIns: [{name: 50.conf, content: c}]}]}",
                  "write-unit kubelet.service; write-unit containerd.service; daemon-reload; restart containerd.service; "
                  "restart kubelet.service; kubelet-health",
                  .error = NULL },
                { "a unit command for containerd already there: no second restart", CRI("sandboxImage: p1"),
                  "spec: {criConfig: {name: containerd, containerd: {sandboxImage: p2}}, units: [{name: containerd.service, command: stop}]}",
                  "containerd-config; write-unit containerd.service; daemon-reload; stop containerd.service",
                  .error = NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

#define KW "write-file /var/lib/kubelet/config/kubelet; write-unit kubelet.service"
#define KR "daemon-reload; restart kubelet.service; kubelet-health"

static void test_in_place(void **state) {
        static const Case table[] = {
                { "in-place only in the new OSC: no flags", OSC(KCFG(K_BASE), U_K),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.7.0", "1.31.0")), "", .error = NULL },
                { "OS version differs from os-release", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.7.0", "1.31.0")), "", .flags = "os " },
                { "OS already at the desired version", IPU(KCFG(K_BASE), U_K, IPU_V("1592.5.0", "1.31.0")),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")), "", .error = NULL },
                { "kubelet minor version", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.30.5")),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "v1.31.0")), "kubelet-health",
                  .flags = "minor " },
                { "kubelet patch version only: no flag", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.4")), "", .error = NULL },
                { "evictionHard relevant key", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG("cpuManagerPolicy: none\\nevictionHard: {memory.available: 200Mi}\\nkubeReserved: {cpu: 80m}\\n"),
                      U_K, IPU_V("1592.6.0", "1.31.0")),
                  KW "; " KR, .flags = "config " },
                { "evictionHard other key: restart, no flag",
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG("cpuManagerPolicy: none\\nevictionHard: {memory.available: 100Mi, pid.available: 1}\\nkubeReserved: {cpu: 80m}\\n"),
                      U_K, IPU_V("1592.6.0", "1.31.0")),
                  KW "; " KR, .error = NULL },
                { "kubeReserved: raw strings differ", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG("cpuManagerPolicy: none\\nevictionHard: {memory.available: 100Mi}\\nkubeReserved: {cpu: '0.08'}\\n"),
                      U_K, IPU_V("1592.6.0", "1.31.0")),
                  KW "; " KR, .flags = "config " },
                { "systemReserved is no trigger", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG(K_BASE "systemReserved: {cpu: 1}\\n"), U_K, IPU_V("1592.6.0", "1.31.0")),
                  KW "; " KR, .error = NULL },
                { "cpuManagerPolicy: flag and cpu_manager_state removal",
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG("cpuManagerPolicy: static\\nevictionHard: {memory.available: 100Mi}\\nkubeReserved: {cpu: 80m}\\n"),
                      U_K, IPU_V("1592.6.0", "1.31.0")),
                  "write-file /var/lib/kubelet/config/kubelet; write-unit kubelet.service cpu; " KR,
                  .flags = "cpu " },
                { "kubeReserved not a quantity", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG("cpuManagerPolicy: none\\nevictionHard: {memory.available: 100Mi}\\nkubeReserved: {cpu: lots}\\n"),
                      U_K, IPU_V("1592.6.0", "1.31.0")),
                  .error = "failed to parse" },
                { "kubelet config missing", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(F_A, U_K, IPU_V("1592.6.0", "1.31.0")), .error = "not found in OSC" },
                { "kubelet version unparsable", IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG(K_BASE), U_K, IPU_V("1592.6.0", "one")), .error = "failed to parse" },
                { "CA rotation, first time", IPU(KCFG(K_BASE), "", IPU_V("1592.6.0", "1.31.0")),
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0",
                            "1.31.0") ", credentialsRotation: {certificateAuthorities: "
                                      "{lastInitiationTime: '2025-01-01T00:00:00Z'}, serviceAccountKey: {}}"),
                  "", .flags = "ca-kubelet ca-agent " },
                { "SA rotation, time changed",
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0",
                            "1.31.0") ", credentialsRotation: {serviceAccountKey: "
                                      "{lastInitiationTime: '2025-01-01T00:00:00Z'}, certificateAuthorities: {}}"),
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0",
                            "1.31.0") ", credentialsRotation: {serviceAccountKey: "
                                      "{lastInitiationTime: '2025-02-01T00:00:00Z'}, certificateAuthorities: {}}"),
                  "", .flags = "sa " },
                { "same instant in another zone: no rotation",
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0", "1.31.0") ", credentialsRotation: {certificateAuthorities: "
                                                  "{lastInitiationTime: '2025-01-01T01:00:00+01:00'}}"),
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0", "1.31.0") ", credentialsRotation: {certificateAuthorities: "
                                                  "{lastInitiationTime: '2025-01-01T00:00:00.5Z'}}"),
                  "", .error = NULL },
                { "rotation struct removed: no flag",
                  IPU(KCFG(K_BASE), "",
                      IPU_V("1592.6.0", "1.31.0") ", credentialsRotation: {certificateAuthorities: "
                                                  "{lastInitiationTime: '2025-01-01T00:00:00Z'}}"),
                  IPU(KCFG(K_BASE), "", IPU_V("1592.6.0", "1.31.0") ", credentialsRotation: {}"), "",
                  .error = NULL },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                run(&table[i]);
}

static void test_resume(void **state) {
        _cleanup_(osc_model_freep) OscModel *new = decode(OSC(F_A "," F_B, U_X "," U_Y));
        _cleanup_(osc_changes_freep) OscChanges *c = NULL, *back = NULL;
        OscDiffInput in = { .new = new, .checksum = "s" };
        json_t *j;

        assert_int_equal(osc_diff(&in, &c, NULL), 0);
        assert_int_equal(osc_changes_next(c), 0);
        osc_changes_mark_done(c, 0);
        osc_changes_mark_done(c, 1);
        j = osc_changes_to_json(c);
        assert_int_equal(osc_changes_from_json(j, &back, NULL), 0);
        json_decref(j);
        assert_int_equal(osc_changes_next(back), 2);
        assert_int_equal(back->items[2].kind, OSC_WORK_WRITE_UNIT);
        assert_int_equal(osc_changes_remaining(back), back->n_items - 2);
        /* A gap (a failed unit command left, a later one done): counted, and skipped from after it. */
        osc_changes_mark_done(back, 3);
        assert_int_equal(osc_changes_next(back), 2);
        assert_int_equal(osc_changes_next_from(back, 3), 4);
        assert_int_equal(osc_changes_next_from(back, back->n_items + 5), back->n_items);
        assert_int_equal(osc_changes_remaining(back), back->n_items - 3);
        for (size_t i = 2; i < back->n_items; i++)
                osc_changes_mark_done(back, i);
        assert_true(osc_changes_complete(back));
        assert_int_equal(osc_changes_remaining(back), 0);
}

static void test_persisted_garbage(void **state) {
        static const char *const table[] = {
                "{}",
                "{\"items\": {}}",
                "{\"items\": [{\"kind\": \"format-disk\"}]}",
                "{\"items\": [{\"kind\": \"write-file\", \"file\": {\"path\": \"../etc/passwd\", \"content\": {\"inline\": {\"data\": \"x\"}}}}]}",
                "{\"items\": [{\"kind\": \"unit-command\", \"name\": \"x.service\", \"command\": \"kill\"}]}",
                "{\"items\": [{\"kind\": \"delete-registry\", \"name\": \"../..\"}]}",
                "{\"items\": [{\"kind\": \"write-unit\", \"unit\": {\"name\": \"x\"}, \"dropInsDeleted\": [\"../x\"]}]}",
                "{\"items\": [], \"inPlaceUpdates\": {\"operatingSystem\": 1}}",
                "{\"items\": [{\"kind\": \"containerd-config\"}]}",
                "{\"items\": [{\"kind\": \"containerd-config\", \"containerd\": []}]}",
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL;
                OscChanges *c = NULL;
                json_t *j = json_loads(table[i], 0, NULL);

                assert_non_null(j);
                if (osc_changes_from_json(j, &c, &err) != -EINVAL)
                        fail_msg("case %zu accepted", i);
                assert_null(c);
                json_decref(j);
        }
}

static void test_describe(void **state) {
        _cleanup_(osc_model_freep) OscModel *new =
                decode("spec: {files: [{path: /s, content: {secretRef: {name: n, dataKey: k}}}, " F_A_MODE
                       ", {path: /n}], "
                       "units: [" U_X_OFF "]}");
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        static const char *const expected[] = {
                "write file /s (0600) from secret n key k",
                "write file /etc/a (0644)",
                "skip file /n: its content has neither inline, secretRef nor imageRef",
                "write unit x.service (with unit file, 0 drop-ins)",
                "reload systemd",
                "stop unit x.service",
        };

        assert_int_equal(osc_diff(&(OscDiffInput) { .new = new }, &c, NULL), 0);
        assert_int_equal(c->n_items, ELEMENTSOF(expected));
        for (size_t i = 0; i < c->n_items; i++) {
                _cleanup_free_ char *d = NULL;

                assert_int_equal(osc_work_describe(&c->items[i], &d), 0);
                assert_string_equal(d, expected[i]);
        }
}

static void test_plan_json(void **state) {
        _cleanup_(osc_model_freep) OscModel *old =
                decode(IPU(KCFG(K_BASE) "," F_B, U_K, IPU_V("1592.6.0", "1.30.0")));
        _cleanup_(osc_model_freep) OscModel *new = decode(IPU(
                KCFG("cpuManagerPolicy: static\\nevictionHard: {memory.available: 1Gi}\\nkubeReserved: {cpu: 80m}\\n"),
                U_K, IPU_V("1592.6.0", "1.31.0")));
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_free_ char *s = NULL;
        json_t *j;

        assert_int_equal(
                osc_diff(&(OscDiffInput) { .old = old, .new = new, .current_os_version = "1592.6.0" }, &c,
                         NULL),
                0);
        osc_changes_mark_done(c, 0);
        j = osc_changes_plan_json(c, SIZE_MAX);
        s = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        assert_string_equal(
                s,
                "{\"inPlace\":[\"kubeletMinorVersion\",\"kubeletConfig\",\"cpuManagerPolicy\"],\"remaining\":5,"
                "\"counts\":{\"write-unit\":1,\"daemon-reload\":1,\"unit-command\":1,\"kubelet-health\":1,\"delete-file\":1},"
                "\"items\":["
                "{\"action\":\"write-unit\",\"target\":\"kubelet.service\",\"description\":"
                "\"write unit kubelet.service (with unit file, 0 drop-ins), remove cpu_manager_state\"},"
                "{\"action\":\"daemon-reload\",\"description\":\"reload systemd\"},"
                "{\"action\":\"unit-command\",\"target\":\"kubelet.service\",\"description\":\"restart unit kubelet.service\"},"
                "{\"action\":\"kubelet-health\",\"description\":\"check kubelet health\"},"
                "{\"action\":\"delete-file\",\"target\":\"/etc/b\",\"description\":\"remove file /etc/b\"}],"
                "\"more\":0}");
}

/* The plan of a 3,000-file OSC for the Node (300 KB listed whole): counts per action and the first
 * items within the budget, a 4 KiB path cut; the whole plan lists every item. */
static void test_plan_summary_bounded(void **state) {
        _cleanup_(osc_model_freep) OscModel *new = NULL;
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_free_ char *yaml = NULL, *s = NULL, *long_path = malloc(4001);
        json_t *j, *items;
        size_t size = 0, listed;
        FILE *f = open_memstream(&yaml, &size);

        assert_non_null(f);
        assert_non_null(long_path);
        memset(long_path, 'p', 4000);
        long_path[0] = '/';
        long_path[4000] = 0;
        fprintf(f, "spec: {files: [{path: %s, content: {inline: {data: x}}}", long_path);
        for (int i = 1; i < 3000; i++)
                fprintf(f, ", {path: /etc/many/file-%05d, content: {inline: {data: x}}}", i);
        fprintf(f, "], units: [" U_Y "]}");
        assert_int_equal(fclose(f), 0);
        new = decode(yaml);
        assert_int_equal(osc_diff(&(OscDiffInput) { .new = new, .checksum = "c" }, &c, NULL), 0);

        j = osc_changes_plan_json(c, OSC_PLAN_SUMMARY_BUDGET);
        s = json_dumps(j, JSON_COMPACT);
        assert_non_null(s);
        assert_true(strlen(s) <= OSC_PLAN_SUMMARY_BUDGET);
        assert_true(strlen(s) > OSC_PLAN_SUMMARY_BUDGET / 2); /* the budget is used, not wasted */
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "counts"), "write-file")),
                         3000);
        assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "counts"), "write-unit")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "remaining")), c->n_items);
        items = json_object_get(j, "items");
        listed = json_array_size(items);
        assert_true(listed > 10);
        assert_int_equal(json_integer_value(json_object_get(j, "more")), c->n_items - listed);
        assert_int_equal(json_string_length(json_object_get(json_array_get(items, 0), "target")),
                         OSC_PLAN_STRING_MAX);
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "target")),
                            "/etc/many/file-00001");
        json_decref(j);

        j = osc_changes_plan_json(c, SIZE_MAX);
        assert_int_equal(json_array_size(json_object_get(j, "items")), c->n_items);
        assert_int_equal(json_integer_value(json_object_get(j, "more")), 0);
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(json_object_get(j, "items"), 0), "target")),
                long_path);
        json_decref(j);
}

static void test_parsers(void **state) {
        static const struct {
                const char *s;
                int64_t t;
                int r;
        } times[] = {
                { "1970-01-01T00:00:00Z", 0, 0 },
                { "2025-01-01T01:00:00+01:00", 1735689600, 0 },
                { "2025-01-01T00:00:00.999999Z", 1735689600, 0 },
                { "2025-01-01 00:00:00Z", 0, -EINVAL },
                { "2025-13-01T00:00:00Z", 0, -EINVAL },
                { "2025-01-01T00:00:00", 0, -EINVAL },
                { "2025-01-01T00:00:00+0100", 0, -EINVAL },
        };
        static const struct {
                const char *s;
                bool ok;
        } quantities[] = {
                { "1", true },   { "80m", true },  { "1Gi", true },   { "1024Mi", true }, { "0.5", true },
                { "+1k", true }, { "1e3", true },  { "1E-3", true },  { ".5", true },     { "", false },
                { "Gi", false }, { "1GB", false }, { "1 Gi", false }, { "lots", false },  { "1e", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(times); i++) {
                int64_t t = -1;
                int r = osc_parse_rfc3339(times[i].s, &t);

                if (r != times[i].r || (r == 0 && t != times[i].t))
                        fail_msg("%s: %d %lld", times[i].s, r, (long long) t);
        }
        for (size_t i = 0; i < ELEMENTSOF(quantities); i++)
                if (osc_quantity_valid(quantities[i].s) != quantities[i].ok)
                        fail_msg("quantity \"%s\"", quantities[i].s);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_files_and_units),   cmocka_unit_test(test_replaced_units),
                cmocka_unit_test(test_self_unit),         cmocka_unit_test(test_containerd),
                cmocka_unit_test(test_in_place),          cmocka_unit_test(test_resume),
                cmocka_unit_test(test_persisted_garbage), cmocka_unit_test(test_describe),
                cmocka_unit_test(test_plan_json),         cmocka_unit_test(test_plan_summary_bounded),
                cmocka_unit_test(test_parsers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
