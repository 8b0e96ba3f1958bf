/* SPDX-License-Identifier: Apache-2.0 */
/* The Manager as the daemon runs it, against what a unit test can give it: a notification socket of
 * the test's, either no system bus (an address nobody listens on) or the fake systemd as the system
 * bus (tests/helpers/fake-systemd.h, listen mode), and either no kubeconfig or one naming a small
 * fake API server over HTTPS (FakeApi below, on tests/helpers/fake-http.h with TLS). It is built,
 * runs, says what it waits for (READY=1, STATUS=: a bootstrap credential), brings its systemd side
 * up (Subscribe) and back after the bus went away, takes up its Node (labels, condition, Lease),
 * applies the OSC Secret the Node names, carries out the restart annotation, stops on SIGTERM
 * (STOPPING=1) also in the middle of an apply and resumes it, and frees everything; a set-up error
 * names its cause and leaves the configuration the caller's. Each case waits for its condition on the
 * Manager's own loop, with a deadline. */
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/config.h"
#include "core/node-view.h"
#include "daemon/manager.h"
#include "fake-http.h"
#include "fake-systemd.h"
#include "tests.h"
#include "update/state-file.h"
#include "util/base64.h"
#include "util/fileio.h"
#include "util/json-util.h"
#include "util/string-util.h"

typedef struct FakeApi FakeApi;

/* A case's Manager with the fake systemd as its system bus and the fake API server (FakeApi below), all
 * on this thread's default loop; released by the teardown also when the case failed half-way (a
 * leftover loop would be the next case's default one). */
typedef struct World {
        sd_event *event;
        FakeSystemd *systemd;
        FakeApi *api;
        Manager *m;
} World;

typedef struct Env {
        char dir[64];
        char *state;
        Config *config;
        KubeTuning tuning;
        int notify_fd;
        char *said; /* the notifications received so far */
        World world;
} Env;

static void world_done(World *w);

/* A configuration as the daemon would finalize it, everything below the case's directory: the state
 * directory, the kubeconfig, osc.rootDirectory, the unit directory, os-release. */
static Config *env_config(Env *env) {
        _cleanup_free_ char *kubeconfig = NULL, *root = NULL, *units = NULL;
        Config *config;

        assert_true(asprintf(&kubeconfig, "%s/kubeconfig", env->dir) > 0);
        assert_true(asprintf(&root, "%s/root", env->dir) > 0);
        assert_true(asprintf(&units, "%s/units", env->dir) > 0);
        assert_int_equal(config_new(&config), 0);
        assert_int_equal(config_finalize(config,
                                         &(ConfigOverrides) { .node_name = "node-1",
                                                              .state_dir = env->state,
                                                              .kubeconfig = kubeconfig },
                                         NULL),
                         0);
        assert_int_equal(free_and_strdup(&config->osc.root_directory, root), 0);
        assert_int_equal(free_and_strdup(&config->systemd.unit_directory, units), 0);
        free(config->os_release);
        assert_true(asprintf(&config->os_release, "%s/os-release", env->dir) > 0);
        return config;
}

