/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Pre-staging of an OS boot image (docs/contract.md §6 "image" backend, §8.3), beside oci/file-stage.h: the
 * reference template (osUpdate.image.reference, "{version}" substituted) is resolved to this
 * machine's platform, the image's last layer — the boot image file itself, an OCI artifact as
 * pushed by e.g. `oras push` — is downloaded and verified by digest like every blob, and hard-linked
 * to <stateDirectory>/staging/os/<version>/image.efi (same file system, so the verified blob is
 * kept without a copy; the directory is fsynced). Nothing is installed here: os-image.h does that
 * after the gate. Async on the registry client's sd_event loop; does not log. */

#include "core/artifact-failure.h"
#include "oci/registry.h"
#include "util/macro.h"

typedef struct OsImageStage OsImageStage;

typedef struct OsImageStageResult {
        int error;               /* 0 or -errno */
        ArtifactFailure failure; /* NONE on success */
        const char *message;     /* borrowed; NULL on success */
        const char *path;        /* borrowed: the staged image; NULL on failure */
} OsImageStageResult;

/* Called once, never from inside os_image_stage_start(); `res` is valid until it returns. The
 * callback may free the stage. */
typedef void (*OsImageStageDone)(OsImageStage *s, const OsImageStageResult *res, void *userdata);

/* `registry` is borrowed and outlives the stage; the strings are copied. */
int os_image_stage_start(RegistryClient *registry, const char *reference_template, const char *version,
                         const char *state_directory, OsImageStageDone done, void *userdata,
                         OsImageStage **ret);
/* Cancels (no callback) and frees; a partial blob stays for a later resume. */
OsImageStage *os_image_stage_free(OsImageStage *s);
DEFINE_CLEANUP_FUNC(OsImageStage, os_image_stage_free);

/* <state_directory>/staging/os/<version>/image.efi */
int os_image_staging_path(const char *state_directory, const char *version, char **ret);
