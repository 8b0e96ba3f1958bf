/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <systemd/sd-id128.h>
#include <time.h>

#include "apply/osc-state.h"
#include "core/node-update.h"
#include "core/node-view.h"
#include "identity/kubelet-bootstrap.h"
#include "kube/kube-client.h"
#include "kube/pods.h"
#include "kubelet/kubelet-health.h"
#include "kubelet/kubelet-store.h"
#include "kubelet/kubelet-version.h"
#include "oci/file-stage.h"
#include "oci/oci-manifest.h"
#include "oci/oci-ref.h"
#include "oci/registry.h"
#include "os/os-command.h"
#include "os/os-image-stage.h"
#include "os/os-image.h"
#include "os/os-release.h"
#include "os/os-update-classify.h"
#include "systemd/reboot.h"
#include "systemd/unit-control.h"
#include "update/catalog-ids.h"
#include "update/credential-rotation.h"
#include "update/executor.h"
#include "update/osc-runner.h"
#include "update/osc-units-verify.h"
#include "update/state-file.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"

#define OS_RELEASE_MAX (64 * 1024)
/* The tail of a failed OS update command's output on the Node (gardener#15707): enough for the
 * error and what led to it, and small, as MCM copies the reason into its condition. */
#define FAILURE_OUTPUT_LINES 20
#define FAILURE_OUTPUT_MAX 1024
#define SAVE_RETRY_USEC (5 * USEC_PER_SEC)

typedef enum ExecutorState {
        EXECUTOR_NEW,      /* executor_start() not called yet */
        EXECUTOR_ADOPTING, /* probing a plain kubelet file before the first decision */
        EXECUTOR_IDLE,     /* waiting for input or the engine's wake-up time */
        EXECUTOR_RUNNING,  /* an action of the batch is in flight */
} ExecutorState;

/* The one operation in flight: at most one action runs at a time. */
typedef enum ExecutorOpKind {
        OP_NONE,
        OP_REPORT, /* Node writes: the reporter calls back */
        OP_STAGE_KUBELET,
        OP_STAGE_OS_IMAGE,
        OP_UNIT_JOB,
        OP_OS_COMMAND,
        OP_OS_IMAGE,
        OP_REBOOT,
        OP_HEALTH,
        OP_PODS,
        OP_APPLY_OSC, /* the OscRunner's run; it calls back */
        OP_ROTATE_CREDENTIALS,
        OP_CHECK_UNITS,
} ExecutorOpKind;

typedef struct ExecutorOp {
        ExecutorOpKind kind;
        union {
                FileStage *stage;             /* owned */
                OsImageStage *os_stage;       /* owned */
                UnitJob *job;                 /* borrowed handle: owned by the UnitControl */
                OsCommand *command;           /* owned */
                OsImage *image;               /* owned */
                RebootRequest *reboot;        /* owned */
                HttpProbe *health;            /* owned */
                PodCleanup *pods;             /* owned */
                CredentialRotation *rotation; /* owned */
                OscUnitsVerify *units_verify; /* owned */
        };
} ExecutorOp;

struct Executor {
        ExecutorDeps deps;            /* all borrowed: the Manager's */
        const Config *config;         /* == deps.config */
        sd_event *event;              /* == deps.event */
        KubeClient *kube;             /* borrowed; NULL: no API client yet */
        bool restarts_busy;           /* the restart annotation is being carried out */
        bool drift_busy;              /* a drift round holds decisions (executor_drift_claim()) */
        ExecutorDriftDone drift_done; /* the drift repair in flight */
        UpdateGate gate;              /* executor_gate() */
        ExecutorReleased released;    /* executor_set_released_callback() */
        void *released_userdata;
        void *drift_userdata;

        ExecutorState state;
        bool dirty;            /* new input while busy: decide again afterwards */
        UpdateTransaction *tx; /* owned: as persisted */
        UpdateDecision batch;  /* owned: the decision being carried out */
        size_t next;           /* index of the next action of `batch` to run */
        ExecutorOp op;         /* owned: the action in flight */

        const NodeView *node; /* borrowed: the Manager's; NULL: absent or unknown */
        bool node_known;      /* executor_set_node() was called: `node` NULL means absent */
        OscDesired *osc;      /* owned */

        KubeletStore *store;        /* owned */
        RegistryClient *registry;   /* owned */
        KubeletVersionProbe *adopt; /* owned: --version probe of a plain kubelet file */
        OscRunner *osc_runner;      /* owned: the OSC's files, units and containerd work */

        UpdatePhase logged_phase; /* phase whose journal line was written */
        char *logged_tx;          /* owned */
        LogOnce logged_notice;    /* the decision's last notice, written to the journal once */

        UpdateFailureCode sync_code; /* a runner's synchronous failure: its code and message */
        char *sync_message;          /* owned */
        bool failure_logged;         /* the action's callback logged its failure (with its catalog ID) */

        sd_event_source *defer; /* owned: deferred decide */
        sd_event_source *wake;  /* owned: decide again at batch.wake_usec (or to retry a save) */
};

static void executor_action_finished(Executor *e, int error, UpdateFailureCode code, const char *message);

/* A runner that fails before going asynchronous, with a better code and message than errno's. */
static int executor_fail_now(Executor *e, int error, UpdateFailureCode code, const char *message) {
        e->sync_code = code;
        if (free_and_strdup(&e->sync_message, message) < 0)
                return -ENOMEM;
        return error;
}

/* The one clock: the loop's idea of now (CLOCK_REALTIME), the same for a whole dispatch. */
static uint64_t executor_now(Executor *e) {
        uint64_t t = 0;

        (void) sd_event_now(e->event, CLOCK_REALTIME, &t);
        return t;
}

