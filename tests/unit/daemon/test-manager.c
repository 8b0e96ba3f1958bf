/* SPDX-License-Identifier: Apache-2.0 */
/* The Manager as the daemon runs it, against what a unit test can give it: a notification socket of
 * the test's, either no system bus (an address nobody listens on) or the fake systemd as the system
 * bus (tests/helpers/fake-systemd.h, listen mode), and either no kubeconfig or one naming the small
 * fake API server over HTTPS (tests/helpers/fake-api.h). It is built, runs, says what it waits for
 * (READY=1, STATUS=: a bootstrap credential), brings its systemd side up (Subscribe) and back after
 * the bus went away, takes up its Node (labels, condition, Lease), applies the OSC Secret the Node
 * names, carries out the restart annotation, stops on SIGTERM (STOPPING=1) also in the middle of an
 * apply and resumes it, and frees everything; a set-up error names its cause and leaves the
 * configuration the caller's. Each case waits for its condition on the Manager's own loop, with a
 * deadline. */
#include <ftw.h>
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
#include "fake-api.h"
#include "fake-systemd.h"
#include "tests.h"
#include "update/state-file.h"
#include "util/base64.h"
#include "util/fileio.h"
#include "util/json-util.h"
#include "util/string-util.h"

/* A case's Manager with the fake systemd as its system bus and the fake API server (fake-api.h), all
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

/* The kubeconfig env_config() names: the fake API server, with its certificate as the CA, and a token. */
static void write_kubeconfig(Env *env, FakeApi *a) {
        _cleanup_free_ char *ca = NULL, *kubeconfig = NULL, *path = NULL;
        const char *pem = fake_api_ca_pem(a);

        assert_int_equal(base64_encode(pem, strlen(pem), /* url= */ false, &ca), 0);
        assert_true(asprintf(&kubeconfig,
                             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                             "clusters: [{name: c, cluster: {server: \"https://127.0.0.1:%u\", "
                             "certificate-authority-data: %s}}]\n"
                             "users: [{name: u, user: {token: t}}]\n"
                             "contexts: [{name: c, context: {cluster: c, user: u}}]\n",
                             fake_api_port(a), ca) > 0);
        assert_true(asprintf(&path, "%s/kubeconfig", env->dir) > 0);
        assert_int_equal(write_file_atomic(path, kubeconfig, strlen(kubeconfig), 0600), 0);
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
                for (unsigned i = 0; fake_api_request(a, i); i++)
                        fprintf(stderr, "request %u: %.300s\n", i, fake_api_request(a, i));
                fail_msg("never: %s", what);
        }
}

static const char NODE_1[] =
        "{\"apiVersion\": \"v1\", \"kind\": \"Node\", \"metadata\": {\"name\": \"node-1\","
        " \"uid\": \"u-1\", \"labels\": {}, \"annotations\": {}}}";

/* The Manager has taken up the Node: labelled it, said on it whether the OSC Secret is readable, and
 * holds its Lease. */
static bool node_taken_up(FakeApi *a, void *userdata) {
        return fake_api_node_label(a, "node-role.kubernetes.io/worker") &&
                fake_api_node_condition(a, "OSCSecretAvailable") && fake_api_lease(a);
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
        w->api = fake_api_new(w->event, node);
        write_kubeconfig(env, w->api);
        w->m = manager_for(env);
}

/* The Manager first: it holds requests to both fakes. */
static void world_done(World *w) {
        w->m = manager_free(w->m);
        w->api = fake_api_free(w->api);
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
        assert_true(fake_api_saw(a, "GET " FAKE_API_NODE_PATH "?fieldSelector=metadata.name%3Dnode-1",
                                 "Authorization: Bearer t"));
        assert_true(fake_api_saw(
                a, "GET " FAKE_API_NODE_PATH "?watch=1&fieldSelector=metadata.name%3Dnode-1", NULL));
        assert_string_equal(json_string_value(json_object_get(
                                    fake_api_node_condition(a, "OSCSecretAvailable"), "status")),
                            "False");
        assert_string_equal(json_string_value(json_object_get(json_object_get(fake_api_lease(a), "spec"),
                                                              "holderIdentity")),
                            "gardener-node-agent-node-1");
        owner = json_array_get(
                json_object_get(json_object_get(fake_api_lease(a), "metadata"), "ownerReferences"), 0);
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
        return streq_ptr(fake_api_node_annotation(a, "checksum/cloud-config-data"), OSC_CHECKSUM);
}

/* The checksum, and the Event that goes with it. */
static bool osc_applied(FakeApi *a, void *userdata) {
        return checksum_on_node(a, NULL) &&
                fake_api_saw(a, "POST /api/v1/namespaces/default/events", "\"OSCApplied\"");
}

/* The OSC Secret the Node names appears in the API server: the Manager watches it, applies it below
 * osc.rootDirectory, and writes its checksum on the Node (with OSCApplied). */
static void test_osc_applied(void **state) {
        Env *env = *state;
        World *w = &env->world;
        _cleanup_free_ char *path = NULL, *content = NULL;
        size_t size;

        world_init(w, env, NODE_WITH_OSC);
        fake_api_add_secret(w->api,
                            "spec: {files: [{path: /etc/hello/hello.conf, permissions: 416,"
                            " content: {inline: {data: \"hi\\n\"}}}]}",
                            OSC_CHECKSUM);
        run_until(env, osc_applied, NULL, "checksum/cloud-config-data on the Node, and OSCApplied");
        assert_true(fake_api_saw(w->api, "GET " FAKE_API_SECRET_PATH "?fieldSelector=metadata.name%3Dosc-1",
                                 NULL));
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
                fake_api_annotate_node(a, NODE_ANNOTATION_RESTART, "x.service");
                r->annotated = true;
        }
        return r->annotated && !fake_api_node_annotation(a, NODE_ANNOTATION_RESTART) &&
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
        fake_api_add_secret(w->api, OSC_WITH_UNIT, OSC_CHECKSUM);
        run_until(env, x_has_a_job, w->systemd, "a job for x.service");

        said = notifications(env);
        assert_contains(said, "STOPPING=1");
        assert_null(fake_api_node_annotation(w->api, "checksum/cloud-config-data"));
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
        node = json_dumps(fake_api_node(w->api), JSON_COMPACT);
        assert_non_null(node);
        world_done(w);

        /* The next start: systemd restarts x.service at once now. */
        world_init(w, env, node);
        assert_int_equal(fake_systemd_add_unit(w->systemd, "x.service", FAKE_OK), 0);
        fake_api_add_secret(w->api, OSC_WITH_UNIT, OSC_CHECKSUM);
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
