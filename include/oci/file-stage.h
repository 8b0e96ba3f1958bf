/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Stages one file of an image into a store (oci/file-store.h) under a version: resolve the image
 * (registry.c), then from the top layer down fetch a layer blob (verified), look for filePathInImage in
 * it (archive-extract.c) and stop at the first layer that has it or deletes it; install the file as
 * <root>/<version>/<file name> of the store. For the kubelet (the store of kubelet/kubelet-store.h; both
 * for pre-staging, docs/contract.md §5, §8.3, and the ungated path: nothing here touches kubelet.binaryPath)
 * and the OSC's other imageRef files (update/osc-runner). A version already in the store from the same image
 * and path is reused without any request.
 *
 * Runs on the sd-event loop. The extraction (CPU-bound inflating) runs on a worker thread that touches
 * only its own job and the layer's feed and reports through an eventfd, so the loop never stalls on a
 * large layer. The thread follows the blob's .partial file while it downloads (oci/layer-feed.h), so
 * inflating overlaps the download; the extracted file is installed only after the blob's digest
 * matched and every byte the thread read was final (else the verified blob is extracted again).
 * Does not log: one callback with a failure code (docs/contract.md §8.9) and a message. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/artifact-failure.h"
#include "oci/archive-extract.h"
#include "oci/file-store.h"
#include "oci/registry.h"

typedef struct FileStageRequest {
        const char *image;     /* imageRef.image, e.g. registry.example.com/hyperkube:v1.31.2 */
        const char *file_path; /* imageRef.filePathInImage, e.g. /kubelet */
        const char *version;   /* store version (docs/contract.md §8.1); NULL = the image tag without "v" */
        const char *os;        /* NULL = "linux" */
        const char *architecture;    /* NULL = this machine's */
        const char *variant;         /* NULL = this machine's (or any) */
        const ArchiveLimits *limits; /* NULL = ARCHIVE_LIMITS_DEFAULT */
} FileStageRequest;

typedef struct FileStageResult {
        int error;                   /* 0 or -errno */
        ArtifactFailure failure;     /* NONE on success */
        const char *message;         /* NULL on success */
        const char *version;         /* the store version */
        const char *path;            /* <root>/<version>/<file name> of the store */
        const char *manifest_digest; /* NULL when reused */
        const char *file_digest;     /* sha256:<hex> of the installed file; NULL when reused */
        uint64_t bytes_downloaded;
        bool reused;
} FileStageResult;

typedef struct FileStage FileStage;

/* Exactly once, never inside file_stage_start(). May free the FileStage; the result's pointers stay
 * valid until the callback returns either way. */
typedef void (*FileStageDone)(FileStage *st, const FileStageResult *result, void *userdata);
/* Download progress over all layers of the image (an upper bound: lower layers may be skipped). */
typedef void (*FileStageProgress)(FileStage *st, uint64_t done, uint64_t total, void *userdata);

/* -EINVAL (no callback) for an invalid image reference, file path or version: that is an invalid desired
 * state, not an artifact failure. `registry` and `store` are borrowed and must outlive the stage. */
int file_stage_start(sd_event *event, RegistryClient *registry, FileStore *store,
                     const FileStageRequest *req, FileStageProgress progress, FileStageDone done,
                     void *userdata, FileStage **ret);
/* Cancels without callback. If an extraction is running, stops its feed and waits for it (bounded by
 * the limits). */
FileStage *file_stage_free(FileStage *st);
DEFINE_CLEANUP_FUNC(FileStage, file_stage_free);

/* Maps an archive_extract_layer() error to its failure code (UnsafeArchive, DiskSpace, ...). */
ArtifactFailure file_stage_failure_from_extract_error(int error);
