/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for the kubelet staging path: on one sd_event loop, pull + verify + extract + store
 * (oci/file-stage into the kubelet store), optionally switch kubelet.binaryPath, health-check and
 * switch back, exactly as the manager would minus the unit restart. Prints one JSON object on stdout. Never
 * installed. */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>

#include "kubelet/kubelet-health.h"
#include "kubelet/kubelet-store.h"
#include "kubelet/kubelet-version.h"
#include "net/http.h"
#include "oci/file-stage.h"
#include "oci/registry-blob.h"
#include "oci/registry-manifest.h"
#include "oci/registry.h"

static struct {
        const char *state_dir, *image, *file, *version, *binary_path, *ca_file, *auth_file, *healthz;
        RegistryMirror mirrors[4];
        size_t n_mirrors;
        ArchiveLimits limits;
        unsigned max_attempts, keep;
        uint64_t retry_base_usec, health_timeout_usec, health_interval_usec;
        uint64_t stall_bytes, stall_usec; /* test-only: a short stall window */
        bool do_switch, progress, adopt;
} arg = {
        .binary_path = "/opt/bin/kubelet",
        .keep = 2,
        .health_timeout_usec = 5 * USEC_PER_SEC,
        .health_interval_usec = 200 * USEC_PER_MSEC,
};

typedef struct Run {
        sd_event *event;
        RegistryClient *registry;
        FileStage *stage;
        KubeletVersionProbe *probe;
        Http *http;
        KubeletStore *store;
        json_t *out;
        char *previous;
        HttpProbe *hc;
        int exit_code;
} Run;

static void finish(Run *run, int code) {
        run->exit_code = code;
        (void) sd_event_exit(run->event, code);
}

static void fail(Run *run, int error, ArtifactFailure f, const char *message) {
        json_object_set_new(run->out, "ok", json_false());
        json_object_set_new(run->out, "error", json_integer(error));
        json_object_set_new(run->out, "code", json_string(artifact_failure_to_string(f)));
        json_object_set_new(run->out, "retriable", json_boolean(artifact_failure_is_retriable(f)));
        json_object_set_new(run->out, "message", json_string(message ? message : ""));
        finish(run, 1);
}

static void on_health(HttpProbe *hc, int error, const char *message, unsigned n_probes, void *userdata) {
        Run *run = userdata;
        _cleanup_free_ char *reason = NULL;
        int r;

        run->hc = http_probe_free(run->hc);
        json_object_set_new(run->out, "healthProbes", json_integer(n_probes));
        if (error >= 0) {
                json_object_set_new(run->out, "ok", json_true());
                finish(run, 0);
                return;
        }
        /* Unhealthy: switch back to the previous version (the manager would restart the unit now). */
        r = run->previous ? kubelet_store_switch(run->store, run->previous, NULL) : 0;
        json_object_set_new(run->out, "rolledBack", json_boolean(run->previous && r >= 0));
        (void) kubelet_health_failure_reason(message, &reason);
        fail(run, error, ARTIFACT_FAILURE_KUBELET_UNHEALTHY, reason);
}

static void on_progress(FileStage *st, uint64_t done, uint64_t total, void *userdata) {
        if (arg.progress)
                fprintf(stderr, "progress %llu %llu\n", (unsigned long long) done,
                        (unsigned long long) total);
}

static void on_staged(FileStage *st, const FileStageResult *res, void *userdata) {
        Run *run = userdata;
        int r;

        json_object_set_new(run->out, "bytesDownloaded", json_integer((json_int_t) res->bytes_downloaded));
        json_object_set_new(run->out, "reused", json_boolean(res->reused));
        if (res->error < 0) {
                fail(run, res->error, res->failure, res->message);
                return;
        }
        json_object_set_new(run->out, "version", json_string(res->version));
        json_object_set_new(run->out, "path", json_string(res->path));
        if (res->manifest_digest)
                json_object_set_new(run->out, "manifestDigest", json_string(res->manifest_digest));
        if (res->file_digest)
                json_object_set_new(run->out, "fileDigest", json_string(res->file_digest));

        if (arg.do_switch) {
                r = kubelet_store_switch(run->store, res->version, &run->previous);
                if (r < 0) {
                        fail(run, r, ARTIFACT_FAILURE_UNAVAILABLE, "switch failed");
                        return;
                }
                json_object_set_new(run->out, "previous",
                                    run->previous ? json_string(run->previous) : json_null());
                r = kubelet_store_gc(run->store, (const char *const[]) { run->previous, NULL });
                json_object_set_new(run->out, "gcRemoved", json_integer(r));
        }
        if (arg.healthz) {
                HttpProbeOptions o = { .url = arg.healthz,
                                       .interval_usec = arg.health_interval_usec,
                                       .timeout_usec = arg.health_timeout_usec };

                r = http_probe_start(run->event, run->http, &o, on_health, run, &run->hc);
                if (r < 0)
                        fail(run, r, ARTIFACT_FAILURE_KUBELET_UNHEALTHY, "cannot start health check");
                return;
        }
        json_object_set_new(run->out, "ok", json_true());
        finish(run, 0);
}

