/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdlib.h>

#include "core/kube-name.h"
#include "core/osc.h"
#include "daemon/osc-source.h"
#include "duties/osc-jitter.h"
#include "duties/osc-secret-state.h"
#include "identity/gna-config.h"
#include "identity/identity.h"
#include "kube/kube-watch.h"
#include "update/osc-intake.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/string-util.h"

struct OscSource {
        sd_event *event;               /* borrowed */
        const Config *config;          /* borrowed */
        NodeLabeler *labeler;          /* borrowed */
        Executor *executor;            /* borrowed; set right after creation */
        KubeClient *kube;              /* borrowed; NULL until there is a client */
        const NodeView *view;          /* borrowed: the latest Node; NULL while unknown or absent */
        KubeWatch *secret_watch;       /* owned: the OSC Secret; NULL while its name is unknown */
        OscJitter *jitter;             /* owned: delays OSC updates (reconciliation-delay) */
        OscSecretState *secret_state;  /* owned: says whether the OSC Secret can be read */
        char *secret_name;             /* owned */
        OscSecretSource secret_source; /* where secret_name came from */
        char *gna_secret_name;         /* owned: the OSC Secret GNA's provisioned component config names
                                        * (read at start); NULL: none */
        LogOnce osc_refused;           /* why the last OSC was refused, logged once */
        LogOnce secret_too_large;      /* the OSC Secret is over the size limit, said once */
        OscComponentConfig *component; /* owned: GNA's component config of the OSC Secret; NULL: none */
        TokenSync *tokens;             /* owned: its token syncs (docs/contract.md §9.8); NULL: none */
};

static void start_tokens(OscSource *s) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs cfg = {};
        int r;

        s->tokens = token_sync_free(s->tokens);
        if (!s->component || s->component->n_token_syncs == 0)
                return;
        r = token_sync_configs_from_component(s->component, &cfg);
        if (r >= 0)
                r = token_sync_new(s->kube, s->config->osc.root_directory, TOKEN_SYNC_NAMESPACE, &cfg,
                                   &s->tokens);
        if (r >= 0)
                r = token_sync_start(s->tokens);
        if (r < 0) {
                log_error_errno(r, "Cannot sync the tokens named in %s: %m", s->component->file);
                s->tokens = token_sync_free(s->tokens);
                return;
        }
        log_info("Syncing %zu token(s) named in %s.", cfg.n, s->component->file);
}

/* GNA's component config (docs/contract.md §9.4, §9.8) of an accepted OSC (NULL: it has none), taken at once
 * like GNA's token controller reads its config file; the TokenSync is recreated only when the token
 * syncs changed. A broken one made the OSC refused (osc-intake.h): the current one stays. */
static void update_component(OscSource *s, OscComponentConfig *c) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = c;
        bool same;

        same = osc_component_config_same_token_syncs(cc, s->component);
        osc_component_config_free(s->component);
        s->component = TAKE_PTR(cc);
        executor_component_changed(s->executor);
        if (!same || (!s->tokens && s->component && s->component->n_token_syncs > 0))
                start_tokens(s);
}

/* Journal line for a refused OSC, once per distinct reason; the update engine reports it on the Node
 * (InvalidDesiredState, a Warning Event) and in STATUS=. */
static void log_refused(OscSource *s, const OscDesired *osc) {
        if (!osc || !osc->refused)
                log_once_clear(&s->osc_refused);
        else if (log_once_check(&s->osc_refused, 0, osc->refused))
                log_error("Refusing the OSC of Secret %s/%s (checksum %s): %s", s->config->osc.namespace,
                          strempty(s->secret_name), osc->checksum ?: "none", osc->refused);
}

/* gardener#15528: a Secret that cannot be read is said out loud (duties/osc-secret-state.h). */
static void say_secret(OscSource *s, OscAvailability a, const char *detail) {
        const OscSecretRef ref = {
                .namespace = s->config->osc.namespace,
                .name = s->secret_name,
                .source = s->secret_source,
        };

        osc_secret_state_set(s->secret_state, a, &ref, detail);
}

/* After each LIST: absent is "not found" (a LIST answers an empty list, never 404, for a missing
 * Secret), 403 "forbidden"; a Secret over the size limit is said once (no retry fixes it); other
 * errors are transient and change nothing. */
static void on_secret_synced(KubeWatch *w, int error, void *userdata) {
        OscSource *s = userdata;

        if (error >= 0)
                log_once_clear(&s->secret_too_large);
        if (error == -EPERM)
                say_secret(s, OSC_AVAILABILITY_FORBIDDEN, kube_watch_get_list_message(w));
        else if ((error == 0 && !kube_watch_get_object(w)) || error == -ENOENT)
                say_secret(s, OSC_AVAILABILITY_NOT_FOUND, NULL);
        else if (error == -EFBIG && log_once_check(&s->secret_too_large, error, NULL))
                log_warning("Cannot list OSC Secret %s/%s: %s; ignoring it and retrying with back-off.",
                            s->config->osc.namespace, s->secret_name,
                            strempty(kube_watch_get_list_message(w)));
}