/* Cancels and frees the operation in flight, if any (no callback follows). */
static void executor_op_clear(Executor *e) {
        switch (e->op.kind) {
        case OP_STAGE_KUBELET:
                file_stage_free(e->op.stage);
                break;
        case OP_STAGE_OS_IMAGE:
                os_image_stage_free(e->op.os_stage);
                break;
        case OP_UNIT_JOB:
                if (e->op.job)
                        unit_job_cancel(e->op.job);
                break;
        case OP_OS_COMMAND:
                os_command_free(e->op.command);
                break;
        case OP_OS_IMAGE:
                os_image_free(e->op.image);
                break;
        case OP_REBOOT:
                reboot_request_free(e->op.reboot);
                break;
        case OP_HEALTH:
                http_probe_free(e->op.health);
                break;
        case OP_PODS:
                pod_cleanup_free(e->op.pods);
                break;
        case OP_APPLY_OSC:
                osc_runner_cancel(e->osc_runner);
                break;
        case OP_ROTATE_CREDENTIALS:
                credential_rotation_free(e->op.rotation);
                break;
        case OP_CHECK_UNITS:
                osc_units_verify_free(e->op.units_verify);
                break;
        case OP_REPORT: /* the reporter drops its writes itself */
        case OP_NONE:
                break;
        }
        e->op = (ExecutorOp) { .kind = OP_NONE };
}

static const UpdateAction *current_action(Executor *e) {
        return e->next < e->batch.n_actions ? &e->batch.actions[e->next] : NULL;
}

/* ---- journal ----------------------------------------------------------------------------- */

/* Key lines carry the catalog MESSAGE_ID of the phase (units/inplace-agent.catalog). */
static void log_phase_line(UpdatePhase p, int level, const char *msg) {
        switch (p) {
        case UPDATE_PHASE_PLANNED:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_PLANNED, "%s", msg);
                break;
        case UPDATE_PHASE_STAGED:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_STAGED, "%s", msg);
                break;
        case UPDATE_PHASE_VERIFYING:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_APPLIED, "%s", msg);
                break;
        case UPDATE_PHASE_SUCCEEDED:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_SUCCEEDED, "%s", msg);
                break;
        case UPDATE_PHASE_FAILED:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_FAILED, "%s", msg);
                break;
        case UPDATE_PHASE_ROLLED_BACK:
                (void) log_struct_id(level, 0, MESSAGE_ID_UPDATE_ROLLED_BACK, "%s", msg);
                break;
        default:
                log_full(level, "%s", msg);
        }
}

/* One line per phase a transaction enters. */
static void executor_log_phase(Executor *e) {
        const UpdateTransaction *tx = e->tx;
        _cleanup_free_ char *msg = NULL;
        const char *phase;
        int level, r;

        if (!tx || !tx->id)
                return;
        phase = update_phase_to_string(tx->phase);
        log_set_transaction(tx->id, phase);
        if (streq_ptr(e->logged_tx, tx->id) && e->logged_phase == tx->phase)
                return;
        e->logged_phase = tx->phase;
        (void) free_and_strdup(&e->logged_tx, tx->id);

        level = tx->phase == UPDATE_PHASE_FAILED || tx->phase == UPDATE_PHASE_ROLLED_BACK ? LOG_WARNING :
                                                                                            LOG_NOTICE;
        if (tx->failure.code >= 0 && tx->failure.message)
                r = asprintf(&msg, "Update %s: %s (%s: %s).", tx->id, phase,
                             strempty(update_failure_code_to_string(tx->failure.code)), tx->failure.message);
        else if (tx->kubelet_to || tx->os_to)
                r = asprintf(&msg, "Update %s: %s (%s%s%s%s%s%s%s%s).", tx->id, phase,
                             tx->kubelet_to ? "kubelet " : "", tx->kubelet_to ? tx->kubelet_from ?: "?" : "",
                             tx->kubelet_to ? " -> " : "", strempty(tx->kubelet_to),
                             tx->kubelet_to && tx->os_to ? ", OS " :
                                     tx->os_to           ? "OS " :
                                                           "",
                             tx->os_to ? tx->os_from ?: "?" : "", tx->os_to ? " -> " : "",
                             strempty(tx->os_to));
        else /* the OSC's files and units only: no versions to name */
                r = asprintf(&msg, "Update %s: %s.", tx->id, phase);
        if (r < 0) {
                log_oom();
                return;
        }
        /* A fresh node's first OSC runs before its Node exists: say where the reports went. */
        if (tx->before_node && e->node_known && !e->node) {
                char *m;

                if (asprintf(&m,
                             "%s The Node %s does not exist yet: what is reported to it waits until the "
                             "kubelet registers it.",
                             msg, e->config->node_name) < 0) {
                        log_oom();
                        return;
                }
                free(msg);
                msg = m;
        }
        log_phase_line(tx->phase, level, msg);
}

/* ---- inputs -------------------------------------------------------------------------------- */

static int read_os_version(const Config *c, char **ret, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_full_file(c->os_release, OS_RELEASE_MAX, &data, &size);
        if (r < 0) {
                *ret_error = os_release_read_error(c->os_release, r);
                return r;
        }
        return os_release_version(data, size, ret, ret_error);
}

static char *new_transaction_id(void) {
        sd_id128_t id;
        char *s;

        if (sd_id128_randomize(&id) < 0)
                return NULL;
        if (asprintf(&s, "%.12s", SD_ID128_TO_STRING(id)) < 0)
                return NULL;
        return s;
}

/* ---- reports: the reporter writes them ------------------------------------------------------ */

static void executor_on_reported(int error, void *userdata) {
        Executor *e = userdata;

        e->op.kind = OP_NONE;
        /* The reporter said the failed write once, with the API server's reason: not again here. */
        e->failure_logged = error < 0;
        executor_action_finished(e, error, _UPDATE_FAILURE_INVALID,
                                 error < 0 ? "writing the Node failed" : NULL);
}

static int run_report(Executor *e, const UpdateAction *a) {
        int r;

        r = reporter_report(e->deps.reporter, e->tx, a, executor_now(e), executor_on_reported, e);
        if (r == 0)
                e->op.kind = OP_REPORT;
        return r;
}

static int run_set_checksum(Executor *e, const UpdateAction *a) {
        osc_runner_retire_bootstrap_credentials(e->osc_runner);
        return run_report(e, a);
}

/* ---- kubelet ---------------------------------------------------------------------------------- */

static void executor_on_stage_progress(FileStage *st, uint64_t done, uint64_t total, void *userdata) {
        Executor *e = userdata;
        const UpdateAction *a = current_action(e);
        _cleanup_free_ char *status = NULL;

        if (a && asprintf(&status, "Staging kubelet %s", strempty(a->version)) < 0)
                status = NULL;
        reporter_progress(e->deps.reporter, e->tx, a, done, total, executor_now(e), status);
}

