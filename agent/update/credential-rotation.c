/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "identity/kubelet-rebootstrap.h"
#include "kubelet/kubelet-health.h"
#include "update/credential-rotation.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/string-util.h"

#define STATE_MAX 4096

struct CredentialRotation {
        CredentialRotationDeps deps; /* borrowed */
        char *transaction;           /* owned */
        bool ca, sa;
        char *state_file;        /* owned */
        char *rebootstrap_state; /* owned */
        char *kubelet_directory; /* owned */
        char *root_directory;    /* owned */
        char *kubelet_unit;      /* owned */
        char *ca_file, *server;  /* owned; NULL: unknown */
        HttpProbeOptions health; /* url owned (health_url) */
        char *health_url;

        CredentialRotationStep step; /* the step running or next */
        unsigned renew_failures;
        bool waiting_identity;
        bool waiting_tokens;
        bool waiting_component;
        uint64_t config_wait_usec;
        sd_event_source *config_timer; /* owned: the wait for the component config */
        UnitJob *job;                  /* borrowed handle: the UnitControl owns it */
        HttpProbe *hc;                 /* owned */
        sd_event_source *defer;        /* owned: runs the machine from the loop */

        CredentialRotationDone done;
        void *userdata;
};

static const char *const step_names[_CREDENTIAL_ROTATION_STEP_MAX] = {
        [CREDENTIAL_ROTATION_RENEW_AGENT] = "renew-agent",
        [CREDENTIAL_ROTATION_KUBELET_FILES] = "kubelet-files",
        [CREDENTIAL_ROTATION_RESTART_KUBELET] = "restart-kubelet",
        [CREDENTIAL_ROTATION_KUBELET_HEALTH] = "kubelet-health",
        [CREDENTIAL_ROTATION_RESYNC_TOKENS] = "resync-tokens",
        [CREDENTIAL_ROTATION_DONE] = "done",
};

DEFINE_STRING_TABLE_LOOKUP(credential_rotation_step, CredentialRotationStep, step_names);

static char *state_path(const char *dir, const char *name) {
        char *p;

        return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

/* The record of this transaction's rotation: the next step, and the API server and CA file the
 * kubelet is re-bootstrapped against (a resumed run may start before the OSC Secret was read again). */
static int load(CredentialRotation *cr) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        const char *ca, *server;
        size_t size;
        int r;

        r = read_full_file(cr->state_file, STATE_MAX, &text, &size);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        doc = json_loadb(text, size, 0, NULL);
        if (!streq_ptr(json_string_value(json_object_get(doc, "transaction")), cr->transaction))
                return 0; /* another transaction's, or unreadable */
        cr->step = credential_rotation_step_from_string(json_string_value(json_object_get(doc, "step")));
        if (cr->step < 0)
                cr->step = CREDENTIAL_ROTATION_RENEW_AGENT;
        ca = json_string_value(json_object_get(doc, "caFile"));
        server = json_string_value(json_object_get(doc, "server"));
        if (ca && server &&
            (free_and_strdup(&cr->ca_file, ca) < 0 || free_and_strdup(&cr->server, server) < 0))
                return -ENOMEM;
        return 1;
}

static int save(CredentialRotation *cr) {
        _cleanup_(json_decrefp) json_t *doc = json_pack(
                "{s:s, s:s, s:s?, s:s?}", "transaction", cr->transaction, "step",
                credential_rotation_step_to_string(cr->step), "caFile", cr->ca_file, "server", cr->server);
        _cleanup_free_ char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;

        if (!text)
                return -ENOMEM;
        return write_file_atomic(cr->state_file, text, strlen(text), 0600);
}

/* ---- the end ---- */

static void finish(CredentialRotation *cr, int error, UpdateFailureCode code, const char *message) {
        CredentialRotationDone done = cr->done;

        cr->done = NULL;
        if (done)
                done(cr, error, code, message, cr->userdata);
}

_printf_(3, 4) static void fail(CredentialRotation *cr, int error, const char *format, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, format);
        m = strdup_vprintf(format, ap);
        va_end(ap);
        finish(cr, error, UPDATE_FAILURE_CREDENTIALS_ROTATION_FAILED, m ?: "credentials rotation failed");
}

static void schedule(CredentialRotation *cr) {
        (void) sd_event_source_set_enabled(cr->defer, SD_EVENT_ONESHOT);
}

/* The current step is over: persisted, then the next one runs from the loop. */
static void step_done(CredentialRotation *cr) {
        int r;

        cr->step++;
        r = save(cr);
        if (r < 0) {
                fail(cr, r, "cannot persist the rotation step in %s: %s", cr->state_file, strerror(-r));
                return;
        }
        schedule(cr);
}

/* ---- the steps: 1 done, 0 started (a callback follows), <0 failed (already reported) ---- */

