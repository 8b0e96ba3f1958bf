/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "apply/osc-apply.h"
#include "apply/osc-files.h"
#include "apply/osc-guard.h"
#include "apply/osc-state.h"
#include "core/unit-guard.h"
#include "update/osc-runner.h"
#include "identity/identity.h"
#include "identity/kubelet-bootstrap.h"
#include "kube/kube-path.h"
#include "kubelet/kubelet-health.h"
#include "oci/file-stage.h"
#include "oci/digest.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/in-root.h"
#include "util/log.h"

#define LAST_APPLIED_MAX (16 * 1024 * 1024)
/* The imageRef files other than the kubelet: <stateDirectory>/osc-images/<key>/file, the key a hash
 * of image and path (oci/file-store.h). */
#define OSC_IMAGE_STORE "osc-images"
/* A registry's readinessProbe: upstream probes every 2 s until its reconcile ends; we give each host
 * 5 minutes, then fail the item (FileApplyFailed, retried with back-off), so a mirror that never
 * comes is visible instead of a silent wait; a newer OSC ends the wait at once (abandon_probe()).
 * 5 s per request where upstream allows 1 s: a mirror starting on a busy node is slow, not absent. */
#define REGISTRY_PROBE_INTERVAL_USEC (2 * USEC_PER_SEC)
#define REGISTRY_PROBE_REQUEST_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define REGISTRY_PROBE_TIMEOUT_USEC (300 * USEC_PER_SEC)
#define REGISTRY_CA_MAX (1024 * 1024)
/* A work list that cannot be computed for a reason that can go away (a full or unreadable state
 * directory) is computed again after 1 s, doubling up to 5 min. */
#define PREPARE_RETRY_FIRST_USEC USEC_PER_SEC
#define PREPARE_RETRY_MAX_USEC (300 * USEC_PER_SEC)
/* The whole plan goes to the journal in lines of about this many bytes. */
#define PLAN_LOG_LINE_MAX 4000

struct OscRunner {
        OscRunnerDeps deps;             /* borrowed */
        KubeClient *kube;               /* borrowed; NULL: no API client yet */
        char *host_name;                /* owned: lower-case, for the files' hostName filter */
        OscProtected own_files;         /* owned: what no OSC file may touch, resolved at start */
        char *desired;                  /* owned: the checksum of the newest OSC; NULL: none known */
        OscModelOptions model_options;  /* how an OSC is decoded here: host_name, the agent's PATH */

        /* The prepared OSC. */
        char *checksum;                 /* owned; NULL: nothing prepared */
        char *yaml;                     /* owned: its osc.yaml (taken from the OscDesired) until committed */
        size_t yaml_size;
        bool committed;                 /* it is the last-applied OSC */
        OscChanges *changes;            /* owned: the remaining work; NULL when committed or on error */
        json_t *plan;                   /* owned: osc_changes_plan_json(changes), the summary */
        char *error;                    /* owned: why no work list could be computed */
        UpdateFailureCode error_code;
        uint64_t retry_usec;            /* a retriable error: compute again at this time */
        unsigned failures;              /* retriable errors in a row, for the back-off */
        char *logged_error;             /* owned: the last error written to the journal */

        /* The run in flight: the prepared work, or a drift repair's (osc_runner_repair()). */
        OscChanges *running;            /* borrowed: `changes`, or the repair's list */
        bool repairing;                 /* nothing persisted, nothing committed */
        OscGuard *guard;                /* owned: judging the unit items before the applier starts */
        UnitJob *reach;                 /* owned: waiting for systemd before the guard can ask it */
        OscApplier *applier;            /* owned */
        KubeRequest *secret;            /* owned: GET of a secretRef file's Secret */
        HttpProbe *health;            /* owned: the kubelet health item */
        HttpProbe *probe;             /* owned: a registry host's readiness probe */
        size_t probe_host;              /* the host of the current registry item being probed */
        FileStage *pull;                /* owned: an imageRef file being pulled */
        FileStore *images;              /* owned: verified imageRef files, created at the first pull */
        sd_event_source *answer;        /* owned: an item answered from the loop */
        int answer_error;
        char *answer_detail;            /* owned */
        OscRunnerDone done;
        void *userdata;
};

static void prepared_clear(OscRunner *r) {
        r->checksum = mfree(r->checksum);
        r->yaml = mfree(r->yaml);
        r->yaml_size = 0;
        r->committed = false;
        r->changes = osc_changes_free(r->changes);
        json_decref(r->plan);
        r->plan = NULL;
        r->error = mfree(r->error);
        r->error_code = _UPDATE_FAILURE_INVALID;
        r->retry_usec = 0;
        r->failures = 0;
}

static void run_clear(OscRunner *r) {
        r->running = NULL;
        r->repairing = false;
        r->guard = osc_guard_free(r->guard);
        r->reach = unit_job_cancel(r->reach);
        r->applier = osc_applier_free(r->applier);
        r->secret = kube_request_free(r->secret);
        r->health = http_probe_free(r->health);
        r->probe = http_probe_free(r->probe);
        r->pull = file_stage_free(r->pull);
        r->answer = sd_event_source_disable_unref(r->answer);
        r->answer_detail = mfree(r->answer_detail);
        r->done = NULL;
        r->userdata = NULL;
}

