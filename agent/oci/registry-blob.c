/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "oci/registry-blob.h"
#include "registry-internal.h"
#include "util/fileio.h"

#define REHASH_SLICE (4U * 1024U * 1024U)

int registry_blob_path(RegistryClient *c, const Digest *d, char **ret) {
        char hex[2 * DIGEST_SHA256_SIZE + 1];

        return asprintf(ret, "%s/%s", c->blob_directory, digest_format_hex(d, hex)) < 0 ? -ENOMEM : 0;
}

int registry_blob_partial_path(RegistryClient *c, const Digest *d, char **ret) {
        char hex[2 * DIGEST_SHA256_SIZE + 1];

        return asprintf(ret, "%s/%s.partial", c->blob_directory, digest_format_hex(d, hex)) < 0 ? -ENOMEM :
                                                                                                  0;
}

/* A blob transfer that failed after its 2xx headers: a stall (the low-speed limit; blob GETs have
 * no overall timeout), or a connection that ended early. Either way the bytes so far are kept. */
static char *describe_blob_cut(const RegistryOp *op, HttpRequest *req, int error) {
        char ds[DIGEST_STRING_MAX];
        int n;
        char *m;

        if (error == -ETIMEDOUT)
                n = asprintf(&m,
                             "blob %s from %s stalled: less than %" PRIu64 " bytes/s for %" PRIu64
                             " s, %" PRIu64 " of %" PRIu64 " bytes on disk, kept to resume",
                             digest_format(&op->blob.digest, ds), http_request_get_url(req),
                             op->client->stall_bytes, op->client->stall_usec / USEC_PER_SEC, op->offset,
                             op->blob.size);
        else
                n = asprintf(&m,
                             "blob %s from %s: transfer cut off (%s), %" PRIu64 " of %" PRIu64
                             " bytes on disk, kept to resume",
                             digest_format(&op->blob.digest, ds), http_request_get_url(req),
                             strerror(-error), op->offset, op->blob.size);
        return n < 0 ? NULL : m;
}

static int blob_write(RegistryOp *op, const void *data, size_t size) {
        const char *p = data;

        for (size_t left = size; left > 0;) {
                ssize_t n = pwrite(op->fd, p, left, (off_t) op->offset + (off_t) (size - left));

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                left -= (size_t) n;
        }
        return digest_context_update(op->hash, data, size);
}

static int blob_on_data(HttpRequest *req, const void *data, size_t size, void *userdata) {
        RegistryOp *op = userdata;
        int r;

        if (op->offset + size > op->blob.size) {
                op->stream_failure = ARTIFACT_FAILURE_DIGEST_MISMATCH;
                return -EFBIG;
        }
        r = blob_write(op, data, size);
        if (r < 0) {
                op->stream_failure = r == -ENOSPC || r == -EDQUOT ? ARTIFACT_FAILURE_DISK_SPACE :
                                                                    ARTIFACT_FAILURE_UNAVAILABLE;
                return r;
        }
        op->offset += size;
        op->downloaded += size;
        if (op->on_progress)
                op->on_progress(op, op->offset, op->blob.size, op->userdata);
        return 0;
}

void registry_blob_restart_from_zero(RegistryOp *op) {
        op->offset = 0;
        op->resumed_from = 0;
        /* A hash that cannot be reset cannot match either: the blob then fails its verification, and
         * nothing unverified is installed. */
        IGNORE_RESULT(digest_context_reset(op->hash));
        /* Whoever reads the file while it grows must know that its bytes are no longer final. */
        if (op->on_progress)
                op->on_progress(op, 0, op->blob.size, op->userdata);
        /* Stale bytes past what is written again would end up in the verified file: if the file
         * cannot be cut, drop it; the next write fails and the attempt starts over on a new file. */
        if (op->fd >= 0 && ftruncate(op->fd, 0) < 0) {
                (void) unlink(op->partial_path);
                (void) close(op->fd);
                op->fd = -EBADF;
        }
}