static KubeletRebootstrapParams rebootstrap_params(const CredentialRotation *cr) {
        return (KubeletRebootstrapParams) {
                .kubelet_directory = cr->kubelet_directory,
                .state_file = cr->rebootstrap_state,
                .ca_file = cr->ca_file,
                .server = cr->server,
        };
}

/* The API server and CA file from GNA's component config, unless the persisted run has them. */
static int take_component(CredentialRotation *cr) {
        const OscComponentConfig *cc = cr->deps.component ? *cr->deps.component : NULL;

        if (cr->ca_file && cr->server)
                return 1;
        if (!cc || !cc->ca_file || !cc->api_server)
                return 0;
        if (free_and_strdup(&cr->ca_file, cc->ca_file) < 0 ||
            free_and_strdup(&cr->server, cc->api_server) < 0)
                return -ENOMEM;
        return 1;
}

static int on_config_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        CredentialRotation *cr = userdata;

        cr->config_timer = sd_event_source_disable_unref(cr->config_timer);
        cr->waiting_component = false;
        if (cr->step == CREDENTIAL_ROTATION_RESYNC_TOKENS)
                fail(cr, -ENODATA,
                     "cannot re-sync the tokens: GNA's component config in the OSC is not known");
        else
                fail(cr, -ENODATA,
                     "cannot %s: GNA's component config in the OSC names no apiServer.caFile and "
                     "apiServer.server",
                     cr->step == CREDENTIAL_ROTATION_RENEW_AGENT ? "renew the agent's client certificate" :
                                                                   "re-bootstrap the kubelet");
        return 0;
}

/* Nothing touched yet: the step waits (bounded) for the OSC Secret to be read; 0 or -errno. */
static int wait_for_component(CredentialRotation *cr) {
        log_info("%s: waiting for GNA's component config in the OSC.",
                 cr->step == CREDENTIAL_ROTATION_RESYNC_TOKENS ? "Service-account-key rotation" :
                                                                 "CA rotation");
        cr->waiting_component = true;
        if (cr->config_timer)
                return 0; /* the deadline of the first wait stands */
        return sd_event_add_time_relative(cr->deps.event, &cr->config_timer, CLOCK_MONOTONIC,
                                          cr->config_wait_usec, USEC_PER_MSEC, on_config_timeout, cr);
}

void credential_rotation_component_changed(CredentialRotation *cr) {
        if (!cr || !cr->waiting_component)
                return;
        cr->waiting_component = false;
        schedule(cr); /* the step again: it looks once more */
}

/* GNA's apiServer.caFile and server, for the step about to run: 1 known (and persisted: a resumed run
 * keeps them), 0 waiting for the OSC Secret, <0 failed (reported). */
static int need_component(CredentialRotation *cr, const char *what) {
        int r;

        r = take_component(cr);
        if (r == 0) {
                r = wait_for_component(cr);
                if (r >= 0)
                        return 0;
        }
        cr->config_timer = sd_event_source_disable_unref(cr->config_timer);
        if (r >= 0)
                r = save(cr);
        if (r < 0) {
                fail(cr, r, "cannot %s: %s", what, strerror(-r));
                return r;
        }
        return 1;
}

/* Against the new bundle: GNA's caFile (below osc.rootDirectory), which the OSC applied before this
 * step rewrote, as upstream's kubeconfig names it. */
static int run_renew_agent(CredentialRotation *cr) {
        Identity *id = cr->deps.identity ? *cr->deps.identity : NULL;
        _cleanup_free_ char *ca = NULL;
        int r;

        if (!id || identity_is_foreign(id)) {
                log_info(
                        "CA rotation: the kubeconfig holds no client certificate of this agent; nothing to renew.");
                return 1;
        }
        r = need_component(cr, "renew the agent's client certificate");
        if (r <= 0)
                return r;
        r = path_below_root(cr->root_directory, cr->ca_file, &ca);
        if (r >= 0)
                r = identity_renew(id, ca);
        if (r < 0) {
                fail(cr, r, "cannot renew the agent's client certificate against %s: %s", cr->ca_file,
                     strerror(-r));
                return r;
        }
        log_info("CA rotation: renewing the agent's client certificate against the new CA bundle %s.", ca);
        cr->waiting_identity = true;
        cr->renew_failures = 0;
        return 0;
}

static int run_kubelet_files(CredentialRotation *cr) {
        KubeletRebootstrapParams p;
        _cleanup_free_ char *error = NULL;
        KubeletRebootstrapStep next;
        int r;

        r = need_component(cr, "re-bootstrap the kubelet");
        if (r <= 0)
                return r;
        p = rebootstrap_params(cr);
        r = kubelet_rebootstrap_run(&p, &next, &error);
        if (r < 0) {
                fail(cr, r, "re-bootstrapping the kubelet failed: %s", error ?: strerror(-r));
                return r;
        }
        log_info("CA rotation: %s/kubeconfig-bootstrap written, kubeconfig-real and pki/ removed.",
                 cr->kubelet_directory);
        return 1;
}