static int setup(void **state) {
        Env *env = calloc(1, sizeof(Env));
        _cleanup_free_ char *bus = NULL, *root = NULL, *units = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        sigset_t ss;

        assert_non_null(env);
        strcpy(env->dir, "/tmp/test-manager-XXXXXX");
        assert_non_null(mkdtemp(env->dir));
        assert_true(asprintf(&env->state, "%s/state", env->dir) > 0);
        assert_true(asprintf(&root, "%s/root", env->dir) > 0);
        assert_int_equal(mkdir(root, 0755), 0);
        assert_true(asprintf(&units, "%s/units", env->dir) > 0);
        assert_int_equal(mkdir(units, 0755), 0);
        env->config = env_config(env);
        kube_tuning_init(&env->tuning);

        /* No system bus: the manager retries it in the background. */
        assert_true(asprintf(&bus, "unix:path=%s/no-bus", env->dir) > 0);
        assert_int_equal(setenv("DBUS_SYSTEM_BUS_ADDRESS", bus, 1), 0);
        /* The notifications come to us. */
        env->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(env->notify_fd >= 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", env->dir);
        assert_int_equal(bind(env->notify_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
        /* As main.c does before manager_new(). */
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        sigaddset(&ss, SIGCHLD);
        assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        *state = env;
        return 0;
}

static int teardown(void **state) {
        Env *env = *state;

        world_done(&env->world);
        (void) unsetenv("NOTIFY_SOCKET");
        (void) unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
        close(env->notify_fd);
        config_free(env->config);
        assert_int_equal(osc_remove_tree(env->dir), 0);
        free(env->state);
        free(env->said);
        free(env);
        return 0;
}

/* Takes the notifications waiting on the socket into env->said: the socket holds only a few
 * (net.unix.max_dgram_qlen, often 10), and sd_notify() blocks the Manager when it is full. */
static void drain_notifications(Env *env) {
        char buf[4096];
        ssize_t n;

        while ((n = recv(env->notify_fd, buf, sizeof(buf) - 1, 0)) > 0) {
                char *grown;

                buf[n] = 0;
                assert_true(asprintf(&grown, "%s%s\n", strempty(env->said), buf) > 0);
                free(env->said);
                env->said = grown;
        }
}

static int on_notification(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        drain_notifications(userdata);
        return 0;
}

/* Every notification so far, one per line. */
static char *notifications(Env *env) {
        char *all;

        drain_notifications(env);
        all = strdup(strempty(env->said));
        assert_non_null(all);
        return all;
}

static void assert_contains(const char *haystack, const char *needle) {
        if (!strstr(haystack, needle))
                fail_msg("\"%s\" lacks \"%s\"", haystack, needle);
}

static void test_new_error_leaves_the_config(void **state) {
        Env *env = *state;
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL;
        Config *config = env->config;

        /* A state directory that is a file: the executor cannot load its state. */
        assert_int_equal(write_file_atomic(env->state, "x", 1, 0600), 0);
        assert_true(manager_new(&env->config, &env->tuning, &m, &error) < 0);
        assert_null(m);
        assert_ptr_equal(env->config, config); /* still the caller's, freed by teardown */
        assert_non_null(error);
        assert_contains(error, env->state);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) raise(SIGTERM);
        return 0;
}

static void test_runs_without_api_server_and_stops(void **state) {
        Env *env = *state;
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(sd_event_source_unrefp) sd_event_source *timer = NULL; /* before the manager and loop */

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        assert_null(env->config); /* the manager's now */
        /* The manager's loop is this thread's default one: SIGTERM after a while. */
        assert_int_equal(sd_event_default(&event), 0);
        assert_int_equal(sd_event_add_time_relative(event, &timer, CLOCK_MONOTONIC, 500 * USEC_PER_MSEC, 0,
                                                    on_timer, NULL),
                         0);
        assert_int_equal(manager_run(m), 0);

        said = notifications(env);
        assert_contains(said, "READY=1");
        assert_contains(said, "STATUS=Waiting for node node-1");
        assert_contains(said, "STOPPING=1");
        /* What it waits for: a credential to bootstrap its client certificate with. */
        assert_contains(said, "no bootstrap credential");
}

static unsigned count(const char *haystack, const char *needle) {
        unsigned n = 0;

        for (const char *p = haystack; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

/* A case's script runs every 10 ms until it raises SIGTERM. */
static int step_again(sd_event_source *s) {
        return sd_event_source_set_time_relative(s, 10 * USEC_PER_MSEC) < 0 ?
                0 :
                sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
}

/* Runs the Manager with the case's script; SIGTERM after 10 s at the latest. */
static void run_script(Env *env, Manager *m, sd_event *event, sd_event_time_handler_t script,
                       void *userdata) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *step = NULL, *deadline = NULL, *notify = NULL;

        assert_int_equal(sd_event_add_io(event, &notify, env->notify_fd, EPOLLIN, on_notification, env), 0);
        assert_int_equal(sd_event_add_time_relative(event, &step, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 0,
                                                    script, userdata),
                         0);
        assert_int_equal(sd_event_add_time_relative(event, &deadline, CLOCK_MONOTONIC, 10 * USEC_PER_SEC, 0,
                                                    on_timer, NULL),
                         0);
        assert_int_equal(manager_run(m), 0);
}

typedef struct BusScript {
        FakeSystemd *fake;
        bool dropped; /* the bus went away once */
        bool done;    /* subscribed again after it: SIGTERM sent */
} BusScript;

/* Every 10 ms: once the Manager subscribed, the bus goes away; once it subscribed again, SIGTERM. */
static int on_bus_step(sd_event_source *s, uint64_t usec, void *userdata) {
        BusScript *b = userdata;
        unsigned n = count(fake_systemd_calls(b->fake), "Subscribe");

        if (!b->dropped && n == 1) {
                fake_systemd_disconnect(b->fake);
                b->dropped = true;
        } else if (b->dropped && n == 2) {
                b->done = true;
                (void) raise(SIGTERM);
                return 0;
        }
        return step_again(s);
}

/* The fake systemd as the system bus, on the loop the Manager will take (this thread's default). */
static FakeSystemd *systemd_on_the_bus(Env *env, sd_event **ret_event) {
        _cleanup_free_ char *path = NULL, *address = NULL;
        FakeSystemd *fake;

        assert_true(sd_event_default(ret_event) >= 0);
        assert_true(asprintf(&path, "%s/system_bus_socket", env->dir) > 0);
        (void) unlink(path); /* a previous fake's, in a case that runs the Manager twice */
        assert_int_equal(fake_systemd_listen(*ret_event, path, &fake), 0);
        assert_true(asprintf(&address, "unix:path=%s", path) > 0);
        assert_int_equal(setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1), 0);
        return fake;
}

static void test_systemd_side_up_and_back(void **state) {
        Env *env = *state;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(fake_systemd_freep) FakeSystemd *fake = systemd_on_the_bus(env, &event);
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL;
        BusScript script = { .fake = fake };

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        run_script(env, m, event, on_bus_step, &script);

        if (!script.dropped)
                fail_msg("no Subscribe: \"%s\"", fake_systemd_calls(fake));
        if (!script.done)
                fail_msg("no second Subscribe after the bus came back: \"%s\"", fake_systemd_calls(fake));
        assert_int_equal(count(fake_systemd_calls(fake), "Hello"), 2);
        said = notifications(env);
        assert_contains(said, "READY=1");
        assert_contains(said, "STOPPING=1");
}

/* SIGTERM once `unit` has a job (held: the apply waits for it). */
typedef struct JobScript {
        FakeSystemd *fake;
        const char *unit;
        bool done;
} JobScript;

static int on_job_step(sd_event_source *s, uint64_t usec, void *userdata) {
        JobScript *j = userdata;

        if (fake_systemd_n_jobs(j->fake, j->unit) > 0) {
                j->done = true;
                (void) raise(SIGTERM);
                return 0;
        }
        return step_again(s);
}

/* SIGTERM in the middle of an apply: the drift round at start (no API server needed) finds the
 * last-applied OSC's unit file gone and repairs it through the executor's OSC runner; the unit's
 * restart is held by systemd when the signal comes. The Manager stops cleanly, freeing the runner
 * with its job in flight (the sanitizer run checks for leaks and use-after-free). */
static void test_sigterm_during_an_apply(void **state) {
        Env *env = *state;
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_(fake_systemd_freep) FakeSystemd *fake = systemd_on_the_bus(env, &event);
        _cleanup_(manager_freep) Manager *m = NULL;
        _cleanup_free_ char *error = NULL, *said = NULL, *applied = NULL, *units = NULL, *unit_file = NULL;
        static const char osc[] = "spec: {units: [{name: x.service,"
                                  " content: \"[Service]\\nExecStart=/bin/true\\n\"}]}";
        JobScript script = { .fake = fake, .unit = "x.service" };

        assert_int_equal(fake_systemd_add_unit(fake, "x.service", FAKE_HELD), 0);
        assert_int_equal(mkdir(env->state, 0700), 0);
        assert_true(asprintf(&applied, "%s/%s", env->state, OSC_STATE_LAST_APPLIED) > 0);
        assert_int_equal(write_file_atomic(applied, osc, strlen(osc), 0600), 0);
        assert_true(asprintf(&units, "%s/units", env->dir) > 0);

        assert_int_equal(manager_new(&env->config, &env->tuning, &m, &error), 0);
        run_script(env, m, event, on_job_step, &script);

        if (!script.done)
                fail_msg("no job for x.service: \"%s\"", fake_systemd_calls(fake));
        assert_true(asprintf(&unit_file, "%s/x.service", units) > 0);
        assert_int_equal(access(unit_file, F_OK), 0); /* the repair had begun */
        assert_contains(fake_systemd_calls(fake), "RestartUnit:x.service");
        said = notifications(env);
        assert_contains(said, "STOPPING=1");
}

/* The API server, as far as the Manager needs one: a small stateful server on the canned-response
 * server's HTTPS (the kubeconfig names https:// servers only). It keeps our Node, the OSC Secret and
 * the Lease under one resourceVersion counter, and answers LIST, WATCH, GET, PATCH (merge; strategic
 * as a merge with conditions by type; JSON patch with "test"), POST and PUT; anything else 404. A
 * WATCH waits, unanswered, until its object changed past the watch's resourceVersion, then gets that
 * one event and a clean end: the client re-watches at once from there (kube-watch.h). */
struct FakeApi {
        FakeHttp *http;
        sd_event_source *wake; /* wakes the waiting watches after a change */
        uint64_t rv;
        json_t *node;   /* NULL: no Node */
        json_t *secret; /* NULL: no OSC Secret */
        json_t *lease;  /* NULL: none yet */
        char *answer;   /* the last body answered, borrowed by the server */
};

static bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

#define NODE_PATH "/api/v1/nodes"
#define SECRET_PATH "/api/v1/namespaces/kube-system/secrets"
#define JSON_HEADERS "Content-Type: application/json\r\n"

static int api_on_wake(sd_event_source *s, void *userdata) {
        FakeApi *a = userdata;

        fake_http_wake(a->http);
        return 0;
}

/* `o` changed: a new resourceVersion. The waiting watches hear it from the loop, not from inside the
 * server's handler, which may be serving one of them. */
static void api_bump(FakeApi *a, json_t *o) {
        char rv[32];

        snprintf(rv, sizeof(rv), "%" PRIu64, ++a->rv);
        assert_int_equal(
                json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv)), 0);
        assert_true(sd_event_source_set_enabled(a->wake, SD_EVENT_ONESHOT) >= 0);
}