/* The whole blob is on disk and hashed: verify, then make it visible under its final name. */
static bool blob_complete(RegistryOp *op) {
        _cleanup_free_ char *mismatch = NULL;
        Digest actual;
        int r;

        r = digest_context_final(op->hash, &actual);
        if (r >= 0)
                r = digest_verify(&op->blob.digest, &actual, &mismatch);
        if (r < 0) {
                bool was_resumed = op->resumed_from > 0 && !op->restarted_from_zero;

                registry_op_set_failure(op, r, ARTIFACT_FAILURE_DIGEST_MISMATCH, "blob from %s%s: %s",
                                        op->endpoints[op->endpoint], op->path, strempty(mismatch));
                registry_blob_restart_from_zero(op);
                if (was_resumed) {
                        /* The prefix from an earlier run may be what is wrong (lost writes after a
                         * crash): one fresh download decides. */
                        op->restarted_from_zero = true;
                        op->req = http_request_free(op->req);
                        registry_op_send(op);
                        return true;
                }
                return false;
        }

        if (fsync(op->fd) < 0 || rename(op->partial_path, op->final_path) < 0) {
                r = -errno;
                registry_op_set_failure(
                        op, r, r == -ENOSPC ? ARTIFACT_FAILURE_DISK_SPACE : ARTIFACT_FAILURE_UNAVAILABLE,
                        "cannot store blob %s: %s", op->final_path, strerror(-r));
                registry_op_finish(op, /* success= */ false);
                return true;
        }
        (void) fsync_parent_dir(op->final_path);
        (void) close(op->fd);
        op->fd = -EBADF;
        registry_op_finish(op, /* success= */ true);
        return true;
}

bool registry_blob_handle(RegistryOp *op, HttpRequest *req) {
        if (op->offset < op->blob.size) {
                /* The server said "done" early: resume from here like after a reset. */
                registry_op_set_failure(op, -ECONNRESET, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "blob from %s: short body (%llu of %llu bytes)",
                                        http_request_get_url(req), (unsigned long long) op->offset,
                                        (unsigned long long) op->blob.size);
                registry_op_retry_or_next(op, /* transient= */ true, 0);
                return true;
        }
        return blob_complete(op);
}

static int blob_check_space(RegistryOp *op) {
        struct statvfs sv;
        uint64_t need = op->blob.size - op->offset + op->client->min_free_bytes;

        if (fstatvfs(op->fd, &sv) < 0) {
                registry_op_set_failure(op, -errno, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "cannot check free space in %s: %m", op->client->blob_directory);
                return -EIO;
        }
        if ((uint64_t) sv.f_bavail * sv.f_frsize < need) {
                registry_op_set_failure(
                        op, -ENOSPC, ARTIFACT_FAILURE_DISK_SPACE,
                        "not enough free space in %s for blob %s: need %llu bytes, have %llu",
                        op->client->blob_directory, op->path, (unsigned long long) need,
                        (unsigned long long) sv.f_bavail * sv.f_frsize);
                return -ENOSPC;
        }
        return 0;
}

int registry_blob_before_send(RegistryOp *op) {
        /* A failed attempt may have written bytes it never hashed: cut back to what is. */
        if (ftruncate(op->fd, (off_t) op->offset) < 0) {
                registry_op_set_failure(op, -errno, ARTIFACT_FAILURE_UNAVAILABLE, "cannot prepare %s: %m",
                                        op->partial_path);
                registry_op_finish(op, /* success= */ false);
                return -EIO;
        }
        if (blob_check_space(op) < 0) {
                registry_op_finish(op, /* success= */ false);
                return -ENOSPC;
        }
        return 0;
}

int registry_blob_prepare(RegistryOp *op, HttpRequest *req) {
        http_request_set_stream(req, blob_on_data);
        http_request_set_low_speed(req, op->client->stall_bytes, op->client->stall_usec);
        if (op->offset > 0)
                http_request_set_resume_from(req, op->offset);
        http_request_set_max_body(req, MESSAGE_BODY_MAX);
        return 0;
}

bool registry_blob_handle_failure(RegistryOp *op, HttpRequest *req, int error, long status) {
        _cleanup_free_ char *m = NULL;

        if (error == -ERANGE || status == 416) {
                /* The server cannot resume: start over, without counting it as a failed attempt. */
                registry_blob_restart_from_zero(op);
                op->req = http_request_free(op->req);
                registry_op_send(op);
                return true;
        }
        if (op->stream_failure != ARTIFACT_FAILURE_NONE) {
                ArtifactFailure f = op->stream_failure;

                op->stream_failure = ARTIFACT_FAILURE_NONE;
                if (f == ARTIFACT_FAILURE_DIGEST_MISMATCH)
                        registry_op_set_failure(
                                op, -EBADMSG, f, "blob from %s: larger than its descriptor size %llu",
                                http_request_get_url(req), (unsigned long long) op->blob.size);
                else
                        registry_op_set_failure(op, error, f, "cannot write blob %s: %s", op->partial_path,
                                                strerror(-error));
                if (f == ARTIFACT_FAILURE_DISK_SPACE)
                        registry_op_finish(op, /* success= */ false);
                else
                        registry_op_endpoint_failed(op);
                return true;
        }
        if (error >= 0 || status < 200 || status >= 300)
                return false;
        if (op->offset == op->blob.size) {
                /* Every byte the descriptor promised arrived before the transfer failed (a
                 * Content-Length longer than the body, a reset after the last byte): the digest
                 * decides, not the framing. Asking again for bytes from the end could only fail. */
                if (!blob_complete(op))
                        registry_op_endpoint_failed(op);
                return true;
        }
        m = describe_blob_cut(op, req, error);
        registry_op_set_failure(op, error, ARTIFACT_FAILURE_UNAVAILABLE, "%s", strempty(m));
        registry_op_retry_or_next(op, registry_is_transient(error, status),
                                  http_request_get_retry_after_usec(req));
        return true;
}

