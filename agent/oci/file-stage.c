/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/eventfd.h>

#include "oci/file-stage.h"
#include "oci/registry-blob.h"
#include "oci/registry-manifest.h"
#include "util/string-util.h"

/* One extraction on the worker thread. The thread reads only this struct, the files it names and
 * the feed. */
typedef struct ExtractJob {
        int layer_fd;    /* owned */
        LayerFeed *feed; /* borrowed from the stage: the layer is still downloading; or NULL */
        char *file_path; /* owned */
        char *staging;   /* owned */
        char *out_name;  /* owned */
        ArchiveLimits limits;
        int efd; /* borrowed: written once when done */
        /* results */
        int r;
        ArchiveExtractResult res;
        char *message; /* owned */
} ExtractJob;

struct FileStage {
        sd_event *event;                   /* ref held */
        RegistryClient *registry;          /* borrowed */
        FileStore *store;                  /* borrowed */
        OciRef *ref;                       /* owned */
        char *image;                       /* owned */
        char *file_path;                   /* owned */
        char *version;                     /* owned */
        char *os, *architecture, *variant; /* owned; NULL = this machine's platform */
        ArchiveLimits limits;

        RegistryOp *op;              /* owned: resolve or blob fetch in flight */
        OciManifest *manifest;       /* owned copy of the layer list (layers only) */
        char *manifest_digest;       /* owned */
        size_t layer;                /* index of the layer being fetched / searched */
        char **blobs;                /* owned: paths of fetched blobs, per layer (NULL if not fetched) */
        uint64_t total, done_before; /* progress: sum of layer sizes; bytes of finished layers */
        uint64_t downloaded;

        /* Per layer: extraction overlaps the download. The thread follows the .partial file through the
         * feed while the registry writes it; the file it produces is installed only once the blob's
         * digest matched and the feed stayed valid (the bytes read are the verified ones); otherwise
         * the verified blob is extracted again, as without streaming. */
        LayerFeed *feed; /* owned: the thread reads through it; NULL = not streaming */
        uint64_t fed;    /* bytes of the layer the feed was told are final */
        bool blob_done;  /* the layer's blob op finished (blob_error says how) */
        int blob_error;
        ArtifactFailure blob_failure;
        char *blob_message; /* owned */

        pthread_t thread;
        bool thread_running;
        ExtractJob *job;             /* owned */
        int efd;                     /* owned */
        sd_event_source *efd_source; /* owned */
        sd_event_source *defer;      /* owned: reuse without requests */

        FileStageProgress on_progress;
        FileStageDone on_done;
        void *userdata; /* borrowed */
};

static void extract_job_free(ExtractJob *j) {
        if (!j)
                return;
        if (j->layer_fd >= 0)
                (void) close(j->layer_fd);
        free(j->file_path);
        free(j->staging);
        free(j->out_name);
        free(j->message);
        free(j);
}

static void stage_join(FileStage *st) {
        if (st->thread_running) {
                (void) pthread_join(st->thread, NULL);
                st->thread_running = false;
        }
}

FileStage *file_stage_free(FileStage *st) {
        if (!st)
                return NULL;
        /* A reader waiting for bytes that will never come must be let go before the join. */
        if (st->feed)
                layer_feed_end(st->feed, -ECANCELED);
        stage_join(st);
        layer_feed_free(st->feed);
        free(st->blob_message);
        extract_job_free(st->job);
        sd_event_source_disable_unref(st->efd_source);
        sd_event_source_disable_unref(st->defer);
        if (st->efd >= 0)
                (void) close(st->efd);
        registry_op_free(st->op);
        if (st->manifest && st->blobs)
                for (size_t i = 0; i < st->manifest->n_layers; i++)
                        free(st->blobs[i]);
        free(st->blobs);
        oci_manifest_free(st->manifest);
        free(st->manifest_digest);
        oci_ref_free(st->ref);
        free(st->image);
        free(st->file_path);
        free(st->version);
        free(st->os);
        free(st->architecture);
        free(st->variant);
        sd_event_unref(st->event);
        free(st);
        return NULL;
}

ArtifactFailure file_stage_failure_from_extract_error(int error) {
        switch (error) {
        case -EXDEV:
        case -E2BIG:
        case -ENAMETOOLONG:
        case -EFBIG:
        case -EMEDIUMTYPE:
        case -EBADMSG:
                return ARTIFACT_FAILURE_UNSAFE_ARCHIVE;
        case -ENOSPC:
        case -EDQUOT:
                return ARTIFACT_FAILURE_DISK_SPACE;
        default:
                return ARTIFACT_FAILURE_UNAVAILABLE;
        }
}