static int parse_argv(int argc, char **argv) {
        enum {
                A_STATE = 0x100,
                A_IMAGE,
                A_FILE,
                A_VERSION,
                A_BIN,
                A_CA,
                A_AUTH,
                A_MIRROR,
                A_MAX_UNPACKED,
                A_MAX_ATTEMPTS,
                A_RETRY_MS,
                A_SWITCH,
                A_KEEP,
                A_HEALTHZ,
                A_HEALTH_MS,
                A_PROGRESS,
                A_ADOPT,
                A_STALL_BYTES,
                A_STALL_SECONDS
        };
        static const struct option options[] = {
                { "state-dir", required_argument, NULL, A_STATE },
                { "image", required_argument, NULL, A_IMAGE },
                { "file", required_argument, NULL, A_FILE },
                { "version", required_argument, NULL, A_VERSION },
                { "binary-path", required_argument, NULL, A_BIN },
                { "ca-file", required_argument, NULL, A_CA },
                { "auth-file", required_argument, NULL, A_AUTH },
                { "mirror", required_argument, NULL, A_MIRROR },
                { "max-unpacked", required_argument, NULL, A_MAX_UNPACKED },
                { "max-attempts", required_argument, NULL, A_MAX_ATTEMPTS },
                { "retry-base-ms", required_argument, NULL, A_RETRY_MS },
                { "switch", no_argument, NULL, A_SWITCH },
                { "keep", required_argument, NULL, A_KEEP },
                { "healthz", required_argument, NULL, A_HEALTHZ },
                { "health-timeout-ms", required_argument, NULL, A_HEALTH_MS },
                { "progress", no_argument, NULL, A_PROGRESS },
                { "adopt", no_argument, NULL, A_ADOPT },
                { "stall-bytes", required_argument, NULL, A_STALL_BYTES },
                { "stall-seconds", required_argument, NULL, A_STALL_SECONDS },
                {}
        };
        int c;

        arg.limits = ARCHIVE_LIMITS_DEFAULT;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case A_STATE:
                        arg.state_dir = optarg;
                        break;
                case A_IMAGE:
                        arg.image = optarg;
                        break;
                case A_FILE:
                        arg.file = optarg;
                        break;
                case A_VERSION:
                        arg.version = optarg;
                        break;
                case A_BIN:
                        arg.binary_path = optarg;
                        break;
                case A_CA:
                        arg.ca_file = optarg;
                        break;
                case A_AUTH:
                        arg.auth_file = optarg;
                        break;
                case A_MIRROR: {
                        char *eq = strchr(optarg, '=');
                        if (!eq || arg.n_mirrors >= ELEMENTSOF(arg.mirrors))
                                return -EINVAL;
                        *eq = '\0';
                        arg.mirrors[arg.n_mirrors++] = (RegistryMirror) { .host = optarg, .url = eq + 1 };
                        break;
                }
                case A_MAX_UNPACKED:
                        arg.limits.max_unpacked = strtoull(optarg, NULL, 10);
                        break;
                case A_MAX_ATTEMPTS:
                        arg.max_attempts = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case A_RETRY_MS:
                        arg.retry_base_usec = strtoull(optarg, NULL, 10) * USEC_PER_MSEC;
                        break;
                case A_SWITCH:
                        arg.do_switch = true;
                        break;
                case A_KEEP:
                        arg.keep = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case A_HEALTHZ:
                        arg.healthz = optarg;
                        break;
                case A_HEALTH_MS:
                        arg.health_timeout_usec = strtoull(optarg, NULL, 10) * USEC_PER_MSEC;
                        break;
                case A_PROGRESS:
                        arg.progress = true;
                        break;
                case A_ADOPT:
                        arg.adopt = true;
                        break;
                case A_STALL_BYTES:
                        arg.stall_bytes = strtoull(optarg, NULL, 10);
                        break;
                case A_STALL_SECONDS:
                        arg.stall_usec = strtoull(optarg, NULL, 10) * USEC_PER_SEC;
                        break;
                default:
                        return -EINVAL;
                }
        if (!arg.state_dir || !arg.image || !arg.file)
                return -EINVAL;
        return 0;
}