static uint64_t object_rv(const json_t *o) {
        const char *rv =
                json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));

        return rv ? strtoull(rv, NULL, 10) : 0;
}

/* Answers `body` (stolen), as one JSON document or, for a watch, one event line in a chunked stream. */
static bool api_reply(FakeApi *a, FakeResponse *ret, int status, json_t *body, bool stream) {
        _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);

        json_decref(body);
        assert_non_null(text);
        free(a->answer);
        assert_true(asprintf(&a->answer, "%s%s", text, stream ? "\n" : "") > 0);
        *ret = (FakeResponse) {
                .status = status, .headers = JSON_HEADERS, .body = a->answer, .chunked = stream
        };
        return true;
}

static bool api_status(FakeApi *a, FakeResponse *ret, int status, const char *reason) {
        return api_reply(a, ret, status,
                         json_pack("{s:s, s:s, s:i, s:s}", "kind", "Status", "status", "Failure", "code",
                                   status, "reason", reason),
                         /* stream= */ false);
}

/* LIST or WATCH of a collection holding at most the one object `o`. */
static bool api_collection(FakeApi *a, const char *path, json_t *o, const char *kind, FakeResponse *ret) {
        const char *since = strstr(path, "resourceVersion=");
        json_t *list;
        char rv[32];

        if (strstr(path, "watch=1")) {
                if (!o || object_rv(o) <= (since ? strtoull(since + 16, NULL, 10) : 0))
                        return false; /* nothing new: the watch waits */
                return api_reply(a, ret, 200, json_pack("{s:s, s:O}", "type", "MODIFIED", "object", o),
                                 /* stream= */ true);
        }
        snprintf(rv, sizeof(rv), "%" PRIu64, a->rv);
        list = json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", kind, "apiVersion", "v1", "metadata",
                         "resourceVersion", rv, "items");
        if (o)
                assert_int_equal(json_array_append(json_object_get(list, "items"), o), 0);
        return api_reply(a, ret, 200, list, /* stream= */ false);
}