static void executor_on_staged(FileStage *st, const FileStageResult *res, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *message = res->message ? strdup(res->message) : NULL;
        ArtifactFailure failure = res->failure;
        int error = res->error;

        /* Everything in `res` belongs to the stage: use it before the stage goes. */
        if (error >= 0)
                log_info("Kubelet %s staged at %s (%s, %" PRIu64 " bytes downloaded).",
                         strempty(res->version), strempty(res->path),
                         res->reused ? "already in the store" : strempty(res->file_digest),
                         res->bytes_downloaded);
        executor_op_clear(e);
        executor_action_finished(e, error, update_failure_from_artifact(failure), message);
}

static int run_stage_kubelet(Executor *e, const UpdateAction *a) {
        FileStageRequest req = {
                .image = a->image,
                .file_path = a->path_in_image,
                .version = a->version,
        };

        e->op.kind = OP_STAGE_KUBELET;
        return file_stage_start(e->event, e->registry, kubelet_store_files(e->store), &req,
                                executor_on_stage_progress, executor_on_staged, e, &e->op.stage);
}

static int run_switch_kubelet(Executor *e, const UpdateAction *a) {
        _cleanup_free_ char *previous = NULL;
        int r;

        r = kubelet_store_switch(e->store, a->version, &previous); /* NULL: none, as before */
        if (r < 0)
                return r;
        log_info("Switched %s to kubelet %s (was %s).", kubelet_store_binary_path(e->store),
                 a->version ?: "none (removed)", previous ?: "none");
        return 1;
}

static void executor_on_health(HttpProbe *hc, int error, const char *message, unsigned n_probes,
                               void *userdata) {
        Executor *e = userdata;

        executor_op_clear(e);
        if (error >= 0)
                log_info("Kubelet healthy after %u probe(s).", n_probes);
        /* The engine words the reason like upstream (docs/node-protocol.md §9 scenario 25) for MCM. */
        executor_action_finished(e, error, UPDATE_FAILURE_KUBELET_UNHEALTHY, error < 0 ? message : NULL);
}

static int run_check_health(Executor *e, const UpdateAction *a) {
        HttpProbeOptions o = kubelet_health_probe(e->config);

        e->op.kind = OP_HEALTH;
        return http_probe_start(e->event, e->deps.http, &o, executor_on_health, e, &e->op.health);
}

/* The success rule: the units the last-applied OSC starts run (update/osc-units-verify.h). */
static void executor_on_units_verified(OscUnitsVerify *v, int error, const char *message, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *m = message ? strdup(message) : NULL;

        if (error >= 0)
                log_info("Verified: %s.", strempty(m));
        executor_op_clear(e);
        executor_action_finished(e, error, UPDATE_FAILURE_OSC_UNITS_NOT_RUNNING, error < 0 ? m : NULL);
}

static int run_check_osc_units(Executor *e, const UpdateAction *a) {
        OscUnitsVerifyParams p = {
                .state_directory = e->config->state_directory,
                .root_directory = e->config->osc.root_directory,
                .replaced_units = e->config->osc.replaced_units,
                .model_options = osc_runner_model_options(e->osc_runner),
                .timeout_usec = e->config->kubelet.health_timeout_usec,
        };

        e->op.kind = OP_CHECK_UNITS;
        return osc_units_verify_start(e->event, e->deps.units, &p, executor_on_units_verified, e,
                                      &e->op.units_verify);
}

/* keepVersions: older kubelets go, never the running one or the one it replaced (the rollback
 * version). Best effort: a failure is logged and recorded, nothing else. */
static int run_collect_kubelets(Executor *e, const UpdateAction *a) {
        const char *protect[] = { a->version, a->previous_version, NULL };
        int r;

        r = kubelet_store_gc(e->store, protect);
        if (r < 0)
                return r;
        return 1;
}

/* ---- units and reboot --------------------------------------------------------------------------- */

static void executor_on_unit_job(const UnitJobResult *res, void *userdata) {
        Executor *e = userdata;
        const UpdateAction *a = current_action(e);
        bool stop = a && a->type == UPDATE_ACTION_STOP_UNIT;

        e->op = (ExecutorOp) { .kind = OP_NONE }; /* the UnitControl frees the job */
        if (res->error == -ENOENT && a && a->step == UPDATE_STEP_ROLLBACK_RESTART) {
                /* Rolled back before the OSC's units were written (a first apply on an image that
                 * brought the kubelet binary): no unit runs the kubelet, so no process of the new
                 * one ever ran and the old binary is back: nothing to restart. */
                if (stop) /* back to none: nothing there, nothing runs */
                        log_notice(
                                "No kubelet at %s again; %s is not installed, so there is nothing to stop.",
                                e->config->kubelet.binary_path, res->unit);
                else
                        log_notice(
                                "Kubelet %s is back at %s; %s is not installed, so nothing runs it to restart.",
                                strempty(e->tx->kubelet_from), e->config->kubelet.binary_path, res->unit);
                executor_action_finished(e, 0, _UPDATE_FAILURE_INVALID, NULL);
                return;
        }
        if (res->error >= 0)
                (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_UNIT_RESTARTED, "%s %s.",
                                     stop ? "Stopped" : "Restarted", res->unit);
        else {
                (void) log_struct_id(LOG_WARNING, res->error, MESSAGE_ID_UNIT_RESTART_FAILED,
                                     "%s of %s failed: %s", stop ? "Stop" : "Restart", res->unit,
                                     strempty(res->detail));
                e->failure_logged = true;
        }
        executor_action_finished(e, res->error, UPDATE_FAILURE_UNIT_RESTART_FAILED, res->detail);
}

static int run_unit_job(Executor *e, const UpdateAction *a) {
        UnitAction action = a->type == UPDATE_ACTION_STOP_UNIT ? UNIT_ACTION_STOP : UNIT_ACTION_RESTART;

        if (!e->deps.units)
                return -ENOTCONN;
        e->op.kind = OP_UNIT_JOB;
        return unit_control_run(e->deps.units, action, a->unit, NULL, executor_on_unit_job, e, &e->op.job);
}