/* Removes the fetched layer blobs: they are large and, once the file is in the store, useless. A
 * retriable failure keeps them for the next attempt. */
static void stage_drop_blobs(FileStage *st) {
        if (!st->manifest || !st->blobs)
                return;
        for (size_t i = 0; i < st->manifest->n_layers; i++)
                if (st->blobs[i])
                        (void) unlink(st->blobs[i]);
}

static void stage_finish(FileStage *st, int error, ArtifactFailure failure, const char *message,
                         const char *file_digest, bool reused) {
        /* Copies: the callback may free st and still read the result. */
        _cleanup_free_ char *path = NULL, *version = strdup(st->version),
                            *manifest_digest = st->manifest_digest ? strdup(st->manifest_digest) : NULL;
        FileStageResult res = {
                .error = error,
                .failure = error < 0 ? failure : ARTIFACT_FAILURE_NONE,
                .message = error < 0 ? (message ? message : strerror(-error)) : NULL,
                .version = version,
                .manifest_digest = manifest_digest,
                .file_digest = file_digest,
                .bytes_downloaded = st->downloaded,
                .reused = reused,
        };

        if (error >= 0 || failure != ARTIFACT_FAILURE_UNAVAILABLE)
                stage_drop_blobs(st);
        if (error >= 0 && file_store_path(st->store, st->version, &path) >= 0)
                res.path = path;
        st->op = registry_op_free(st->op);
        st->on_done(st, &res, st->userdata); /* may free st */
}

static void stage_failf(FileStage *st, int error, ArtifactFailure failure, const char *fmt, ...)
        _printf_(4, 5);
static void stage_failf(FileStage *st, int error, ArtifactFailure failure, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        m = strdup_vprintf(fmt, ap);
        va_end(ap);
        stage_finish(st, error < 0 ? error : -EIO, failure, m, NULL, /* reused= */ false);
}

static void *extract_thread(void *userdata) {
        ExtractJob *j = userdata;
        uint64_t one = 1;

        j->r = archive_extract_layer_fed(j->layer_fd, j->feed, j->file_path, j->staging, j->out_name,
                                         &j->limits, &j->res, &j->message);
        /* An eventfd write of 8 bytes cannot fail short of a bug; nothing to do here if it did. */
        if (write(j->efd, &one, sizeof(one)) != sizeof(one))
                return NULL;
        return NULL;
}

static void stage_fetch_layer(FileStage *st);

static int stage_install(FileStage *st, ExtractJob *j) {
        _cleanup_free_ char *staged = NULL, *json = NULL;
        json_auto_t *src = NULL;
        char layer_digest[DIGEST_STRING_MAX], file_digest[DIGEST_STRING_MAX];

        if (asprintf(&staged, "%s/%s", j->staging, j->out_name) < 0)
                return -ENOMEM;
        src = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "image", st->image, "filePathInImage",
                        st->file_path, "manifestDigest", st->manifest_digest, "layerDigest",
                        digest_format(&st->manifest->layers[st->layer].digest, layer_digest), "sha256",
                        digest_format(&j->res.digest, file_digest), "size", (json_int_t) j->res.size);
        if (!src)
                return -ENOMEM;
        json = json_dumps(src, JSON_SORT_KEYS);
        if (!json)
                return -ENOMEM;
        return file_store_install(st->store, st->version, staged, json);
}

static int stage_start_extract(FileStage *st, int layer_fd);

/* Throws away what an extraction produced (a streamed one whose bytes turned out not to be final). */
static void stage_discard_job(FileStage *st) {
        ExtractJob *j = TAKE_PTR(st->job);
        _cleanup_free_ char *staged = NULL;

        if (j && j->r >= 0 && j->res.lookup == ARCHIVE_LOOKUP_FOUND &&
            asprintf(&staged, "%s/%s", j->staging, j->out_name) >= 0)
                (void) unlink(staged);
        extract_job_free(j);
}