static void merge_conditions(json_t *target, json_t *patch) {
        size_t i, j;
        json_t *p, *t;

        json_array_foreach(patch, i, p) {
                const char *type = json_string_value(json_object_get(p, "type"));
                bool found = false;

                json_array_foreach(target, j, t)
                        if (streq_ptr(json_string_value(json_object_get(t, "type")), type)) {
                                assert_int_equal(json_object_update(t, p), 0);
                                found = true;
                        }
                if (!found)
                        assert_int_equal(json_array_append(target, p), 0);
        }
}

/* RFC 7386, and for a strategic merge patch its directives skipped and conditions merged by type. */
static void merge_patch(json_t *target, json_t *patch) {
        const char *k;
        json_t *v;

        json_object_foreach(patch, k, v) {
                json_t *t = json_object_get(target, k);

                if (k[0] == '$')
                        continue;
                if (json_is_null(v))
                        (void) json_object_del(target, k);
                else if (json_is_object(v)) {
                        if (!json_is_object(t)) {
                                t = json_object();
                                assert_int_equal(json_object_set_new(target, k, t), 0);
                        }
                        merge_patch(t, v);
                } else if (streq(k, "conditions") && json_is_array(t) && json_is_array(v))
                        merge_conditions(t, v);
                else
                        assert_int_equal(json_object_set(target, k, v), 0);
        }
}

/* The object a JSON pointer's parent names, and the last token (unescaped) in *key. */
static json_t *pointer_parent(json_t *root, const char *pointer, char **key) {
        _cleanup_free_ char *copy = strdup(pointer);
        char *token, *save = NULL;
        json_t *o = root, *parent = NULL;

        assert_non_null(copy);
        for (token = strtok_r(copy, "/", &save); token; token = strtok_r(NULL, "/", &save)) {
                char *w = token;

                for (char *r = token; *r; r++) /* ~1 is '/', ~0 is '~' */
                        *w++ = r[0] == '~' && (r[1] == '0' || r[1] == '1') ? (*++r == '1' ? '/' : '~') : *r;
                *w = '\0';
                free(*key);
                *key = strdup(token);
                parent = o;
                o = json_object_get(o, token);
        }
        return parent;
}

/* RFC 6902 add, replace, remove and test on objects; false when an operation does not apply (the
 * server's 422). */