static void on_restarted(const UnitJobResult *res, void *userdata) {
        CredentialRotation *cr = userdata;

        cr->job = NULL; /* the UnitControl frees it */
        if (res->error < 0) {
                finish(cr, res->error, UPDATE_FAILURE_UNIT_RESTART_FAILED, res->detail);
                return;
        }
        log_info("CA rotation: %s restarted.", cr->kubelet_unit);
        step_done(cr);
}

static int run_restart_kubelet(CredentialRotation *cr) {
        int r;

        if (!cr->deps.units) {
                fail(cr, -ENOTCONN, "cannot restart %s: no connection to systemd", cr->kubelet_unit);
                return -ENOTCONN;
        }
        r = unit_control_restart_unit(cr->deps.units, cr->kubelet_unit, on_restarted, cr, &cr->job);
        if (r < 0) {
                fail(cr, r, "cannot restart %s: %s", cr->kubelet_unit, strerror(-r));
                return r;
        }
        return 0;
}

static void on_health(HttpProbe *hc, int error, const char *message, unsigned n_probes, void *userdata) {
        CredentialRotation *cr = userdata;
        KubeletRebootstrapParams p = rebootstrap_params(cr);
        _cleanup_free_ char *reason = NULL, *err = NULL;
        int r;

        cr->hc = http_probe_free(cr->hc);
        if (error < 0) {
                (void) kubelet_health_failure_reason(message, &reason);
                finish(cr, error, UPDATE_FAILURE_KUBELET_UNHEALTHY, reason ?: message);
                return;
        }
        r = kubelet_rebootstrap_finish(&p, &err);
        if (r < 0) {
                fail(cr, r, "%s", err ?: strerror(-r));
                return;
        }
        log_info("CA rotation: the kubelet is healthy after %u probe(s); it re-bootstrapped.", n_probes);
        step_done(cr);
}

static int run_kubelet_health(CredentialRotation *cr) {
        int r;

        r = http_probe_start(cr->deps.event, cr->deps.http, &cr->health, on_health, cr, &cr->hc);
        if (r < 0) {
                fail(cr, r, "cannot check the kubelet's health: %s", strerror(-r));
                return r;
        }
        return 0;
}

static void on_tokens(TokenSync *t, int error, void *userdata) {
        CredentialRotation *cr = userdata;

        cr->waiting_tokens = false;
        if (error < 0) {
                fail(cr, error,
                     error == -ECANCELED ? "the token sync configuration changed during the rotation" :
                                           "not every token could be re-synced (see the journal)");
                return;
        }
        log_info("Service-account-key rotation: every token re-synced.");
        step_done(cr);
}

static int run_resync_tokens(CredentialRotation *cr) {
        const OscComponentConfig *cc = cr->deps.component ? *cr->deps.component : NULL;
        TokenSync *tokens = cr->deps.tokens ? *cr->deps.tokens : NULL;
        int r;

        if (!cc) {
                /* A resumed run before the OSC Secret was read: the TokenSync does not exist yet. */
                r = wait_for_component(cr);
                if (r >= 0)
                        return 0;
                fail(cr, r, "cannot re-sync the tokens: %s", strerror(-r));
                return r;
        }
        cr->config_timer = sd_event_source_disable_unref(cr->config_timer);
        if (cc->n_token_syncs == 0) {
                log_info("Service-account-key rotation: no token sync configured; nothing to re-sync.");
                return 1;
        }
        if (!tokens) {
                fail(cr, -ENOTCONN, "cannot re-sync the tokens: the token sync of %s is not running",
                     cc->file);
                return -ENOTCONN;
        }
        cr->waiting_tokens = true;
        r = token_sync_resync(tokens, on_tokens, cr);
        if (r < 0) {
                cr->waiting_tokens = false;
                fail(cr, r, "cannot re-sync the tokens: %s", strerror(-r));
                return r;
        }
        return 0;
}

typedef int (*StepRunner)(CredentialRotation *cr);

static const StepRunner runners[_CREDENTIAL_ROTATION_STEP_MAX] = {
        [CREDENTIAL_ROTATION_RENEW_AGENT] = run_renew_agent,
        [CREDENTIAL_ROTATION_KUBELET_FILES] = run_kubelet_files,
        [CREDENTIAL_ROTATION_RESTART_KUBELET] = run_restart_kubelet,
        [CREDENTIAL_ROTATION_KUBELET_HEALTH] = run_kubelet_health,
        [CREDENTIAL_ROTATION_RESYNC_TOKENS] = run_resync_tokens,
};