static void executor_on_reboot(RebootRequest *r, int error, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *msg =
                reboot_request_get_error_message(r) ? strdup(reboot_request_get_error_message(r)) : NULL;

        if (error >= 0)
                log_notice("Reboot requested; waiting to be restarted on the new OS.");
        executor_op_clear(e);
        executor_action_finished(e, error, _UPDATE_FAILURE_INVALID, msg);
}

static int run_reboot(Executor *e, const UpdateAction *a) {
        sd_bus *bus = system_bus_get(e->deps.bus);
        int r;

        if (!bus && e->config->os_update.reboot != REBOOT_METHOD_NONE)
                return executor_fail_now(e, -ENOTCONN, _UPDATE_FAILURE_INVALID,
                                         "no connection to the system bus to request the reboot");
        e->op.kind = OP_REBOOT;
        r = reboot_request_new(bus, e->config->os_update.reboot, &e->op.reboot);
        if (r < 0)
                return r;
        r = reboot_request_start(e->op.reboot, executor_on_reboot, e);
        if (r == REBOOT_DISABLED) {
                log_notice("The OS update needs a reboot, but osUpdate.reboot is none: %s.",
                           REBOOT_DISABLED_MESSAGE);
                executor_op_clear(e);
                return 1;
        }
        return r;
}

/* ---- OS ------------------------------------------------------------------------------------------ */

static int executor_on_os_spawn(OsCommand *c, unsigned attempt, void *userdata) {
        log_info("Running the OS update command, attempt %u.", attempt);
        return 0;
}

static void executor_on_os_line(OsCommand *c, const char *line, size_t size, void *userdata) {
        log_info("os-update: %.*s", (int) size, line);
}

static void executor_on_os_retry(OsCommand *c, const OsCommandResult *res, uint64_t delay_usec,
                                 void *userdata) {
        log_warning("The OS update command reported network problems (attempt %u); retrying in %" PRIu64
                    "s.",
                    res->attempts, delay_usec / USEC_PER_SEC);
}

static void executor_on_os_done(OsCommand *c, const OsCommandResult *res, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *msg = NULL;
        bool timeout;

        if (res->class == OS_UPDATE_CLASS_SUCCESS) {
                log_info("The OS update command succeeded after %u attempt(s).", res->attempts);
                executor_op_clear(e);
                executor_action_finished(e, 0, _UPDATE_FAILURE_INVALID, NULL);
                return;
        }
        timeout = res->class == OS_UPDATE_CLASS_TIMEOUT;
        if (os_update_failure_message(res->class, &res->outcome, res->path, res->output,
                                      FAILURE_OUTPUT_LINES, FAILURE_OUTPUT_MAX,
                                      e->config->os_update.timeout_usec, &msg) < 0)
                msg = NULL;
        executor_op_clear(e);
        executor_action_finished(e, timeout ? -ETIMEDOUT : -EIO,
                                 timeout ? UPDATE_FAILURE_OS_COMMAND_TIMEOUT :
                                           UPDATE_FAILURE_OS_COMMAND_FAILED,
                                 msg ? msg : "failed to execute OS update command");
}

static int run_os_command(Executor *e, const UpdateAction *a) {
        static const OsCommandCallbacks cb = {
                .on_spawn = executor_on_os_spawn,
                .on_line = executor_on_os_line,
                .on_retry = executor_on_os_retry,
                .on_done = executor_on_os_done,
        };
        OsCommandOptions o = { .timeout_usec = e->config->os_update.timeout_usec };
        int r;

        e->op.kind = OP_OS_COMMAND;
        r = os_command_new(e->event, a->command, a->args, &o, &cb, e, &e->op.command);
        if (r < 0)
                return r;
        return os_command_start(e->op.command);
}

static void executor_on_os_installed(OsImage *image, int error, void *userdata) {
        Executor *e = userdata;

        if (error >= 0)
                log_info("OS image installed as %s.", strempty(os_image_get_installed_path(image)));
        executor_op_clear(e);
        executor_action_finished(e, error,
                                 os_image_error_is_disk_space(error) ? UPDATE_FAILURE_DISK_SPACE :
                                                                       _UPDATE_FAILURE_INVALID,
                                 error < 0 ? strerror(-error) : NULL);
}

static int run_install_os_image(Executor *e, const UpdateAction *a) {
        _cleanup_free_ char *source = NULL, *running = NULL, *err = NULL;
        OsImageInstallOptions o;
        int r;

        r = os_image_staging_path(e->config->state_directory, a->version, &source);
        if (r < 0)
                return r;
        (void) read_os_version(e->config, &running, &err);
        o = (OsImageInstallOptions) {
                .source_path = source,
                .install_directory = e->config->os_update.image.install_directory,
                .name_prefix = e->config->os_update.image.name_prefix,
                .version = a->version,
                .boot_tries = e->config->os_update.image.boot_tries,
                .running_version = running,
        };
        e->op.kind = OP_OS_IMAGE;
        r = os_image_install_new(e->event, &o, executor_on_os_installed, e, &e->op.image);
        if (r < 0)
                return r;
        return os_image_install_start(e->op.image);
}

static void executor_on_os_staged(OsImageStage *st, const OsImageStageResult *res, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *message = res->message ? strdup(res->message) : NULL;
        UpdateFailureCode code = update_failure_from_artifact(res->failure);
        int error = res->error;

        /* Everything in `res` belongs to the stage: use it before the stage goes. */
        if (error >= 0)
                log_info("OS image staged at %s.", res->path);
        executor_op_clear(e);
        executor_action_finished(e, error, code, message);
}

static int run_stage_os_image(Executor *e, const UpdateAction *a) {
        e->op.kind = OP_STAGE_OS_IMAGE;
        return os_image_stage_start(e->registry, e->config->os_update.image.reference, a->version,
                                    e->config->state_directory, executor_on_os_staged, e, &e->op.os_stage);
}

/* ---- pods ------------------------------------------------------------------------------------------ */

#define REASON_PODS_DELETED "InPlaceUpdatePodsDeleted"