static bool json_patch(json_t *target, json_t *ops) {
        size_t i;
        json_t *op;

        json_array_foreach(ops, i, op) {
                const char *name = json_string_value(json_object_get(op, "op"));
                json_t *value = json_object_get(op, "value");
                _cleanup_free_ char *key = NULL;
                json_t *parent =
                        pointer_parent(target, json_string_value(json_object_get(op, "path")), &key);
                json_t *cur = parent ? json_object_get(parent, key) : NULL;

                if (!json_is_object(parent))
                        return false;
                if (streq(name, "test") && !json_equal(cur, value))
                        return false;
                if ((streq(name, "remove") || streq(name, "replace")) && !cur)
                        return false;
                if (streq(name, "remove"))
                        assert_int_equal(json_object_del(parent, key), 0);
                else if (streq(name, "add") || streq(name, "replace"))
                        assert_int_equal(json_object_set(parent, key, value), 0);
        }
        return true;
}

static bool api_patch_node(FakeApi *a, const char *request, const char *body, FakeResponse *ret) {
        _cleanup_(json_decrefp) json_t *patch = json_loads(body, 0, NULL);
        _cleanup_(json_decrefp) json_t *patched = NULL;

        if (!a->node)
                return api_status(a, ret, 404, "NotFound");
        assert_non_null(patch);
        patched = json_deep_copy(a->node);
        if (strcasestr(request, "Content-Type: application/json-patch+json")) {
                if (!json_patch(patched, patch))
                        return api_status(a, ret, 422, "Invalid");
        } else
                merge_patch(patched, patch);
        json_decref(a->node);
        a->node = json_incref(patched);
        api_bump(a, a->node);
        return api_reply(a, ret, 200, json_incref(a->node), /* stream= */ false);
}

/* The Lease: created (POST) and renewed (PUT) as sent. */
static bool api_lease(FakeApi *a, const char *method, const char *body, FakeResponse *ret) {
        if (streq(method, "GET"))
                return a->lease ? api_reply(a, ret, 200, json_incref(a->lease), /* stream= */ false) :
                                  api_status(a, ret, 404, "NotFound");
        if (streq(method, "POST") && a->lease)
                return api_status(a, ret, 409, "AlreadyExists");
        json_decref(a->lease);
        a->lease = json_loads(body, 0, NULL);
        assert_non_null(a->lease);
        if (!json_object_get(a->lease, "metadata"))
                assert_int_equal(json_object_set_new(a->lease, "metadata", json_object()), 0);
        api_bump(a, a->lease);
        return api_reply(a, ret, streq(method, "POST") ? 201 : 200, json_incref(a->lease),
                         /* stream= */ false);
}

static bool api_handle(const char *request, FakeResponse *ret, void *userdata) {
        FakeApi *a = userdata;
        char method[16], path[2048];
        const char *body = strstr(request, "\r\n\r\n") + 4;

        assert_int_equal(sscanf(request, "%15s %2047s", method, path), 2);
        if (startswith(path, NODE_PATH "?"))
                return api_collection(a, path, a->node, "NodeList", ret);
        if (startswith(path, SECRET_PATH "?"))
                return api_collection(a, path, a->secret, "SecretList", ret);
        if (streq(path, NODE_PATH "/node-1") || streq(path, NODE_PATH "/node-1/status")) {
                if (streq(method, "PATCH"))
                        return api_patch_node(a, request, body, ret);
                return a->node ? api_reply(a, ret, 200, json_incref(a->node), /* stream= */ false) :
                                 api_status(a, ret, 404, "NotFound");
        }
        if (strstr(path, "/leases"))
                return api_lease(a, method, body, ret);
        if (strstr(path, "/events") && (streq(method, "POST") || streq(method, "PATCH")))
                return api_reply(a, ret, streq(method, "POST") ? 201 : 200, json_loads(body, 0, NULL),
                                 /* stream= */ false);
        return api_status(a, ret, 404, "NotFound");
}

/* On the loop the Manager takes (this thread's default), with the Node `node` (a JSON text; NULL:
 * none); the kubeconfig env_config() names it, with its certificate as the CA and a token. */
static FakeApi *api_new(Env *env, const char *node) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_free_ char *ca = NULL, *kubeconfig = NULL, *path = NULL;
        const char *pem;
        FakeApi *a = calloc(1, sizeof(*a));

        assert_non_null(a);
        assert_true(sd_event_default(&event) >= 0);
        assert_int_equal(fake_http_new_tls(event, &a->http), 0);
        fake_http_set_handler(a->http, api_handle, a);
        assert_true(sd_event_add_defer(event, &a->wake, api_on_wake, a) >= 0);
        assert_true(sd_event_source_set_enabled(a->wake, SD_EVENT_OFF) >= 0);
        if (node) {
                a->node = json_loads(node, 0, NULL);
                assert_non_null(a->node);
                api_bump(a, a->node);
        }
        pem = fake_http_ca_pem(a->http);
        assert_int_equal(base64_encode(pem, strlen(pem), false, &ca), 0);
        assert_true(asprintf(&kubeconfig,
                             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                             "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:%u\", "
                             "certificate-authority-data: %s}}]\n"
                             "users: [{name: u, user: {token: t}}]\n"
                             "contexts: [{name: c, context: {cluster: c, user: u}}]\n",
                             fake_http_port(a->http), ca) > 0);
        assert_true(asprintf(&path, "%s/kubeconfig", env->dir) > 0); /* env_config()'s */
        assert_int_equal(write_file_atomic(path, kubeconfig, strlen(kubeconfig), 0600), 0);
        return a;
}

