/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "build-config.h"
#include "core/kube-name.h"
#include "core/contact-blocker.h"
#include "core/node-view.h"
#include "core/osc-component-config.h"
#include "core/osc.h"
#include "core/restart-request.h"
#include "duties/applied-osc.h"
#include "duties/drift-repair.h"
#include "update/catalog-ids.h"
#include "update/executor.h"
#include "update/osc-intake.h"
#include "duties/hostname-check.h"
#include "daemon/manager.h"
#include "daemon/status.h"
#include "duties/node-health.h"
#include "duties/node-labeler.h"
#include "duties/osc-jitter.h"
#include "duties/osc-secret-state.h"
#include "duties/replaced-units.h"
#include "report/console.h"
#include "report/reporter.h"
#include "duties/restart-handler.h"
#include "duties/units-check.h"
#include "kube/kube-client.h"
#include "kube/kube-events.h"
#include "kube/kube-tuning.h"
#include "kube/kube-watch.h"
#include "kube/kubeconfig.h"
#include "identity/gna-config.h"
#include "identity/identity.h"
#include "identity/kubelet-bootstrap.h"
#include "identity/token-sync.h"
#include "kube/lease.h"
#include "net/http.h"
#include "systemd/system-bus.h"
#include "systemd/unit-control.h"
#include "util/error-message.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/log-once.h"
#include "util/time-util.h"

#define AGENT_COMPONENT "inplace-agent"
#define KUBECONFIG_RETRY_USEC (10 * USEC_PER_SEC)
#define NODE_VIEW_ENV "INPLACE_AGENT_DEBUG_NODE_VIEW"
#define NODE_VIEW_FILE "node-view.json"
#define DEBUG_JSON_MAX 4096
#define RESTART_STATE_FILE "restart-request.json"

struct Manager {
        Config *config;                 /* owned */
        sd_event *event;                /* ref held */
        KubeTuning tuning;

        Http *http;                     /* owned */
        KubeClient *kube;               /* owned; NULL until a kubeconfig was loaded */
        KubeWatch *node_watch;          /* owned */
        KubeEvents *events;             /* owned */
        Lease *lease;                   /* owned; NULL when lease.enabled=false */
        Reporter *reporter;             /* owned: every write about us (Node, Events, STATUS=) */
        sd_event_source *kubeconfig_timer;      /* owned: retries loading the kubeconfig */
        sd_event_source *trim_timer;    /* owned: gives freed heap back once things have been quiet */
        LogOnce kubeconfig_error;       /* the last load error, to log each distinct one once */
        char *api_server;               /* owned: the kubeconfig's server, for messages; NULL before one */
        ContactBlocker contact;         /* what keeps us from the API server before the first contact */
        Console *console;               /* owned: the kernel console; NULL when console.enabled=false */
        Identity *identity;             /* owned: our client certificate (bootstrap, renewal); NULL if unused */

        SystemBus *bus;                 /* owned: the system bus (DBUS_SYSTEM_BUS_ADDRESS), reopened when it closes */
        UnitControl *units;             /* owned; NULL until the bus was first up, then kept across reconnects */
        RestartHandler *restarts;       /* owned; NULL until the bus was first up */
        UnitsCheck *units_check;        /* owned: SystemdUnitsReady; NULL until the bus was first up */
        NodeHealth *health;             /* owned: kubelet/containerd health checks; NULL likewise */
        HostnameCheck *hostname;        /* owned: restarts us on a hostname change; NULL likewise */
        ReplacedUnits *replaced;        /* owned: keeps osc.replacedUnits from running; NULL likewise */
        int systemd_error;              /* < 0: the systemd side could not be set up in manager_new() */
        char *systemd_why;              /* owned: and why */
        Executor *executor;             /* owned */
        KubeWatch *secret_watch;        /* owned: the OSC Secret; NULL while its name is unknown */
        OscJitter *jitter;              /* owned: delays OSC updates (reconciliation-delay) */
        OscSecretState *secret_state;   /* owned: says whether the OSC Secret can be read */
        NodeLabeler *labeler;           /* owned: node-role and zone labels */
        AppliedOsc *applied;            /* owned: the last-applied OSC, for the units check and the drift repair */
        DriftRepair *drift;             /* owned: the drift check and repair */
        char *secret_name;              /* owned */
        OscSecretSource secret_source;  /* where secret_name came from */
        char *gna_secret_name;          /* owned: the OSC Secret GNA's provisioned component config names
                                         * (read at start); NULL: none */
        LogOnce osc_refused;            /* why the last OSC was refused, logged once */
        LogOnce secret_too_large;       /* the OSC Secret is over the size limit, said once */
        LogOnce duties_error;           /* the Node's duties could not start, said once */
        OscComponentConfig *component;  /* owned: GNA's component config of the OSC Secret; NULL: none */
        TokenSync *tokens;              /* owned: its token syncs (docs/contract.md §9.8); NULL: none */

        json_t *node;                   /* ref held: the latest Node; NULL while unknown or absent */
        NodeView *view;                 /* owned: `node` decoded once, for every reader; NULL likewise */
        LogOnce view_error;             /* the last decode error, logged once */
        LogOnce view_warning;           /* the last decode warning, logged once */
        char *node_uid;                 /* owned */
        LogOnce list_outcome;           /* of the last LIST of the Node (0 or -errno), said once; unset
                                         * before the first LIST completed or failed (READY=1 may come
                                         * before: while there is no kubeconfig yet) */
        bool node_view;                 /* debug: mirror the Node view into the state directory */
};

#define manager_emit_event(m, ...) reporter_emit_event((m)->reporter, __VA_ARGS__)

/* The daemon idles for days between updates. Start-up and every transaction free what they used
 * (lists, manifests, the OSC being applied), and glibc keeps freed pages resident: give them back
 * once, TRIM_DELAY_USEC after the last status change, not on a timer that would wake the idle daemon. */
#define TRIM_DELAY_USEC (30 * USEC_PER_SEC)

static int manager_on_trim_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        (void) userdata;
        (void) malloc_trim(0);
        return 0;
}

static void manager_schedule_trim(Manager *m) {
        if (m->trim_timer)
                (void) event_timer_arm(m->trim_timer, TRIM_DELAY_USEC);
        else
                (void) sd_event_add_time_relative(m->event, &m->trim_timer, CLOCK_MONOTONIC, TRIM_DELAY_USEC,
                                                  USEC_PER_SEC, manager_on_trim_timer, m);
}

#define manager_set_status(m, ...)                                      \
        do {                                                            \
                reporter_set_status((m)->reporter, __VA_ARGS__);        \
                manager_schedule_trim(m);                               \
        } while (0)