static int start_stage(Run *run) {
        FileStageRequest req = {
                .image = arg.image,
                .file_path = arg.file,
                .version = arg.version,
                .limits = &arg.limits,
        };
        int r;

        r = file_stage_start(run->event, run->registry, kubelet_store_files(run->store), &req, on_progress,
                             on_staged, run, &run->stage);
        if (r < 0) {
                json_object_set_new(run->out, "ok", json_false());
                json_object_set_new(run->out, "code", json_string("InvalidDesiredState"));
                json_object_set_new(run->out, "error", json_integer(r));
                finish(run, 1);
        }
        return r;
}

/* docs/contract.md §8.2, as the manager does it once at startup: ask the regular file for its version
 * (asynchronously), move it into the store under that version, then go on. */
static void on_version(KubeletVersionProbe *p, int error, const char *version, void *userdata) {
        Run *run = userdata;
        _cleanup_free_ char *adopted = NULL;
        int r;

        run->probe = kubelet_version_probe_free(run->probe);
        json_object_set_new(run->out, "versionProbe",
                            error < 0 ? json_integer(error) : json_string(version));
        r = kubelet_store_adopt(run->store, version, &adopted);
        if (r < 0) {
                fail(run, r, ARTIFACT_FAILURE_UNAVAILABLE, "adoption failed");
                return;
        }
        json_object_set_new(run->out, "adopted", json_string(adopted));
        (void) start_stage(run);
}

int main(int argc, char **argv) {
        _cleanup_free_ char *blobs = NULL;
        Run run = { .exit_code = 1 };
        RegistryOptions ro;
        sigset_t ss;
        int r;

        if (parse_argv(argc, argv) < 0) {
                fprintf(stderr, "usage: pull --state-dir DIR --image REF --file PATH [options]\n");
                return 2;
        }
        /* sd-event child sources (the --version probe) need SIGCHLD blocked, as in main.c. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        (void) sigprocmask(SIG_BLOCK, &ss, NULL);

        run.out = json_object();
        if (sd_event_new(&run.event) < 0 || http_new(run.event, &run.http) < 0 ||
            kubelet_store_new(arg.state_dir, arg.binary_path, arg.keep, &run.store) < 0 ||
            asprintf(&blobs, "%s/staging/blobs", arg.state_dir) < 0)
                return 1;

        ro = (RegistryOptions) {
                .ca_file = arg.ca_file,
                .auth_file = arg.auth_file,
                .mirrors = arg.mirrors,
                .n_mirrors = arg.n_mirrors,
                .blob_directory = blobs,
                .max_attempts = arg.max_attempts,
                .retry_base_usec = arg.retry_base_usec,
                .stall_bytes = arg.stall_bytes,
                .stall_usec = arg.stall_usec,
        };
        r = registry_client_new(run.event, run.http, &ro, &run.registry);
        if (r < 0)
                return 1;

        if (arg.adopt && kubelet_store_needs_adoption(run.store) > 0)
                r = kubelet_version_probe_start(run.event, arg.binary_path, 0, on_version, &run, &run.probe);
        else
                r = start_stage(&run);
        if (r >= 0)
                (void) sd_event_loop(run.event);

        json_dumpf(run.out, stdout, JSON_SORT_KEYS);
        fputc('\n', stdout);
        kubelet_version_probe_free(run.probe);
        file_stage_free(run.stage);
        http_probe_free(run.hc);
        registry_client_free(run.registry);
        kubelet_store_free(run.store);
        http_free(run.http);
        sd_event_unref(run.event);
        json_decref(run.out);
        free(run.previous);
        return r < 0 ? 1 : run.exit_code;
}