static FakeApi *api_free(FakeApi *a) {
        if (!a)
                return NULL;
        fake_http_free(a->http);
        sd_event_source_disable_unref(a->wake);
        json_decref(a->node);
        json_decref(a->secret);
        json_decref(a->lease);
        free(a->answer);
        free(a);
        return NULL;
}

/* The OSC Secret appears: `osc` (YAML) as osc.yaml, `checksum` as checksum/data-script. */
static void api_add_secret(FakeApi *a, const char *osc, const char *checksum) {
        _cleanup_free_ char *data = NULL;

        assert_int_equal(base64_encode(osc, strlen(osc), false, &data), 0);
        a->secret =
                json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1", "kind",
                          "Secret", "metadata", "name", "osc-1", "namespace", "kube-system", "uid", "s-1",
                          "annotations", "checksum/data-script", checksum, "data", "osc.yaml", data);
        assert_non_null(a->secret);
        api_bump(a, a->secret);
}

/* Request i (from 0) served so far; NULL past the last. */
static const char *api_request(FakeApi *a, unsigned i) {
        return fake_http_request(a->http, i);
}

/* Whether some request so far starts with `prefix` (its method and path) and contains `needle`. */
static bool api_saw(FakeApi *a, const char *prefix, const char *needle) {
        for (unsigned i = 0; api_request(a, i); i++)
                if (startswith(api_request(a, i), prefix) && (!needle || strstr(api_request(a, i), needle)))
                        return true;
        return false;
}

typedef bool (*Condition)(FakeApi *a, void *userdata);

typedef struct Until {
        FakeApi *api;
        Condition cond;
        void *userdata;
        bool met;
} Until;

static int on_until_step(sd_event_source *s, uint64_t usec, void *userdata) {
        Until *u = userdata;

        if (u->cond(u->api, u->userdata)) {
                u->met = true;
                (void) raise(SIGTERM);
                return 0;
        }
        return step_again(s);
}

/* Runs the case's Manager until `cond` holds, then stops it with SIGTERM; fails naming `what` (with the
 * requests the API server saw) when it did not hold within run_script()'s deadline. */
static void run_until(Env *env, Condition cond, void *userdata, const char *what) {
        FakeApi *a = env->world.api;
        Until u = { .api = a, .cond = cond, .userdata = userdata };

        run_script(env, env->world.m, env->world.event, on_until_step, &u);
        if (!u.met) {
                for (unsigned i = 0; api_request(a, i); i++)
                        fprintf(stderr, "request %u: %.300s\n", i, api_request(a, i));
                fail_msg("never: %s", what);
        }
}

static const char NODE_1[] =
        "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"node-1\","
        " \"uid\": \"u-1\", \"labels\": {}, \"annotations\": {}}}";

static json_t *node_field(FakeApi *a, const char *section, const char *key) {
        return json_object_get(json_object_get(json_object_get(a->node, "metadata"), section), key);
}

static const char *node_annotation(FakeApi *a, const char *key) {
        return json_string_value(node_field(a, "annotations", key));
}

static json_t *node_condition(FakeApi *a, const char *type) {
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(json_object_get(a->node, "status"), "conditions"), i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "type")), type))
                        return c;
        return NULL;
}

/* The Manager has taken up the Node: labelled it, said on it whether the OSC Secret is readable, and
 * holds its Lease. */
static bool node_taken_up(FakeApi *a, void *userdata) {
        return node_field(a, "labels", "node-role.kubernetes.io/worker") &&
                node_condition(a, "OSCSecretAvailable") && a->lease;
}

static Manager *manager_for(Env *env) {
        Manager *m = NULL;
        _cleanup_free_ char *error = NULL;

        if (!env->config)
                env->config = env_config(env);
        env->tuning.startup_delay_usec = 0; /* the first LIST at once */
        if (manager_new(&env->config, &env->tuning, &m, &error) < 0)
                fail_msg("manager_new: %s", strempty(error));
        return m;
}

static void world_init(World *w, Env *env, const char *node) {
        w->systemd = systemd_on_the_bus(env, &w->event);
        w->api = api_new(env, node);
        w->m = manager_for(env);
}

/* The Manager first: it holds requests to both fakes. */
static void world_done(World *w) {
        w->m = manager_free(w->m);
        w->api = api_free(w->api);
        w->systemd = fake_systemd_free(w->systemd);
        w->event = sd_event_unref(w->event);
}

/* The first contact: the Manager lists and watches its own Node through the kubeconfig's https://
 * server, and reports on it — the role label, the OSCSecretAvailable condition (no Secret is named
 * yet), the Lease owned by the Node — and says so in STATUS=. */
