/* SPDX-License-Identifier: Apache-2.0 */
/* The OSC runner's own items: those that need the world outside the node, which the applier stops
 * at (osc-runner-internal.h). Each is the runner's one operation in flight until its callback ends
 * the item with osc_runner_item_ended(). */
#include <stdio.h>

#include "apply/osc-files.h"
#include "kube/kube-path.h"
#include "kubelet/kubelet-health.h"
#include "oci/digest.h"
#include "osc-runner-internal.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/log.h"

/* The imageRef files other than the kubelet: <stateDirectory>/osc-images/<key>/file, the key a hash
 * of image and path (oci/file-store.h). */
#define OSC_IMAGE_STORE "osc-images"
/* A registry's readinessProbe: upstream probes every 2 s until its reconcile ends; we give each host
 * 5 minutes, then fail the item (FileApplyFailed, retried with back-off), so a mirror that never
 * comes is visible instead of a silent wait; a newer OSC ends the wait at once
 * (osc_runner_set_desired()). 5 s per request where upstream allows 1 s: a mirror starting on a busy
 * node is slow, not absent. */
#define REGISTRY_PROBE_INTERVAL_USEC (2 * USEC_PER_SEC)
#define REGISTRY_PROBE_REQUEST_TIMEOUT_USEC (5 * USEC_PER_SEC)
#define REGISTRY_PROBE_TIMEOUT_USEC (300 * USEC_PER_SEC)
#define REGISTRY_CA_MAX (1024 * 1024)

/* ---- our items: a secretRef file ---------------------------------------------------------------- */

static void on_secret(KubeRequest *req, int error, json_t *object, void *userdata) {
        OscRunner *r = userdata;
        const OscWork *w = osc_runner_current(r);
        const char *value =
                json_string_value(json_object_get(json_object_get(object, "data"), w->file.secret_key));
        _cleanup_free_ char *data = NULL, *detail = NULL;
        size_t size = 0;
        int k;

        if (error < 0)
                k = error_setf(&detail, error, "reading Secret %s: %s", w->file.secret_name,
                               strerror(-error));
        else if (!value)
                k = error_setf(&detail, -ENOENT, "Secret %s has no data key %s", w->file.secret_name,
                               w->file.secret_key);
        else if (base64_decode(value, SIZE_MAX, &data, &size) < 0)
                k = error_setf(&detail, -EBADMSG, "Secret %s: data key %s is not base64",
                               w->file.secret_name, w->file.secret_key);
        else {
                /* The content is a secret: only the path and the errno ever reach a message. */
                k = osc_write_file(r->deps.config->osc.root_directory, w->file.path, data, size,
                                   osc_file_mode(&w->file), /* if_changed= */ true);
                if (k < 0)
                        (void) error_setf(&detail, k, "%s", strerror(-k));
        }
        if (data)
                explicit_bzero(data, size);
        osc_runner_op_clear(r); /* `object` is not used below */
        osc_runner_item_ended(r, MIN(k, 0), detail);
}

/* 0: the GET is in flight; -errno (and maybe *ret_detail) when it cannot start. */
static int start_secret(OscRunner *r, const OscWork *w, char **ret_detail) {
        _cleanup_free_ char *path = NULL;
        KubeRequest *req = NULL;
        int k;

        if (!r->kube)
                return error_setf(ret_detail, -ENOTCONN, "no API server connection to read the Secret");
        /* The model refused an invalid name already (InvalidDesiredState); a saved work list from an
         * older version may still hold one. */
        k = kube_path(KUBE_RESOURCE_SECRETS, r->deps.config->osc.namespace, w->file.secret_name, NULL,
                      &path);
        if (k == -EINVAL)
                return error_setf(ret_detail, k, "not a valid Secret name");
        if (k >= 0)
                k = kube_client_get(r->kube, path, on_secret, r, &req);
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_SECRET, .secret = req };
        return 0;
}

/* ---- our items: the kubelet health check -------------------------------------------------------- */

static void on_health(HttpProbe *p, int error, const char *message, unsigned n_probes, void *userdata) {
        OscRunner *r = userdata;
        _cleanup_free_ char *detail = error < 0 ? strdup(strempty(message)) : NULL;

        osc_runner_op_clear(r);
        osc_runner_item_ended(r, MIN(error, 0), detail);
}