static bool step_wanted(const CredentialRotation *cr, CredentialRotationStep s) {
        return s == CREDENTIAL_ROTATION_RESYNC_TOKENS ? cr->sa : cr->ca;
}

static int on_defer(sd_event_source *s, void *userdata) {
        CredentialRotation *cr = userdata;
        int r;

        while (cr->step < CREDENTIAL_ROTATION_DONE && !step_wanted(cr, cr->step))
                cr->step++;
        if (cr->step == CREDENTIAL_ROTATION_DONE) {
                r = save(cr); /* a kill before the executor records the action must not redo it */
                if (r < 0)
                        log_warning_errno(r, "Cannot persist the end of the rotation in %s: %m",
                                          cr->state_file);
                finish(cr, 0, _UPDATE_FAILURE_INVALID, NULL);
                return 0;
        }
        r = runners[cr->step](cr);
        if (r > 0)
                step_done(cr);
        return 0;
}

void credential_rotation_identity_event(CredentialRotation *cr, IdentityEvent ev) {
        if (!cr || !cr->waiting_identity)
                return;
        if (ev == IDENTITY_CHANGED) {
                cr->waiting_identity = false;
                log_info("CA rotation: the agent's client certificate was renewed.");
                step_done(cr);
                return;
        }
        /* The identity retries with back-off by itself; a few failures in a row end the rotation. */
        if (++cr->renew_failures < CREDENTIAL_ROTATION_RENEW_ATTEMPTS)
                return;
        cr->waiting_identity = false;
        fail(cr, -EIO, "renewing the agent's client certificate failed: %s",
             strempty(*cr->deps.identity ? identity_status(*cr->deps.identity) : NULL));
}

static int dup_or_null(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

int credential_rotation_start(const CredentialRotationDeps *deps, const CredentialRotationParams *p,
                              CredentialRotationDone done, void *userdata, CredentialRotation **ret) {
        _cleanup_(credential_rotation_freep) CredentialRotation *cr = NULL;
        int r;

        assert(deps && deps->event && deps->http);
        assert(p && p->transaction && p->state_directory && p->kubelet_directory && p->kubelet_unit);
        assert(done);
        assert(ret);

        cr = calloc(1, sizeof(*cr));
        if (!cr)
                return -ENOMEM;
        cr->deps = *deps;
        cr->ca = p->ca;
        cr->sa = p->sa;
        cr->health = p->health;
        cr->done = done;
        cr->userdata = userdata;
        cr->config_wait_usec = p->config_wait_usec ?: CREDENTIAL_ROTATION_CONFIG_WAIT_USEC;
        cr->state_file = state_path(p->state_directory, CREDENTIAL_ROTATION_STATE_FILE);
        cr->rebootstrap_state = state_path(p->state_directory, KUBELET_REBOOTSTRAP_STATE_FILE);
        cr->transaction = strdup(p->transaction);
        cr->kubelet_directory = strdup(p->kubelet_directory);
        cr->root_directory = strdup(p->root_directory ?: "/");
        cr->kubelet_unit = strdup(p->kubelet_unit);
        if (!cr->state_file || !cr->rebootstrap_state || !cr->transaction || !cr->kubelet_directory ||
            !cr->root_directory || !cr->kubelet_unit || dup_or_null(p->health.url, &cr->health_url) < 0)
                return -ENOMEM;
        cr->health.url = cr->health_url;

        r = load(cr);
        if (r >= 0 && take_component(cr) < 0)
                r = -ENOMEM;
        if (r > 0)
                log_info("Resuming the credentials rotation of %s at step %s.", cr->transaction,
                         credential_rotation_step_to_string(cr->step));
        else {
                r = r < 0 ? r : save(cr);
                if (r < 0)
                        return r;
        }

        r = sd_event_add_defer(deps->event, &cr->defer, on_defer, cr);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(cr->defer, "credential-rotation");
        *ret = TAKE_PTR(cr);
        return 0;
}

CredentialRotation *credential_rotation_free(CredentialRotation *cr) {
        if (!cr)
                return NULL;
        if (cr->job)
                unit_job_cancel(cr->job);
        if (cr->waiting_tokens && cr->deps.tokens)
                token_sync_forget_waiter(*cr->deps.tokens);
        http_probe_free(cr->hc);
        sd_event_source_disable_unref(cr->defer);
        sd_event_source_disable_unref(cr->config_timer);
        free(cr->transaction);
        free(cr->state_file);
        free(cr->rebootstrap_state);
        free(cr->kubelet_directory);
        free(cr->root_directory);
        free(cr->kubelet_unit);
        free(cr->ca_file);
        free(cr->server);
        free(cr->health_url);
        free(cr);
        return NULL;
}