static void executor_on_pods_done(PodCleanup *pc, int error, const char *message,
                                  const PodSelection *selection, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *failure = NULL, *summary = NULL;

        /* Both are the PodCleanup's: use them before it goes. */
        failure = message ? strdup(message) : NULL;
        if (error >= 0 && selection && selection->n_pods > 0) {
                summary = pod_selection_message(selection, KUBE_EVENTS_MESSAGE_MAX);
                if (summary) {
                        log_info("%s", summary);
                        (void) reporter_emit_event(e->deps.reporter, "Normal", REASON_PODS_DELETED, summary);
                }
        } else if (error >= 0)
                log_info("No Pods were bound to this node.");
        executor_op_clear(e);
        executor_action_finished(e, error, _UPDATE_FAILURE_INVALID, failure);
}

static int run_delete_pods(Executor *e, const UpdateAction *a) {
        if (!e->kube)
                return -ENODEV;
        e->op.kind = OP_PODS;
        return pod_cleanup_start(e->kube, e->config->node_name, executor_on_pods_done, e, &e->op.pods);
}

/* ---- the OSC's own work ------------------------------------------------------------------------------ */

static void executor_on_osc_applied(OscRunner *r, int error, UpdateFailureCode code, const char *message,
                                    void *userdata) {
        Executor *e = userdata;

        e->op.kind = OP_NONE;
        executor_action_finished(e, error, code, message); /* a failure is logged there, once */
}

static int run_apply_osc(Executor *e, const UpdateAction *a) {
        int r;

        r = osc_runner_apply(e->osc_runner, a->checksum, executor_on_osc_applied, e);
        if (r == -ENODATA) {
                /* Resumed after a restart, and the work list cannot be read or computed now. */
                UpdateFailureCode code;
                const char *why = osc_runner_error(e->osc_runner, &code);

                return executor_fail_now(e, r, code, why);
        }
        if (r == -ESTALE)
                /* The OSC moved on while this transaction was applying: it fails (FileApplyFailed is
                 * retried), and the next transaction applies the new OSC against the last-applied one. */
                return executor_fail_now(
                        e, r, UPDATE_FAILURE_FILE_APPLY_FAILED,
                        "the OSC changed while it was being applied; applying the new one next");
        if (r == -ENOTCONN)
                return executor_fail_now(e, r, UPDATE_FAILURE_UNIT_APPLY_FAILED,
                                         "no connection to systemd to apply the OSC's units");
        if (r >= 0)
                e->op.kind = OP_APPLY_OSC;
        return r;
}

/* ---- credentials rotation (docs/contract.md §9.7)
 * ------------------------------------------------------------ */

static void executor_on_rotated(CredentialRotation *cr, int error, UpdateFailureCode code,
                                const char *message, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *m = message ? strdup(message) : NULL;

        if (error >= 0)
                log_info("Credentials rotation done.");
        executor_op_clear(e);
        executor_action_finished(e, error, code, m);
}

static int run_rotate_credentials(Executor *e, const UpdateAction *a) {
        _cleanup_free_ char *kubelet_dir = NULL;
        CredentialRotationDeps deps = {
                .event = e->event,
                .http = e->deps.http,
                .units = e->deps.units,
                .identity = e->deps.identity,
                .tokens = e->deps.tokens,
                .component = e->deps.component,
        };
        CredentialRotationParams p = {
                .transaction = a->transaction,
                .ca = a->rotate_ca,
                .sa = a->rotate_sa,
                .state_directory = e->config->state_directory,
                .root_directory = e->config->osc.root_directory,
                .kubelet_unit = e->config->kubelet.unit,
                .health = kubelet_health_probe(e->config),
        };

        if (path_below_root(e->config->osc.root_directory, KUBELET_DIRECTORY, &kubelet_dir) < 0)
                return -ENOMEM;
        p.kubelet_directory = kubelet_dir;
        log_notice("Rotating credentials in place:%s%s.", a->rotate_ca ? " certificate authorities" : "",
                   a->rotate_sa ? " service-account key" : "");
        e->op.kind = OP_ROTATE_CREDENTIALS;
        return credential_rotation_start(&deps, &p, executor_on_rotated, e, &e->op.rotation);
}

void executor_identity_event(Executor *e, IdentityEvent ev) {
        if (e && e->op.kind == OP_ROTATE_CREDENTIALS)
                credential_rotation_identity_event(e->op.rotation, ev);
}

void executor_component_changed(Executor *e) {
        if (e && e->op.kind == OP_ROTATE_CREDENTIALS)
                credential_rotation_component_changed(e->op.rotation);
}

/* ---- the batch --------------------------------------------------------------------------------------- */

typedef int (*ActionRunner)(Executor *e, const UpdateAction *a);

static const ActionRunner runners[_UPDATE_ACTION_MAX] = {
        [UPDATE_ACTION_PUBLISH_PLAN] = run_report,
        [UPDATE_ACTION_REPORT_PROGRESS] = run_report,
        [UPDATE_ACTION_EMIT_EVENT] = run_report,
        [UPDATE_ACTION_STAGE_KUBELET] = run_stage_kubelet,
        [UPDATE_ACTION_STAGE_OS_IMAGE] = run_stage_os_image,
        [UPDATE_ACTION_SET_MARKER] = run_report,
        [UPDATE_ACTION_SWITCH_KUBELET] = run_switch_kubelet,
        [UPDATE_ACTION_RESTART_UNIT] = run_unit_job,
        [UPDATE_ACTION_STOP_UNIT] = run_unit_job,
        [UPDATE_ACTION_RUN_OS_COMMAND] = run_os_command,
        [UPDATE_ACTION_INSTALL_OS_IMAGE] = run_install_os_image,
        [UPDATE_ACTION_REBOOT] = run_reboot,
        [UPDATE_ACTION_CHECK_KUBELET_HEALTH] = run_check_health,
        [UPDATE_ACTION_ROLLBACK_KUBELET] = run_switch_kubelet,
        [UPDATE_ACTION_DELETE_PODS] = run_delete_pods,
        [UPDATE_ACTION_REPORT_RESULT] = run_report,
        [UPDATE_ACTION_SET_CHECKSUM] = run_set_checksum,
        [UPDATE_ACTION_COLLECT_KUBELETS] = run_collect_kubelets,
        [UPDATE_ACTION_APPLY_OSC] = run_apply_osc,
        [UPDATE_ACTION_ROTATE_CREDENTIALS] = run_rotate_credentials,
        [UPDATE_ACTION_CHECK_OSC_UNITS] = run_check_osc_units,
};

static void executor_schedule(Executor *e);
static void executor_kick(Executor *e);

