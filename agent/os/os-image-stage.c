/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "oci/oci-ref.h"
#include "oci/registry-blob.h"
#include "oci/registry-manifest.h"
#include "os/os-image-stage.h"
#include "os/os-image.h"
#include "util/fileio.h"

struct OsImageStage {
        RegistryClient *registry; /* borrowed */
        OciRef *ref;              /* owned: the reference, version substituted */
        char *target;             /* owned: the staging path */
        RegistryOp *op;           /* owned: resolve, then the blob fetch */
        OsImageStageDone done;
        void *userdata; /* borrowed */
};

int os_image_staging_path(const char *state_directory, const char *version, char **ret) {
        return asprintf(ret, "%s/staging/os/%s/image.efi", state_directory, version) < 0 ? -ENOMEM : 0;
}

OsImageStage *os_image_stage_free(OsImageStage *s) {
        if (!s)
                return NULL;
        registry_op_free(s->op);
        oci_ref_free(s->ref);
        free(s->target);
        free(s);
        return NULL;
}

static void os_image_stage_finish(OsImageStage *s, int error, ArtifactFailure failure, const char *message) {
        OsImageStageResult res = {
                .error = error,
                .failure = error < 0 ? failure : ARTIFACT_FAILURE_NONE,
                .message = error < 0 ? message ?: strerror(-error) : NULL,
                .path = error < 0 ? NULL : s->target,
        };

        s->done(s, &res, s->userdata);
}

/* Same file system (both under the state directory): a hard link keeps the verified blob. */
static int link_staged(const char *blob, const char *target) {
        _cleanup_free_ char *dir = strndup(target, (size_t) (strrchr(target, '/') - target));
        int r;

        if (!dir)
                return -ENOMEM;
        r = mkdir_parents(dir, 0700);
        if (r < 0)
                return r;
        if (link(blob, target) < 0 && errno != EEXIST)
                return -errno;
        return fsync_parent_dir(target);
}

static void os_image_stage_on_blob(RegistryOp *op, const RegistryResult *res, void *userdata) {
        OsImageStage *s = userdata;
        /* res->blob_path is borrowed from the op: free it only on the way out. */
        _cleanup_(registry_op_freep) _unused_ RegistryOp *done_op = TAKE_PTR(s->op);
        int r;

        if (res->error < 0) {
                os_image_stage_finish(s, res->error, res->failure, res->message);
                return;
        }
        r = link_staged(res->blob_path, s->target);
        os_image_stage_finish(s, r,
                              os_image_error_is_disk_space(r) ? ARTIFACT_FAILURE_DISK_SPACE :
                                                                ARTIFACT_FAILURE_UNAVAILABLE,
                              NULL);
}

static void os_image_stage_on_resolved(RegistryOp *op, const RegistryResult *res, void *userdata) {
        OsImageStage *s = userdata;
        /* `res` (the manifest too) is borrowed from the op: free it only on the way out. */
        _cleanup_(registry_op_freep) _unused_ RegistryOp *done_op = TAKE_PTR(s->op);
        int r;

        if (res->error < 0 || !res->manifest || res->manifest->n_layers == 0) {
                os_image_stage_finish(s, res->error < 0 ? res->error : -ENOENT,
                                      res->error < 0 ? res->failure : ARTIFACT_FAILURE_UNAVAILABLE,
                                      res->message ? res->message : "the OS image has no layers");
                return;
        }
        r = registry_fetch_blob(s->registry, s->ref, &res->manifest->layers[res->manifest->n_layers - 1],
                                NULL, os_image_stage_on_blob, s, &s->op);
        if (r < 0)
                os_image_stage_finish(s, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot fetch the OS image");
}

int os_image_stage_start(RegistryClient *registry, const char *reference_template, const char *version,
                         const char *state_directory, OsImageStageDone done, void *userdata,
                         OsImageStage **ret) {
        _cleanup_(os_image_stage_freep) OsImageStage *s = NULL;
        _cleanup_free_ char *image = NULL;
        int r;

        assert(registry);
        assert(reference_template);
        assert(version);
        assert(done);
        assert(ret);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (OsImageStage) { .registry = registry, .done = done, .userdata = userdata };
        r = os_image_staging_path(state_directory, version, &s->target);
        if (r < 0)
                return r;
        r = oci_ref_substitute_version(reference_template, version, &image);
        if (r < 0)
                return r;
        r = oci_ref_parse(image, &s->ref);
        if (r < 0)
                return r;
        /* NULL platform: this machine's boot image from a multi-platform index, as for the kubelet. */
        r = registry_resolve(registry, s->ref, NULL, NULL, NULL, os_image_stage_on_resolved, s, &s->op);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}
