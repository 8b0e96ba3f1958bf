/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for kube-client and kube-events against the API-server emulator: runs the given
 * commands one after the other on an sd_event loop, each to completion, and prints one JSON object
 * per request on stdout (flushed).
 *
 *   kubedrv --kubeconfig PATH [--node NAME] [--uid UID] COMMAND... where COMMAND is one of
 *     get PATH | delete PATH | post PATH JSON | put PATH JSON
 *     patch merge|strategic|json|apply PATH JSON
 *     event Normal|Warning REASON MESSAGE     queue an Event about the node (not waited for)
 *     flush                                   wait until every queued Event was sent or dropped
 *     sleep DURATION                          let time pass (e.g. between two identical Events)
 *
 * Request lines: {"cmd","path","error","errno","status","reason","message","attempts","elapsed_ms"}.
 * Timings come from INPLACE_AGENT_KUBE_TUNING like in the agent. Exit status: 0 when all commands
 * ran (the JSON tells the outcome), 1 on setup errors, 2 on usage errors. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <systemd/sd-event.h>

#include "kube/kube-client.h"
#include "kube/kube-events.h"
#include "kube/kube-tuning.h"
#include "kube/kubeconfig.h"
#include "net/http.h"
#include "util/time-util.h"

typedef struct Ctx {
        sd_event *event;        /* ref held */
        KubeClient *client;     /* owned */
        KubeEvents *events;     /* owned */
        KubeRequest *request;   /* owned: in flight */
        sd_event_source *timer; /* owned */
        char **argv;            /* borrowed */
        int argc, next;
        uint64_t started_usec;
        const char *cmd; /* borrowed */
} Ctx;

static void run_next(Ctx *c);

static uint64_t now_usec(Ctx *c) {
        uint64_t t = 0;

        (void) sd_event_now(c->event, CLOCK_MONOTONIC, &t);
        return t;
}

static void emit(json_t *j) {
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

        if (s) {
                printf("%s\n", s);
                fflush(stdout);
        }
        free(s);
        json_decref(j);
}

static void on_request_done(KubeRequest *req, int error, json_t *object, void *userdata) {
        Ctx *c = userdata;
        uint64_t elapsed = now_usec(c) - c->started_usec;

        emit(json_pack("{s:s, s:s, s:i, s:s?, s:i, s:s?, s:s?, s:i, s:I, s:O?}", "cmd", c->cmd, "path",
                       kube_request_get_path(req), "error", error, "errno",
                       error < 0 ? strerrorname_np(-error) : NULL, "status",
                       (int) kube_request_get_status(req), "reason", kube_request_get_reason(req), "message",
                       kube_request_get_message(req), "attempts", (int) kube_request_get_attempts(req),
                       "elapsed_ms", (json_int_t) (elapsed / USEC_PER_MSEC), "object",
                       error >= 0 ? object : NULL));
        c->request = kube_request_free(c->request);
        run_next(c);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Ctx *c = userdata;

        c->timer = sd_event_source_disable_unref(c->timer);
        if (streq(c->cmd, "flush") && kube_events_pending(c->events) > 0)
                return sd_event_add_time_relative(c->event, &c->timer, CLOCK_MONOTONIC, 20 * USEC_PER_MSEC,
                                                  1, on_timer, c);
        run_next(c);
        return 0;
}

static int need(Ctx *c, int n) {
        if (c->next + n > c->argc) {
                fprintf(stderr, "kubedrv: %s needs %d argument(s)\n", c->cmd, n);
                return -EINVAL;
        }
        return 0;
}