static void test_first_node(void **state) {
        Env *env = *state;
        World *w = &env->world;
        _cleanup_free_ char *said = NULL;
        FakeApi *a;
        json_t *owner;

        world_init(w, env, NODE_1);
        a = w->api;
        run_until(env, node_taken_up, NULL, "the Node labelled, its condition and Lease written");
        assert_true(api_saw(a, "GET " NODE_PATH "?fieldSelector=metadata.name%3Dnode-1",
                            "Authorization: Bearer t"));
        assert_true(api_saw(a, "GET " NODE_PATH "?watch=1&fieldSelector=metadata.name%3Dnode-1", NULL));
        assert_string_equal(
                json_string_value(json_object_get(node_condition(a, "OSCSecretAvailable"), "status")),
                "False");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(a->lease, "spec"), "holderIdentity")),
                "gardener-node-agent-node-1");
        owner = json_array_get(json_object_get(json_object_get(a->lease, "metadata"), "ownerReferences"), 0);
        assert_string_equal(json_string_value(json_object_get(owner, "uid")), "u-1");
        said = notifications(env);
        assert_contains(said, "READY=1");
        assert_contains(said, "STATUS=Watching node node-1");
}

static const char NODE_WITH_OSC[] =
        "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"node-1\","
        " \"uid\": \"u-1\", \"labels\": {\"" NODE_LABEL_SECRET_NAME "\": \"osc-1\"},"
        " \"annotations\": {}}}";
#define OSC_CHECKSUM "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static bool checksum_on_node(FakeApi *a, void *userdata) {
        return streq_ptr(node_annotation(a, "checksum/cloud-config-data"), OSC_CHECKSUM);
}

/* The checksum, and the Event that goes with it. */
static bool osc_applied(FakeApi *a, void *userdata) {
        return checksum_on_node(a, NULL) &&
                api_saw(a, "POST /api/v1/namespaces/default/events", "\"OSCApplied\"");
}

/* The OSC Secret the Node names appears in the API server: the Manager watches it, applies it below
 * osc.rootDirectory, and writes its checksum on the Node (with OSCApplied). */
static void test_osc_applied(void **state) {
        Env *env = *state;
        World *w = &env->world;
        _cleanup_free_ char *path = NULL, *content = NULL;
        size_t size;

        world_init(w, env, NODE_WITH_OSC);
        api_add_secret(w->api,
                       "spec: {files: [{path: /etc/hello/hello.conf, permissions: 416,"
                       " content: {inline: {data: \"hi\\n\"}}}]}",
                       OSC_CHECKSUM);
        run_until(env, osc_applied, NULL, "checksum/cloud-config-data on the Node, and OSCApplied");
        assert_true(api_saw(w->api, "GET " SECRET_PATH "?fieldSelector=metadata.name%3Dosc-1", NULL));
        assert_true(asprintf(&path, "%s/root/etc/hello/hello.conf", env->dir) > 0);
        assert_int_equal(read_full_file(path, 4096, &content, &size), 0);
        assert_string_equal(content, "hi\n");
}

typedef struct RestartScript {
        FakeSystemd *fake;
        bool annotated;
} RestartScript;

/* Once the Node is taken up, the restart annotation comes (through the watch); done when the unit was
 * restarted and the annotation is gone. */
static bool restarted_and_removed(FakeApi *a, void *userdata) {
        RestartScript *r = userdata;

        if (!r->annotated && node_taken_up(a, NULL)) {
                json_t *annotations = json_object_get(json_object_get(a->node, "metadata"), "annotations");

                assert_int_equal(
                        json_object_set_new(annotations, NODE_ANNOTATION_RESTART, json_string("x.service")),
                        0);
                api_bump(a, a->node);
                r->annotated = true;
        }
        return r->annotated && !node_annotation(a, NODE_ANNOTATION_RESTART) &&
                strstr(fake_systemd_calls(r->fake), "RestartUnit:x.service");
}

/* worker.gardener.cloud/restart-systemd-services on the Node: systemd restarts the unit, and the
 * annotation is removed. */
static void test_restart_annotation(void **state) {
        Env *env = *state;
        World *w = &env->world;
        RestartScript script = {};

        world_init(w, env, NODE_1);
        script.fake = w->systemd;
        assert_int_equal(fake_systemd_add_unit(w->systemd, "x.service", FAKE_OK), 0);
        run_until(env, restarted_and_removed, &script, "x.service restarted and the annotation removed");
        assert_int_equal(count(fake_systemd_calls(w->systemd), "RestartUnit:x.service"), 1);
}

#define OSC_WITH_UNIT                                                    \
        "spec: {files: [{path: /etc/hello/hello.conf, permissions: 416," \
        " content: {inline: {data: \"hi\\n\"}}}],"                       \
        " units: [{name: x.service, content: \"[Service]\\nExecStart=/bin/true\\n\"}]}"

