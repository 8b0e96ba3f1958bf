/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A model of the node around the update decider (issue 31), and a bounded exhaustive explorer of it.
 *
 * The world is what the decider can observe and what its actions change: the desired OSC (one of a
 * few: kubelet patch, kubelet minor, OS version, file-only, gated file change, credentials rotation),
 * MCM's labels and the InPlaceUpdate condition, the Node's result, checksum and marker, the kubelet
 * binary and unit (present, running), the OS version on disk and the one staged for the next boot,
 * the OSC committed as last applied and its units (present, running), the boot, the clock, and the
 * persisted transaction (state.json's text: every decision starts from a state-codec round trip).
 *
 * One event is one thing that happens:
 *   RUN         the agent decides (the REAL node_update_decide()) and runs the batch as
 *               agent/update/executor.c does: every action's effect on the world, then
 *               node_update_action_done()/_failed(), the record persisted after each. A variant
 *               says which action fails (an API write, a stage, a health result, ...), or where the
 *               agent dies: before an action, or after its effect and before its feedback.
 *               The world decides what cannot be chosen: the units check and a kubelet restart
 *               answer what is true; the kubelet answers healthy only when it runs.
 *   REBOOT      the node boots (into the staged OS version if any), with or without an /etc reset
 *               that takes the OSC's units and the kubelet unit; the agent starts, and its drift
 *               repair at start (when the transaction lets it) restores them or fails.
 *   NEW_OSC     a new desired state; MCM starts over (labels, condition, result cleared).
 *   CANDIDATE, SELECTED, READY (ReadyForUpdate, a new lastTransitionTime), LEAVE (UpdateFailed)
 *   WAIT        time passes until the last decision's wake-up (back-offs).
 *
 * Invariants checked after every effect (model_violation() names the one broken):
 *   SUCCESS     update-result=successful and a transaction's checksum land only when the units
 *               the OSC starts run, the kubelet runs at the desired version (when the success rule
 *               checks it), the OS is the transaction's target, AND the transaction's own checks
 *               passed in the current boot (CHECK_OSC_UNITS; CHECK_KUBELET_HEALTH when
 *               update_checks_kubelet());
 *   GATE        no in-place change (a gated transaction's kubelet switch or OSC apply, any OS
 *               command or image install) before ReadyForUpdate or update-result=failed was seen
 *               for the current desired state;
 *   ONE_RESULT  one result value per transaction; no successful for a superseded desired state;
 *   CHECKSUM    the checksum only for the committed OSC; never a checksum alone after a failure of
 *               the same desired state;
 *   CRASH       the OS command never started twice in a transaction (a crash resumes, never repeats);
 *   INTERNAL    the decider and the feedback never return an error; the record always decodes. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ModelEventKind {
        EV_RUN,
        EV_REBOOT,
        EV_NEW_OSC,
        EV_CANDIDATE,
        EV_SELECTED,
        EV_READY,
        EV_LEAVE,
        EV_WAIT,
        _EV_MAX,
} ModelEventKind;

/* EV_RUN variants: what happens to action `at` of the batch. */
typedef enum ModelRun {
        RUN_OK,           /* everything that can succeed succeeds */
        RUN_FAIL,         /* action `at` fails (an API write: the API server refuses) */
        RUN_CRASH_BEFORE, /* the agent dies before action `at` starts */
        RUN_CRASH_AFTER,  /* action `at` takes effect, the agent dies before its feedback */
        RUN_OS_IN_PLACE,  /* the OS command `at` changes the OS at once, no reboot */
} ModelRun;

/* EV_REBOOT's argument: bits. */
#define REBOOT_ETC_RESET 1    /* /etc comes back as the image's: the OSC's units and the kubelet unit go */
#define REBOOT_REPAIR_FAILS 2 /* the drift repair at start restores nothing */

typedef struct ModelEvent {
        ModelEventKind kind;
        int arg;      /* EV_NEW_OSC: OSC index; EV_REBOOT: bits; EV_RUN: action index */
        ModelRun run; /* EV_RUN */
} ModelEvent;

/* The desired states (EV_NEW_OSC's argument); 0 is the one applied at the start. */
typedef enum ModelOsc {
        OSC_BASE,
        OSC_KUBELET_PATCH,
        OSC_KUBELET_MINOR,
        OSC_OS_UPDATE,
        OSC_FILES,
        OSC_FILES_GATED,
        OSC_ROTATION,
        _OSC_MAX,
} ModelOsc;

typedef struct ModelOptions {
        unsigned depth;
        uint32_t oscs;     /* bit set of ModelOsc that EV_NEW_OSC may bring */
        bool os_image;     /* the image backend (else the command backend) */
        bool truth_only;   /* SUCCESS checks the world only, not that the checks ran (to show
                            * what a decider without CHECK_OSC_UNITS reports) */
        size_t max_states; /* stop after this many (0: no limit) */
} ModelOptions;

typedef struct ModelResult {
        size_t states; /* distinct states explored */
        size_t transitions;
        unsigned depth; /* the depth completed */
        bool violated;
        char *violation;   /* owned: which invariant and why */
        ModelEvent *trace; /* owned: the shortest sequence that reaches it */
        size_t n_trace;
        bool truncated; /* max_states reached */
} ModelResult;

void model_result_done(ModelResult *r);

/* Breadth-first over every event sequence up to o->depth (visited states hashed): the first
 * violation found is at the smallest depth. */
int model_explore(const ModelOptions *o, ModelResult *ret);

/* Replays `events` from the initial world; 0 when no invariant broke, else 1 with *ret_violation
 * (owned) saying which. */
int model_replay(const ModelOptions *o, const ModelEvent *events, size_t n, char **ret_violation);

/* The sequence as a ready-to-paste cmocka test (owned string). */
char *model_format_test(const char *name, const ModelOptions *o, const ModelResult *r);