/* ---- preparing ----------------------------------------------------------------------------------- */

/* Whether osc.yaml is byte for byte the last-applied one: then there is nothing left to do for it. */
static bool is_last_applied(const OscRunner *r) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t size;

        if (asprintf(&path, "%s/%s", r->deps.config->state_directory, OSC_STATE_LAST_APPLIED) < 0)
                return false;
        if (read_full_file(path, LAST_APPLIED_MAX, &data, &size) < 0)
                return false;
        return size == r->yaml_size && memcmp(data, r->yaml, size) == 0;
}

static const char *baseline_to_string(OscBaseline b) {
        switch (b) {
        case OSC_BASELINE_RESUMED:
                return "resuming the saved remaining work";
        case OSC_BASELINE_LAST_APPLIED:
                return "diffed against the last-applied OSC";
        case OSC_BASELINE_HANDOVER:
                return "diffed against gardener-node-agent's last-applied OSC";
        default:
                return "first apply";
        }
}

static void warning_event(OscRunner *r, const char *reason, const char *message) {
        if (r->deps.reporter)
                (void) reporter_emit_event(r->deps.reporter, "Warning", reason, message);
}

static void prepare_failed(OscRunner *r, int error, char *message, uint64_t now_usec) {
        /* A bad desired state (undecodable, an unknown codec, a bad path) cannot be fixed by retrying,
         * nor can a file among the agent's own (-EPERM, core/osc-protected: FileApplyFailed naming it);
         * a state directory we cannot write can: computed again with back-off. */
        bool invalid = error == -EINVAL || error == -EBADMSG || error == -EFBIG || error == -ENODATA;
        bool final = invalid || error == -EPERM;

        r->error_code = invalid ? UPDATE_FAILURE_INVALID_DESIRED_STATE : UPDATE_FAILURE_FILE_APPLY_FAILED;
        r->retry_usec = final ? 0
                                : now_usec + MIN(PREPARE_RETRY_FIRST_USEC << MIN(r->failures, 16u), PREPARE_RETRY_MAX_USEC);
        r->failures = final ? 0 : r->failures + 1;
        r->error = message;
        if (!r->error && asprintf(&r->error, "cannot compute the changes of the OSC: %s", strerror(-error)) < 0)
                r->error = NULL;
        if (r->error && !streq_ptr(r->error, r->logged_error)) {
                log_error("OSC %s: %s%s", strempty(r->checksum), r->error, final ? "" : " (retrying with back-off)");
                if (!final)
                        warning_event(r, "OSCChangesNotComputed", r->error);
                (void) free_and_strdup(&r->logged_error, r->error);
        }
}

/* The whole plan in the journal (the Node gets a summary): the remaining items, "; "-separated, in
 * lines of about PLAN_LOG_LINE_MAX bytes. */
static void log_plan(const OscRunner *r) {
        const OscChanges *c = r->changes;
        size_t total = osc_changes_remaining(c), first = 0, n = 0, len = 0;
        _cleanup_free_ char *line = NULL;

        for (size_t i = 0; i < c->n_items; i++) {
                _cleanup_free_ char *d = NULL;
                char *grown;

                if (c->items[i].done || osc_work_describe(&c->items[i], &d) < 0)
                        continue;
                grown = realloc(line, len + strlen(d) + 3);
                if (!grown)
                        return;
                line = grown;
                len += (size_t) sprintf(line + len, "%s%s", n > 0 ? "; " : "", d);
                n++;
                if (len < PLAN_LOG_LINE_MAX)
                        continue;
                log_info("OSC %s plan, items %zu-%zu of %zu: %s", r->checksum, first + 1, first + n, total, line);
                first += n;
                n = len = 0;
        }
        if (n > 0)
                log_info("OSC %s plan, items %zu-%zu of %zu: %s", r->checksum, first + 1, first + n, total, line);
}