static bool x_has_a_job(FakeApi *a, void *userdata) {
        return fake_systemd_n_jobs(userdata, "x.service") > 0;
}

static int find_temp(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        size_t n = strlen(path);

        return n > 4 && streq(path + n - 4, ".tmp") ? 1 : 0; /* write_file_atomic()'s, or anyone's */
}

static json_t *state_field(const char *path) {
        json_t *o = json_load_file(path, 0, NULL);

        assert_non_null(o);
        return o;
}

/* Whether systemd was called `method` (the name alone, not a unit's method: "Reload", not "ReloadUnit"). */
static bool has_call(FakeSystemd *f, const char *method) {
        const char *calls = fake_systemd_calls(f);
        size_t n = strlen(method);

        for (const char *p = calls; (p = strstr(p, method)); p += n)
                if ((p == calls || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
                        return true;
        return false;
}

/* SIGTERM in the middle of an apply that came from the API server: x.service's restart is held by
 * systemd when the signal comes. The Manager stops cleanly (STOPPING=1), nothing is half-written (no
 * temporary file left, the files it wrote whole), the checksum is not on the Node (that is a
 * promise: docs/contract.md §9.2), and state.json keeps the transaction. The next Manager, on the same
 * state directory and the Node as the first one left it, resumes it: the same transaction ends with
 * the checksum and OSCApplied. */
static void test_sigterm_during_an_api_apply(void **state) {
        Env *env = *state;
        World *w = &env->world;
        _cleanup_free_ char *node = NULL, *said = NULL, *path = NULL, *content = NULL, *content_path = NULL;
        _cleanup_(json_decrefp) json_t *tx = NULL, *resumed = NULL;
        size_t size;

        world_init(w, env, NODE_WITH_OSC);
        assert_int_equal(fake_systemd_add_unit(w->systemd, "x.service", FAKE_HELD), 0);
        api_add_secret(w->api, OSC_WITH_UNIT, OSC_CHECKSUM);
        run_until(env, x_has_a_job, w->systemd, "a job for x.service");

        said = notifications(env);
        assert_contains(said, "STOPPING=1");
        assert_null(node_annotation(w->api, "checksum/cloud-config-data"));
        assert_int_equal(nftw(env->dir, find_temp, 16, FTW_PHYS), 0);
        assert_true(asprintf(&path, "%s/units/x.service", env->dir) > 0);
        assert_int_equal(read_full_file(path, 4096, &content, &size), 0);
        assert_string_equal(content, "[Service]\nExecStart=/bin/true\n");
        content = mfree(content);
        assert_true(asprintf(&content_path, "%s/root/etc/hello/hello.conf", env->dir) > 0);
        assert_int_equal(read_full_file(content_path, 4096, &content, &size), 0);
        assert_string_equal(content, "hi\n");
        content = mfree(content);
        free(path);
        assert_true(asprintf(&path, "%s/%s", env->state, STATE_FILE_NAME) > 0);
        tx = state_field(path);
        assert_string_equal(json_string_value(json_object_get(tx, "phase")), "Applying");
        assert_string_equal(json_string_value(json_object_get(tx, "checksum")), OSC_CHECKSUM);
        node = json_dumps(w->api->node, JSON_COMPACT);
        assert_non_null(node);
        world_done(w);

        /* The next start: systemd restarts x.service at once now. */
        world_init(w, env, node);
        assert_int_equal(fake_systemd_add_unit(w->systemd, "x.service", FAKE_OK), 0);
        api_add_secret(w->api, OSC_WITH_UNIT, OSC_CHECKSUM);
        run_until(env, osc_applied, NULL, "the resumed apply's checksum and OSCApplied");
        resumed = state_field(path);
        assert_string_equal(json_string_value(json_object_get(resumed, "transaction")),
                            json_string_value(json_object_get(tx, "transaction")));
        assert_string_equal(json_string_value(json_object_get(resumed, "phase")), "Succeeded");
        /* What was left: the restart; the daemon-reload before it was done. */
        assert_int_equal(count(fake_systemd_calls(w->systemd), "RestartUnit:x.service"), 1);
        assert_false(has_call(w->systemd, "Reload"));
        assert_int_equal(read_full_file(content_path, 4096, &content, &size), 0);
        assert_string_equal(content, "hi\n");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_new_error_leaves_the_config, setup, teardown),
                cmocka_unit_test_setup_teardown(test_runs_without_api_server_and_stops, setup, teardown),
                cmocka_unit_test_setup_teardown(test_systemd_side_up_and_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sigterm_during_an_apply, setup, teardown),
                cmocka_unit_test_setup_teardown(test_first_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_osc_applied, setup, teardown),
                cmocka_unit_test_setup_teardown(test_restart_annotation, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sigterm_during_an_api_apply, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
