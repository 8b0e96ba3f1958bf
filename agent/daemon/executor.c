/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <systemd/sd-id128.h>
#include <time.h>

#include "core/node-update.h"
#include "core/node-view.h"
#include "daemon/catalog-ids.h"
#include "daemon/executor.h"
#include "daemon/manager.h"
#include "daemon/state-file.h"
#include "kube/kube-client.h"
#include "kubelet/health-check.h"
#include "kubelet/kubelet-stage.h"
#include "kubelet/kubelet-store.h"
#include "kubelet/kubelet-version.h"
#include "oci/oci-manifest.h"
#include "oci/oci-ref.h"
#include "oci/registry.h"
#include "os/os-command.h"
#include "os/os-image.h"
#include "os/os-release.h"
#include "os/os-update-classify.h"
#include "systemd/reboot.h"
#include "systemd/unit-control.h"
#include "util/fileio.h"
#include "util/log.h"

#define OS_RELEASE_MAX (64 * 1024)
#define FAILURE_OUTPUT_MAX 1024
#define PODS_PATH_MAX 512

struct Executor {
        Manager *manager;               /* borrowed: owns us */
        const Config *config;           /* borrowed: the Manager's */
        sd_event *event;                /* borrowed: the Manager's */

        UpdateTransaction *tx;          /* owned: as persisted */
        UpdateDecision batch;           /* owned: the decision being carried out */
        size_t next;                    /* index of the next action of `batch` to run */
        bool running;                   /* an action of `batch` is in flight */
        bool dirty;                     /* new input while busy: decide again afterwards */
        bool started;

        NodeView *node;                 /* owned; NULL: absent or undecodable */
        char *node_error;               /* owned: last decode error, logged once */
        OscDesired *osc;                /* owned */

        KubeletStore *store;            /* owned */
        RegistryClient *registry;       /* owned */
        KubeletVersionProbe *adopt;     /* owned: --version probe of a plain kubelet file */

        /* The action in flight (at most one of these is set). */
        KubeletStage *stage;            /* owned */
        UnitJob *job;                   /* borrowed handle: owned by the UnitControl */
        OsCommand *command;             /* owned */
        OsImage *image;                 /* owned */
        RebootRequest *reboot;          /* owned */
        HealthCheck *health;            /* owned */
        KubeRequest *pods;              /* owned: LIST of our pods, then DELETEs (floating) */
        RegistryOp *os_op;              /* owned: OS image resolve, then blob fetch */
        unsigned writes_pending;        /* Node writes of the running action */
        int writes_error;
        unsigned deletes_pending;
        int deletes_error;

        /* Byte progress of staging, throttled (CONTRACT §6 write budget). */
        UpdatePhase progress_phase;
        unsigned progress_percent;
        uint64_t progress_usec;

        UpdatePhase logged_phase;       /* phase whose journal line was written */
        char *logged_tx;                /* owned */

        sd_event_source *defer;         /* owned: deferred decide */
        sd_event_source *wake;          /* owned: decide again at batch.wake_usec */
};

static void executor_action_finished(Executor *e, int error, UpdateFailureCode code, const char *message);