static int start_health(OscRunner *r) {
        HttpProbeOptions o = kubelet_health_probe(r->deps.config);
        HttpProbe *p = NULL;
        int k;

        k = http_probe_start(r->deps.event, r->deps.http, &o, on_health, r, &p);
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_KUBELET_HEALTH, .probe = p };
        return 0;
}

/* ---- our items: a registry's readiness probe ---------------------------------------------------- */

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

                if ((**ca == '/' ? asprintf(&path, "%s", *ca) :
                                   asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s/%s", g->upstream, *ca)) < 0)
                        return -ENOMEM;
                k = path_below_root(r->deps.config->osc.root_directory, path, &full);
                if (k >= 0)
                        k = read_full_file(full, REGISTRY_CA_MAX, &pem, &size);
                if (k < 0)
                        return error_setf(ret_detail, k, "upstream %s: CA file %s of host %s: %s",
                                          g->upstream, path, h->url, strerror(-k));
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

/* A newer OSC than the one being applied is published. */
static bool superseded(const OscRunner *r) {
        return r->desired && r->checksum && !streq(r->desired, r->checksum);
}

/* -ESTALE and why the probe of the current host ends: a newer OSC is there. */
static int abandoned(const OscRunner *r, char **ret_detail) {
        const OscRegistry *g = &osc_runner_current(r)->registry;

        return error_setf(ret_detail, -ESTALE,
                          "upstream %s: readiness probe of %s abandoned: OSC %s supersedes this one",
                          g->upstream, g->hosts[r->probe_host].url, r->desired);
}

static void on_probed(HttpProbe *p, int error, const char *message, unsigned n_probes, void *userdata);

/* docs/node-protocol.md §6.4 step 9: a new or changed registry with readinessProbe gets its hosts.toml only
 * once each of its hosts answers. Its item comes after the unit commands and the kubelet health check
 * (core/osc-diff.h), where upstream waits for its asynchronous probes: a mirror running in this
 * cluster, which may need this very node, never holds the node's own files and units back. 1: every
 * host answered and hosts.toml is written; 0: a probe is in flight; -errno (and *ret_detail). */
static int probe_next_host(OscRunner *r, char **ret_detail) {
        const OscRegistry *g = &osc_runner_current(r)->registry;
        _cleanup_free_ char *pem = NULL;
        HttpProbe *p = NULL;
        size_t size = 0;
        int k;

        if (r->probe_host >= g->n_hosts) {
                k = osc_write_registry(r->deps.config->osc.root_directory, g);
                return k < 0 ? error_setf(ret_detail, k, "%s", strerror(-k)) : 1;
        }
        /* Once a newer OSC is there the wait helps nobody (it may drop or fix the mirror). */
        if (superseded(r))
                return abandoned(r, ret_detail);
        k = read_host_cas(r, g, &g->hosts[r->probe_host], &pem, &size, ret_detail);
        if (k >= 0)
                k = http_probe_start(r->deps.event, r->deps.http,
                                     &(HttpProbeOptions) {
                                             .url = g->hosts[r->probe_host].url,
                                             .interval_usec = REGISTRY_PROBE_INTERVAL_USEC,
                                             .request_timeout_usec = REGISTRY_PROBE_REQUEST_TIMEOUT_USEC,
                                             .timeout_usec = REGISTRY_PROBE_TIMEOUT_USEC,
                                             .any_status = true,
                                             .ca_pem = pem,
                                             .ca_pem_size = size,
                                     },
                                     on_probed, r, &p);
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_REGISTRY_PROBE, .probe = p };
        return 0;
}

static void on_probed(HttpProbe *p, int error, const char *message, unsigned n_probes, void *userdata) {
        OscRunner *r = userdata;
        const OscRegistry *g = &osc_runner_current(r)->registry;
        _cleanup_free_ char *detail = NULL;
        int k;

        if (error < 0)
                k = error_setf(&detail, error, "upstream %s: %s", g->upstream, strempty(message));
        else {
                log_info("Registry host %s of upstream %s answered after %u probe(s).",
                         g->hosts[r->probe_host].url, g->upstream, n_probes);
                r->probe_host++;
        }
        osc_runner_op_clear(r); /* `message` is not used below */
        if (error >= 0) {
                k = probe_next_host(r, &detail);
                if (k == 0)
                        return;
        }
        osc_runner_item_ended(r, MIN(k, 0), detail ?: "cannot start the next probe");
}

static int start_probe(OscRunner *r, const OscWork *w, char **ret_detail) {
        log_info("Probing the %zu host(s) of registry upstream %s before writing its hosts.toml.",
                 w->registry.n_hosts, w->registry.upstream);
        r->probe_host = 0;
        return probe_next_host(r, ret_detail);
}

/* ---- our items: an imageRef file ---------------------------------------------------------------- */

/* The kubelet binary is the kubelet store's (staged, switched and rolled back by the transaction);
 * the OSC's imageRef entry for it is satisfied by that. Both name it as the OSC does (the store
 * puts it below osc.rootDirectory). */
static bool is_kubelet_binary(const OscRunner *r, const char *path) {
        return streq_ptr(path, r->deps.config->kubelet.binary_path);
}

static void on_pulled(FileStage *st, const FileStageResult *res, void *userdata) {
        OscRunner *r = userdata;
        const OscWork *w = osc_runner_current(r);
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
        osc_runner_op_clear(r); /* `res` is not used below */
        osc_runner_item_ended(r, MIN(k, 0), detail);
}

/* An imageRef file (docs/node-protocol.md §6.4 step 10) through the same staging as the kubelet's: resolved,
 * every layer verified against its digest, the file extracted safely, kept in a store of its own under a key
 * of image and path (a second apply of the same image does not download again). 1: nothing to pull (the
 * kubelet's), 0: pulling, -errno (and *ret_detail). */
static int start_pull(OscRunner *r, const OscWork *w, char **ret_detail) {
        _cleanup_free_ char *dir = NULL, *staging = NULL, *key = NULL;
        char hex[DIGEST_STRING_MAX];
        FileStage *st = NULL;
        Digest d;
        int k;

        if (is_kubelet_binary(r, w->file.path))
                return 1;
        if (!r->images) {
                if (asprintf(&dir, "%s/" OSC_IMAGE_STORE, r->deps.config->state_directory) < 0 ||
                    asprintf(&staging, "%s/staging", r->deps.config->state_directory) < 0)
                        return -ENOMEM;
                k = file_store_new(dir, staging, "file", &r->images);
                if (k < 0)
                        return error_setf(ret_detail, k, "cannot create the image file store");
        }
        if (asprintf(&key, "%s\n%s", w->file.image, w->file.file_in_image) < 0 ||
            digest_buffer(key, strlen(key), &d) < 0)
                return -ENOMEM;
        digest_format_hex(&d, hex);
        hex[32] = 0;
        k = file_stage_start(r->deps.event, r->deps.registry, r->images,
                             &(FileStageRequest) { .image = w->file.image,
                                                   .file_path = w->file.file_in_image,
                                                   .version = hex },
                             NULL, on_pulled, r, &st);
        if (k == -EINVAL)
                return error_setf(ret_detail, k, "not a valid image reference or file path");
        if (k < 0)
                return k;
        r->op = (OscOp) { .kind = OSC_OP_PULL, .pull = st };
        return 0;
}

int osc_runner_start_item(OscRunner *r, const OscWork *w, char **ret_detail) {
        _cleanup_free_ char *d = NULL;

        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
                return start_secret(r, w, ret_detail);
        case OSC_WORK_KUBELET_HEALTH:
                return start_health(r);
        case OSC_WORK_REGISTRY:
                return start_probe(r, w, ret_detail);
        case OSC_WORK_PULL_FILE:
                return start_pull(r, w, ret_detail);
        default:
                (void) osc_work_describe(w, &d);
                return error_setf(ret_detail, -EOPNOTSUPP, "%s", strempty(d));
        }
}

/* ---- a newer OSC ---------------------------------------------------------------------------------- */

void osc_runner_set_desired(OscRunner *r, const char *checksum) {
        _cleanup_free_ char *detail = NULL;
        int k;

        if (free_and_strdup(&r->desired, checksum) < 0) {
                log_oom();
                return;
        }
        if (r->op.kind != OSC_OP_REGISTRY_PROBE || !superseded(r))
                return;
        /* The item fails from the loop: our caller (the executor taking the newer OSC) is on the stack. */
        k = abandoned(r, &detail);
        k = detail ? osc_runner_op_step(r, k, detail) : -ENOMEM;
        if (k < 0)
                /* The probe keeps its own deadline; the newer OSC comes after it. */
                log_warning_errno(k, "Cannot end the readiness probe for the newer OSC %s: %m", r->desired);
}