/* docs/contract.md §8.14: READY=1 once the first LIST of the Node completed or failed (or could not even be
 * attempted), so neither an unreachable API server nor a missing Node restart-loops us. */
static void manager_notify_ready(Manager *m) {
        reporter_notify_ready(m->reporter);
        manager_schedule_trim(m);
}

static const char *node_string(const json_t *node, const char *field) {
        return json_string_value(json_object_get(json_object_get(node, "metadata"), field));
}

static char *json_compact(const json_t *j) {
        char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");

        if (s && strlen(s) > DEBUG_JSON_MAX)
                memcpy(s + DEBUG_JSON_MAX - 3, "...", 4);
        return s;
}

/* Debug aid for tests: what the agent believes the Node looks like. */
static void manager_dump_node_view(Manager *m) {
        _cleanup_free_ char *path = NULL, *data = NULL, *labels = NULL, *annotations = NULL;
        json_t *md = json_object_get(m->node, "metadata");
        _cleanup_(json_decrefp) json_t *view = NULL, *empty_object = NULL, *empty_array = NULL;
        json_t *conditions;
        int r;

        labels = json_compact(json_object_get(md, "labels"));
        annotations = json_compact(json_object_get(md, "annotations"));
        log_debug("Node %s: present=%s uid=%s rv=%s labels=%s annotations=%s", m->config->node_name,
                  m->node ? "yes" : "no", strempty(node_string(m->node, "uid")),
                  strempty(node_string(m->node, "resourceVersion")), strempty(labels), strempty(annotations));
        if (!m->node_view)
                return;

        empty_object = json_object();
        empty_array = json_array();
        conditions = json_object_get(json_object_get(m->node, "status"), "conditions");
        view = json_pack("{s:s, s:b, s:I, s:O?, s:O?}", "name", m->config->node_name, "present", m->node != NULL,
                         "updatedUsec", (json_int_t) clock_now_usec(CLOCK_REALTIME),
                         "metadata", md ?: empty_object, "conditions", conditions ?: empty_array);
        data = view ? json_dumps(view, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!data || asprintf(&path, "%s/%s", m->config->state_directory, NODE_VIEW_FILE) < 0) {
                log_oom();
                return;
        }
        r = write_file_atomic(path, data, strlen(data), 0600);
        if (r < 0)
                log_debug_errno(r, "Failed to write %s: %m", path);
}

/* The one place where a change of our Node enters the agent: called whenever the watched Node
 * changed, appeared or disappeared (m->node is NULL then). Consumers — the update engine, the
 * restart handler — plug in here and read m->node. Keep this function a list of calls. */
static void manager_update_secret_watch(Manager *m);
static void manager_submit_restarts(Manager *m);

/* Decodes the Node once for every reader. An undecodable Node keeps the last good view (logged once
 * per distinct error). */
static void manager_decode_node(Manager *m) {
        _cleanup_free_ char *error = NULL;
        NodeView *v = NULL;
        int r;

        if (m->node) {
                r = node_view_decode(m->node, &v, &error);
                if (r < 0) {
                        if (log_once_check(&m->view_error, r, error))
                                log_warning_errno(r, "Ignoring an undecodable Node: %s", error ?: strerror(-r));
                        return;
                }
                /* Tolerated oddities (e.g. too many conditions) repeat with every Node update: once. */
                if (v->warning && log_once_check(&m->view_warning, 0, v->warning))
                        log_warning("Node %s: %s", strempty(v->name), v->warning);
        }
        log_once_clear(&m->view_error);
        /* Readers borrow the view: hand them the new one before the old goes. */
        reporter_set_node(m->reporter, v);
        osc_secret_state_sync(m->secret_state, v);
        executor_set_node(m->executor, v);
        node_view_free(m->view);
        m->view = v;
}

static void manager_on_node_changed(Manager *m) {
        manager_dump_node_view(m);
        manager_decode_node(m);
        if (m->health)
                node_health_set_node(m->health, m->view);
        osc_jitter_node_changed(m->jitter, m->view);
        node_labeler_sync(m->labeler, m->view);
        manager_update_secret_watch(m);
        manager_submit_restarts(m);
}

/* ---- the OSC Secret --------------------------------------------------------------------------- */

static void manager_start_tokens(Manager *m) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs cfg = {};
        int r;

        m->tokens = token_sync_free(m->tokens);
        if (!m->component || m->component->n_token_syncs == 0)
                return;
        r = token_sync_configs_from_component(m->component, &cfg);
        if (r >= 0)
                r = token_sync_new(m->kube, m->config->osc.root_directory, TOKEN_SYNC_NAMESPACE, &cfg, &m->tokens);
        if (r >= 0)
                r = token_sync_start(m->tokens);
        if (r < 0) {
                log_error_errno(r, "Cannot sync the tokens named in %s: %m", m->component->file);
                m->tokens = token_sync_free(m->tokens);
                return;
        }
        log_info("Syncing %zu token(s) named in %s.", cfg.n, m->component->file);
}

/* GNA's component config (docs/contract.md §9.4, §9.8) of an accepted OSC (NULL: it has none), taken at once
 * like GNA's token controller reads its config file; the TokenSync is recreated only when the token
 * syncs changed. A broken one made the OSC refused (osc-intake.h): the current one stays. */
static void manager_update_component(Manager *m, OscComponentConfig *c) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = c;
        bool same;

        same = osc_component_config_same_token_syncs(cc, m->component);
        osc_component_config_free(m->component);
        m->component = TAKE_PTR(cc);
        executor_component_changed(m->executor);
        if (!same || (!m->tokens && m->component && m->component->n_token_syncs > 0))
                manager_start_tokens(m);
}

/* Journal line for a refused OSC, once per distinct reason; the update engine reports it on the Node
 * (InvalidDesiredState, a Warning Event) and in STATUS=. */
static void manager_log_refused(Manager *m, const OscDesired *osc) {
        if (!osc || !osc->refused)
                log_once_clear(&m->osc_refused);
        else if (log_once_check(&m->osc_refused, 0, osc->refused))
                log_error("Refusing the OSC of Secret %s/%s (checksum %s): %s", m->config->osc.namespace,
                          strempty(m->secret_name), osc->checksum ?: "none", osc->refused);
}

/* gardener#15528: a Secret that cannot be read is said out loud (duties/osc-secret-state.h). */
static void manager_say_secret(Manager *m, OscAvailability a, const char *detail) {
        const OscSecretRef ref = {
                .namespace = m->config->osc.namespace,
                .name = m->secret_name,
                .source = m->secret_source,
        };

        osc_secret_state_set(m->secret_state, a, &ref, detail);
}

