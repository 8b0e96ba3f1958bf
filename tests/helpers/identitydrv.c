/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for identity/ against the API-server emulator: runs an Identity on an sd_event loop,
 * and, once the kubeconfig is usable, a probe client made from it that LISTs the node every
 * --probe-interval — the way the daemon's own client lives on across renewals (credentials reloaded,
 * never re-created) and reports 401s back (identity_unauthorized()). SIGUSR1 asks for a renewal (what
 * a CA rotation does). With --token-config, token sync runs on the probe client too (files below
 * --root); SIGUSR2 resyncs every token (what a service-account-key rotation does). Runs until
 * SIGTERM/SIGINT.
 *
 *   identitydrv --kubeconfig P --bootstrap-kubeconfig B --gna-dir D [--gna-server URL] --node N
 *               [--probe-interval D] [--token-config FILE --root DIR]
 *
 * Prints one JSON object per line on stdout (flushed):
 *   {"event":"start","usable":bool}   {"event":"changed"|"failed","status":S,"failure":CODE}
 *   {"event":"probe","status":HTTP,"error":E,"token_writes":N,"token_failures":N}
 * Timings come from INPLACE_AGENT_KUBE_TUNING like in the agent. Exit status 0, 1 on setup errors. */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "identity/identity.h"
#include "identity/token-sync.h"
#include "kube/kube-client.h"
#include "kube/kubeconfig.h"
#include "net/http.h"
#include "util/log.h"
#include "util/time-util.h"

typedef struct Ctx {
        sd_event *event;
        Identity *identity;
        KubeClient *probe;
        KubeRequest *request;
        sd_event_source *timer;
        const char *kubeconfig;
        const char *node;
        char *probe_path;
        const KubeTuning *tuning;
        Http *http;
        uint64_t interval;
        const char *token_config;
        const char *root;
        TokenSync *tokens;
} Ctx;

static void emit(json_t *j) {
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

        if (s) {
                printf("%s\n", s);
                fflush(stdout);
        }
        free(s);
        json_decref(j);
}

static void probe_ensure(Ctx *c) {
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_free_ char *error = NULL;

        if (c->probe || kubeconfig_load(c->kubeconfig, &kc, &error) < 0)
                return;
        if (kube_client_new(c->event, c->http, kc, c->tuning, &c->probe) < 0) {
                c->probe = NULL;
                return;
        }
        if (c->token_config) {
                TokenSyncConfigs cfg = {};

                if (token_sync_configs_load(c->token_config, &cfg, &error) < 0 ||
                    token_sync_new(c->probe, c->root ?: "/", "kube-system", &cfg, &c->tokens) < 0 ||
                    token_sync_start(c->tokens) < 0)
                        fprintf(stderr, "token sync: %s\n", strempty(error));
                token_sync_configs_clear(&cfg);
        }
}

static void on_probe(KubeRequest *req, int error, json_t *object, void *userdata) {
        Ctx *c = userdata;
        long status = kube_request_get_status(req);

        emit(json_pack("{s:s, s:i, s:i, s:i, s:i}", "event", "probe", "status", (int) status, "error", error,
                       "token_writes", c->tokens ? (int) token_sync_writes(c->tokens) : 0, "token_failures",
                       c->tokens ? (int) token_sync_failures(c->tokens) : 0));
        c->request = kube_request_free(c->request);
        if (status == 401)
                identity_unauthorized(c->identity);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Ctx *c = userdata;

        probe_ensure(c);
        if (c->probe && !c->request)
                IGNORE_RESULT(kube_client_get(c->probe, c->probe_path, on_probe, c,
                                              &c->request)); /* the next tick probes again */
        (void) sd_event_source_set_time_relative(s, c->interval);
        return sd_event_source_set_enabled(s, SD_EVENT_ON);
}

static void on_identity(Identity *id, IdentityEvent ev, void *userdata) {
        Ctx *c = userdata;
        UpdateFailureCode f = identity_failure(id);

        if (ev == IDENTITY_CHANGED && c->probe)
                (void) kube_client_reload_credentials(c->probe);
        emit(json_pack("{s:s, s:s?, s:s?}", "event", ev == IDENTITY_CHANGED ? "changed" : "failed", "status",
                       identity_status(id), "failure", update_failure_code_to_string(f)));
}