static int start_command(Ctx *c) {
        _cleanup_(json_decrefp) json_t *body = NULL;
        const char *path;
        int r;

        c->cmd = c->argv[c->next++];
        c->started_usec = now_usec(c);

        if (streq(c->cmd, "get") || streq(c->cmd, "delete")) {
                if ((r = need(c, 1)) < 0)
                        return r;
                path = c->argv[c->next++];
                return (streq(c->cmd, "get") ? kube_client_get : kube_client_delete)(
                        c->client, path, on_request_done, c, &c->request);
        }
        if (streq(c->cmd, "post") || streq(c->cmd, "put") || streq(c->cmd, "patch")) {
                KubePatchType type = KUBE_PATCH_MERGE;

                if (streq(c->cmd, "patch")) {
                        static const char *const names[] = { "merge", "strategic", "json", "apply" };

                        if ((r = need(c, 1)) < 0)
                                return r;
                        type = _KUBE_PATCH_TYPE_INVALID;
                        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                                if (streq(c->argv[c->next], names[i]))
                                        type = (KubePatchType) i;
                        if (type < 0)
                                return -EINVAL;
                        c->next++;
                }
                if ((r = need(c, 2)) < 0)
                        return r;
                path = c->argv[c->next++];
                body = json_loads(c->argv[c->next++], JSON_DECODE_ANY, NULL);
                if (!body)
                        return -EINVAL;
                if (streq(c->cmd, "post"))
                        return kube_client_post(c->client, path, body, on_request_done, c, &c->request);
                if (streq(c->cmd, "put"))
                        return kube_client_put(c->client, path, body, on_request_done, c, &c->request);
                return kube_client_patch(c->client, path, type, body, on_request_done, c, &c->request);
        }
        if (streq(c->cmd, "event")) {
                if ((r = need(c, 3)) < 0)
                        return r;
                r = kube_events_emit(c->events, c->argv[c->next], c->argv[c->next + 1],
                                     c->argv[c->next + 2]);
                emit(json_pack("{s:s, s:i, s:s?}", "cmd", "event", "error", r, "errno",
                               r < 0 ? strerrorname_np(-r) : NULL));
                c->next += 3;
                return sd_event_add_time_relative(c->event, &c->timer, CLOCK_MONOTONIC, 0, 1, on_timer, c);
        }
        if (streq(c->cmd, "flush"))
                return sd_event_add_time_relative(c->event, &c->timer, CLOCK_MONOTONIC, 0, 1, on_timer, c);
        if (streq(c->cmd, "sleep")) {
                uint64_t d;

                if ((r = need(c, 1)) < 0)
                        return r;
                if (parse_duration(c->argv[c->next++], &d) < 0)
                        return -EINVAL;
                return sd_event_add_time_relative(c->event, &c->timer, CLOCK_MONOTONIC, d, 1, on_timer, c);
        }
        fprintf(stderr, "kubedrv: unknown command %s\n", c->cmd);
        return -EINVAL;
}

static void run_next(Ctx *c) {
        int r;

        if (c->next >= c->argc) {
                (void) sd_event_exit(c->event, 0);
                return;
        }
        r = start_command(c);
        if (r < 0) {
                emit(json_pack("{s:s, s:i, s:s}", "cmd", c->cmd, "error", r, "errno", strerrorname_np(-r)));
                (void) sd_event_exit(c->event, r == -EINVAL ? 2 : 0);
        }
}

int main(int argc, char *argv[]) {
        static const struct option options[] = { { "kubeconfig", required_argument, NULL, 'k' },
                                                 { "node", required_argument, NULL, 'n' },
                                                 { "uid", required_argument, NULL, 'u' },
                                                 {} };
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_free_ char *error = NULL;
        const char *kubeconfig = NULL, *node = "n1", *uid = NULL;
        Http *http = NULL;
        KubeTuning tuning;
        Ctx c = {};
        int opt, r, ret;

        while ((opt = getopt_long(argc, argv, "+", options, NULL)) >= 0)
                switch (opt) {
                case 'k':
                        kubeconfig = optarg;
                        break;
                case 'n':
                        node = optarg;
                        break;
                case 'u':
                        uid = optarg;
                        break;
                default:
                        return 2;
                }
        if (!kubeconfig || optind >= argc) {
                fprintf(stderr, "usage: kubedrv --kubeconfig PATH [--node NAME] [--uid UID] COMMAND...\n");
                return 2;
        }

        kube_tuning_init(&tuning);
        if (kube_tuning_parse(&tuning, getenv(KUBE_TUNING_ENV), &error) < 0 ||
            kubeconfig_load(kubeconfig, &kc, &error) < 0) {
                fprintf(stderr, "kubedrv: %s\n", strempty(error));
                return 1;
        }

        if (sd_event_default(&c.event) < 0 || http_new(c.event, &http) < 0 ||
            kube_client_new(c.event, http, kc, &tuning, &c.client) < 0 ||
            kube_events_new(c.client, "inplace-agent", node, &c.events) < 0 ||
            (uid && kube_events_set_node_uid(c.events, uid) < 0)) {
                fprintf(stderr, "kubedrv: setup failed\n");
                return 1;
        }
        c.argv = argv;
        c.argc = argc;
        c.next = optind;

        run_next(&c);
        r = sd_event_loop(c.event);
        ret = r < 0 ? 1 : r;

        kube_request_free(c.request);
        sd_event_source_disable_unref(c.timer);
        kube_events_free(c.events);
        kube_client_free(c.client);
        http_free(http);
        sd_event_unref(c.event);
        return ret;
}
