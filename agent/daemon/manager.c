/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "build-config.h"
#include "core/contact-blocker.h"
#include "core/node-labels.h"
#include "core/node-view.h"
#include "daemon/first-contact.h"
#include "daemon/gna-bootstrap.h"
#include "daemon/manager.h"
#include "daemon/node-dump.h"
#include "daemon/osc-source.h"
#include "daemon/restart-annotation.h"
#include "daemon/systemd-side.h"
#include "duties/applied-osc.h"
#include "duties/drift-repair.h"
#include "duties/node-labeler.h"
#include "identity/identity.h"
#include "kube/kube-client.h"
#include "kube/kube-events.h"
#include "kube/kube-tuning.h"
#include "kube/kube-watch.h"
#include "kube/kubeconfig.h"
#include "kube/lease.h"
#include "net/http.h"
#include "report/reporter.h"
#include "update/catalog-ids.h"
#include "update/executor.h"
#include "util/error-message.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/time-util.h"

#define AGENT_COMPONENT "inplace-agent"
#define KUBECONFIG_RETRY_USEC (10 * USEC_PER_SEC)

struct Manager {
        Config *config;  /* owned */
        sd_event *event; /* ref held */
        KubeTuning tuning;

        Http *http;                        /* owned */
        KubeClient *kube;                  /* owned; NULL until a kubeconfig was loaded */
        KubeWatch *node_watch;             /* owned */
        KubeEvents *events;                /* owned */
        Lease *lease;                      /* owned; NULL when lease.enabled=false */
        Reporter *reporter;                /* owned: every write about us (Node, Events, STATUS=) */
        sd_event_source *kubeconfig_timer; /* owned: retries loading the kubeconfig */
        sd_event_source *trim_timer;       /* owned: gives freed heap back once things have been quiet */
        LogOnce kubeconfig_error;          /* the last load error, to log each distinct one once */
        char *api_server;      /* owned: the kubeconfig's server, for messages; NULL before one */
        FirstContact *contact; /* owned: what keeps us from the API server, until it answered */
        Identity *identity;    /* owned: our client certificate (bootstrap, renewal); NULL if unused */

        SystemdSide *systemd; /* owned: everything that talks to systemd */
        Executor *executor;   /* owned */
        NodeLabeler *labeler; /* owned: node-role and zone labels */
        OscSource *osc;       /* owned: the OSC Secret, from its name to the executor */
        AppliedOsc *applied;  /* owned: the last-applied OSC, for the units check and the drift repair */
        DriftRepair *drift;   /* owned: the drift check and repair */

        json_t *node;         /* ref held: the latest Node; NULL while unknown or absent */
        NodeView *view;       /* owned: `node` decoded once, for every reader; NULL likewise */
        LogOnce view_error;   /* the last decode error, logged once */
        LogOnce view_warning; /* the last decode warning, logged once */
        char *node_uid;       /* owned */
        LogOnce list_outcome; /* of the last LIST of the Node (0 or -errno), said once; unset
                               * before the first LIST completed or failed (READY=1 may come
                               * before: while there is no kubeconfig yet) */
        bool node_view;       /* debug: mirror the Node view into the state directory */
};

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

#define manager_set_status(m, ...)                               \
        do {                                                     \
                reporter_set_status((m)->reporter, __VA_ARGS__); \
                manager_schedule_trim(m);                        \
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
                                log_warning_errno(r, "Ignoring an undecodable Node: %s",
                                                  error ?: strerror(-r));
                        return;
                }
                /* Tolerated oddities (e.g. too many conditions) repeat with every Node update: once. */
                if (v->warning && log_once_check(&m->view_warning, 0, v->warning))
                        log_warning("Node %s: %s", strempty(v->name), v->warning);
        }
        log_once_clear(&m->view_error);
        /* Readers borrow the view: hand them the new one before the old goes. */
        reporter_set_node(m->reporter, v);
        osc_source_set_node(m->osc, v);
        executor_set_node(m->executor, v);
        node_view_free(m->view);
        m->view = v;
}

/* The one place where a change of our Node enters the agent: called whenever the watched Node
 * changed, appeared or disappeared (m->node is NULL then). Its readers (the reporter, the OSC source,
 * the executor, the systemd side, the restart annotation) get the decoded view here. Keep this
 * function a list of calls. */