static int executor_on_wake(sd_event_source *s, uint64_t usec, void *userdata) {
        Executor *e = userdata;

        e->wake = sd_event_source_disable_unref(e->wake);
        executor_kick(e);
        return 0;
}

/* Decide again after `delay_usec` even without new input. */
static void executor_wake_in(Executor *e, uint64_t delay_usec) {
        int r;

        e->wake = sd_event_source_disable_unref(e->wake);
        r = sd_event_add_time_relative(e->event, &e->wake, CLOCK_MONOTONIC, delay_usec, USEC_PER_MSEC,
                                       executor_on_wake, e);
        if (r < 0)
                /* Without the timer the next input still decides; say so instead of stalling silently. */
                log_warning_errno(r, "Failed to arm the executor's wake-up timer: %m");
}

static int executor_save(Executor *e) {
        int r;

        r = state_file_save(e->config->state_directory, e->tx);
        if (r < 0)
                log_error_errno(r, "Failed to persist %s/%s, retrying in %us: %m",
                                e->config->state_directory, STATE_FILE_NAME,
                                (unsigned) (SAVE_RETRY_USEC / USEC_PER_SEC));
        return r;
}

static void executor_end_batch(Executor *e) {
        uint64_t wake = e->batch.wake_usec;
        bool had_actions = e->batch.n_actions > 0;

        update_decision_done(&e->batch);
        e->next = 0;
        e->state = EXECUTOR_IDLE;

        /* A batch that did something is followed by a new decision at once (the engine moves on from
         * the recorded results); an empty one waits for new input or the engine's wake-up time. */
        if (had_actions)
                e->dirty = true;
        e->wake = sd_event_source_disable_unref(e->wake);
        if (!had_actions && wake != USEC_INFINITY && wake > 0) {
                uint64_t now = executor_now(e);

                executor_wake_in(e, wake > now ? wake - now : 0);
        }
        executor_schedule(e);
}

/* Records the result of the current action and moves on; a failure that is not best effort ends
 * the batch (the next decision takes over). Never runs the next action itself. */
static void executor_record(Executor *e, int error, UpdateFailureCode code, const char *message) {
        const UpdateAction *a = current_action(e);
        uint64_t now = executor_now(e);
        int r;

        assert(a);
        if (error >= 0)
                r = node_update_action_done(e->tx, a, now);
        else {
                UpdatePhase was = e->tx->phase;

                r = node_update_action_failed(e->tx, a, code, message ? message : strerror(-error), now);
                /* The one line about a failed action, unless its callback said it with a catalog ID or it
                 * ended the update: then the phase line below (Failed, RolledBack) says it. */
                if (!e->failure_logged && !(e->tx->phase != was && update_phase_is_terminal(e->tx->phase)))
                        log_full_errno(
                                update_action_is_best_effort(a->type) ? LOG_DEBUG : LOG_WARNING, error,
                                "Action %s failed: %s%s%s%s", update_action_type_to_string(a->type),
                                message ? message : strerror(-error), code >= 0 ? " (" : "",
                                code >= 0 ? update_failure_code_to_string(code) : "", code >= 0 ? ")" : "");
        }
        e->failure_logged = false;
        if (r < 0)
                log_warning_errno(r, "Result of %s not recorded: %m", update_action_type_to_string(a->type));
        if (executor_save(e) < 0) {
                /* The result is kept in memory; the batch stops here and the next decision (after the
                 * retry delay) persists it before any further side effect. */
                e->next = e->batch.n_actions;
                executor_log_phase(e);
                return;
        }
        executor_log_phase(e);

        e->next++;
        if (error < 0 && !update_action_is_best_effort(a->type))
                e->next = e->batch.n_actions;
}

/* Runs the batch's actions from e->next on until one goes asynchronous or the batch ends. */
static void executor_run_next(Executor *e) {
        while (e->next < e->batch.n_actions) {
                const UpdateAction *a = &e->batch.actions[e->next];
                int r;

                log_debug("Action %s (%s).", update_action_type_to_string(a->type),
                          update_phase_to_string(a->phase));
                e->state = EXECUTOR_RUNNING;
                _cleanup_free_ char *message = NULL;
                UpdateFailureCode code;

                e->sync_code = _UPDATE_FAILURE_INVALID;
                r = runners[a->type] ? runners[a->type](e, a) : -EOPNOTSUPP;
                if (r == 0)
                        return; /* asynchronous: executor_action_finished() follows */
                code = e->sync_code;
                message = TAKE_PTR(e->sync_message);
                executor_op_clear(e);
                executor_record(e, r > 0 ? 0 : r, code, r < 0 ? message ?: strerror(-r) : NULL);
        }
        executor_end_batch(e);
}

/* Completion of an asynchronous action, from its callback on the event loop. */
static void executor_action_finished(Executor *e, int error, UpdateFailureCode code, const char *message) {
        assert(e->op.kind == OP_NONE);
        executor_record(e, error, code, message);
        executor_run_next(e);
}