static void stage_handle_job(FileStage *st, ExtractJob *j) {
        _cleanup_free_ char *staged = NULL;
        char digest_s[DIGEST_STRING_MAX];
        int r;

        if (j->r < 0) {
                _cleanup_free_ char *m = TAKE_PTR(j->message);
                size_t layer = st->layer;

                r = j->r;
                extract_job_free(j);
                stage_failf(st, r, file_stage_failure_from_extract_error(r), "layer %zu of %s: %s", layer,
                            st->image, m ? m : strerror(-r));
                return;
        }

        switch (j->res.lookup) {
        case ARCHIVE_LOOKUP_FOUND:
                r = stage_install(st, j);
                digest_format(&j->res.digest, digest_s);
                if (r < 0 && asprintf(&staged, "%s/%s", j->staging, j->out_name) >= 0)
                        (void) unlink(staged);
                extract_job_free(j);
                if (r < 0) {
                        stage_failf(st, r,
                                    r == -ENOSPC ? ARTIFACT_FAILURE_DISK_SPACE :
                                                   ARTIFACT_FAILURE_UNAVAILABLE,
                                    "cannot install %s of %s into the store: %s", st->file_path, st->image,
                                    strerror(-r));
                        return;
                }
                stage_finish(st, 0, ARTIFACT_FAILURE_NONE, NULL, digest_s, /* reused= */ false);
                return;
        case ARCHIVE_LOOKUP_ABSENT:
                extract_job_free(j);
                if (st->layer == 0) {
                        stage_failf(st, -ENOENT, ARTIFACT_FAILURE_UNAVAILABLE, "%s not found in image %s",
                                    st->file_path, st->image);
                        return;
                }
                st->done_before += st->manifest->layers[st->layer].size;
                st->layer--;
                stage_fetch_layer(st);
                return;
        default:
                r = j->res.lookup;
                extract_job_free(j);
                stage_failf(st, -ENOENT, ARTIFACT_FAILURE_UNAVAILABLE,
                            "%s is deleted in layer %zu of image %s (%s)", st->file_path, st->layer,
                            st->image, archive_lookup_to_string(r));
                return;
        }
}

