/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The OscRunner's insides, shared by osc-runner.c (preparing, the walk over the work list, the
 * applier's stretches, committing) and osc-runner-items.c (the runner's own items: a secretRef file,
 * the kubelet health check, a registry's readiness probe, an imageRef file). Not part of the public
 * interface. */

#include <systemd/sd-event.h>

#include "apply/osc-apply.h"
#include "apply/osc-guard.h"
#include "core/osc-masked.h"
#include "kube/kube-client.h"
#include "net/http-probe.h"
#include "oci/file-stage.h"
#include "oci/file-store.h"
#include "update/osc-runner.h"
#include "util/log-once.h"

/* The one operation of a run in flight: at most one thing happens at a time. */
typedef enum OscOpKind {
        OSC_OP_NONE,
        OSC_OP_STEP,           /* the next step from the loop: the run's start, an item ended early */
        OSC_OP_REACH,          /* waiting for systemd before the guard can ask it */
        OSC_OP_GUARD,          /* judging the unit items before any of them runs */
        OSC_OP_APPLY,          /* the applier runs its items, up to the next of ours */
        OSC_OP_SECRET,         /* a secretRef file: GET of its Secret */
        OSC_OP_KUBELET_HEALTH, /* the kubelet health item */
        OSC_OP_REGISTRY_PROBE, /* a registry with readinessProbe: one host's probe */
        OSC_OP_PULL,           /* an imageRef file being pulled */
} OscOpKind;

typedef struct OscOp {
        OscOpKind kind;
        union {
                sd_event_source *step; /* owned */
                UnitJob *reach;        /* borrowed handle: owned by the UnitControl */
                OscGuard *guard;       /* owned */
                OscApplier *applier;   /* owned */
                KubeRequest *secret;   /* owned */
                HttpProbe *probe;      /* owned: OSC_OP_KUBELET_HEALTH, OSC_OP_REGISTRY_PROBE */
                FileStage *pull;       /* owned */
        };
} OscOp;

struct OscRunner {
        OscRunnerDeps deps;            /* borrowed */
        KubeClient *kube;              /* borrowed; NULL: no API client yet */
        char *host_name;               /* owned: lower-case, for the files' hostName filter */
        OscProtected own_files;        /* owned: what no OSC file may touch, resolved at start */
        char *desired;                 /* owned: the checksum of the newest OSC; NULL: none known */
        OscModelOptions model_options; /* how an OSC is decoded here: host_name, the agent's PATH */
        FileStore *images;             /* owned: verified imageRef files, created at the first pull */

        /* The prepared OSC. */
        char *checksum; /* owned; NULL: nothing prepared */
        char *yaml;     /* owned: a copy of its osc.yaml until committed */
        size_t yaml_size;
        OscModel *model;     /* a reference to the OscDesired's model (decoded at intake, shared,
                              * immutable); NULL: none given, osc_state_prepare() decodes yaml */
        bool committed;      /* it is the last-applied OSC */
        OscChanges *changes; /* owned: the remaining work; NULL when committed or on error */
        json_t *plan;        /* owned: osc_changes_plan_json(changes), the summary */
        char *error;         /* owned: why no work list could be computed */
        UpdateFailureCode error_code;
        uint64_t retry_usec;  /* a retriable error: compute again at this time */
        unsigned failures;    /* retriable errors in a row, for the back-off */
        LogOnce logged_error; /* the last error written to the journal */

        /* The run in flight (`done` set): the prepared work, or a drift repair's (osc_runner_repair()). */
        OscChanges *running; /* borrowed: `changes`, or the repair's list; NULL: committed */
        bool repairing;      /* nothing persisted, nothing committed */
        char *refused;       /* owned: a repair's units the guard refused, "<unit> (<why>); ..." */
        OscMasked masked;    /* owned: what the run left masked, said once when it ends */
        OscOp op;            /* owned */
        size_t item;         /* our item in flight (OSC_OP_SECRET ... OSC_OP_PULL) */
        size_t probe_host;   /* OSC_OP_REGISTRY_PROBE: the host being probed */
        int step_error;      /* OSC_OP_STEP: < 0, item `item` failed (a probe abandoned) */
        char *step_detail;   /* owned: and why */
        OscRunnerDone done;
        void *userdata;
};

/* The item of ours in flight. */
static inline const OscWork *osc_runner_current(const OscRunner *r) {
        return &r->running->items[r->item];
}

/* Cancels and frees the operation in flight, if any (no callback follows). */
void osc_runner_op_clear(OscRunner *r);
/* Replaces the operation in flight by the next step from the loop: the run's first, or (error < 0)
 * the failure of item `item` decided where the run's owner is on the stack. */
int osc_runner_op_step(OscRunner *r, int error, const char *detail);
/* Our item ended, from the loop: failed (error < 0, `detail` says why), or done and persisted, and
 * the run goes on. */
void osc_runner_item_ended(OscRunner *r, int error, const char *detail);

/* Starts item `r->item`, one the applier does not do (osc_applier_handles()): 1 done already, 0 in
 * flight (osc_runner_item_ended() follows), -errno (and maybe *ret_detail) failed. */
int osc_runner_start_item(OscRunner *r, const OscWork *w, char **ret_detail);