static void on_secret_object(KubeWatch *w, json_t *secret, void *userdata) {
        OscSource *s = userdata;
        OscComponentConfig *cc = NULL;
        OscDesired *osc = NULL;
        int r;

        say_secret(s, OSC_AVAILABILITY_FOUND, NULL);

        r = osc_intake(secret, s->config->kubelet.binary_path, s->config->osc.replaced_units,
                       s->executor ? executor_osc_model_options(s->executor) : NULL, &osc, &cc);
        if (r < 0) {
                log_oom();
                return;
        }
        log_refused(s, osc);
        if (osc->refused) {
                osc_jitter_submit(s->jitter, osc, s->view);
                return;
        }
        update_component(s, cc);
        log_debug("OSC Secret %s/%s: checksum %s, kubelet %s, OS %s.", s->config->osc.namespace,
                  s->secret_name, strempty(osc->checksum), strempty(osc->kubelet_version),
                  strempty(osc->os_version));
        osc_jitter_submit(s->jitter, osc, s->view);
}

static void deliver_osc(OscDesired *osc, void *userdata) {
        OscSource *s = userdata;

        node_labeler_reload(s->labeler); /* GNA reads the zone file at every OSC reconcile */
        if (osc && !osc->refused)
                node_labeler_set_control_plane(s->labeler, osc->control_plane);
        node_labeler_sync(s->labeler, s->view);
        executor_set_osc(s->executor, osc);
}

static void on_secret_deleted(KubeWatch *w, json_t *last, void *userdata) {
        OscSource *s = userdata;

        say_secret(s, OSC_AVAILABILITY_NOT_FOUND, NULL);
        osc_jitter_submit(s->jitter, NULL, s->view);
}

/* A watch stops by itself only when its timer cannot be armed (the loop is finishing, or a forked
 * child): blind to the OSC, the agent ends the loop and lets systemd restart it. */
static void on_watch_stopped(KubeWatch *w, int error, void *userdata) {
        OscSource *s = userdata;

        log_error_errno(error, "A watch of the API server stopped and cannot resume: %m");
        (void) sd_event_exit(s->event, error);
}

/* The OSC Secret's name, the first found (docs/node-protocol.md §2.1): osc.secretName; the Node's label;
 * GNA's provisioned component config, all a fresh node has before its kubelet registers the Node. Upstream's
 * GNA reads its component config, and its secretnamechange controller rewrites that config from the label
 * and restarts; here, when the label names another Secret, the label wins at once, without a restart:
 * gardenlet keeps it current (the MachineClass's node template, and it corrects the label of nodes whose
 * pool's Secret changed), while the provisioned config is what the machine was created with. Said once, when
 * the label takes over. */
static const char *secret_name(OscSource *s, OscSecretSource *ret_source) {
        const char *label = s->view ? s->view->secret_name : NULL;

        *ret_source = OSC_SECRET_FROM_CONFIG;
        if (!isempty(s->config->osc.secret_name))
                return s->config->osc.secret_name;
        *ret_source = isempty(label) ? OSC_SECRET_FROM_GNA_CONFIG : OSC_SECRET_FROM_LABEL;
        if (isempty(label))
                return s->gna_secret_name;
        if (s->gna_secret_name && !streq(label, s->gna_secret_name) && !streq_ptr(label, s->secret_name))
                log_notice("Node label %s names OSC Secret %s, gardener-node-agent's component config %s; "
                           "following the label.",
                           NODE_LABEL_SECRET_NAME, label, s->gna_secret_name);
        return label;
}