/* Both halves of a layer are in when the blob op finished and no extraction runs: then decide. */
static void stage_continue(FileStage *st) {
        _cleanup_(layer_feed_freep) LayerFeed *feed = NULL;
        int r;

        if (!st->blob_done || st->thread_running)
                return;
        feed = TAKE_PTR(st->feed);
        if (st->blob_error < 0) {
                _cleanup_free_ char *m = TAKE_PTR(st->blob_message);

                stage_discard_job(st);
                stage_failf(st, st->blob_error, st->blob_failure, "%s", strempty(m));
                return;
        }
        if (feed && !layer_feed_is_valid(feed)) {
                /* The download started over while the thread read it: extract the verified blob. */
                _cleanup_close_ int fd = -EBADF;

                stage_discard_job(st);
                fd = open(st->blobs[st->layer], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
                r = fd < 0 ? -errno : stage_start_extract(st, TAKE_FD(fd));
                if (r < 0)
                        stage_failf(st, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot start extraction: %s",
                                    strerror(-r));
                return;
        }
        stage_handle_job(st, TAKE_PTR(st->job));
}

static int stage_on_extracted(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FileStage *st = userdata;
        uint64_t v;

        if (read(st->efd, &v, sizeof(v)) != sizeof(v))
                v = 0; /* the thread is joined below all the same */
        st->efd_source = sd_event_source_disable_unref(st->efd_source);
        stage_join(st);
        stage_continue(st);
        return 0;
}

/* Starts the thread on `layer_fd` (consumed), through st->feed when it is set. */
static int stage_start_extract(FileStage *st, int layer_fd) {
        ExtractJob *j;
        int r;

        j = calloc(1, sizeof(*j));
        if (!j) {
                (void) close(layer_fd);
                return -ENOMEM;
        }
        st->job = j;
        j->efd = st->efd;
        j->limits = st->limits;
        j->layer_fd = layer_fd;
        j->feed = st->feed;
        j->file_path = strdup(st->file_path);
        j->staging = strdup(file_store_staging(st->store));
        if (!j->file_path || !j->staging ||
            asprintf(&j->out_name, "%s-%s.new", file_store_file_name(st->store), st->version) < 0)
                return -ENOMEM;

        r = sd_event_add_io(st->event, &st->efd_source, st->efd, EPOLLIN, stage_on_extracted, st);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(st->efd_source, "file-stage-extract");
        r = -pthread_create(&st->thread, NULL, extract_thread, j);
        if (r < 0)
                return r;
        st->thread_running = true;
        return 0;
}

static void stage_on_blob(RegistryOp *op, const RegistryResult *res, void *userdata) {
        FileStage *st = userdata;
        int r;

        st->downloaded += res->bytes_downloaded;
        if (res->error < 0 && !st->feed) {
                stage_failf(st, res->error, res->failure, "%s", res->message);
                return;
        }
        st->blob_done = true;
        if (res->error < 0) {
                /* The thread stops at its next read; the failure is reported once it has. */
                st->blob_error = res->error;
                st->blob_failure = res->failure;
                st->blob_message = strdup(strempty(res->message));
                layer_feed_end(st->feed, -ECANCELED);
                st->op = registry_op_free(st->op);
                stage_continue(st);
                return;
        }
        st->blobs[st->layer] = strdup(res->blob_path);
        st->op = registry_op_free(st->op); /* res points into it: copy first */
        if (!st->blobs[st->layer]) {
                stage_failf(st, -ENOMEM, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                return;
        }
        if (st->feed) {
                /* Verified. The thread read what the feed was told is final: all of it, unless the
                 * bytes came another way (then the feed is invalid and the blob is extracted again). */
                layer_feed_end(st->feed, st->fed == st->manifest->layers[st->layer].size ? 0 : -ECANCELED);
                stage_continue(st);
                return;
        }
        r = open(st->blobs[st->layer], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        r = r < 0 ? -errno : stage_start_extract(st, r);
        if (r < 0)
                stage_failf(st, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot start extraction: %s",
                            strerror(-r));
}

static void stage_on_blob_progress(RegistryOp *op, uint64_t done, uint64_t total, void *userdata) {
        FileStage *st = userdata;

        if (st->feed) {
                layer_feed_advance(st->feed, done);
                st->fed = done;
        }

        if (st->on_progress)
                st->on_progress(st, st->done_before + done, st->total, st->userdata);
}

/* Follows the blob's .partial file while it downloads. Best effort: without it (the blob was already
 * there, no memory) the layer is extracted after the download, as before. */
static void stage_start_streaming(FileStage *st) {
        _cleanup_free_ char *partial = NULL;
        int fd, r;

        if (registry_blob_partial_path(st->registry, &st->manifest->layers[st->layer].digest, &partial) < 0)
                return;
        fd = open(partial, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return;
        if (layer_feed_new(&st->feed) < 0) {
                (void) close(fd);
                return;
        }
        r = stage_start_extract(st, fd);
        if (r < 0) {
                st->efd_source = sd_event_source_disable_unref(st->efd_source);
                extract_job_free(TAKE_PTR(st->job));
                st->feed = layer_feed_free(st->feed);
        }
}

static void stage_fetch_layer(FileStage *st) {
        int r;

        st->blob_done = false;
        st->blob_error = 0;
        free(st->blob_message);
        st->blob_message = NULL;
        st->fed = 0;
        r = registry_fetch_blob(st->registry, st->ref, &st->manifest->layers[st->layer],
                                stage_on_blob_progress, stage_on_blob, st, &st->op);
        if (r < 0) {
                stage_failf(st, r, r == -ENOSPC ? ARTIFACT_FAILURE_DISK_SPACE : ARTIFACT_FAILURE_UNAVAILABLE,
                            "cannot fetch layer %zu of %s: %s", st->layer, st->image, strerror(-r));
                return;
        }
        stage_start_streaming(st);
}

/* Keep only what the rest of the stage needs from the manifest: its layer list. */
static int copy_layers(const OciManifest *m, OciManifest **ret) {
        _cleanup_(oci_manifest_freep) OciManifest *c = calloc(1, sizeof(OciManifest));

        if (!c)
                return -ENOMEM;
        c->kind = m->kind;
        c->layers = calloc(m->n_layers, sizeof(OciDescriptor));
        if (!c->layers)
                return -ENOMEM;
        for (; c->n_layers < m->n_layers; c->n_layers++) {
                OciDescriptor *d = &c->layers[c->n_layers];

                *d = (OciDescriptor) {
                        .digest = m->layers[c->n_layers].digest,
                        .size = m->layers[c->n_layers].size,
                        .compression = m->layers[c->n_layers].compression,
                        .media_type = strdup(m->layers[c->n_layers].media_type),
                };
                if (!d->media_type)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

static void stage_on_manifest(RegistryOp *op, const RegistryResult *res, void *userdata) {
        FileStage *st = userdata;
        int r;

        if (res->error < 0) {
                stage_failf(st, res->error, res->failure, "%s", res->message);
                return;
        }
        r = copy_layers(res->manifest, &st->manifest);
        if (r >= 0 && !(st->manifest_digest = strdup(res->manifest_digest)))
                r = -ENOMEM;
        if (r >= 0 && !(st->blobs = calloc(st->manifest->n_layers, sizeof(char *))))
                r = -ENOMEM;
        st->op = registry_op_free(st->op);
        if (r < 0) {
                stage_failf(st, r, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                return;
        }
        for (size_t i = 0; i < st->manifest->n_layers; i++)
                st->total += st->manifest->layers[i].size;
        st->layer = st->manifest->n_layers - 1;
        stage_fetch_layer(st);
}

/* Stored before from the same image and path? Then nothing needs to be fetched. */
static bool stage_can_reuse(FileStage *st) {
        _cleanup_free_ char *data = NULL;
        json_auto_t *src = NULL;

        if (file_store_has(st->store, st->version) <= 0 ||
            file_store_read_source(st->store, st->version, &data) < 0)
                return false;
        src = json_loads(data, 0, NULL);
        return streq_ptr(json_string_value(json_object_get(src, "image")), st->image) &&
                streq_ptr(json_string_value(json_object_get(src, "filePathInImage")), st->file_path);
}

static int stage_on_reuse(sd_event_source *s, void *userdata) {
        FileStage *st = userdata;

        st->defer = sd_event_source_disable_unref(st->defer);
        stage_finish(st, 0, ARTIFACT_FAILURE_NONE, NULL, NULL, /* reused= */ true);
        return 0;
}

static int stage_init_request(FileStage *st, const FileStageRequest *req) {
        _cleanup_free_ char *normalized = NULL;
        int r;

        if (isempty(req->image) || isempty(req->file_path))
                return -EINVAL;
        r = oci_ref_parse(req->image, &st->ref);
        if (r < 0)
                return r;
        r = archive_path_normalize(req->file_path, /* allow_absolute= */ true, st->limits.max_path,
                                   &normalized);
        if (r < 0 || isempty(normalized))
                return -EINVAL;
        if (req->version)
                st->version = strdup(req->version[0] == 'v' ? req->version + 1 : req->version);
        else {
                r = oci_ref_tag_version(st->ref, &st->version);
                if (r < 0)
                        return -EINVAL;
        }
        if (!st->version)
                return -ENOMEM;
        if (!file_store_version_is_valid(st->version))
                return -EINVAL;

        /* NULL architecture: registry_resolve() picks this machine's platform. */
        st->image = strdup(req->image);
        st->file_path = strdup(req->file_path);
        if (!st->image || !st->file_path || free_and_strdup(&st->os, req->os) < 0 ||
            free_and_strdup(&st->architecture, req->architecture) < 0 ||
            free_and_strdup(&st->variant, req->variant) < 0)
                return -ENOMEM;
        return 0;
}

int file_stage_start(sd_event *event, RegistryClient *registry, FileStore *store,
                     const FileStageRequest *req, FileStageProgress progress, FileStageDone done,
                     void *userdata, FileStage **ret) {
        _cleanup_(file_stage_freep) FileStage *st = NULL;
        int r;

        assert(event);
        assert(registry);
        assert(store);
        assert(req);
        assert(done);
        assert(ret);

        st = calloc(1, sizeof(*st));
        if (!st)
                return -ENOMEM;
        st->efd = -EBADF;
        st->event = sd_event_ref(event);
        st->registry = registry;
        st->store = store;
        st->on_progress = progress;
        st->on_done = done;
        st->userdata = userdata;
        st->limits = req->limits ? *req->limits : ARCHIVE_LIMITS_DEFAULT;
        st->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (st->efd < 0)
                return -errno;

        r = stage_init_request(st, req);
        if (r < 0)
                return r;

        if (stage_can_reuse(st)) {
                r = sd_event_add_defer(event, &st->defer, stage_on_reuse, st);
                if (r < 0)
                        return r;
        } else {
                r = registry_resolve(registry, st->ref, st->os, st->architecture, st->variant,
                                     stage_on_manifest, st, &st->op);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(st);
        return 0;
}
