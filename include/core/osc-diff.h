/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What applying a new OSC means on this node (docs/node-protocol.md §2.3, docs/contract.md §9.2-§9.4): the
 * diff of the last-applied OscModel against the new one, as an ordered list of work items in the order of
 * docs/node-protocol.md §6.4 (containerd config, files, registries, imageRef files, changed units, deleted
 * units, daemon-reload, unit commands, kubelet health, probed registries, registry cleanup, deleted files),
 * plus the in-place flags that wait for MCM's ReadyForUpdate. A new or changed registry with
 * readinessProbe is probed before its hosts.toml is written; upstream runs those probes in parallel
 * with steps 10-16 and waits for them at step 17, so their items stand there.
 *
 * The OscChanges is also the persisted "remaining work" (docs/contract.md §9.2, last-computed-osc-changes):
 * osc_changes_to_json() is saved once, and the items done since are recorded by index
 * (apply/osc-state.h); after a SIGKILL the saved changes (same checksum) are loaded, the recorded
 * items marked done, and the work continues at the first item not done. Each item is idempotent on
 * its own (a file write, a unit command): only the one running at the kill, and file writes not
 * recorded yet (apply/osc-apply.h), can run twice; a unit command is recorded the moment it is done.
 *
 * A command for the agent's own unit (restart.selfUnit; the OSC changed it) is the very last item:
 * the agent restarting itself ends its run, and whatever is left resumes in the next process
 * (upstream's MustRestartNodeAgent, reconciler.go). The applier marks it done before it runs
 * (core/unit-guard.h), so it happens once.
 *
 * Among the unit commands containerd's comes first: the kubelet is never restarted before it in one
 * apply (docs/node-protocol.md §6.4 step 15); the others keep the OSC's order.
 *
 * Replaced units (osc.replacedUnits, docs/contract.md §9.4) are left out of both sides: never written,
 * enabled, started or deleted, and an imageRef file only they list gets no pull item (it still
 * counts as changed and restarts nothing).
 *
 * Pure: no I/O, no logging. The OscChanges owns every item and everything the items point to. */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/osc-model.h"
#include "util/macro.h"

#define OSC_CHANGES_ITEMS_MAX 40000 /* bound for a decoded work list */

typedef enum OscWorkKind {
        OSC_WORK_CONTAINERD_CONFIG, /* config.toml from `containerd` (core/containerd-config.h) */
        OSC_WORK_WRITE_FILE,        /* inline or secretRef file, with its mode */
        OSC_WORK_SKIP_FILE,         /* a file without content (OSC_FILE_NONE): nothing written */
        OSC_WORK_REGISTRY,          /* certs.d/<upstream>/hosts.toml (probe first if `probe`) */
        OSC_WORK_PULL_FILE,         /* imageRef file */
        OSC_WORK_WRITE_UNIT,        /* unit file, drop-ins (deleted ones removed), enable/disable */
        OSC_WORK_DELETE_UNIT,       /* disable, stop, remove the file and its drop-ins */
        OSC_WORK_DAEMON_RELOAD,
        OSC_WORK_UNIT_COMMAND,    /* restart/stop `name` */
        OSC_WORK_KUBELET_HEALTH,  /* wait for the kubelet's /healthz after kubelet changes */
        OSC_WORK_DELETE_REGISTRY, /* remove certs.d/<upstream> */
        OSC_WORK_DELETE_FILE,
        _OSC_WORK_KIND_MAX,
        _OSC_WORK_KIND_INVALID = -EINVAL,
} OscWorkKind;

const char *osc_work_kind_to_string(OscWorkKind k); /* "write-file", "unit-command", ... */
OscWorkKind osc_work_kind_from_string(const char *s);

typedef struct OscWork {
        OscWorkKind kind;
        bool done;
        bool refused;                  /* (with done) a drift repair's item the unit guard refused: left
                                        * out, the rest of the repair goes on; never persisted */
        OscFile file;                  /* WRITE_FILE, SKIP_FILE, PULL_FILE; DELETE_FILE: only .path */
        OscUnit unit;                  /* WRITE_UNIT, DELETE_UNIT */
        char **drop_ins_deleted;       /* WRITE_UNIT: drop-in names to remove; NULL-terminated or NULL */
        bool remove_cpu_manager_state; /* WRITE_UNIT of kubelet.service while cpuManagerPolicy changed */
        char *name;                    /* UNIT_COMMAND: the unit; DELETE_REGISTRY: the upstream */
        OscUnitCommand command;        /* UNIT_COMMAND */
        OscRegistry registry;          /* REGISTRY */
        bool probe;                    /* REGISTRY: new or changed with readinessProbe */
        json_t *containerd;            /* CONTAINERD_CONFIG: the new OscModel's containerd_config, so a
                                        * resumed item renders the same file without the OSC */
} OscWork;

typedef struct OscInPlaceFlags {
        bool operating_system;
        bool kubelet_minor_version;
        bool kubelet_config;
        bool cpu_manager_policy;
        bool ca_rotation_kubelet;
        bool ca_rotation_node_agent;
        bool sa_key_rotation;
} OscInPlaceFlags;

typedef struct OscChanges {
        char *checksum;   /* the Secret's checksum/data-script these changes lead to */
        bool first_apply; /* there was no last-applied OSC */
        bool containerd_config_changed;
        OscInPlaceFlags in_place;
        OscWork *items;
        size_t n_items, n_alloc;
} OscChanges;

typedef struct OscDiffInput {
        const OscModel *old; /* NULL: first apply (docs/node-protocol.md §2.3 step 2) */
        const OscModel *new;
        const char *checksum;
        const char *current_os_version; /* from os-release; used only when both OSCs are in-place */
        char *const *replaced_units;    /* NULL-terminated; NULL: none */
        const char *self_unit;          /* restart.selfUnit: its command comes last (NULL: none) */
} OscDiffInput;

OscChanges *osc_changes_free(OscChanges *c);
DEFINE_CLEANUP_FUNC(OscChanges, osc_changes_free);

/* Computes the changes. Errors are upstream's, with *ret_error set: the kubelet config missing or
 * unreadable, an unparsable kubelet version or kubeReserved quantity ("failed to parse"), an
 * unparsable OS version. -ENOMEM. */
int osc_diff(const OscDiffInput *in, OscChanges **ret, char **ret_error);

/* Any in-place flag set: then the work waits for ReadyForUpdate (upstream gates the whole reconcile
 * after the containerd base config, docs/node-protocol.md §6.4 step 7). */
bool osc_in_place_flags_any(const OscInPlaceFlags *f);
bool osc_in_place_flags_kubelet(const OscInPlaceFlags *f);

/* Index of the first item not done at or after `from`, or n_items when there is none. */
size_t osc_changes_next_from(const OscChanges *c, size_t from);
/* Appends an empty item of `kind` for the caller to fill in (a work list built elsewhere than by
 * osc_diff(): the drift repair, core/osc-drift-plan.h); NULL on -ENOMEM or past OSC_CHANGES_ITEMS_MAX. */
OscWork *osc_changes_add_item(OscChanges *c, OscWorkKind kind);
/* Whether `c` has a command item for `unit`. */
bool osc_changes_has_command_for(const OscChanges *c, const char *unit);

/* Index of the first item not done, or n_items when everything is applied. */
static inline size_t osc_changes_next(const OscChanges *c) {
        return osc_changes_next_from(c, 0);
}
/* How many items are not done (with gaps: a failed unit command stays while later ones are done). */
size_t osc_changes_remaining(const OscChanges *c);
/* Marks item `i` done. */
void osc_changes_mark_done(OscChanges *c, size_t i);
/* Marks the unit items (write, delete, command) of `unit` not done yet as done and refused: a drift
 * repair leaves out what the unit guard refuses and restores the rest. Returns how many. */
size_t osc_changes_refuse_unit(OscChanges *c, const char *unit);
static inline bool osc_changes_complete(const OscChanges *c) {
        return osc_changes_next(c) >= c->n_items;
}

/* Persisted form; the decoder checks every item like the OSC decoder (the file is ours, but a
 * corrupt file must not make us write outside the root). */
json_t *osc_changes_to_json(const OscChanges *c);
int osc_changes_from_json(const json_t *j, OscChanges **ret, char **ret_error);

/* One line for the plan and the journal: "write file /etc/foo (0644)", "restart unit kubelet.service",
 * "remove drop-in ...". */
int osc_work_describe(const OscWork *w, char **ret);

/* What the item acts on: the path, unit, upstream; NULL for daemon-reload and kubelet-health. */
const char *osc_work_target(const OscWork *w);

/* The remaining work as a plan, so an operator sees before the drain what will change:
 *   {"inPlace": [flags set], "counts": {"write-file": 2500, ...}, "remaining": n,
 *    "items": [{"action", "target", "description"}, ...], "more": n - listed}
 * with the items not done yet, in order. With a `budget` (bytes of its compact JSON) the items
 * listed are the first that fit, their strings cut at OSC_PLAN_STRING_MAX: the summary for the plan
 * annotation (inplace-agent/plan, which shares the Node's 256 KiB of annotations with everyone).
 * budget SIZE_MAX lists every item whole: the plan for the state directory and the journal. */
#define OSC_PLAN_SUMMARY_BUDGET (16 * 1024)
#define OSC_PLAN_STRING_MAX 256
json_t *osc_changes_plan_json(const OscChanges *c, size_t budget);

/* RFC 3339 timestamp -> seconds since the epoch (metav1.Time precision). -EINVAL if not one. */
int osc_parse_rfc3339(const char *s, int64_t *ret);

/* Whether `s` is a Kubernetes resource quantity (resource.ParseQuantity's grammar). */
bool osc_quantity_valid(const char *s);