static void executor_decide(Executor *e) {
        _cleanup_free_ char *os_version = NULL, *os_error = NULL, *kubelet = NULL, *tx_id = NULL;
        char boot[SD_ID128_STRING_MAX] = "";
        sd_id128_t boot_id;
        OscWorkView osc_work;
        UpdateInput in;
        bool kubelet_absent;
        int r;

        e->dirty = false;
        (void) read_os_version(e->config, &os_version, &os_error);
        r = kubelet_store_current(e->store, &kubelet);
        if (r < 0)
                kubelet = NULL;
        kubelet_absent = r == -ENOENT;
        if (sd_id128_get_boot(&boot_id) >= 0)
                sd_id128_to_string(boot_id, boot);
        tx_id = new_transaction_id();
        if (!tx_id) {
                log_oom();
                return;
        }

        /* Once the Node is known, present or not: a fresh node's first OSC goes on without it. */
        if (e->node_known)
                osc_runner_prepare(e->osc_runner, e->osc, e->node, os_version, executor_now(e), &osc_work);
        else
                osc_work = (OscWorkView) { .error_code = _UPDATE_FAILURE_INVALID };
        in = (UpdateInput) {
                .tx = e->tx,
                .node = e->node,
                .node_absent = e->node_known && !e->node,
                .first_osc =
                        !osc_state_any_applied(e->config->state_directory, e->config->osc.root_directory),
                .osc = e->osc,
                .os_version = os_version,
                .os_version_error = os_error,
                .kubelet_version = kubelet,
                .kubelet_absent = kubelet_absent,
                .boot_id = boot[0] ? boot : NULL,
                .new_transaction_id = tx_id,
                .osc_work = osc_work,
                .now_usec = executor_now(e),
        };
        update_settings_from_config(e->config, &in.settings);
        in.settings.node_registration_timeout_usec = e->deps.node_registration_usec;

        r = node_update_decide(&in, &e->batch);
        if (r < 0) {
                log_error_errno(r, "Failed to decide the next update step: %m");
                return;
        }
        /* The decision's record replaces ours and is persisted before any side effect. */
        update_transaction_free(e->tx);
        e->tx = TAKE_PTR(e->batch.tx);
        if (e->batch.notice && log_once_check(&e->logged_notice, 0, e->batch.notice))
                log_notice("%s", e->batch.notice);
        if (e->batch.status)
                reporter_set_status(e->deps.reporter, "Node %s: %s", e->config->node_name, e->batch.status);
        if (executor_save(e) < 0) {
                /* Nothing runs unpersisted: decide (and save) again after a while. */
                update_decision_done(&e->batch);
                executor_wake_in(e, SAVE_RETRY_USEC);
                return;
        }
        executor_log_phase(e);
        e->next = 0;
        if (e->batch.n_actions == 0) {
                executor_end_batch(e);
                return;
        }
        executor_run_next(e);
}

static int executor_on_defer(sd_event_source *s, void *userdata) {
        Executor *e = userdata;

        (void) sd_event_source_set_enabled(e->defer, SD_EVENT_OFF);
        if (e->state != EXECUTOR_IDLE || !e->dirty)
                return 0;
        if (e->restarts_busy || e->drift_busy)
                return 0; /* executor_set_restarts_busy(false), executor_drift_release() kick us again */
        executor_decide(e);
        return 0;
}

/* Decide again from the event loop (never from inside a callback chain) when there is new input. */
static void executor_schedule(Executor *e) {
        if (!e->dirty || e->state != EXECUTOR_IDLE)
                return;
        (void) sd_event_source_set_enabled(e->defer, SD_EVENT_ONESHOT);
}

static void executor_kick(Executor *e) {
        if (!e)
                return;
        e->dirty = true;
        executor_schedule(e);
}

/* ---- setup ----------------------------------------------------------------------------------------------
 */

static void executor_on_adopt(KubeletVersionProbe *p, int error, const char *version, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *stored = NULL;
        int r;

        e->adopt = kubelet_version_probe_free(e->adopt);
        if (error < 0)
                log_warning_errno(error, "Cannot tell the version of %s, adopting it as \"%s\": %m",
                                  kubelet_store_binary_path(e->store), KUBELET_ADOPTED_VERSION);
        r = kubelet_store_adopt(e->store, error < 0 ? NULL : version, &stored);
        if (r < 0)
                log_error_errno(r, "Failed to adopt %s into the kubelet store: %m",
                                kubelet_store_binary_path(e->store));
        else
                log_info("Adopted %s as kubelet %s; it is now a symlink into %s.",
                         kubelet_store_binary_path(e->store), stored, kubelet_store_root(e->store));
        e->state = EXECUTOR_IDLE;
        executor_kick(e);
}

int executor_start(Executor *e) {
        int r;

        r = kubelet_store_needs_adoption(e->store);
        if (r > 0) {
                /* docs/contract.md §8.2: a plain kubelet file is moved into the store under the version it
                 * reports, and replaced by a symlink, before any update decision is taken. */
                r = kubelet_version_probe_start(e->event, kubelet_store_binary_path(e->store),
                                                KUBELET_VERSION_TIMEOUT_DEFAULT_USEC, executor_on_adopt, e,
                                                &e->adopt);
                if (r >= 0) {
                        e->state = EXECUTOR_ADOPTING;
                        return 0;
                }
                log_warning_errno(r, "Cannot run %s --version: %m", kubelet_store_binary_path(e->store));
        }
        e->state = EXECUTOR_IDLE;
        executor_kick(e);
        return 0;
}

/* The duties' interface (executor_gate()): the functions of the header, each for its duty. */
static bool gate_blocks_unit_restarts(void *userdata) {
        return executor_blocks_unit_restarts(userdata);
}

static int gate_drift_claim(const char **ret_why, void *userdata) {
        return executor_drift_claim(userdata, ret_why);
}

static void gate_drift_release(void *userdata) {
        executor_drift_release(userdata);
}

static int gate_drift_run(OscChanges *changes, UpdateGateRepairDone done, void *done_userdata,
                          void *userdata) {
        return executor_drift_repair(userdata, changes, done, done_userdata);
}