static void prepare_now(OscRunner *r, OscDesired *osc, const char *os_version, uint64_t now_usec) {
        const Config *c = r->deps.config;
        _cleanup_free_ char *error = NULL, *warning = NULL;
        OscBaseline baseline = OSC_BASELINE_NONE;
        int k;

        if (!streq_ptr(r->checksum, osc->checksum) || osc->yaml) {
                char *yaml = TAKE_PTR(osc->yaml);
                size_t size = osc->yaml_size;

                prepared_clear(r);
                r->yaml = yaml;
                r->yaml_size = size;
                r->checksum = strdup(osc->checksum);
                if (!r->checksum || !r->yaml)
                        return prepare_failed(r, -ENOMEM, NULL, now_usec);
        } else
                r->error = mfree(r->error);     /* a retry of the same OSC */

        if (is_last_applied(r)) {
                r->committed = true;
                r->yaml = mfree(r->yaml);
                return;
        }
        k = osc_state_prepare(&(OscPrepareInput) {
                        .state_directory = c->state_directory,
                        .root_directory = c->osc.root_directory,
                        .yaml = r->yaml,
                        .size = r->yaml_size,
                        .checksum = r->checksum,
                        .model_options = r->model_options,
                        .current_os_version = os_version,
                        .replaced_units = c->osc.replaced_units,
                        .protected = &r->own_files,
                        .self_unit = c->restart.self_unit,
                }, &r->changes, &baseline, &warning, &error);
        if (warning) {
                /* A corrupt bookkeeping file was moved aside: the work starts over, and says so. */
                log_warning("OSC %s: %s.", r->checksum, warning);
                warning_event(r, "CorruptStateFile", warning);
        }
        if (k < 0)
                return prepare_failed(r, k, TAKE_PTR(error), now_usec);
        r->plan = osc_changes_plan_json(r->changes, OSC_PLAN_SUMMARY_BUDGET);
        if (!r->plan)
                return prepare_failed(r, -ENOMEM, NULL, now_usec);
        r->logged_error = mfree(r->logged_error);
        r->failures = 0;
        r->retry_usec = 0;
        log_info("OSC %s: %zu change(s) to apply (%s)%s; the whole plan is in %s/%s.", r->checksum,
                 osc_changes_remaining(r->changes), baseline_to_string(baseline),
                 osc_in_place_flags_any(&r->changes->in_place) ? "; in-place changes wait for ReadyForUpdate" : "",
                 c->state_directory, OSC_STATE_PLAN);
        log_plan(r);
}

static bool restarts_unit(const OscChanges *c, const char *unit) {
        for (size_t i = 0; c && i < c->n_items; i++) {
                const OscWork *w = &c->items[i];

                if (!w->done && w->kind == OSC_WORK_UNIT_COMMAND && w->command != OSC_UNIT_COMMAND_STOP &&
                    streq_ptr(w->name, unit))
                        return true;
        }
        return false;
}

void osc_runner_prepare(OscRunner *r, OscDesired *osc, const NodeView *node, const char *os_version,
                        uint64_t now_usec, OscWorkView *ret) {
        assert(r && ret);

        *ret = (OscWorkView) { .error_code = _UPDATE_FAILURE_INVALID };
        /* A refused OSC has nothing to prepare: the decider fails it (osc->refused). Without a Node
         * (a fresh node's first OSC) there is no checksum on it to compare. */
        if (!osc || osc->refused || isempty(osc->checksum))
                return;
        /* The Node already says this OSC is applied (GNP §2.2): the decider does nothing with it. */
        if (node && streq_ptr(node->applied_checksum, osc->checksum))
                return;
        assert(!r->applier && !r->guard && !r->reach);     /* the executor never decides while a run is in flight */
        if (!streq_ptr(r->checksum, osc->checksum) || (r->error && now_usec >= r->retry_usec))
                prepare_now(r, osc, os_version, now_usec);

        if (r->error) {
                ret->error = r->error;
                ret->error_code = r->error_code;
                ret->retry_usec = r->retry_usec;
                return;
        }
        if (r->committed || !r->changes)
                return;
        ret->pending = true;
        ret->gated = osc_in_place_flags_any(&r->changes->in_place);
        ret->restarts_kubelet = restarts_unit(r->changes, r->deps.config->kubelet.unit);
        ret->plan = r->plan;
}

/* ---- the items the applier hands back to us ---------------------------------------------------- */

/* The item the applier is at. */
static const OscWork *current_work(const OscRunner *r) {
        return &r->running->items[osc_applier_current(r->applier)];
}

static int on_answer(sd_event_source *s, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *detail = TAKE_PTR(r->answer_detail);

        r->answer = sd_event_source_disable_unref(r->answer);
        osc_applier_external_done(r->applier, r->answer_error, detail);
        return 0;
}

/* Answers the current item from the loop (the applier must not be re-entered from its own hook). */
static int answer_later(OscRunner *r, int error, const char *detail) {
        int k;

        r->answer_error = error;
        if (free_and_strdup(&r->answer_detail, detail) < 0)
                return -ENOMEM;
        k = sd_event_add_defer(r->deps.event, &r->answer, on_answer, r);
        if (k >= 0)
                (void) sd_event_source_set_description(r->answer, "osc-runner-answer");
        return k;
}