/* After each LIST: absent is "not found" (a LIST answers an empty list, never 404, for a missing
 * Secret), 403 "forbidden"; a Secret over the size limit is said once (no retry fixes it); other
 * errors are transient and change nothing. */
static void manager_on_secret_synced(KubeWatch *w, int error, void *userdata) {
        Manager *m = userdata;

        if (error >= 0)
                log_once_clear(&m->secret_too_large);
        if (error == -EPERM)
                manager_say_secret(m, OSC_AVAILABILITY_FORBIDDEN, kube_watch_get_list_message(w));
        else if ((error == 0 && !kube_watch_get_object(w)) || error == -ENOENT)
                manager_say_secret(m, OSC_AVAILABILITY_NOT_FOUND, NULL);
        else if (error == -EFBIG && log_once_check(&m->secret_too_large, error, NULL))
                log_warning("Cannot list OSC Secret %s/%s: %s; ignoring it and retrying with back-off.",
                            m->config->osc.namespace, m->secret_name, strempty(kube_watch_get_list_message(w)));
}

static void manager_on_secret_object(KubeWatch *w, json_t *secret, void *userdata) {
        Manager *m = userdata;
        OscComponentConfig *cc = NULL;
        OscDesired *osc = NULL;
        int r;

        manager_say_secret(m, OSC_AVAILABILITY_FOUND, NULL);

        r = osc_intake(secret, m->config->kubelet.binary_path, m->config->osc.replaced_units,
                       m->executor ? executor_osc_model_options(m->executor) : NULL, &osc, &cc);
        if (r < 0) {
                log_oom();
                return;
        }
        manager_log_refused(m, osc);
        if (osc->refused) {
                osc_jitter_submit(m->jitter, osc, m->view);
                return;
        }
        manager_update_component(m, cc);
        log_debug("OSC Secret %s/%s: checksum %s, kubelet %s, OS %s.", m->config->osc.namespace, m->secret_name,
                  strempty(osc->checksum), strempty(osc->kubelet_version), strempty(osc->os_version));
        osc_jitter_submit(m->jitter, osc, m->view);
}

static void manager_deliver_osc(OscDesired *osc, void *userdata) {
        Manager *m = userdata;

        node_labeler_reload(m->labeler);        /* GNA reads the zone file at every OSC reconcile */
        if (osc && !osc->refused)
                node_labeler_set_control_plane(m->labeler, osc->control_plane);
        node_labeler_sync(m->labeler, m->view);
        executor_set_osc(m->executor, osc);
}

static void manager_on_secret_deleted(KubeWatch *w, json_t *last, void *userdata) {
        Manager *m = userdata;

        manager_say_secret(m, OSC_AVAILABILITY_NOT_FOUND, NULL);
        osc_jitter_submit(m->jitter, NULL, m->view);
}

/* A watch or the Lease stops by itself only when its timer cannot be armed (the loop is finishing,
 * or a forked child): without them the agent is blind, so end the loop and let systemd restart us. */
static void manager_on_watch_stopped(KubeWatch *w, int error, void *userdata) {
        Manager *m = userdata;

        log_error_errno(error, "A watch of the API server stopped and cannot resume: %m");
        (void) sd_event_exit(m->event, error);
}

static void manager_on_lease_stopped(Lease *l, int error, void *userdata) {
        Manager *m = userdata;

        log_error_errno(error, "The Lease renewal stopped and cannot resume: %m");
        (void) sd_event_exit(m->event, error);
}

/* The OSC Secret's name, the first found (docs/node-protocol.md §2.1): osc.secretName; the Node's label; GNA's
 * provisioned component config, all a fresh node has before its kubelet registers the Node.
 * Upstream's GNA reads its component config, and its secretnamechange controller rewrites that config
 * from the label and restarts; here, when the label names another Secret, the label wins at once,
 * without a restart: gardenlet keeps it current (the MachineClass's node template, and it corrects the
 * label of nodes whose pool's Secret changed), while the provisioned config is what the machine was
 * created with. Said once, when the label takes over. */
static const char *manager_secret_name(Manager *m, OscSecretSource *ret_source) {
        const char *label = m->view ? m->view->secret_name : NULL;

        *ret_source = OSC_SECRET_FROM_CONFIG;
        if (!isempty(m->config->osc.secret_name))
                return m->config->osc.secret_name;
        *ret_source = isempty(label) ? OSC_SECRET_FROM_GNA_CONFIG : OSC_SECRET_FROM_LABEL;
        if (isempty(label))
                return m->gna_secret_name;
        if (m->gna_secret_name && !streq(label, m->gna_secret_name) && !streq_ptr(label, m->secret_name))
                log_notice("Node label %s names OSC Secret %s, gardener-node-agent's component config %s; "
                           "following the label.", NODE_LABEL_SECRET_NAME, label, m->gna_secret_name);
        return label;
}

static void manager_update_secret_watch(Manager *m) {
        static const KubeWatchCallbacks secret_callbacks = {
                .on_object = manager_on_secret_object,
                .on_deleted = manager_on_secret_deleted,
                .on_synced = manager_on_secret_synced,
                .on_stopped = manager_on_watch_stopped,
        };
        _cleanup_(osc_desired_freep) OscDesired *refused = NULL;
        _cleanup_free_ char *error = NULL;
        OscSecretSource source;
        const char *name = manager_secret_name(m, &source);
        int r;

        if (isempty(name) && m->view)
                manager_say_secret(m, OSC_AVAILABILITY_NOT_NAMED, NULL);
        if (streq_ptr(isempty(name) ? NULL : name, m->secret_name) || !m->kube)
                return;

        m->secret_watch = kube_watch_free(m->secret_watch);
        osc_jitter_reset(m->jitter);
        executor_set_osc(m->executor, NULL);
        if (free_and_strdup(&m->secret_name, isempty(name) ? NULL : name) < 0) {
                log_oom();
                return;
        }
        if (!m->secret_name) {
                log_notice("No OSC Secret is named (osc.secretName, label %s, gardener-node-agent's component "
                           "config); waiting.", NODE_LABEL_SECRET_NAME);
                return;
        }
        /* osc.secretName was checked with the configuration; the label is anyone's who may patch the
         * Node: "../../default/secrets/other" must not make us read another Secret. */
        m->secret_source = source;
        if (kube_name_check(m->secret_name, KUBE_NAME_SUBDOMAIN, osc_secret_source_to_string(source), &error) < 0) {
                log_error("Not watching an OSC Secret: %s", strempty(error));
                log_once_clear(&m->osc_refused);
                if (!error || osc_desired_new_refused(NULL, error, &refused) < 0) {
                        log_oom();
                        return;
                }
                osc_jitter_submit(m->jitter, TAKE_PTR(refused), m->view);
                return;
        }
        log_info("Watching OSC Secret %s/%s.", m->config->osc.namespace, m->secret_name);
        r = kube_watch_new(m->kube, KUBE_RESOURCE_SECRETS, m->config->osc.namespace, m->secret_name, &secret_callbacks,
                           m, &m->secret_watch);
        if (r >= 0)
                r = kube_watch_start(m->secret_watch);
        if (r < 0) {
                /* Out of memory, or the loop is finishing: blind to the OSC, like a stopped watch. */
                log_error_errno(r, "Failed to watch OSC Secret %s: %m", m->secret_name);
                (void) sd_event_exit(m->event, r);
        }
}