int executor_new(const ExecutorDeps *deps, Executor **ret, char **ret_error) {
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *error = NULL, *blobs = NULL, *binary = NULL;
        const Config *c = deps->config;
        RegistryOptions ro;
        int r;

        assert(deps);
        assert(deps->event && deps->config && deps->http && deps->reporter);
        assert(ret);

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->deps = *deps;
        e->config = c;
        e->event = deps->event;
        e->logged_phase = _UPDATE_PHASE_INVALID;
        e->gate = (UpdateGate) {
                .blocks_unit_restarts = gate_blocks_unit_restarts,
                .drift_claim = gate_drift_claim,
                .drift_release = gate_drift_release,
                .drift_run = gate_drift_run,
                .userdata = e,
        };

        r = mkdir_parents(c->state_directory, 0700);
        if (r < 0)
                return error_setf(ret_error, r, "cannot create the state directory %s: %s",
                                  c->state_directory, strerror(-r));

        r = state_file_load(c->state_directory, &e->tx, &error);
        if (r == -ENOENT)
                r = update_transaction_new(&e->tx);
        else if (r == -EBADMSG) {
                /* A corrupt record must not keep the agent down: start afresh, say why. */
                log_error("%s", strempty(error));
                r = update_transaction_new(&e->tx);
        }
        if (r < 0)
                return error_setf(ret_error, r, "cannot load %s/%s: %s", c->state_directory, STATE_FILE_NAME,
                                  error ? error : strerror(-r));
        if (e->tx->id)
                log_info("Resuming from %s/%s: transaction %s in phase %s.", c->state_directory,
                         STATE_FILE_NAME, e->tx->id, update_phase_to_string(e->tx->phase));

        /* kubelet.binaryPath is a path of the OSC's world (docs/contract.md §9.5): the kubelet's files[]
         * entry names it as it is, the disk has it below osc.rootDirectory. */
        r = path_below_root(c->osc.root_directory, c->kubelet.binary_path, &binary);
        if (r >= 0)
                r = kubelet_store_new(c->state_directory, binary, c->kubelet.keep_versions, &e->store);
        if (r < 0)
                return error_setf(ret_error, r, "cannot open the kubelet store in %s: %s",
                                  c->state_directory, strerror(-r));

        if (asprintf(&blobs, "%s/staging/blobs", c->state_directory) < 0)
                return -ENOMEM;
        ro = (RegistryOptions) {
                .ca_file = isempty(c->registry.ca_file) ? NULL : c->registry.ca_file,
                .auth_file = isempty(c->registry.auth_file) ? NULL : c->registry.auth_file,
                .mirrors = c->registry.mirrors,
                .n_mirrors = c->registry.n_mirrors,
                .blob_directory = blobs,
        };
        r = registry_client_new(e->event, deps->http, &ro, &e->registry);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the registry client: %s", strerror(-r));

        r = osc_runner_new(&(OscRunnerDeps) { .event = e->event,
                                              .config = c,
                                              .http = deps->http,
                                              .registry = e->registry,
                                              .units = deps->units,
                                              .reporter = deps->reporter,
                                              .tokens = deps->tokens },
                           &e->osc_runner);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the OSC applier: %s", strerror(-r));

        r = sd_event_add_defer(e->event, &e->defer, executor_on_defer, e);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the executor: %s", strerror(-r));
        (void) sd_event_source_set_enabled(e->defer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(e->defer, "executor-decide");

        *ret = TAKE_PTR(e);
        return 0;
}

Executor *executor_free(Executor *e) {
        if (!e)
                return NULL;
        executor_op_clear(e);
        kubelet_version_probe_free(e->adopt);
        osc_runner_free(e->osc_runner);
        registry_client_free(e->registry);
        kubelet_store_free(e->store);
        update_decision_done(&e->batch);
        update_transaction_free(e->tx);
        osc_desired_free(e->osc);
        free(e->logged_tx);
        log_once_done(&e->logged_notice);
        free(e->sync_message);
        sd_event_source_disable_unref(e->defer);
        sd_event_source_disable_unref(e->wake);
        free(e);
        return NULL;
}

void executor_set_node(Executor *e, const NodeView *node) {
        e->node = node;
        e->node_known = true;
        executor_kick(e);
}

void executor_set_kube(Executor *e, KubeClient *kube) {
        e->kube = kube;
        osc_runner_set_kube(e->osc_runner, kube);
}

void executor_set_units(Executor *e, UnitControl *units) {
        e->deps.units = units;
        osc_runner_set_units(e->osc_runner, units);
        executor_kick(e);
}

void executor_set_restarts_busy(Executor *e, bool busy) {
        if (e->restarts_busy == busy)
                return;
        e->restarts_busy = busy;
        if (!busy)
                executor_kick(e);
}

void executor_set_osc(Executor *e, OscDesired *osc) {
        osc_desired_free(e->osc);
        e->osc = osc;
        /* A run in flight learns of it too: it may be waiting for something the newer OSC drops. */
        osc_runner_set_desired(e->osc_runner, osc ? osc->checksum : NULL);
        executor_kick(e);
}

bool executor_blocks_unit_restarts(const Executor *e) {
        return e && (node_update_blocks_unit_restarts(e->tx) || e->drift_busy);
}

int executor_drift_claim(Executor *e, const char **ret_why) {
        const char *why = NULL;

        assert(e && ret_why);
        assert(!e->drift_busy);
        if (e->state == EXECUTOR_RUNNING)
                why = "an update step runs";
        else if (e->restarts_busy)
                why = "the restart annotation is being carried out";
        else if (node_update_holds_drift_repair(e->tx))
                why = e->tx->phase == UPDATE_PHASE_WAITING_FOR_DRAIN ?
                        "an in-place update waits for the drain" :
                        "an OSC change is on its way";
        else if (osc_runner_work_pending(e->osc_runner))
                why = "an OSC change is prepared and not applied yet";
        *ret_why = why;
        if (why)
                return -EBUSY;
        e->drift_busy = true;
        return 0;
}

void executor_drift_release(Executor *e) {
        if (!e || !e->drift_busy)
                return;
        e->drift_busy = false;
        e->drift_done = NULL;
        e->drift_userdata = NULL;
        osc_runner_cancel(e->osc_runner);
        executor_schedule(e); /* input that came meanwhile is decided on now */
        if (e->released)
                e->released(e->released_userdata);
}

void executor_set_released_callback(Executor *e, ExecutorReleased cb, void *userdata) {
        e->released = cb;
        e->released_userdata = userdata;
}

static void executor_on_drift_repaired(OscRunner *r, int error, UpdateFailureCode code, const char *message,
                                       void *userdata) {
        Executor *e = userdata;
        ExecutorDriftDone done = e->drift_done;

        e->drift_done = NULL;
        done(error, message, e->drift_userdata);
}

int executor_drift_repair(Executor *e, OscChanges *changes, ExecutorDriftDone done, void *userdata) {
        int r;

        assert(e && changes && done);
        assert(e->drift_busy && !e->drift_done);
        e->drift_done = done;
        e->drift_userdata = userdata;
        r = osc_runner_repair(e->osc_runner, changes, executor_on_drift_repaired, e);
        if (r < 0)
                e->drift_done = NULL;
        return r;
}

const UpdateGate *executor_gate(const Executor *e) {
        return &e->gate;
}

const OscModelOptions *executor_osc_model_options(const Executor *e) {
        return osc_runner_model_options(e->osc_runner);
}

const OscProtected *executor_own_files(const Executor *e) {
        return osc_runner_own_files(e->osc_runner);
}

bool executor_is_busy(const Executor *e) {
        return e && e->state == EXECUTOR_RUNNING;
}