/* ---- blob start: reuse, resume (re-hash what is on disk in slices), or start afresh ---- */

static int blob_on_rehash(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;
        _cleanup_free_ char *buf = NULL;
        uint64_t want = op->resumed_from - op->offset;
        ssize_t n;

        buf = malloc(REHASH_SLICE);
        if (!buf)
                n = -1, errno = ENOMEM;
        else
                n = pread(op->fd, buf, (size_t) MIN(want, (uint64_t) REHASH_SLICE), (off_t) op->offset);
        if (n <= 0 || digest_context_update(op->hash, buf, (size_t) n) < 0) {
                /* Unreadable prefix: throw it away and download everything. */
                registry_blob_restart_from_zero(op);
        } else {
                op->offset += (uint64_t) n;
                if (op->offset < op->resumed_from)
                        return 0; /* more slices on the next iterations */
        }

        op->defer = sd_event_source_disable_unref(op->defer);
        if (op->on_progress && op->offset > 0)
                op->on_progress(op, op->offset, op->blob.size, op->userdata);
        if (op->offset == op->blob.size) {
                if (!blob_complete(op))
                        registry_op_endpoint_failed(op);
                return 0;
        }
        registry_op_send(op);
        return 0;
}

static int blob_on_already_there(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;

        op->defer = sd_event_source_disable_unref(op->defer);
        registry_op_finish(op, /* success= */ true);
        return 0;
}

static int blob_open(RegistryOp *op) {
        struct stat st;

        if (stat(op->final_path, &st) >= 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size == op->blob.size)
                return 1; /* verified before it got this name */

        op->fd = open(op->partial_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (op->fd < 0)
                return -errno;
        if (fstat(op->fd, &st) < 0)
                return -errno;
        if ((uint64_t) st.st_size > op->blob.size) {
                if (ftruncate(op->fd, 0) < 0)
                        return -errno;
                st.st_size = 0;
        }
        op->resumed_from = (uint64_t) st.st_size;
        return 0;
}

int registry_fetch_blob(RegistryClient *c, const OciRef *ref, const OciDescriptor *blob,
                        RegistryProgress progress, RegistryDone done, void *userdata, RegistryOp **ret) {
        _cleanup_(registry_op_freep) RegistryOp *op = NULL;
        char ds[DIGEST_STRING_MAX];
        int r;

        assert(c);
        assert(ref);
        assert(blob);
        assert(done);
        assert(ret);

        r = registry_op_new(c, OP_BLOB, ref, done, userdata, &op);
        if (r < 0)
                return r;
        op->on_progress = progress;
        op->blob.digest = blob->digest;
        op->blob.size = blob->size;
        op->blob.compression = blob->compression;
        if (free_and_strdup(&op->blob.media_type, blob->media_type) < 0)
                return -ENOMEM;
        if (asprintf(&op->path, "/v2/%s/blobs/%s", op->ref->repository, digest_format(&blob->digest, ds)) <
                    0 ||
            registry_blob_partial_path(c, &blob->digest, &op->partial_path) < 0 ||
            registry_blob_path(c, &blob->digest, &op->final_path) < 0)
                return -ENOMEM;
        r = digest_context_new(&op->hash);
        if (r < 0)
                return r;

        r = blob_open(op);
        if (r < 0)
                return r;
        if (r > 0)
                r = registry_op_defer(op, blob_on_already_there);
        else if (op->resumed_from > 0) {
                r = registry_op_defer(op, blob_on_rehash);
                if (r >= 0)
                        r = sd_event_source_set_enabled(op->defer, SD_EVENT_ON);
        } else
                r = registry_op_defer(op, registry_op_on_start);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(op);
        return 0;
}