static int on_usr2(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Ctx *c = userdata;

        if (c->tokens)
                IGNORE_RESULT(token_sync_resync(c->tokens, NULL, NULL)); /* the test waits for the file */
        return 0;
}

static int on_usr1(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Ctx *c = userdata;

        return identity_renew(c->identity, NULL);
}

int main(int argc, char **argv) {
        static const struct option options[] = { { "kubeconfig", required_argument, NULL, 'k' },
                                                 { "bootstrap-kubeconfig", required_argument, NULL, 'b' },
                                                 { "gna-dir", required_argument, NULL, 'g' },
                                                 { "gna-server", required_argument, NULL, 's' },
                                                 { "node", required_argument, NULL, 'n' },
                                                 { "probe-interval", required_argument, NULL, 'i' },
                                                 { "token-config", required_argument, NULL, 't' },
                                                 { "root", required_argument, NULL, 'r' },
                                                 {} };
        IdentityParams p = {};
        KubeTuning tuning;
        _cleanup_free_ char *terr = NULL;
        Ctx c = { .interval = 300 * USEC_PER_MSEC };
        int opt, r;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (opt) {
                case 'k':
                        p.kubeconfig = optarg;
                        break;
                case 'b':
                        p.bootstrap_kubeconfig = optarg;
                        break;
                case 'g':
                        p.gna_directory = optarg;
                        break;
                case 's':
                        p.gna_server = optarg;
                        break;
                case 'n':
                        p.node_name = optarg;
                        break;
                case 't':
                        c.token_config = optarg;
                        break;
                case 'r':
                        c.root = optarg;
                        break;
                case 'i':
                        if (parse_duration(optarg, &c.interval) < 0)
                                return 2;
                        break;
                default:
                        return 2;
                }
        if (!p.kubeconfig || !p.bootstrap_kubeconfig || !p.gna_directory || !p.node_name)
                return 2;
        log_set_max_level(LOG_DEBUG);
        kube_tuning_init(&tuning);
        if (kube_tuning_parse(&tuning, getenv(KUBE_TUNING_ENV), &terr) < 0) {
                fprintf(stderr, "%s\n", terr);
                return 1;
        }
        c.kubeconfig = p.kubeconfig;
        c.node = p.node_name;
        c.tuning = &tuning;
        if (asprintf(&c.probe_path, "/api/v1/nodes?fieldSelector=metadata.name%%3D%s", p.node_name) < 0)
                return 1;
        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGUSR1);
        sigaddset(&ss, SIGUSR2);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        if (sd_event_default(&c.event) < 0 || http_new(c.event, &c.http) < 0 ||
            sd_event_add_signal(c.event, NULL, SIGTERM, NULL, NULL) < 0 ||
            sd_event_add_signal(c.event, NULL, SIGINT, NULL, NULL) < 0 ||
            sd_event_add_signal(c.event, NULL, SIGUSR1, on_usr1, &c) < 0 ||
            sd_event_add_signal(c.event, NULL, SIGUSR2, on_usr2, &c) < 0 ||
            identity_new(c.event, c.http, &tuning, &p, on_identity, &c, &c.identity) < 0)
                return 1;
        r = identity_start(c.identity);
        emit(json_pack("{s:s, s:b}", "event", "start", "usable", r > 0));
        if (sd_event_add_time_relative(c.event, &c.timer, CLOCK_MONOTONIC, 0, 0, on_tick, &c) < 0)
                return 1;
        r = sd_event_loop(c.event);
        kube_request_free(c.request);
        token_sync_free(c.tokens);
        kube_client_free(c.probe);
        identity_free(c.identity);
        sd_event_source_disable_unref(c.timer);
        http_free(c.http);
        sd_event_unref(c.event);
        free(c.probe_path);
        return r < 0 ? 1 : 0;
}