/* ---- the restart annotation ---------------------------------------------------------------------- */

static void manager_on_restart_result(const char *unit, bool ok, const char *detail, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ char *msg = restart_result_message(unit, ok, detail);

        if (ok)
                (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_UNIT_RESTARTED, "%s", msg ? msg : unit);
        else
                (void) log_struct_id(LOG_WARNING, 0, MESSAGE_ID_UNIT_RESTART_FAILED, "%s", msg ? msg : unit);
        (void) manager_emit_event(m, ok ? "Normal" : "Warning", "SystemDUnitRestart", msg ? msg : unit);
}

static void manager_on_restart_rejected(const char *entry, const char *why, void *userdata) {
        Manager *m = userdata;
        RestartRejected rej = { .entry = (char *) entry, .why = (char *) why };
        _cleanup_free_ char *msg = restart_rejected_message(&rej);

        log_warning("%s", msg ? msg : entry);
        (void) manager_emit_event(m, "Warning", "SystemDUnitRestart", msg ? msg : entry);
}

static void manager_on_restart_annotation_removed(int error, void *userdata) {
        Manager *m = userdata;

        /* 422 from the "test" op: the value changed meanwhile, a newer request is not ours to drop. */
        restart_handler_annotation_removed(m->restarts, error == -EINVAL ? -ESTALE : error);
}

static int manager_remove_restart_annotation(const char *value, void *userdata) {
        Manager *m = userdata;
        int r;

        /* Conditional: removes the annotation only if it still holds the value we handled. */
        r = reporter_remove_annotation(m->reporter, NODE_ANNOTATION_RESTART, value, manager_on_restart_annotation_removed,
                                       m);
        return r > 0 ? -EIO : r;
}

static void manager_on_restart_finished(const char *value, void *userdata) {
        Manager *m = userdata;

        log_info("Handled restart request \"%s\".", value);
        executor_set_restarts_busy(m->executor, false);
}

static void manager_submit_restarts(Manager *m) {
        if (!m->restarts)
                return;
        /* Units are not restarted behind the back of an update that restarts units itself. */
        if (executor_blocks_unit_restarts(m->executor))
                return;
        if (restart_handler_submit(m->restarts, m->view ? m->view->restart_services : NULL) < 0)
                log_oom();
        executor_set_restarts_busy(m->executor, restart_handler_is_busy(m->restarts));
}

/* A path the OSC's world knows, below osc.rootDirectory. */
static char *root_path(const Config *c, const char *path) {
        char *p;

        return path_below_root(c->osc.root_directory, path, &p) < 0 ? NULL : p;
}

/* SystemdUnitsReady over the units of the last-applied OSC, which duties/applied-osc hands over;
 * without one there is nothing to judge and nothing is written (upstream's readManagedUnits skips
 * the check until an OSC was applied: a new node's kubelet is "not loaded" before its first OSC). */
static int manager_setup_units_check(Manager *m) {
        return units_check_new(m->event, m->units, m->reporter, m->tuning.units_check_usec, m->tuning.units_stuck_usec,
                               &m->units_check);
}

/* Health checks restart no unit behind the back of an update step that restarts units itself. */
static bool manager_health_may_restart(const char *unit, void *userdata) {
        Manager *m = userdata;

        return !executor_blocks_unit_restarts(m->executor);
}

/* For `inplace-agent status`: what containerd last said it is. The journal has it already (the duty's
 * line); a state directory that cannot take it loses only this. */
static void manager_on_containerd_version(const ContainerdVersion *v, void *userdata) {
        Manager *m = userdata;
        int r;

        r = status_containerd_save(m->config->state_directory, v->version, v->revision,
                                   clock_now_usec(CLOCK_REALTIME));
        if (r < 0)
                log_warning_errno(r, "Cannot save containerd's version for 'inplace-agent status' in %s: %m",
                                  m->config->state_directory);
}

static int manager_setup_health(Manager *m) {
        _cleanup_free_ char *socket = root_path(m->config, CONTAINERD_SOCKET);

        if (!socket)
                return -ENOMEM;
        return node_health_new(m->event, m->http, m->units, m->reporter,
                               &(NodeHealthOptions) {
                                       .kubelet_unit = m->config->kubelet.unit,
                                       .kubelet_healthz_url = m->config->kubelet.healthz_url,
                                       .containerd_unit = CONTAINERD_UNIT,
                                       .containerd_socket = socket,
                                       .period_usec = m->tuning.health_check_usec,
                                       .grace_usec = m->tuning.health_grace_usec,
                                       .may_restart = manager_health_may_restart,
                                       .on_containerd_version = manager_on_containerd_version,
                                       .userdata = m,
                               }, &m->health);
}

/* What runs while there is a Node, started at its first sight (or when it is back, or when the bus
 * came up only later); each a no-op when running. The Lease's timer cannot be armed only when the
 * loop is finishing (or in a forked child): like a stopped Lease, that ends us. A duty that cannot
 * start (out of memory) is said once and tried again with the next Node event. */
static void manager_start_node_duties(Manager *m) {
        int r = 0, k;

        if (m->lease) {
                r = lease_start(m->lease);
                if (r < 0) {
                        log_error_errno(r, "Cannot start renewing the Lease: %m");
                        (void) sd_event_exit(m->event, r);
                        return;
                }
        }
        if (m->units_check)
                r = units_check_start(m->units_check);
        if (m->health) {
                k = node_health_start(m->health);
                r = r < 0 ? r : k;
        }
        if (r >= 0)
                log_once_clear(&m->duties_error);
        else if (log_once_check(&m->duties_error, r, NULL))
                log_warning_errno(r, "Cannot start the units check or the health checks, trying again with the "
                                  "next Node event: %m");
}