static void on_secret(KubeRequest *req, int error, json_t *object, void *userdata) {
        OscRunner *r = userdata;
        const OscWork *w = current_work(r);
        const char *value = json_string_value(json_object_get(json_object_get(object, "data"), w->file.secret_key));
        _cleanup_free_ char *data = NULL, *detail = NULL;
        size_t size = 0;
        int k;

        r->secret = kube_request_free(r->secret);
        if (error < 0)
                k = error_setf(&detail, error, "reading Secret %s: %s", w->file.secret_name, strerror(-error));
        else if (!value)
                k = error_setf(&detail, -ENOENT, "Secret %s has no data key %s", w->file.secret_name,
                               w->file.secret_key);
        else if (base64_decode(value, SIZE_MAX, &data, &size) < 0)
                k = error_setf(&detail, -EBADMSG, "Secret %s: data key %s is not base64", w->file.secret_name,
                               w->file.secret_key);
        else {
                /* The content is a secret: only the path and the errno ever reach a message. */
                k = osc_write_file(r->deps.config->osc.root_directory, w->file.path, data, size,
                                   osc_file_mode(&w->file), true);
                if (k < 0)
                        (void) error_setf(&detail, k, "%s", strerror(-k));
        }
        if (data)
                explicit_bzero(data, size);
        osc_applier_external_done(r->applier, k < 0 ? k : 0, detail);
}

static int start_secret(OscRunner *r, const OscWork *w) {
        _cleanup_free_ char *path = NULL;
        int k;

        if (!r->kube)
                return answer_later(r, -ENOTCONN, "no API server connection to read the Secret");
        /* The model refused an invalid name already (InvalidDesiredState); a saved work list from an
         * older version may still hold one. */
        k = kube_path(KUBE_RESOURCE_SECRETS, r->deps.config->osc.namespace, w->file.secret_name, NULL, &path);
        if (k == -EINVAL)
                return answer_later(r, k, "not a valid Secret name");
        if (k < 0)
                return k;
        return kube_client_get(r->kube, path, on_secret, r, &r->secret);
}

static void on_health(HttpProbe *hc, int error, const char *message, unsigned n_probes, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *detail = NULL;

        r->health = http_probe_free(r->health);
        if (error < 0)
                detail = strdup(strempty(message));
        osc_applier_external_done(r->applier, error < 0 ? error : 0, detail);
}

static int start_health(OscRunner *r) {
        HttpProbeOptions o = kubelet_health_probe(r->deps.config);

        return http_probe_start(r->deps.event, r->deps.http, &o, on_health, r, &r->health);
}

/* The PEM of a registry host's `ca` files, concatenated: relative names are below the upstream's
 * certs.d directory (upstream's baseDir), every path below osc.rootDirectory. */
