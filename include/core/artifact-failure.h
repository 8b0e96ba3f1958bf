/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Failure codes of artifact staging and applying, as they appear in inplace-agent/failure.code
 * (docs/contract.md §8.9), with their retriable/terminal class. Pure. */

#include <stdbool.h>

#include "util/macro.h"

typedef enum ArtifactFailure {
        ARTIFACT_FAILURE_NONE,
        ARTIFACT_FAILURE_UNAVAILABLE,       /* registry unreachable, 404, 401, malformed manifest */
        ARTIFACT_FAILURE_DIGEST_MISMATCH,   /* manifest or blob differs from its digest or size */
        ARTIFACT_FAILURE_UNSAFE_ARCHIVE,    /* escaping entry, device node, bomb, not a regular file */
        ARTIFACT_FAILURE_DISK_SPACE,        /* not enough room for the blob or the file */
        ARTIFACT_FAILURE_KUBELET_UNHEALTHY, /* healthz did not answer 200 within healthTimeout */
        _ARTIFACT_FAILURE_MAX,
        _ARTIFACT_FAILURE_INVALID = -EINVAL,
} ArtifactFailure;

/* "ArtifactUnavailable", "DigestMismatch", "UnsafeArchive", "DiskSpace", "KubeletUnhealthy"; NULL for
 * NONE. */
const char *artifact_failure_to_string(ArtifactFailure f);
ArtifactFailure artifact_failure_from_string(const char *s);
/* ArtifactUnavailable and DiskSpace may go away by themselves (docs/contract.md §8.9). */
bool artifact_failure_is_retriable(ArtifactFailure f);