/* Everything that talks to systemd, once the bus is first up; kept across reconnects (the UnitControl
 * is handed each new connection). */
static int manager_start_systemd(Manager *m, sd_bus *bus, char **ret_error) {
        static const RestartHandlerCallbacks restart_callbacks = {
                .on_unit_result = manager_on_restart_result,
                .on_rejected = manager_on_restart_rejected,
                .remove_annotation = manager_remove_restart_annotation,
                .on_finished = manager_on_restart_finished,
        };
        _cleanup_free_ char *state = NULL;
        int r;

        r = unit_control_new(bus, m->config->systemd.job_timeout_usec, &m->units);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the systemd client: %s", strerror(-r));
        if (asprintf(&state, "%s/%s", m->config->state_directory, RESTART_STATE_FILE) < 0)
                return -ENOMEM;
        r = restart_handler_new(m->event, m->units, m->config->restart.self_unit, state, &restart_callbacks, m,
                                &m->restarts);
        if (r >= 0 && m->config->osc.replaced_units)
                restart_handler_set_replaced_units(m->restarts, (const char *const *) m->config->osc.replaced_units);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the restart handler: %s", strerror(-r));
        r = manager_setup_units_check(m);
        if (r >= 0)
                r = manager_setup_health(m);
        if (r >= 0)
                r = replaced_units_new(m->event, m->units, m->reporter, m->config->osc.replaced_units,
                                       m->config->systemd.runtime_unit_directory, m->tuning.units_check_usec,
                                       &m->replaced);
        if (r >= 0 && hostname_check_new(m->event, m->units, m->config->restart.self_unit, m->tuning.health_check_usec,
                                         &m->hostname) < 0)
                log_warning("Cannot read the hostname; the hostname check is off.");
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the unit check: %s", strerror(-r));
        return 0;
}

/* The bus came up for the first time only after start: hand the new objects to those who were
 * created without them, and start the duties the Node's first sight would have started. */
static void manager_late_systemd(Manager *m) {
        executor_set_units(m->executor, m->units);
        applied_osc_set_units_check(m->applied, m->units_check);
        drift_repair_set_units(m->drift, m->units);
        if (m->node) {
                manager_start_node_duties(m);
                node_health_set_node(m->health, m->view);
        }
        manager_submit_restarts(m);
}

#define BUS_DOWN_NOTE "system bus down, reconnecting"

/* The one place that hears of the bus (systemd/system-bus.h) and logs it: once per loss, once per
 * return. Unit jobs in flight wait meanwhile (bounded by systemd.jobTimeout), the duties skip their
 * D-Bus reads, and STATUS= says so. */
static void manager_on_bus(SystemBus *sb, bool up, int error, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ char *why = NULL;
        int r;

        if (!up) {
                if (m->units) {
                        log_warning_errno(error, "Lost the connection to the system bus (%m); unit jobs wait for it, "
                                          "reconnecting.");
                        IGNORE_RESULT(unit_control_set_bus(m->units, NULL));  /* NULL cannot fail */
                } else
                        log_warning_errno(error, "Cannot connect to the system bus, retrying; unit restarts and "
                                          "reboots wait for it: %m");
                reporter_set_status_note(m->reporter, REPORTER_NOTE_BUS, BUS_DOWN_NOTE);
                return;
        }
        reporter_set_status_note(m->reporter, REPORTER_NOTE_BUS, NULL);
        if (m->units) {
                r = unit_control_set_bus(m->units, system_bus_get(sb));
                if (r < 0) {
                        /* Unit jobs could never finish: end the loop, systemd restarts us. */
                        log_error_errno(r, "Cannot use the new system bus connection: %m");
                        (void) sd_event_exit(m->event, r);
                } else
                        log_info("Reconnected to the system bus.");
                return;
        }
        r = manager_start_systemd(m, system_bus_get(sb), &why);
        if (r < 0) {
                if (!m->executor) {             /* in manager_new(): it fails with this */
                        m->systemd_error = r;
                        free(m->systemd_why);
                        m->systemd_why = TAKE_PTR(why);
                        return;
                }
                log_error_errno(r, "%s", why ? why : "Cannot set up the systemd client: %m");
                (void) sd_event_exit(m->event, r);
                return;
        }
        if (m->executor) {
                log_info("Connected to the system bus.");
                manager_late_systemd(m);
        }
}

/* Not fatal when the bus is not there: updates that need no unit restart and all reporting work, and
 * the bus is retried in the background. */
static int manager_setup_systemd(Manager *m, char **ret_error) {
        int r;

        r = system_bus_new(m->event, NULL, manager_on_bus, m, &m->bus);
        if (r >= 0)
                r = system_bus_start(m->bus);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the system bus connection: %s", strerror(-r));
        if (m->systemd_error < 0)
                return error_setf(ret_error, m->systemd_error, "%s",
                                  m->systemd_why ?: "cannot set up the systemd client");
        return 0;
}

static void manager_on_node_object(KubeWatch *w, json_t *node, void *userdata) {
        Manager *m = userdata;
        const char *uid = node_string(node, "uid");

        if (!m->node)
                log_info("Node %s found (uid %s).", m->config->node_name, strempty(uid));
        json_decref(m->node);
        m->node = json_incref(node);

        if (!streq_ptr(uid, m->node_uid)) {
                if (free_and_strdup(&m->node_uid, uid) < 0 ||
                    kube_events_set_node_uid(m->events, uid) < 0 ||
                    (m->lease && lease_set_owner(m->lease, m->config->node_name, uid) < 0))
                        log_oom();
        }
        manager_start_node_duties(m);   /* first sight of the Node (or back); else a no-op */
        manager_set_status(m, "Watching node %s", m->config->node_name);
        manager_on_node_changed(m);
}

static void manager_on_node_deleted(KubeWatch *w, json_t *last, void *userdata) {
        Manager *m = userdata;

        log_notice("Node %s was deleted.", m->config->node_name);
        if (m->lease)
                lease_stop(m->lease);   /* renewed again when the Node is back */
        json_decref(m->node);
        m->node = NULL;
        manager_set_status(m, "Waiting for node %s to be registered", m->config->node_name);
        manager_on_node_changed(m);
}

/* ---- before the first contact (gardener#15707) -------------------------------------------------- */

/* Until the API server answered once, the logs are out of reach from outside: each failed attempt
 * (the caller logs it once) also goes to the status file `inplace-agent status` reads and, rate-
 * limited (core/contact-blocker.h), to the kernel console. */