static uint64_t now_realtime(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
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

/* keepVersions: once an update succeeded, older kubelets go, never the running one or the one it
 * replaced (the rollback version). */
static void executor_collect_kubelets(Executor *e) {
        const char *protect[] = { e->tx->kubelet_to, e->tx->kubelet_from, NULL };
        int r;

        r = kubelet_store_gc(e->store, protect);
        if (r < 0)
                log_warning_errno(r, "Failed to remove old kubelet versions from %s: %m", kubelet_store_root(e->store));
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

        level = tx->phase == UPDATE_PHASE_FAILED || tx->phase == UPDATE_PHASE_ROLLED_BACK ? LOG_WARNING : LOG_NOTICE;
        if (tx->failure.code >= 0 && tx->failure.message)
                r = asprintf(&msg, "Update %s: %s (%s: %s).", tx->id, phase,
                             strempty(update_failure_code_to_string(tx->failure.code)), tx->failure.message);
        else
                r = asprintf(&msg, "Update %s: %s (%s%s%s%s%s%s%s%s).", tx->id, phase,
                             tx->kubelet_to ? "kubelet " : "", tx->kubelet_to ? tx->kubelet_from ?: "?" : "",
                             tx->kubelet_to ? " -> " : "", strempty(tx->kubelet_to),
                             tx->kubelet_to && tx->os_to ? ", OS " : tx->os_to ? "OS " : "",
                             tx->os_to ? tx->os_from ?: "?" : "", tx->os_to ? " -> " : "", strempty(tx->os_to));
        if (r < 0) {
                log_oom();
                return;
        }
        log_phase_line(tx->phase, level, msg);
        if (tx->phase == UPDATE_PHASE_SUCCEEDED && tx->kubelet_to)
                executor_collect_kubelets(e);
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

/* ---- Node writes ------------------------------------------------------------------------------ */

static void executor_on_write_done(Manager *m, int error, void *userdata) {
        Executor *e = userdata;

        assert(e->writes_pending > 0);
        if (error < 0 && e->writes_error == 0)
                e->writes_error = error;
        if (--e->writes_pending > 0)
                return;
        executor_action_finished(e, e->writes_error, _UPDATE_FAILURE_INVALID,
                                 e->writes_error < 0 ? "writing the Node failed" : NULL);
}

/* Starts one Node write belonging to the running action; the action finishes when all are done. */
static int executor_write_metadata(Executor *e, json_t *patch) {
        int r;

        r = manager_patch_node_metadata(e->manager, patch, executor_on_write_done, e);
        if (r >= 0)
                e->writes_pending++;
        return r;
}

static int executor_write_condition(Executor *e, bool status, const char *reason, const char *message) {
        int r;

        r = manager_patch_node_condition(e->manager, NODE_CONDITION_AGENT, status ? "True" : "False", reason,
                                         message, executor_on_write_done, e);
        if (r > 0)
                e->writes_pending++;
        return r < 0 ? r : 0;
}

static int set_string_json(json_t *obj, const char *key, const json_t *value) {
        _cleanup_free_ char *s = NULL;

        if (!value)
                return json_object_set_new(obj, key, json_null()) < 0 ? -ENOMEM : 0;
        s = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!s || json_object_set_new(obj, key, json_string(s)) < 0)
                return -ENOMEM;
        return 0;
}

/* Runs `writes` Node writes built into `labels`/`annotations`, plus the condition if asked. */
static int executor_write(Executor *e, json_t *labels, json_t *annotations, bool condition,
                          const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *patch = json_object();
        int r;

        if (!patch)
                return -ENOMEM;
        if (labels && json_object_size(labels) > 0 && json_object_set(patch, "labels", labels) < 0)
                return -ENOMEM;
        if (annotations && json_object_size(annotations) > 0 && json_object_set(patch, "annotations", annotations) < 0)
                return -ENOMEM;
        if (json_object_size(patch) > 0) {
                r = executor_write_metadata(e, patch);
                if (r < 0)
                        return r;
        }
        if (condition) {
                r = executor_write_condition(e, a->condition_status, a->condition_reason, a->message);
                if (r < 0 && e->writes_pending == 0)
                        return r;
        }
        return e->writes_pending > 0 ? 0 : 1;     /* 1: nothing to write, done at once */
}

static int run_publish_plan(Executor *e, const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *ann = json_object();

        if (!ann || set_string_json(ann, NODE_ANNOTATION_PLAN, a->json) < 0)
                return -ENOMEM;
        return executor_write(e, NULL, ann, false, a);
}

static int run_report_progress(Executor *e, const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *ann = json_object();

        if (!ann || set_string_json(ann, NODE_ANNOTATION_PROGRESS, a->json) < 0)
                return -ENOMEM;
        e->progress_phase = a->phase;
        e->progress_usec = now_realtime();
        e->progress_percent = update_transaction_percent(e->tx);
        return executor_write(e, NULL, ann, true, a);
}

static int run_report_result(Executor *e, const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *labels = json_object(), *ann = json_object();

        if (!labels || !ann)
                return -ENOMEM;
        if ((a->json && set_string_json(ann, NODE_ANNOTATION_PROGRESS, a->json) < 0) ||
            set_string_json(ann, NODE_ANNOTATION_FAILURE, a->failure) < 0)
                return -ENOMEM;
        if (a->result != NODE_UPDATE_RESULT_NONE &&
            json_object_set_new(labels, NODE_LABEL_UPDATE_RESULT, json_string(node_update_result_to_string(a->result))) < 0)
                return -ENOMEM;
        if (a->clear_marker) {
                if (json_object_set_new(ann, NODE_ANNOTATION_UPDATING_OS, json_null()) < 0 ||
                    json_object_set_new(ann, NODE_ANNOTATION_FAILED_REASON, json_null()) < 0)
                        return -ENOMEM;
        } else if (a->reason && !a->keep_reason &&
                   json_object_set_new(ann, NODE_ANNOTATION_FAILED_REASON, json_string(a->reason)) < 0)
                return -ENOMEM;
        return executor_write(e, labels, ann, true, a);
}

static int run_set_marker(Executor *e, const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *ann = json_pack("{s:s}", NODE_ANNOTATION_UPDATING_OS, a->version);

        return ann ? executor_write(e, NULL, ann, false, a) : -ENOMEM;
}

static int run_set_checksum(Executor *e, const UpdateAction *a) {
        _cleanup_(json_decrefp) json_t *labels = json_object(), *ann = json_object();

        if (!labels || !ann)
                return -ENOMEM;
        if (a->checksum && json_object_set_new(ann, NODE_ANNOTATION_CHECKSUM, json_string(a->checksum)) < 0)
                return -ENOMEM;
        if (a->version && json_object_set_new(labels, NODE_LABEL_KUBERNETES_VERSION, json_string(a->version)) < 0)
                return -ENOMEM;
        return executor_write(e, labels, ann, false, a);
}

static int run_emit_event(Executor *e, const UpdateAction *a) {
        int r;

        r = manager_emit_event(e->manager, a->event_type, a->event_reason, a->message);
        return r < 0 ? r : 1;
}

/* ---- kubelet ---------------------------------------------------------------------------------- */

static UpdateFailureCode failure_from_artifact(ArtifactFailure f) {
        const char *s = artifact_failure_to_string(f);

        return s ? update_failure_code_from_string(s) : _UPDATE_FAILURE_INVALID;
}

static void executor_on_stage_progress(KubeletStage *st, uint64_t done, uint64_t total, void *userdata) {
        Executor *e = userdata;
        const UpdateAction *a = current_action(e);
        _cleanup_(json_decrefp) json_t *progress = NULL, *ann = NULL, *patch = NULL;
        unsigned percent = total > 0 ? (unsigned) (done * 100 / total) : 0;
        uint64_t now = now_realtime();

        if (!a || !progress_should_write(e->progress_phase, e->progress_percent, e->progress_usec, a->phase,
                                         percent, now))
                return;
        progress = update_progress_json(e->tx, update_step_to_string(a->step), done, total, percent, now);
        ann = json_object();
        if (!progress || !ann || set_string_json(ann, NODE_ANNOTATION_PROGRESS, progress) < 0)
                return;
        e->progress_phase = a->phase;
        e->progress_percent = percent;
        e->progress_usec = now;
        manager_set_status(e->manager, "Staging kubelet %s: %u%%", strempty(a->version), percent);
        /* Fire and forget: an intermediate figure that does not arrive is replaced by the next. */
        patch = json_pack("{s:O}", "annotations", ann);
        if (patch)
                (void) manager_patch_node_metadata(e->manager, patch, NULL, NULL);
}

static void executor_on_staged(KubeletStage *st, const KubeletStageResult *res, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *message = res->message ? strdup(res->message) : NULL;
        ArtifactFailure failure = res->failure;
        int error = res->error;

        /* Everything in `res` belongs to the stage: use it before the stage goes. */
        if (error >= 0)
                log_info("Kubelet %s staged at %s (%s, %" PRIu64 " bytes downloaded).", strempty(res->version),
                         strempty(res->path), res->reused ? "already in the store" : strempty(res->file_digest),
                         res->bytes_downloaded);
        e->stage = kubelet_stage_free(e->stage);
        executor_action_finished(e, error, failure_from_artifact(failure), message);
}

static int run_stage_kubelet(Executor *e, const UpdateAction *a) {
        KubeletStageRequest req = {
                .image = a->image,
                .file_path = a->path_in_image,
                .version = a->version,
        };

        return kubelet_stage_start(e->event, e->registry, e->store, &req, executor_on_stage_progress,
                                   executor_on_staged, e, &e->stage);
}

static int run_switch_kubelet(Executor *e, const UpdateAction *a) {
        _cleanup_free_ char *previous = NULL;
        int r;

        r = kubelet_store_switch(e->store, a->version, &previous);
        if (r < 0)
                return r;
        log_info("Switched %s to kubelet %s (was %s).", e->config->kubelet.binary_path, a->version,
                 strempty(previous));
        return 1;
}

static void executor_on_health(HealthCheck *hc, int error, const char *message, unsigned n_probes, void *userdata) {
        Executor *e = userdata;

        e->health = health_check_free(e->health);
        if (error >= 0)
                log_info("Kubelet healthy after %u probe(s).", n_probes);
        /* The engine words the reason like upstream (GNP scenario 25) for MCM. */
        executor_action_finished(e, error, UPDATE_FAILURE_KUBELET_UNHEALTHY, error < 0 ? message : NULL);
}

static int run_check_health(Executor *e, const UpdateAction *a) {
        HealthCheckOptions o = {
                .url = e->config->kubelet.healthz_url,
                .timeout_usec = e->config->kubelet.health_timeout_usec,
                .interval_usec = MIN(HEALTH_CHECK_INTERVAL_DEFAULT_USEC, e->config->kubelet.health_timeout_usec / 4),
        };

        return health_check_start(e->event, manager_get_http(e->manager), &o, executor_on_health, e, &e->health);
}

/* ---- units and reboot --------------------------------------------------------------------------- */

static void executor_on_unit_job(const UnitJobResult *res, void *userdata) {
        Executor *e = userdata;

        e->job = NULL;
        if (res->error >= 0)
                (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_UNIT_RESTARTED, "Restarted %s.", res->unit);
        else
                (void) log_struct_id(LOG_WARNING, res->error, MESSAGE_ID_UNIT_RESTART_FAILED, "Restart of %s failed: %s",
                                     res->unit, strempty(res->detail));
        executor_action_finished(e, res->error, UPDATE_FAILURE_UNIT_RESTART_FAILED, res->detail);
}

static int run_restart_unit(Executor *e, const UpdateAction *a) {
        UnitControl *uc = manager_get_unit_control(e->manager);

        if (!uc)
                return -ENOTCONN;
        return unit_control_restart_unit(uc, a->unit, executor_on_unit_job, e, &e->job);
}

static void executor_on_reboot(RebootRequest *r, int error, void *userdata) {
        Executor *e = userdata;
        const char *msg = reboot_request_get_error_message(r);

        if (error >= 0)
                log_notice("Reboot requested; waiting to be restarted on the new OS.");
        e->reboot = reboot_request_free(e->reboot);
        executor_action_finished(e, error, _UPDATE_FAILURE_INVALID, msg);
}

static int run_reboot(Executor *e, const UpdateAction *a) {
        int r;

        r = reboot_request_new(manager_get_bus(e->manager), e->config->os_update.reboot, &e->reboot);
        if (r < 0)
                return r;
        r = reboot_request_start(e->reboot, executor_on_reboot, e);
        if (r == REBOOT_DISABLED) {
                log_notice("The OS update needs a reboot, but osUpdate.reboot is none: %s.", REBOOT_DISABLED_MESSAGE);
                e->reboot = reboot_request_free(e->reboot);
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

static void executor_on_os_retry(OsCommand *c, const OsCommandResult *res, uint64_t delay_usec, void *userdata) {
        log_warning("The OS update command reported network problems (attempt %u); retrying in %" PRIu64 "s.",
                    res->attempts, delay_usec / USEC_PER_SEC);
}

static void executor_on_os_done(OsCommand *c, const OsCommandResult *res, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *msg = NULL;
        const char *code;

        if (res->class == OS_UPDATE_CLASS_SUCCESS) {
                log_info("The OS update command succeeded after %u attempt(s).", res->attempts);
                e->command = os_command_free(e->command);
                executor_action_finished(e, 0, _UPDATE_FAILURE_INVALID, NULL);
                return;
        }
        code = os_update_class_failure_code(res->class);
        if (os_update_failure_message(res->class, &res->outcome, res->path, res->output, FAILURE_OUTPUT_MAX,
                                      e->config->os_update.timeout_usec, &msg) < 0)
                msg = NULL;
        e->command = os_command_free(e->command);
        executor_action_finished(e, res->class == OS_UPDATE_CLASS_TIMEOUT ? -ETIMEDOUT : -EIO,
                                 code ? update_failure_code_from_string(code) : UPDATE_FAILURE_OS_COMMAND_FAILED,
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

        r = os_command_new(e->event, a->command, a->args, &o, &cb, e, &e->command);
        if (r < 0)
                return r;
        return os_command_start(e->command);
}

static int os_staging_path(Executor *e, const char *version, char **ret) {
        return asprintf(ret, "%s/staging/os/%s/image.efi", e->config->state_directory, version) < 0 ? -ENOMEM : 0;
}

static void executor_on_os_installed(OsImage *image, int error, void *userdata) {
        Executor *e = userdata;

        if (error >= 0)
                log_info("OS image installed as %s.", strempty(os_image_get_installed_path(image)));
        e->image = os_image_free(e->image);
        executor_action_finished(e, error, os_image_error_is_disk_space(error) ? UPDATE_FAILURE_DISK_SPACE
                                                                                : _UPDATE_FAILURE_INVALID,
                                 error < 0 ? strerror(-error) : NULL);
}

static int run_install_os_image(Executor *e, const UpdateAction *a) {
        _cleanup_free_ char *source = NULL, *running = NULL, *err = NULL;
        OsImageInstallOptions o;
        int r;

        r = os_staging_path(e, a->version, &source);
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
        r = os_image_install_new(e->event, &o, executor_on_os_installed, e, &e->image);
        if (r < 0)
                return r;
        return os_image_install_start(e->image);
}

/* The OS image artifact: the last layer of the image is the boot image file itself (an OCI
 * artifact as pushed by e.g. `oras push`), verified by digest like every blob. */
static void executor_on_os_blob(RegistryOp *op, const RegistryResult *res, void *userdata);

static void executor_on_os_resolved(RegistryOp *op, const RegistryResult *res, void *userdata) {
        Executor *e = userdata;
        const UpdateAction *a = current_action(e);
        /* `res` (the manifest too) is borrowed from the op (== e->os_op): free it on the way out. */
        _cleanup_(registry_op_freep) _unused_ RegistryOp *done_op = TAKE_PTR(e->os_op);
        _cleanup_(oci_ref_freep) OciRef *ref = NULL;
        _cleanup_free_ char *image = NULL;
        int r;

        if (res->error < 0 || !res->manifest || res->manifest->n_layers == 0) {
                executor_action_finished(e, res->error < 0 ? res->error : -ENOENT, failure_from_artifact(res->failure),
                                         res->message ? res->message : "the OS image has no layers");
                return;
        }
        r = oci_ref_substitute_version(e->config->os_update.image.reference, a->version, &image);
        if (r >= 0)
                r = oci_ref_parse(image, &ref);
        if (r >= 0)
                r = registry_fetch_blob(e->registry, ref, &res->manifest->layers[res->manifest->n_layers - 1],
                                        NULL, executor_on_os_blob, e, &e->os_op);
        if (r < 0)
                executor_action_finished(e, r, UPDATE_FAILURE_ARTIFACT_UNAVAILABLE, "cannot fetch the OS image");
}

static void executor_on_os_blob(RegistryOp *op, const RegistryResult *res, void *userdata) {
        Executor *e = userdata;
        const UpdateAction *a = current_action(e);
        /* res->blob_path is borrowed from the op (== e->os_op): free it on the way out. */
        _cleanup_(registry_op_freep) _unused_ RegistryOp *done_op = TAKE_PTR(e->os_op);
        _cleanup_free_ char *target = NULL, *dir = NULL;
        int r;

        if (res->error < 0) {
                executor_action_finished(e, res->error, failure_from_artifact(res->failure), res->message);
                return;
        }
        r = os_staging_path(e, a->version, &target);
        if (r >= 0) {
                dir = strndup(target, (size_t) (strrchr(target, '/') - target));
                r = dir ? mkdir_parents(dir, 0700) : -ENOMEM;
        }
        /* Same file system (both under the state directory): a hard link keeps the verified blob. */
        if (r >= 0 && link(res->blob_path, target) < 0 && errno != EEXIST)
                r = -errno;
        if (r >= 0)
                r = fsync_parent_dir(target);
        if (r >= 0)
                log_info("OS image %s staged at %s.", a->version, target);
        executor_action_finished(e, r, os_image_error_is_disk_space(r) ? UPDATE_FAILURE_DISK_SPACE
                                                                   : UPDATE_FAILURE_ARTIFACT_UNAVAILABLE,
                                 r < 0 ? strerror(-r) : NULL);
}

static int run_stage_os_image(Executor *e, const UpdateAction *a) {
        _cleanup_(oci_ref_freep) OciRef *ref = NULL;
        _cleanup_free_ char *image = NULL;
        int r;

        r = oci_ref_substitute_version(e->config->os_update.image.reference, a->version, &image);
        if (r < 0)
                return r;
        r = oci_ref_parse(image, &ref);
        if (r < 0)
                return r;
        /* NULL platform: this machine's boot image from a multi-platform index, as for the kubelet. */
        return registry_resolve(e->registry, ref, NULL, NULL, NULL, executor_on_os_resolved, e, &e->os_op);
}

/* ---- pods ------------------------------------------------------------------------------------------ */

static void executor_on_pod_deleted(KubeRequest *req, int error, json_t *object, void *userdata) {
        Executor *e = userdata;

        if (error < 0 && error != -ENOENT && e->deletes_error == 0)
                e->deletes_error = error;
        if (--e->deletes_pending > 0)
                return;
        executor_action_finished(e, e->deletes_error, _UPDATE_FAILURE_INVALID,
                                 e->deletes_error < 0 ? "deleting the pods on this node failed" : NULL);
}

static void executor_on_pods_listed(KubeRequest *req, int error, json_t *object, void *userdata) {
        Executor *e = userdata;
        KubeClient *kube = manager_get_kube(e->manager);
        json_t *pod;
        size_t i;

        e->pods = kube_request_free(e->pods);
        if (error < 0) {
                executor_action_finished(e, error, _UPDATE_FAILURE_INVALID, "listing the pods on this node failed");
                return;
        }
        e->deletes_pending = 1;         /* held until every DELETE was sent */
        e->deletes_error = 0;
        json_array_foreach(json_object_get(object, "items"), i, pod) {
                json_t *md = json_object_get(pod, "metadata");
                const char *ns = json_string_value(json_object_get(md, "namespace"));
                const char *name = json_string_value(json_object_get(md, "name"));
                _cleanup_free_ char *path = NULL;

                if (!ns || !name || asprintf(&path, "/api/v1/namespaces/%s/pods/%s", ns, name) < 0)
                        continue;
                if (kube_client_delete(kube, path, executor_on_pod_deleted, e, NULL) >= 0)
                        e->deletes_pending++;
        }
        log_info("Deleting %zu pod(s) still bound to this node.", json_array_size(json_object_get(object, "items")));
        executor_on_pod_deleted(NULL, 0, NULL, e);
}

static int run_delete_pods(Executor *e, const UpdateAction *a) {
        KubeClient *kube = manager_get_kube(e->manager);
        char path[PODS_PATH_MAX];

        if (!kube)
                return -ENODEV;
        snprintf(path, sizeof(path), "/api/v1/pods?fieldSelector=spec.nodeName%%3D%s", e->config->node_name);
        return kube_client_get(kube, path, executor_on_pods_listed, e, &e->pods);
}

/* ---- the batch --------------------------------------------------------------------------------------- */

typedef int (*ActionRunner)(Executor *e, const UpdateAction *a);

static const ActionRunner runners[_UPDATE_ACTION_MAX] = {
        [UPDATE_ACTION_PUBLISH_PLAN] = run_publish_plan,
        [UPDATE_ACTION_REPORT_PROGRESS] = run_report_progress,
        [UPDATE_ACTION_EMIT_EVENT] = run_emit_event,
        [UPDATE_ACTION_STAGE_KUBELET] = run_stage_kubelet,
        [UPDATE_ACTION_STAGE_OS_IMAGE] = run_stage_os_image,
        [UPDATE_ACTION_SET_MARKER] = run_set_marker,
        [UPDATE_ACTION_SWITCH_KUBELET] = run_switch_kubelet,
        [UPDATE_ACTION_RESTART_UNIT] = run_restart_unit,
        [UPDATE_ACTION_RUN_OS_COMMAND] = run_os_command,
        [UPDATE_ACTION_INSTALL_OS_IMAGE] = run_install_os_image,
        [UPDATE_ACTION_REBOOT] = run_reboot,
        [UPDATE_ACTION_CHECK_KUBELET_HEALTH] = run_check_health,
        [UPDATE_ACTION_ROLLBACK_KUBELET] = run_switch_kubelet,
        [UPDATE_ACTION_DELETE_PODS] = run_delete_pods,
        [UPDATE_ACTION_REPORT_RESULT] = run_report_result,
        [UPDATE_ACTION_SET_CHECKSUM] = run_set_checksum,
};

static void executor_schedule(Executor *e);

static int executor_save(Executor *e) {
        int r;

        r = state_file_save(e->config->state_directory, e->tx);
        if (r < 0)
                log_error_errno(r, "Failed to persist %s/%s: %m", e->config->state_directory, STATE_FILE_NAME);
        return r;
}

static int executor_on_wake(sd_event_source *s, uint64_t usec, void *userdata) {
        Executor *e = userdata;

        e->wake = sd_event_source_disable_unref(e->wake);
        executor_kick(e);
        return 0;
}

static void executor_end_batch(Executor *e) {
        uint64_t wake = e->batch.wake_usec;
        bool had_actions = e->batch.n_actions > 0;

        update_decision_done(&e->batch);
        e->next = 0;
        e->running = false;

        /* A batch that did something is followed by a new decision at once (the engine moves on from
         * the recorded results); an empty one waits for new input or the engine's wake-up time. */
        if (had_actions)
                e->dirty = true;
        e->wake = sd_event_source_disable_unref(e->wake);
        if (!had_actions && wake != USEC_INFINITY && wake > 0) {
                uint64_t now = now_realtime();

                (void) sd_event_add_time_relative(e->event, &e->wake, CLOCK_MONOTONIC, wake > now ? wake - now : 0,
                                                  USEC_PER_MSEC, executor_on_wake, e);
        }
        executor_schedule(e);
}

/* Records the result of the current action and moves on; a failure that is not best effort ends
 * the batch (the next decision takes over). Never runs the next action itself. */
static void executor_record(Executor *e, int error, UpdateFailureCode code, const char *message) {
        const UpdateAction *a = current_action(e);
        uint64_t now = now_realtime();
        int r;

        assert(a);
        e->running = false;
        if (error >= 0)
                r = node_update_action_done(e->tx, a, now);
        else {
                log_full_errno(update_action_is_best_effort(a->type) ? LOG_DEBUG : LOG_WARNING, error,
                               "Action %s failed: %s", update_action_type_to_string(a->type),
                               message ? message : strerror(-error));
                r = node_update_action_failed(e->tx, a, code, message ? message : strerror(-error), now);
        }
        if (r < 0)
                log_warning_errno(r, "Result of %s not recorded: %m", update_action_type_to_string(a->type));
        (void) executor_save(e);
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

                log_debug("Action %s (%s).", update_action_type_to_string(a->type), update_phase_to_string(a->phase));
                e->writes_pending = 0;
                e->writes_error = 0;
                e->running = true;
                r = runners[a->type] ? runners[a->type](e, a) : -EOPNOTSUPP;
                if (r == 0)
                        return;                 /* asynchronous: executor_action_finished() follows */
                executor_record(e, r > 0 ? 0 : r, _UPDATE_FAILURE_INVALID, r < 0 ? strerror(-r) : NULL);
        }
        executor_end_batch(e);
}

/* Completion of an asynchronous action, from its callback on the event loop. */
static void executor_action_finished(Executor *e, int error, UpdateFailureCode code, const char *message) {
        executor_record(e, error, code, message);
        executor_run_next(e);
}

static void executor_decide(Executor *e) {
        _cleanup_free_ char *os_version = NULL, *os_error = NULL, *kubelet = NULL, *tx_id = NULL;
        char boot[SD_ID128_STRING_MAX] = "";
        sd_id128_t boot_id;
        UpdateInput in;
        int r;

        e->dirty = false;
        (void) read_os_version(e->config, &os_version, &os_error);
        if (kubelet_store_current(e->store, &kubelet) < 0)
                kubelet = NULL;
        if (sd_id128_get_boot(&boot_id) >= 0)
                sd_id128_to_string(boot_id, boot);
        tx_id = new_transaction_id();
        if (!tx_id) {
                log_oom();
                return;
        }

        in = (UpdateInput) {
                .tx = e->tx,
                .node = e->node,
                .osc = e->osc,
                .os_version = os_version,
                .os_version_error = os_error,
                .kubelet_version = kubelet,
                .boot_id = boot[0] ? boot : NULL,
                .new_transaction_id = tx_id,
                .now_usec = now_realtime(),
        };
        update_settings_from_config(e->config, &in.settings);

        r = node_update_decide(&in, &e->batch);
        if (r < 0) {
                log_error_errno(r, "Failed to decide the next update step: %m");
                return;
        }
        /* The decision's record replaces ours and is persisted before any side effect. */
        update_transaction_free(e->tx);
        e->tx = TAKE_PTR(e->batch.tx);
        if (e->batch.status)
                manager_set_status(e->manager, "Node %s: %s", e->config->node_name, e->batch.status);
        if (executor_save(e) < 0) {
                update_decision_done(&e->batch);
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
        if (e->running || !e->started || e->batch.n_actions > 0 || !e->dirty)
                return 0;
        if (manager_restarts_busy(e->manager))
                return 0;       /* the restart handler's on_finished kicks us again */
        executor_decide(e);
        return 0;
}

/* Decide again from the event loop (never from inside a callback chain) when there is new input. */
static void executor_schedule(Executor *e) {
        if (!e->dirty || e->running || !e->started)
                return;
        (void) sd_event_source_set_enabled(e->defer, SD_EVENT_ONESHOT);
}

void executor_kick(Executor *e) {
        if (!e)
                return;
        e->dirty = true;
        executor_schedule(e);
}

/* ---- setup ---------------------------------------------------------------------------------------------- */

static void executor_on_adopt(KubeletVersionProbe *p, int error, const char *version, void *userdata) {
        Executor *e = userdata;
        _cleanup_free_ char *stored = NULL;
        int r;

        e->adopt = kubelet_version_probe_free(e->adopt);
        if (error < 0)
                log_warning_errno(error, "Cannot tell the version of %s, adopting it as \"%s\": %m",
                                  e->config->kubelet.binary_path, KUBELET_ADOPTED_VERSION);
        r = kubelet_store_adopt(e->store, error < 0 ? NULL : version, &stored);
        if (r < 0)
                log_error_errno(r, "Failed to adopt %s into the kubelet store: %m", e->config->kubelet.binary_path);
        else
                log_info("Adopted %s as kubelet %s; it is now a symlink into %s.", e->config->kubelet.binary_path,
                         stored, kubelet_store_root(e->store));
        e->started = true;
        executor_kick(e);
}

int executor_start(Executor *e) {
        int r;

        r = kubelet_store_needs_adoption(e->store);
        if (r > 0) {
                /* CONTRACT §8.2: a plain kubelet file is moved into the store under the version it
                 * reports, and replaced by a symlink, before any update decision is taken. */
                r = kubelet_version_probe_start(e->event, e->config->kubelet.binary_path,
                                                KUBELET_VERSION_TIMEOUT_DEFAULT_USEC, executor_on_adopt, e, &e->adopt);
                if (r >= 0)
                        return 0;
                log_warning_errno(r, "Cannot run %s --version: %m", e->config->kubelet.binary_path);
        }
        e->started = true;
        executor_kick(e);
        return 0;
}

int executor_new(Manager *m, Executor **ret) {
        _cleanup_(executor_freep) Executor *e = NULL;
        _cleanup_free_ char *error = NULL, *blobs = NULL;
        const Config *c = manager_get_config(m);
        RegistryOptions ro;
        int r;

        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        e->manager = m;
        e->config = c;
        e->event = manager_get_event(m);
        e->progress_phase = _UPDATE_PHASE_INVALID;
        e->logged_phase = _UPDATE_PHASE_INVALID;

        r = mkdir_parents(c->state_directory, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create %s: %m", c->state_directory);

        r = state_file_load(c->state_directory, &e->tx, &error);
        if (r == -ENOENT)
                r = update_transaction_new(&e->tx);
        else if (r == -EBADMSG) {
                log_error("%s", strempty(error));
                r = update_transaction_new(&e->tx);
        }
        if (r < 0)
                return log_error_errno(r, "Failed to load %s/%s: %s", c->state_directory, STATE_FILE_NAME,
                                       error ? error : strerror(-r));
        if (e->tx->id)
                log_info("Resuming from %s/%s: transaction %s in phase %s.", c->state_directory, STATE_FILE_NAME,
                         e->tx->id, update_phase_to_string(e->tx->phase));

        r = kubelet_store_new(c->state_directory, c->kubelet.binary_path, c->kubelet.keep_versions, &e->store);
        if (r < 0)
                return log_error_errno(r, "Failed to open the kubelet store in %s: %m", c->state_directory);

        if (asprintf(&blobs, "%s/staging/blobs", c->state_directory) < 0)
                return -ENOMEM;
        ro = (RegistryOptions) {
                .ca_file = isempty(c->registry.ca_file) ? NULL : c->registry.ca_file,
                .auth_file = isempty(c->registry.auth_file) ? NULL : c->registry.auth_file,
                .mirrors = c->registry.mirrors,
                .n_mirrors = c->registry.n_mirrors,
                .blob_directory = blobs,
        };
        r = registry_client_new(e->event, manager_get_http(m), &ro, &e->registry);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the registry client: %m");

        r = sd_event_add_defer(e->event, &e->defer, executor_on_defer, e);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(e->defer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(e->defer, "executor-decide");

        *ret = TAKE_PTR(e);
        return 0;
}

Executor *executor_free(Executor *e) {
        if (!e)
                return NULL;
        kubelet_stage_free(e->stage);
        if (e->job)
                unit_job_cancel(e->job);
        os_command_free(e->command);
        os_image_free(e->image);
        reboot_request_free(e->reboot);
        health_check_free(e->health);
        kube_request_free(e->pods);
        registry_op_free(e->os_op);
        kubelet_version_probe_free(e->adopt);
        registry_client_free(e->registry);
        kubelet_store_free(e->store);
        update_decision_done(&e->batch);
        update_transaction_free(e->tx);
        node_view_free(e->node);
        osc_desired_free(e->osc);
        free(e->node_error);
        free(e->logged_tx);
        sd_event_source_disable_unref(e->defer);
        sd_event_source_disable_unref(e->wake);
        free(e);
        return NULL;
}

void executor_set_node(Executor *e, const json_t *node) {
        _cleanup_free_ char *error = NULL;
        NodeView *v = NULL;
        int r;

        if (node) {
                r = node_view_decode(node, &v, &error);
                if (r < 0) {
                        if (!streq_ptr(error, e->node_error))
                                log_warning_errno(r, "Ignoring an undecodable Node: %s", strempty(error));
                        free(e->node_error);
                        e->node_error = TAKE_PTR(error);
                        return;
                }
                if (v->warning)
                        log_warning("Node %s: %s", strempty(v->name), v->warning);
        }
        node_view_free(e->node);
        e->node = v;
        executor_kick(e);
}

void executor_set_osc(Executor *e, OscDesired *osc) {
        osc_desired_free(e->osc);
        e->osc = osc;
        executor_kick(e);
}

bool executor_blocks_unit_restarts(const Executor *e) {
        return e && node_update_blocks_unit_restarts(e->tx);
}

bool executor_is_busy(const Executor *e) {
        return e && (e->running || e->batch.n_actions > 0);
}