static int read_host_cas(OscRunner *r, const OscRegistry *g, const OscRegistryHost *h, char **ret,
                         size_t *ret_size, char **ret_detail) {
        _cleanup_free_ char *all = NULL;
        size_t n = 0;

        for (char **ca = h->ca_certs; ca && *ca; ca++) {
                _cleanup_free_ char *path = NULL, *full = NULL, *pem = NULL;
                size_t size;
                char *grown;
                int k;

                if ((**ca == '/' ? asprintf(&path, "%s", *ca)
                                 : asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s/%s", g->upstream, *ca)) < 0)
                        return -ENOMEM;
                k = path_below_root(r->deps.config->osc.root_directory, path, &full);
                if (k >= 0)
                        k = read_full_file(full, REGISTRY_CA_MAX, &pem, &size);
                if (k < 0)
                        return error_setf(ret_detail, k, "upstream %s: CA file %s of host %s: %s", g->upstream,
                                          path, h->url, strerror(-k));
                grown = realloc(all, n + size + 2);
                if (!grown)
                        return -ENOMEM;
                all = grown;
                memcpy(all + n, pem, size);
                n += size;
                all[n++] = '\n';
                all[n] = 0;
        }
        *ret = TAKE_PTR(all);
        *ret_size = n;
        return 0;
}

static int probe_next_host(OscRunner *r);

/* A newer OSC than the one being applied is published. */
static bool superseded(const OscRunner *r) {
        return r->desired && r->checksum && !streq(r->desired, r->checksum);
}

/* Issue 23: a mirror on a dead host held a corrected OSC published after it back for the whole probe
 * timeout. Once a newer OSC is there the wait helps nobody (the newer one may drop or fix the
 * mirror): the item fails now (FileApplyFailed, the item stays not done) and the executor's next
 * decision takes the newer OSC. */
static int abandon_probe(OscRunner *r) {
        const OscWork *w = current_work(r);
        _cleanup_free_ char *detail = NULL;
        int k;

        if (asprintf(&detail, "upstream %s: readiness probe of %s abandoned: OSC %s supersedes this one",
                     w->registry.upstream, w->registry.hosts[r->probe_host].url, r->desired) < 0)
                return -ENOMEM;
        k = answer_later(r, -ESTALE, detail);
        if (k >= 0)
                r->probe = http_probe_free(r->probe);
        return k;
}

static void on_probed(HttpProbe *hc, int error, const char *message, unsigned n_probes, void *userdata) {
        OscRunner *r = userdata;
        const OscWork *w = current_work(r);
        _cleanup_free_ char *detail = NULL;
        int k;

        r->probe = http_probe_free(r->probe);
        if (error < 0) {
                (void) error_setf(&detail, error, "upstream %s: %s", w->registry.upstream, strempty(message));
                return osc_applier_external_done(r->applier, error, detail);
        }
        log_info("Registry host %s of upstream %s answered after %u probe(s).",
                 w->registry.hosts[r->probe_host].url, w->registry.upstream, n_probes);
        r->probe_host++;
        k = probe_next_host(r);
        if (k < 0)
                osc_applier_external_done(r->applier, k, "cannot start the next probe");
}

/* GNP §6.4 step 9: a new or changed registry with readinessProbe gets its hosts.toml only once each
 * of its hosts answers. Its item comes after the unit commands and the kubelet health check
 * (core/osc-diff.h), where upstream waits for its asynchronous probes: a mirror running in this
 * cluster, which may need this very node, never holds the node's own files and units back. */
static int probe_next_host(OscRunner *r) {
        const OscWork *w = current_work(r);
        const OscRegistry *g = &w->registry;
        _cleanup_free_ char *pem = NULL, *detail = NULL;
        size_t size = 0;
        int k;

        if (r->probe_host >= g->n_hosts) {
                k = osc_write_registry(r->deps.config->osc.root_directory, g);
                if (k < 0)
                        (void) error_setf(&detail, k, "%s", strerror(-k));
                return answer_later(r, MIN(k, 0), detail);
        }
        if (superseded(r))
                return abandon_probe(r);
        k = read_host_cas(r, g, &g->hosts[r->probe_host], &pem, &size, &detail);
        if (k == -ENOMEM)
                return k;
        if (k < 0)
                return answer_later(r, k, detail);
        return http_probe_start(r->deps.event, r->deps.http,
                                  &(HttpProbeOptions) {
                                          .url = g->hosts[r->probe_host].url,
                                          .interval_usec = REGISTRY_PROBE_INTERVAL_USEC,
                                          .request_timeout_usec = REGISTRY_PROBE_REQUEST_TIMEOUT_USEC,
                                          .timeout_usec = REGISTRY_PROBE_TIMEOUT_USEC,
                                          .any_status = true,
                                          .ca_pem = pem,
                                          .ca_pem_size = size,
                                  },
                                  on_probed, r, &r->probe);
}

static int start_probe(OscRunner *r, const OscWork *w) {
        log_info("Probing the %zu host(s) of registry upstream %s before writing its hosts.toml.",
                 w->registry.n_hosts, w->registry.upstream);
        r->probe_host = 0;
        return probe_next_host(r);
}

/* The kubelet binary is the kubelet store's (staged, switched and rolled back by the transaction);
 * the OSC's imageRef entry for it is satisfied by that. Both name it as the OSC does (the store
 * puts it below osc.rootDirectory). */
static bool is_kubelet_binary(const OscRunner *r, const char *path) {
        return streq_ptr(path, r->deps.config->kubelet.binary_path);
}

static void on_pulled(FileStage *st, const FileStageResult *res, void *userdata) {
        OscRunner *r = userdata;
        const OscWork *w = current_work(r);
        _cleanup_free_ char *detail = NULL;
        int k = res->error;

        if (k < 0)
                (void) error_setf(&detail, k, "%s: %s", w->file.image, strempty(res->message));
        else {
                k = osc_install_file(r->deps.config->osc.root_directory, w->file.path, res->path,
                                     osc_file_mode(&w->file));
                if (k < 0)
                        (void) error_setf(&detail, k, "%s", strerror(-k));
                else
                        log_info("Installed %s from %s (%s).", w->file.path, w->file.image,
                                 res->reused ? "already pulled" : strempty(res->file_digest));
        }
        r->pull = file_stage_free(r->pull);  /* `res` is not used below */
        osc_applier_external_done(r->applier, k < 0 ? k : 0, detail);
}

/* An imageRef file (GNP §6.4 step 10) through the kubelet's staging: resolved, every layer verified
 * against its digest, the file extracted safely, kept in a store of its own under a key of image
 * and path (a second apply of the same image does not download again). */
static int start_pull(OscRunner *r, const OscWork *w) {
        _cleanup_free_ char *dir = NULL, *staging = NULL, *key = NULL;
        char hex[DIGEST_STRING_MAX];
        Digest d;
        int k;

        if (!r->images) {
                if (asprintf(&dir, "%s/" OSC_IMAGE_STORE, r->deps.config->state_directory) < 0 ||
                    asprintf(&staging, "%s/staging", r->deps.config->state_directory) < 0)
                        return -ENOMEM;
                k = file_store_new(dir, staging, "file", &r->images);
                if (k < 0)
                        return answer_later(r, k, "cannot create the image file store");
        }
        if (asprintf(&key, "%s\n%s", w->file.image, w->file.file_in_image) < 0 || digest_buffer(key, strlen(key), &d) < 0)
                return -ENOMEM;
        digest_format_hex(&d, hex);
        hex[32] = 0;
        k = file_stage_start(r->deps.event, r->deps.registry, r->images,
                                &(FileStageRequest) { .image = w->file.image, .file_path = w->file.file_in_image,
                                                         .version = hex },
                                NULL, on_pulled, r, &r->pull);
        if (k == -EINVAL)
                return answer_later(r, k, "not a valid image reference or file path");
        return k;
}

static int on_external(OscApplier *a, const OscWork *w, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *detail = NULL;

        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
                return start_secret(r, w);
        case OSC_WORK_KUBELET_HEALTH:
                return start_health(r);
        case OSC_WORK_REGISTRY:
                return start_probe(r, w);
        case OSC_WORK_PULL_FILE:
                if (is_kubelet_binary(r, w->file.path))
                        return answer_later(r, 0, NULL);
                return start_pull(r, w);
        default:
                if (osc_work_describe(w, &detail) < 0)
                        return -ENOMEM;
                return answer_later(r, -EOPNOTSUPP, detail);
        }
}

/* ---- the run ------------------------------------------------------------------------------------------ */

/* Said once: the item is done all the same (a mask is the admin's decision, not a failure to retry). */
static void on_masked(OscApplier *a, const char *path, const char *left_out, void *userdata) {
        log_warning("%s is masked (a symlink to /dev/null): %s; unmask it for the OSC to manage it.", path, left_out);
}

static int on_items_done(OscApplier *a, const size_t *indices, size_t n, void *userdata) {
        OscRunner *r = userdata;
        const char *self = r->deps.config->restart.self_unit;
        int k;

        if (r->repairing)
                return 0;       /* nothing to resume: the next drift round sees what is left */
        k = osc_state_save_done(r->deps.config->state_directory, r->changes, indices, n);
        for (size_t i = 0; k >= 0 && i < n; i++)
                if (unit_guard_is_self_restart(self, &r->changes->items[indices[i]]))
                        log_notice("OSC %s changed the agent's own unit %s: restarting it now (marked done first, "
                                   "so once); the next process finishes the OSC.", r->checksum, self);
        return k;
}

static void finish(OscRunner *r, int error, UpdateFailureCode code, const char *message) {
        OscRunnerDone done = r->done;
        void *userdata = r->userdata;

        run_clear(r);
        done(r, error, code, message, userdata);
}

static UpdateFailureCode failure_code(const char *name) {
        UpdateFailureCode c = update_failure_code_from_string(name);

        return c >= 0 ? c : UPDATE_FAILURE_FILE_APPLY_FAILED;
}

/* A bootstrap credential below osc.rootDirectory that has done its job: removed, said once. */
static void retire(const char *root, const char *path, const char *what) {
        _cleanup_free_ char *file = NULL;

        if (path_below_root(root, path, &file) < 0) {
                log_oom();
                return;
        }
        if (unlink(file) >= 0) {
                (void) fsync_parent_dir(file);
                log_info("Removed %s %s: the OSC is applied and the Node registered.", what, file);
        } else if (errno != ENOENT)
                log_warning_errno(errno, "Cannot remove %s %s: %m", what, file);
}

void osc_runner_retire_bootstrap_credentials(OscRunner *r) {
        const char *root = r->deps.config->osc.root_directory;

        retire(root, KUBELET_DIRECTORY "/" KUBELET_BOOTSTRAP_KUBECONFIG, "the kubelet's bootstrap kubeconfig");
        retire(root, IDENTITY_GNA_DIRECTORY "/" GNA_BOOTSTRAP_TOKEN, "gardener-node-agent's bootstrap token");
}

/* Every item is done: the OSC becomes the last-applied one (GNP §6.4 step 19). */
static void commit(OscRunner *r) {
        _cleanup_free_ char *message = NULL;
        size_t n;
        int k;

        k = osc_state_commit(r->deps.config->state_directory, r->yaml, r->yaml_size);
        if (k < 0) {
                if (asprintf(&message, "%s/%s: %s", r->deps.config->state_directory, OSC_STATE_LAST_APPLIED,
                             strerror(-k)) < 0)
                        message = NULL;
                return finish(r, k, UPDATE_FAILURE_FILE_APPLY_FAILED, message ?: "cannot record the last-applied OSC");
        }
        n = r->changes ? r->changes->n_items : 0;
        r->committed = true;
        r->yaml = mfree(r->yaml);
        r->changes = osc_changes_free(r->changes);
        json_decref(r->plan);
        r->plan = NULL;
        log_notice("Applied every change of OSC %s (%zu item(s)); it is the last-applied OSC now.", r->checksum, n);
        finish(r, 0, _UPDATE_FAILURE_INVALID, NULL);
}

static void on_finished(OscApplier *a, const OscApplyFailure *f, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *message = NULL;
        UpdateFailureCode code;
        int k;

        if (!f && r->repairing)
                return finish(r, 0, _UPDATE_FAILURE_INVALID, NULL);
        if (!f)
                return commit(r);
        code = failure_code(f->code);
        /* Upstream's reason for MCM (GNP scenario 25); everything else names its path or unit. */
        if (code == UPDATE_FAILURE_KUBELET_UNHEALTHY)
                k = asprintf(&message, "kubelet is not healthy after in-place update: %s", strempty(f->detail));
        else
                k = asprintf(&message, "%s: %s", strempty(f->subject), strempty(f->detail));
        if (k < 0)
                message = NULL;
        finish(r, f->error < 0 ? f->error : -EIO, code, message ?: "applying the OSC failed");
}

/* Nothing left to run (committed before a restart, or an OSC without file or unit changes). */
static int on_nothing_to_run(sd_event_source *s, void *userdata) {
        OscRunner *r = userdata;

        if (r->committed)
                finish(r, 0, _UPDATE_FAILURE_INVALID, NULL);
        else
                commit(r);
        return 0;
}

static int start_applier(OscRunner *r) {
        static const OscApplierCallbacks cb = {
                .items_done = on_items_done,
                .finished = on_finished,
                .external = on_external,
                .masked = on_masked,
        };
        const Config *c = r->deps.config;
        int k;

        k = osc_applier_new(r->deps.event, r->deps.units, r->running,
                            &(OscApplierParams) { .root_directory = c->osc.root_directory,
                                                  .unit_directory = c->systemd.unit_directory,
                                                  .self_unit = c->restart.self_unit,
                                                  .restore = r->repairing },
                            &cb, r, &r->applier);
        if (k >= 0)
                k = osc_applier_start(r->applier);
        return k;
}

static void on_guarded(OscGuard *g, int error, const char *unit, const char *why, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *message = NULL;
        int k;

        if (error >= 0) {
                r->guard = osc_guard_free(r->guard);
                k = start_applier(r);
                if (k >= 0)
                        return;
                return finish(r, k, UPDATE_FAILURE_FILE_APPLY_FAILED, "cannot start applying the OSC");
        }
        /* Refused, or systemd could not be asked: either way nothing of the OSC ran. */
        if (asprintf(&message, "%s: %s", strempty(unit), strempty(why)) < 0)
                message = NULL;
        finish(r, error, UPDATE_FAILURE_UNIT_APPLY_FAILED, message ?: "an OSC unit is refused");
}

static int start_guard(OscRunner *r) {
        const Config *c = r->deps.config;

        return osc_guard_start(unit_control_get_bus(r->deps.units),
                               &(OscGuardParams) { .self_unit = c->restart.self_unit,
                                                   .replaced_units = c->osc.replaced_units,
                                                   .kubelet_unit = c->kubelet.unit,
                                                   .containerd_unit = OSC_CONTAINERD_UNIT },
                               r->running, on_guarded, r, &r->guard);
}

static void on_reached(const UnitJobResult *result, void *userdata) {
        OscRunner *r = userdata;
        int k;

        r->reach = NULL;
        k = result->error < 0 ? result->error : start_guard(r);
        if (k < 0)
                finish(r, k, UPDATE_FAILURE_UNIT_APPLY_FAILED,
                       result->detail ?: "cannot ask systemd about the OSC's units");
}

/* The guard asks systemd over the connection of the moment. While there is none (the bus restarts,
 * systemd re-executes) the run waits for it like any unit job, rather than apply unit items unjudged. */
static int start_guard_or_applier(OscRunner *r) {
        int k;

        if (!osc_guard_needed(r->running))
                return start_applier(r);
        k = unit_control_reach(r->deps.units, on_reached, r, &r->reach);
        return k > 0 ? start_guard(r) : k;
}

int osc_runner_apply(OscRunner *r, const char *checksum, OscRunnerDone done, void *userdata) {
        int k;

        assert(r && done);
        if (r->applier || r->guard || r->reach || r->answer)
                return -EBUSY;
        if (streq_ptr(r->checksum, checksum) && r->error)
                return -ENODATA;
        if (!streq_ptr(r->checksum, checksum) || (!r->committed && !r->changes))
                return -ESTALE;
        r->done = done;
        r->userdata = userdata;
        r->running = r->changes;
        if (r->committed || osc_changes_next(r->changes) >= r->changes->n_items) {
                k = sd_event_add_defer(r->deps.event, &r->answer, on_nothing_to_run, r);
                if (k < 0)
                        run_clear(r);
                return k;
        }
        if (!r->deps.units) {
                run_clear(r);
                return -ENOTCONN;
        }
        k = start_guard_or_applier(r);
        if (k < 0)
                run_clear(r);
        return k;
}

const char *osc_runner_error(const OscRunner *r, UpdateFailureCode *ret_code) {
        if (ret_code)
                *ret_code = r->error_code;
        return r->error;
}

int osc_runner_repair(OscRunner *r, OscChanges *c, OscRunnerDone done, void *userdata) {
        int k;

        assert(r && c && done);
        if (r->applier || r->guard || r->reach || r->answer)
                return -EBUSY;
        if (!r->deps.units)
                return -ENOTCONN;
        r->done = done;
        r->userdata = userdata;
        r->running = c;
        r->repairing = true;
        k = start_guard_or_applier(r);
        if (k < 0)
                run_clear(r);
        return k;
}

bool osc_runner_work_pending(const OscRunner *r) {
        _cleanup_free_ char *path = NULL;

        /* Once the current OSC is prepared, that says it: a saved list of another checksum is never
         * resumed (an OSC whose work could not be computed wrote nothing, and its diff starts from
         * the last-applied OSC a repair restores). Before (at start), a saved list may be resumed. */
        if (r->checksum)
                return r->changes && !r->committed;
        if (asprintf(&path, "%s/%s", r->deps.config->state_directory, OSC_STATE_CHANGES) < 0)
                return true;    /* not knowing is not "nothing pending" */
        return access(path, F_OK) >= 0;
}

const OscModelOptions *osc_runner_model_options(const OscRunner *r) {
        return &r->model_options;
}

const OscProtected *osc_runner_own_files(const OscRunner *r) {
        return &r->own_files;
}

void osc_runner_cancel(OscRunner *r) {
        if (r)
                run_clear(r);
}

/* ---- setup ---------------------------------------------------------------------------------------------- */

static char *lower_host_name(void) {
        char buf[256] = "";

        if (gethostname(buf, sizeof(buf) - 1) < 0)
                return strdup("");
        for (char *p = buf; *p; p++)
                *p = (char) tolower((unsigned char) *p);
        return strdup(buf);
}

/* `path` as named (its directory resolved, the last component not followed: an OSC file's own
 * canonical form) and, where it exists, with every symlink resolved (a state directory that is a
 * symlink is protected where it leads). */
static int protect(OscProtected *p, const char *path, const char *what) {
        _cleanup_close_ int root_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *named = NULL, *real = NULL;
        int k;

        if (root_fd < 0)
                return -errno;
        k = path_in_root_canonical(root_fd, path, &named);
        if (k >= 0)
                k = osc_protected_add(p, named, what);
        real = realpath(path, NULL);
        if (k >= 0 && real)
                k = osc_protected_add(p, real, what);
        return k == -ENOMEM ? k : 0;    /* a path that is no path protects nothing */
}

/* Issue 23: the agent's state and configuration directories, its binary, and its unit files and
 * drop-in directories where systemd looks for them (systemd.unitDirectory and the vendor directory). */
static int protect_own_files(OscRunner *r) {
        const Config *c = r->deps.config;
        const char *const unit_dirs[] = { c->systemd.unit_directory, "/usr/lib/systemd/system" };
        _cleanup_free_ char *exe = realpath("/proc/self/exe", NULL);
        int k;

        k = protect(&r->own_files, c->state_directory, "state directory");
        if (k >= 0 && c->config_directory)
                k = protect(&r->own_files, c->config_directory, "configuration directory");
        if (k >= 0 && exe)
                k = protect(&r->own_files, exe, "binary");
        for (size_t i = 0; k >= 0 && i < ELEMENTSOF(unit_dirs); i++) {
                _cleanup_free_ char *unit = NULL, *drop_ins = NULL;

                if (asprintf(&unit, "%s/%s", unit_dirs[i], c->restart.self_unit) < 0 ||
                    asprintf(&drop_ins, "%s.d", unit) < 0)
                        return -ENOMEM;
                k = protect(&r->own_files, unit, "unit file");
                if (k >= 0)
                        k = protect(&r->own_files, drop_ins, "drop-in directory");
        }
        for (size_t i = 0; k >= 0 && i < r->own_files.n_items; i++)
                log_debug("No OSC file may write or remove %s (the agent's %s).", r->own_files.items[i].path,
                          r->own_files.items[i].what);
        return k;
}

int osc_runner_new(const OscRunnerDeps *deps, OscRunner **ret) {
        _cleanup_(osc_runner_freep) OscRunner *r = NULL;
        int k;

        assert(deps && deps->event && deps->config && deps->http && ret);
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->deps = *deps;
        r->error_code = _UPDATE_FAILURE_INVALID;
        r->host_name = lower_host_name();
        if (!r->host_name)
                return -ENOMEM;
        r->model_options = (OscModelOptions) { .host_name = r->host_name, .containerd_path = getenv("PATH") };
        k = protect_own_files(r);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}

OscRunner *osc_runner_free(OscRunner *r) {
        if (!r)
                return NULL;
        run_clear(r);
        prepared_clear(r);
        free(r->logged_error);
        file_store_free(r->images);
        free(r->host_name);
        osc_protected_done(&r->own_files);
        free(r->desired);
        free(r);
        return NULL;
}

void osc_runner_set_desired(OscRunner *r, const char *checksum) {
        int k;

        if (free_and_strdup(&r->desired, checksum) < 0) {
                log_oom();
                return;
        }
        if (!r->probe || !superseded(r))
                return;
        k = abandon_probe(r);
        if (k < 0)
                /* The probe keeps its own deadline; the newer OSC comes after it. */
                log_warning_errno(k, "Cannot end the readiness probe for the newer OSC %s: %m", r->desired);
}

void osc_runner_set_kube(OscRunner *r, KubeClient *kube) {
        r->kube = kube;
}

void osc_runner_set_units(OscRunner *r, UnitControl *units) {
        r->deps.units = units;
}