static void manager_on_node_changed(Manager *m) {
        node_dump(m->config->node_name, m->node, m->config->state_directory, m->node_view);
        manager_decode_node(m);
        systemd_side_set_node(m->systemd, m->node != NULL, m->view);
        osc_source_node_changed(m->osc);
        restart_annotation_sync(systemd_side_restarts(m->systemd), m->view);
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

/* What runs while there is a Node, started at its first sight (or when it is back, or when the bus
 * came up only later); each a no-op when running. The Lease's timer cannot be armed only when the
 * loop is finishing (or in a forked child): like a stopped Lease, that ends us. A duty that cannot
 * start (out of memory) is said once and tried again with the next Node event. */
static void manager_start_node_duties(Manager *m) {
        int r;

        if (m->lease) {
                r = lease_start(m->lease);
                if (r < 0) {
                        log_error_errno(r, "Cannot start renewing the Lease: %m");
                        (void) sd_event_exit(m->event, r);
                        return;
                }
        }
        systemd_side_start_node_duties(m->systemd);
}

static void manager_on_node_object(KubeWatch *w, json_t *node, void *userdata) {
        Manager *m = userdata;
        const char *uid = node_string(node, "uid");

        if (!m->node)
                log_info("Node %s found (uid %s).", m->config->node_name, strempty(uid));
        json_decref(m->node);
        m->node = json_incref(node);

        if (!streq_ptr(uid, m->node_uid)) {
                if (free_and_strdup(&m->node_uid, uid) < 0 || kube_events_set_node_uid(m->events, uid) < 0 ||
                    (m->lease && lease_set_owner(m->lease, m->config->node_name, uid) < 0))
                        log_oom();
        }
        manager_start_node_duties(m); /* first sight of the Node (or back); else a no-op */
        manager_set_status(m, "Watching node %s", m->config->node_name);
        manager_on_node_changed(m);
}

static void manager_on_node_deleted(KubeWatch *w, json_t *last, void *userdata) {
        Manager *m = userdata;

        log_notice("Node %s was deleted.", m->config->node_name);
        if (m->lease)
                lease_stop(m->lease); /* renewed again when the Node is back */
        json_decref(m->node);
        m->node = NULL;
        manager_set_status(m, "Waiting for node %s to be registered", m->config->node_name);
        manager_on_node_changed(m);
}

/* "cannot list node n1 at https://…: connection refused", with the server's message of a 401/403. */
static char *manager_list_failure(Manager *m, KubeWatch *w, int error) {
        const char *detail = kube_watch_get_list_message(w);
        char *s;

        if (asprintf(&s, "cannot list node %s at %s: %s%s%.300s", m->config->node_name,
                     strempty(m->api_server), contact_error_phrase(error), detail ? ": " : "",
                     strempty(detail)) < 0)
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
                first_contact_blocked(m->contact, reason);
        } else if (!m->node) {
                first_contact_reached(m->contact);
                if (changed)
                        log_notice("Node %s is not registered yet, waiting for it.", m->config->node_name);
                manager_set_status(m, "Waiting for node %s to be registered", m->config->node_name);
                if (changed)
                        manager_on_node_changed(m); /* "absent" is news too, and the executor's to say */
        } else {
                first_contact_reached(m->contact);
                manager_set_status(m, "Watching node %s", m->config->node_name);
        }
        manager_notify_ready(m);
}

static void manager_on_credentials_changed(KubeClient *c, void *userdata) {
        Manager *m = userdata;

        log_info("Client credentials changed on disk, reconnecting.");
        kube_watch_reconnect(m->node_watch);
        osc_source_reconnect(m->osc);
}

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
        if (m->identity) /* final once there is a client (manager_try_kube()) */
                identity_watch_client(m->identity, m->kube);

        r = kube_events_new(m->kube, AGENT_COMPONENT, m->config->node_name, &m->events);
        if (r < 0)
                return r;
        reporter_attach(m->reporter, m->kube, m->events);
        executor_set_kube(m->executor, m->kube);
        osc_source_set_kube(m->osc, m->kube);

        /* Started on the first sight of the Node: the Lease is owned by it. */
        if (m->config->lease.enabled) {
                r = lease_new(m->kube, m->config->lease.namespace, m->config->lease.name,
                              m->config->lease.name, m->config->lease.duration_usec, &m->lease);
                if (r < 0)
                        return r;
                lease_set_stopped_callback(m->lease, manager_on_lease_stopped, m);
        }

        r = kube_watch_new(m->kube, KUBE_RESOURCE_NODES, NULL, m->config->node_name, &node_callbacks, m,
                           &m->node_watch);
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
                        first_contact_blocked(m->contact, strempty(identity_status(id)));
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

/* Bootstraps when there is no kubeconfig, renews the certificate of one we issued; another kind of
 * kubeconfig (a token, in-cluster) is left alone. */