static void manager_blocked(Manager *m, const char *reason) {
        uint64_t now = clock_now_usec(CLOCK_MONOTONIC);
        bool changed;
        int r, k;

        r = contact_blocker_set(&m->contact, reason, now, clock_now_usec(CLOCK_REALTIME), &changed);
        if (r < 0) {
                log_oom();
                return;
        }
        if (changed) {
                k = status_blocker_save(m->config->state_directory, m->contact.reason, m->contact.first_reason,
                                        m->contact.since_realtime_usec);
                if (k < 0)
                        log_debug_errno(k, "Cannot write %s: %m", STATUS_BLOCKER_FILE);
        }
        if (r == 0 || !m->console)
                return;
        k = console_write(m->console, m->contact.reason);
        if (k < 0)
                log_debug_errno(k, "Cannot write to the console %s: %m", strempty(m->config->console.path));
        else
                contact_blocker_console_written(&m->contact, now);
}

/* Best effort, like writing it: `inplace-agent status` then shows a stale blocker, which says when it
 * was written. */
static void manager_remove_blocker(Manager *m) {
        int r;

        r = status_blocker_remove(m->config->state_directory);
        if (r < 0)
                log_debug_errno(r, "Cannot remove %s: %m", STATUS_BLOCKER_FILE);
}

/* The first answer of the API server since start: one Warning says what blocked us and how long. */
static void manager_contacted(Manager *m) {
        _cleanup_free_ char *msg = NULL;
        bool told = contact_blocker_told_console(&m->contact);
        int r;

        if (m->contact.contacted)
                return;
        r = contact_blocker_contact(&m->contact, clock_now_usec(CLOCK_MONOTONIC), m->tuning.contact_event_min_usec,
                                    &msg);
        if (r < 0)
                log_oom();
        if (r <= 0)
                return;
        manager_remove_blocker(m);
        if (msg) {
                log_warning("%s.", msg);
                (void) manager_emit_event(m, "Warning", "NoAPIServerAccess", msg);
        }
        if (told && m->console) {
                r = console_write(m->console, "reached the API server; the reason above no longer holds");
                if (r < 0)
                        log_debug_errno(r, "Cannot write to the console %s: %m", strempty(m->config->console.path));
        }
}

/* "cannot list node n1 at https://…: connection refused", with the server's message of a 401/403. */
static char *manager_list_failure(Manager *m, KubeWatch *w, int error) {
        const char *detail = kube_watch_get_list_message(w);
        char *s;

        if (asprintf(&s, "cannot list node %s at %s: %s%s%.300s", m->config->node_name, strempty(m->api_server),
                     contact_error_phrase(error), detail ? ": " : "", strempty(detail)) < 0)
                return NULL;
        return s;
}

static void manager_on_node_synced(KubeWatch *w, int error, void *userdata) {
        Manager *m = userdata;
        bool changed = log_once_check(&m->list_outcome, error, NULL);

        if (error < 0) {
                _cleanup_free_ char *failure = manager_list_failure(m, w, error);
                const char *reason = failure ?: strerror(-error);

                /* Logged once per distinct error: the watch retries with backoff on its own. */
                if (changed)
                        log_warning_errno(error, "%s; retrying.", reason);
                manager_set_status(m, "Waiting for node %s: %s", m->config->node_name, reason);
                manager_blocked(m, reason);
        } else if (!m->node) {
                manager_contacted(m);
                if (changed)
                        log_notice("Node %s is not registered yet, waiting for it.", m->config->node_name);
                manager_set_status(m, "Waiting for node %s to be registered", m->config->node_name);
                if (changed)
                        manager_on_node_changed(m);     /* "absent" is news too, and the executor's to say */
        } else {
                manager_contacted(m);
                manager_set_status(m, "Watching node %s", m->config->node_name);
        }
        manager_notify_ready(m);
}

static void manager_on_credentials_changed(KubeClient *c, void *userdata) {
        Manager *m = userdata;

        log_info("Client credentials changed on disk, reconnecting.");
        kube_watch_reconnect(m->node_watch);
        if (m->secret_watch)
                kube_watch_reconnect(m->secret_watch);
}

static void manager_on_unauthorized(KubeClient *c, void *userdata);

static int manager_start_kube(Manager *m, const KubeConfig *kc) {
        static const KubeWatchCallbacks node_callbacks = {
                .on_object = manager_on_node_object,
                .on_deleted = manager_on_node_deleted,
                .on_synced = manager_on_node_synced,
                .on_stopped = manager_on_watch_stopped,
        };
        int r;

        r = kube_client_new(m->event, m->http, kc, &m->tuning, &m->kube);
        if (r < 0)
                return r;
        kube_client_set_reconnect_callback(m->kube, manager_on_credentials_changed, m);
        kube_client_set_unauthorized_callback(m->kube, manager_on_unauthorized, m);

        r = kube_events_new(m->kube, AGENT_COMPONENT, m->config->node_name, &m->events);
        if (r < 0)
                return r;
        reporter_attach(m->reporter, m->kube, m->events);
        executor_set_kube(m->executor, m->kube);

        /* Started on the first sight of the Node: the Lease is owned by it. */
        if (m->config->lease.enabled) {
                r = lease_new(m->kube, m->config->lease.namespace, m->config->lease.name, m->config->lease.name,
                              m->config->lease.duration_usec, &m->lease);
                if (r < 0)
                        return r;
                lease_set_stopped_callback(m->lease, manager_on_lease_stopped, m);
        }

        r = kube_watch_new(m->kube, KUBE_RESOURCE_NODES, NULL, m->config->node_name, &node_callbacks, m, &m->node_watch);
        if (r < 0)
                return r;
        return kube_watch_start(m->node_watch);
}

static int manager_on_kubeconfig_timer(sd_event_source *s, uint64_t usec, void *userdata);
static int manager_try_kube(Manager *m);

/* identity/ owns our client certificate (docs/contract.md §9.6); here only: a new one → load it (or let the
 * running client re-read it), a failure → STATUS= while we have no client; and every event to the
 * executor, whose CA rotation waits for its renewal (docs/contract.md §9.7). */
static void manager_on_identity(Identity *id, IdentityEvent ev, void *userdata) {
        Manager *m = userdata;

        if (ev == IDENTITY_FAILED) {
                if (!m->kube) {
                        manager_set_status(m, "Waiting for node %s: %s", m->config->node_name,
                                           strempty(identity_status(id)));
                        manager_blocked(m, strempty(identity_status(id)));
                }
        } else if (m->kube)
                (void) kube_client_reload_credentials(m->kube);
        else {
                m->kubeconfig_timer = sd_event_source_disable_unref(m->kubeconfig_timer);
                if (manager_try_kube(m) < 0)
                        (void) sd_event_exit(m->event, -EIO);
        }
        /* A CA rotation waits for the renewal; it goes on with the credentials reloaded above. */
        executor_identity_event(m->executor, ev);
}