static void update_watch(OscSource *s) {
        static const KubeWatchCallbacks secret_callbacks = {
                .on_object = on_secret_object,
                .on_deleted = on_secret_deleted,
                .on_synced = on_secret_synced,
                .on_stopped = on_watch_stopped,
        };
        _cleanup_(osc_desired_freep) OscDesired *refused = NULL;
        _cleanup_free_ char *error = NULL;
        OscSecretSource source;
        const char *name = secret_name(s, &source);
        int r;

        if (isempty(name) && s->view)
                say_secret(s, OSC_AVAILABILITY_NOT_NAMED, NULL);
        if (streq_ptr(isempty(name) ? NULL : name, s->secret_name) || !s->kube)
                return;

        s->secret_watch = kube_watch_free(s->secret_watch);
        osc_jitter_reset(s->jitter);
        executor_set_osc(s->executor, NULL);
        if (free_and_strdup(&s->secret_name, isempty(name) ? NULL : name) < 0) {
                log_oom();
                return;
        }
        if (!s->secret_name) {
                log_notice(
                        "No OSC Secret is named (osc.secretName, label %s, gardener-node-agent's component "
                        "config); waiting.",
                        NODE_LABEL_SECRET_NAME);
                return;
        }
        /* osc.secretName was checked with the configuration; the label is anyone's who may patch the
         * Node: "../../default/secrets/other" must not make us read another Secret. */
        s->secret_source = source;
        if (kube_name_check(s->secret_name, KUBE_NAME_SUBDOMAIN, osc_secret_source_to_string(source),
                            &error) < 0) {
                log_error("Not watching an OSC Secret: %s", strempty(error));
                log_once_clear(&s->osc_refused);
                if (!error || osc_desired_new_refused(NULL, error, &refused) < 0) {
                        log_oom();
                        return;
                }
                osc_jitter_submit(s->jitter, TAKE_PTR(refused), s->view);
                return;
        }
        log_info("Watching OSC Secret %s/%s.", s->config->osc.namespace, s->secret_name);
        r = kube_watch_new(s->kube, KUBE_RESOURCE_SECRETS, s->config->osc.namespace, s->secret_name,
                           &secret_callbacks, s, &s->secret_watch);
        if (r >= 0)
                r = kube_watch_start(s->secret_watch);
        if (r < 0) {
                /* Out of memory, or the loop is finishing: blind to the OSC, like a stopped watch. */
                log_error_errno(r, "Failed to watch OSC Secret %s: %m", s->secret_name);
                (void) sd_event_exit(s->event, r);
        }
}

int osc_source_new(sd_event *event, const Config *config, Reporter *reporter, NodeLabeler *labeler,
                   OscSource **ret) {
        _cleanup_(osc_source_freep) OscSource *s = NULL;
        int r;

        assert(event && config && reporter && labeler && ret);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = event;
        s->config = config;
        s->labeler = labeler;
        r = osc_jitter_new(event, deliver_osc, s, &s->jitter);
        if (r < 0)
                return r;
        r = osc_secret_state_new(reporter, &s->secret_state);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

OscSource *osc_source_free(OscSource *s) {
        if (!s)
                return NULL;
        kube_watch_free(s->secret_watch);
        token_sync_free(s->tokens);
        osc_component_config_free(s->component);
        osc_jitter_free(s->jitter);
        osc_secret_state_free(s->secret_state);
        free(s->secret_name);
        free(s->gna_secret_name);
        log_once_done(&s->osc_refused);
        log_once_done(&s->secret_too_large);
        free(s);
        return NULL;
}

OscComponentConfig *const *osc_source_component_slot(const OscSource *s) {
        return &s->component;
}

TokenSync *const *osc_source_tokens_slot(const OscSource *s) {
        return &s->tokens;
}

void osc_source_set_executor(OscSource *s, Executor *executor) {
        s->executor = executor;
}

void osc_source_set_kube(OscSource *s, KubeClient *kube) {
        s->kube = kube;
}

/* GNA's component config as gardener-node-init provisioned it (docs/contract.md §9.6): the name of the OSC
 * Secret when neither osc.secretName nor the Node (not registered yet on a fresh node) names it. Read
 * once, at start, as GNA reads its config at its start. */
void osc_source_read_gna_config(OscSource *s) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = NULL;
        _cleanup_free_ char *gna = NULL, *error = NULL;
        int r;

        if (path_below_root(s->config->osc.root_directory, IDENTITY_GNA_DIRECTORY, &gna) < 0) {
                log_oom();
                return;
        }
        r = gna_config_read(gna, &cc, &error);
        if (r < 0 && r != -ENOENT)
                log_warning_errno(r, "Ignoring gardener-node-agent's provisioned component config: %s",
                                  error ?: strerror(-r));
        if (r < 0 || !cc->secret_name)
                return;
        log_info("gardener-node-agent's component config %s names OSC Secret %s.", cc->file,
                 cc->secret_name);
        s->gna_secret_name = TAKE_PTR(cc->secret_name);
}

void osc_source_set_node(OscSource *s, const NodeView *view) {
        osc_secret_state_sync(s->secret_state, view);
        s->view = view;
}

/* The labeler syncs here, between the delay and the watch, as it follows the OSC too (deliver_osc()). */
void osc_source_node_changed(OscSource *s) {
        osc_jitter_node_changed(s->jitter, s->view);
        node_labeler_sync(s->labeler, s->view);
        update_watch(s);
}

void osc_source_reconnect(OscSource *s) {
        if (s->secret_watch)
                kube_watch_reconnect(s->secret_watch);
}