static void manager_identity_start(Manager *m, bool bootstrap) {
        if (m->identity || (!bootstrap && access(m->config->kubeconfig, F_OK) < 0))
                return;
        if (identity_new_from_config(m->event, m->http, &m->tuning, m->config, manager_on_identity, m,
                                     &m->identity) < 0 ||
            identity_start(m->identity) < 0)
                log_warning("Cannot manage the client certificate; using %s as it is.",
                            m->config->kubeconfig);
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
                return 0; /* manager_on_identity() goes on */
        }
        if (r < 0) {
                const char *why = error ?: strerror(-r);

                if (log_once_check(&m->kubeconfig_error, r, error))
                        log_warning_errno(r, "Cannot use kubeconfig, retrying every %us: %s",
                                          (unsigned) (KUBECONFIG_RETRY_USEC / USEC_PER_SEC), why);
                manager_set_status(m, "Waiting for node %s: %s", m->config->node_name, why);
                first_contact_blocked(m->contact, why);
                manager_notify_ready(m);
                r = sd_event_add_time_relative(m->event, &m->kubeconfig_timer, CLOCK_MONOTONIC,
                                               KUBECONFIG_RETRY_USEC, USEC_PER_SEC,
                                               manager_on_kubeconfig_timer, m);
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

        return applied_osc_new(m->event, &opts, systemd_side_units_check(m->systemd), &m->applied);
}

/* After the executor and the AppliedOsc: it plans on the OSC runner's terms, reads through the other. */
static int manager_setup_drift(Manager *m) {
        const Config *c = m->config;
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

        r = drift_repair_new(m->event, &opts, m->applied, m->reporter, executor_gate(m->executor),
                             &m->drift);
        if (r >= 0)
                drift_repair_set_units(m->drift, systemd_side_units(m->systemd),
                                       systemd_side_replaced(m->systemd));
        return r;
}

static int manager_new_labeler(Manager *m, const Config *c) {
        _cleanup_free_ char *zone = NULL;

        if (path_below_root(c->osc.root_directory, NODE_ZONE_FILE, &zone) < 0)
                return -ENOMEM;
        return node_labeler_new(m->reporter, zone, &m->labeler);
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
        m->node_view = !isempty(getenv(NODE_DUMP_ENV));

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
        r = first_contact_new(*config, m->reporter, m->tuning.contact_event_min_usec, &m->contact);
        if (r < 0)
                return r;
        r = manager_new_labeler(m, *config);
        if (r < 0)
                return r;
        r = osc_source_new(m->event, *config, m->reporter, m->labeler, &m->osc);
        if (r < 0)
                return r;

        /* The objects below borrow the configuration; the Manager owns it only once it is complete,
         * so on failure it stays the caller's (never freed twice). */
        m->config = *config;
        r = systemd_side_new(m->event, m->config, &m->tuning, m->http, m->reporter, &m->systemd);
        if (r < 0)
                r = error_setf(ret_error, r, "cannot set up the system bus connection: %s", strerror(-r));
        if (r >= 0) {
                /* Before the bus is up: what talks to systemd is handed the executor it waits on. */
                deps = (ExecutorDeps) {
                        .event = m->event,
                        .config = m->config,
                        .http = m->http,
                        .bus = systemd_side_bus(m->systemd),
                        .reporter = m->reporter,
                        .identity = &m->identity,
                        .tokens = osc_source_tokens_slot(m->osc),
                        .component = osc_source_component_slot(m->osc),
                        .node_registration_usec = m->tuning.node_registration_usec,
                };
                r = executor_new(&deps, &m->executor, ret_error);
        }
        if (r >= 0)
                osc_source_set_executor(m->osc, m->executor);
        if (r >= 0)
                r = systemd_side_start(m->systemd, m->executor, ret_error);
        if (r >= 0)
                r = manager_setup_applied_osc(m);
        if (r >= 0)
                r = manager_setup_drift(m);
        if (r < 0) {
                m->config = NULL;
                return r;
        }
        systemd_side_attach(m->systemd, m->applied, m->drift);
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
        drift_repair_free(m->drift); /* borrows the executor's and the AppliedOsc's */
        executor_free(m->executor);
        applied_osc_free(m->applied);  /* borrows the units check */
        systemd_side_free(m->systemd); /* after all that borrow its objects */
        osc_source_free(m->osc);       /* borrows the labeler */
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
        log_once_done(&m->kubeconfig_error);
        free(m->api_server);
        first_contact_free(m->contact);
        sd_event_unref(m->event);
        config_free(m->config);
        free(m);
        return NULL;
}

int manager_run(Manager *m) {
        int r;

        assert(m);

        (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_AGENT_STARTED, "Starting inplace-agent %s for node %s.",
                             PACKAGE_VERSION, m->config->node_name);
        manager_set_status(m, "Waiting for node %s", m->config->node_name);
        gna_bootstrap_provision_kubelet(m->config);
        osc_source_read_gna_config(m->osc);
        first_contact_clear_stale(m->contact);

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

        (void) sd_notify(/* unset_environment= */ false, "STOPPING=1\nSTATUS=Shutting down");
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        (void) log_struct_id(LOG_INFO, 0, MESSAGE_ID_AGENT_STOPPED, "Stopped.");
        return 0;
}