static void manager_on_unauthorized(KubeClient *c, void *userdata) {
        Manager *m = userdata;

        if (m->identity)
                identity_unauthorized(m->identity);
}

/* Bootstraps when there is no kubeconfig, renews the certificate of one we issued; another kind of
 * kubeconfig (a token, in-cluster) is left alone. */
static void manager_identity_start(Manager *m, bool bootstrap) {
        if (m->identity || (!bootstrap && access(m->config->kubeconfig, F_OK) < 0))
                return;
        if (identity_new_from_config(m->event, m->http, &m->tuning, m->config, manager_on_identity, m,
                                     &m->identity) < 0 || identity_start(m->identity) < 0)
                log_warning("Cannot manage the client certificate; using %s as it is.", m->config->kubeconfig);
}

/* Loads the kubeconfig and starts everything that talks to the API server. A missing or broken
 * kubeconfig is not fatal: the node may still be bootstrapping; try again in a while. */
static int manager_try_kube(Manager *m) {
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = kubeconfig_load(m->config->kubeconfig, &kc, &error);
        manager_identity_start(m, r < 0);
        if (r < 0 && m->identity && identity_status(m->identity)) {
                /* Not a blocker yet: a bootstrap under way is the normal start of a fresh node; a
                 * failed one comes through manager_on_identity(). */
                manager_set_status(m, "Waiting for node %s: %s", m->config->node_name,
                                   identity_status(m->identity));
                manager_notify_ready(m);
                return 0;       /* manager_on_identity() goes on */
        }
        if (r < 0) {
                const char *why = error ?: strerror(-r);

                if (log_once_check(&m->kubeconfig_error, r, error))
                        log_warning_errno(r, "Cannot use kubeconfig, retrying every %us: %s",
                                          (unsigned) (KUBECONFIG_RETRY_USEC / USEC_PER_SEC), why);
                manager_set_status(m, "Waiting for node %s: %s", m->config->node_name, why);
                manager_blocked(m, why);
                manager_notify_ready(m);
                r = sd_event_add_time_relative(m->event, &m->kubeconfig_timer, CLOCK_MONOTONIC, KUBECONFIG_RETRY_USEC,
                                               USEC_PER_SEC, manager_on_kubeconfig_timer, m);
                if (r < 0)
                        return log_error_errno(r, "Cannot schedule loading the kubeconfig again: %m");
                return 0;
        }

        log_info("Using API server %s (%s).", kc->server, kc->source);
        if (free_and_strdup(&m->api_server, kc->server) < 0)
                return log_oom();
        manager_set_status(m, "Waiting for node %s: listing it", m->config->node_name);
        r = manager_start_kube(m, kc);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Kubernetes client: %m");
        return 0;
}

static int manager_on_kubeconfig_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        m->kubeconfig_timer = sd_event_source_disable_unref(m->kubeconfig_timer);
        r = manager_try_kube(m);
        if (r < 0)
                return sd_event_exit(m->event, r);
        return 0;
}

/* After the executor: it creates the state directory the module watches. */
static int manager_setup_applied_osc(Manager *m) {
        const AppliedOscOptions opts = {
                .state_directory = m->config->state_directory,
                .root_directory = m->config->osc.root_directory,
                .replaced_units = m->config->osc.replaced_units,
        };

        return applied_osc_new(m->event, &opts, m->units_check, &m->applied);
}

/* ---- the drift repair: the executor's side ------------------------------------------------------ */

static int manager_drift_claim(const char **ret_why, void *userdata) {
        Manager *m = userdata;

        return executor_drift_claim(m->executor, ret_why);
}

static void manager_drift_release(void *userdata) {
        Manager *m = userdata;

        executor_drift_release(m->executor);
        replaced_units_kick(m->replaced);       /* a repair may have brought a replaced unit's file back */
        manager_submit_restarts(m);     /* a restart request that waited for the round */
}

static int manager_drift_run(OscChanges *changes, DriftRepairRunDone done, void *done_userdata, void *userdata) {
        Manager *m = userdata;

        return executor_drift_repair(m->executor, changes, done, done_userdata);
}

/* After the executor and the AppliedOsc: it plans on the OSC runner's terms, reads through the other. */
static int manager_setup_drift(Manager *m) {
        static const DriftRepairHooks hooks = {
                .claim = manager_drift_claim,
                .release = manager_drift_release,
                .run = manager_drift_run,
        };
        const Config *c = m->config;
        DriftRepairHooks h = hooks;
        const DriftRepairOptions opts = {
                .root_directory = c->osc.root_directory,
                .unit_directory = c->systemd.unit_directory,
                .replaced_units = c->osc.replaced_units,
                .self_unit = c->restart.self_unit,
                .kubelet_binary = c->kubelet.binary_path,
                .mode = c->osc.drift_repair,
                .interval_usec = c->osc.drift_interval_usec,
                .model_options = executor_osc_model_options(m->executor),
                .own_files = executor_own_files(m->executor),
        };
        int r;

        h.userdata = m;
        r = drift_repair_new(m->event, &opts, m->applied, m->reporter, &h, &m->drift);
        if (r >= 0)
                drift_repair_set_units(m->drift, m->units);
        return r;
}

static int manager_new_labeler(Manager *m, const Config *c) {
        _cleanup_free_ char *zone = root_path(c, NODE_ZONE_FILE);

        return zone ? node_labeler_new(m->reporter, zone, &m->labeler) : -ENOMEM;
}

int manager_new(Config **config, const KubeTuning *tuning, Manager **ret, char **ret_error) {
        _cleanup_(manager_freep) Manager *m = NULL;
        ExecutorDeps deps;
        int r;

        assert(config && *config);
        assert(tuning);
        assert(ret);

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->tuning = *tuning;
        m->node_view = !isempty(getenv(NODE_VIEW_ENV));

        r = reporter_new((*config)->node_name, &m->reporter);
        if (r < 0)
                return r;

        r = sd_event_default(&m->event);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the event loop: %s", strerror(-r));

        /* SIGTERM/SIGINT end the loop with exit code 0; blocked first as sd-event requires. */
        r = sd_event_set_signal_exit(m->event, true);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up signal handling: %s", strerror(-r));

        /* Pings WATCHDOG=1 at half of WatchdogSec= while the loop turns; no-op without it. */
        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the watchdog: %s", strerror(-r));

        r = http_new(m->event, &m->http);
        if (r < 0)
                return error_setf(ret_error, r, "cannot set up the HTTP client: %s", strerror(-r));
        r = osc_jitter_new(m->event, manager_deliver_osc, m, &m->jitter);
        if (r < 0)
                return r;
        r = osc_secret_state_new(m->reporter, &m->secret_state);
        if (r < 0)
                return r;
        if ((*config)->console.enabled) {
                r = console_new((*config)->console.path, &m->console);
                if (r < 0)
                        return r;
        }
        r = manager_new_labeler(m, *config);
        if (r < 0)
                return r;

        /* The objects below borrow the configuration; the Manager owns it only once it is complete,
         * so on failure it stays the caller's (never freed twice). */
        m->config = *config;
        r = manager_setup_systemd(m, ret_error);
        if (r >= 0) {
                deps = (ExecutorDeps) {
                        .event = m->event,
                        .config = m->config,
                        .http = m->http,
                        .bus = m->bus,
                        .units = m->units,
                        .reporter = m->reporter,
                        .identity = &m->identity,
                        .tokens = &m->tokens,
                        .component = &m->component,
                        .node_registration_usec = m->tuning.node_registration_usec,
                };
                r = executor_new(&deps, &m->executor, ret_error);
        }
        if (r >= 0)
                r = manager_setup_applied_osc(m);
        if (r >= 0)
                r = manager_setup_drift(m);
        if (r < 0) {
                m->config = NULL;
                return r;
        }
        *config = NULL;
        *ret = TAKE_PTR(m);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Everything holding HTTP requests goes before the client, the client before Http; the
         * reporter's writes go before the executor that waits for them (no callback follows). */
        reporter_free(m->reporter);
        drift_repair_free(m->drift);    /* borrows the executor's and the AppliedOsc's */
        executor_free(m->executor);
        restart_handler_free(m->restarts);
        applied_osc_free(m->applied);   /* borrows the units check */
        units_check_free(m->units_check);
        node_health_free(m->health);
        hostname_check_free(m->hostname);
        replaced_units_free(m->replaced);
        unit_control_free(m->units);
        system_bus_free(m->bus);
        free(m->systemd_why);
        kube_watch_free(m->secret_watch);
        token_sync_free(m->tokens);
        osc_component_config_free(m->component);
        osc_jitter_free(m->jitter);
        osc_secret_state_free(m->secret_state);
        node_labeler_free(m->labeler);
        kube_watch_free(m->node_watch);
        lease_free(m->lease);
        kube_events_free(m->events);
        kube_client_free(m->kube);
        identity_free(m->identity);
        http_free(m->http);
        sd_event_source_disable_unref(m->kubeconfig_timer);
        sd_event_source_disable_unref(m->trim_timer);
        json_decref(m->node);
        node_view_free(m->view);
        log_once_done(&m->view_error);
        log_once_done(&m->view_warning);
        log_once_done(&m->list_outcome);
        free(m->node_uid);
        free(m->secret_name);
        free(m->gna_secret_name);
        log_once_done(&m->osc_refused);
        log_once_done(&m->secret_too_large);
        log_once_done(&m->duties_error);
        log_once_done(&m->kubeconfig_error);
        free(m->api_server);
        contact_blocker_done(&m->contact);
        console_free(m->console);
        sd_event_unref(m->event);
        config_free(m->config);
        free(m);
        return NULL;
}

/* GNA's bootstrapper, at every start (docs/contract.md §9.6): a new node's kubelet needs its bootstrap
 * kubeconfig before the first OSC starts it. Not fatal: the kubelet then says what it misses. */
static void manager_provision_kubelet_bootstrap(Manager *m) {
        _cleanup_free_ char *gna = root_path(m->config, IDENTITY_GNA_DIRECTORY),
                            *kubelet = root_path(m->config, KUBELET_DIRECTORY),
                            *token = root_path(m->config, IDENTITY_GNA_DIRECTORY "/" GNA_BOOTSTRAP_TOKEN),
                            *server = NULL, *ca = NULL, *error = NULL;
        int r;

        if (!gna || !kubelet || !token || identity_gna_api_server(gna, &server, &ca) < 0) {
                log_oom();
                return;
        }
        r = kubelet_bootstrap_provision(&(KubeletBootstrapParams) { .kubelet_directory = kubelet, .token_file = token,
                                                                   .server = server, .ca_file = ca },
                                        &error);
        if (r < 0)
                log_warning_errno(r, "Cannot write the kubelet's bootstrap kubeconfig: %s", error ?: strerror(-r));
        else if (r > 0)
                log_info("Wrote the kubelet's bootstrap kubeconfig %s/%s from gardener-node-agent's bootstrap token.",
                         kubelet, KUBELET_BOOTSTRAP_KUBECONFIG);
}

/* GNA's component config as gardener-node-init provisioned it (docs/contract.md §9.6): the name of the OSC
 * Secret when neither osc.secretName nor the Node (not registered yet on a fresh node) names it. Read
 * once, at start, as GNA reads its config at its start. */
static void manager_read_gna_secret_name(Manager *m) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_free_ char *gna = root_path(m->config, IDENTITY_GNA_DIRECTORY), *error = NULL;
        int r;

        if (!gna) {
                log_oom();
                return;
        }
        r = gna_config_read(gna, &cc, &error);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Ignoring gardener-node-agent's provisioned component config: %s",
                                  error ?: strerror(-r));
        if (r < 0 || !cc->secret_name)
                return;
        log_info("gardener-node-agent's component config %s names OSC Secret %s.", cc->file, cc->secret_name);
        m->gna_secret_name = TAKE_PTR(cc->secret_name);
}

int manager_run(Manager *m) {
        int r;

        assert(m);

        (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_AGENT_STARTED, "Starting inplace-agent %s for node %s.",
                             PACKAGE_VERSION, m->config->node_name);
        manager_set_status(m, "Waiting for node %s", m->config->node_name);
        manager_provision_kubelet_bootstrap(m);
        manager_read_gna_secret_name(m);
        manager_remove_blocker(m);      /* a previous run's */

        r = manager_try_kube(m);
        if (r < 0)
                return r;

        /* The drift check goes first: after a boot that wiped /etc, the node is restored before the
         * update engine verifies anything on it (docs/contract.md §9.8). */
        r = drift_repair_start(m->drift);
        if (r >= 0)
                r = executor_start(m->executor);
        if (r < 0)
                return r;

        r = sd_event_loop(m->event);

        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down");
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_AGENT_STOPPED, "Stopped.");
        return 0;
}
