/* SPDX-License-Identifier: Apache-2.0 */
#include "core/artifact-failure.h"

static const char *const failure_table[_ARTIFACT_FAILURE_MAX] = {
        [ARTIFACT_FAILURE_NONE] = NULL,
        [ARTIFACT_FAILURE_UNAVAILABLE] = "ArtifactUnavailable",
        [ARTIFACT_FAILURE_DIGEST_MISMATCH] = "DigestMismatch",
        [ARTIFACT_FAILURE_UNSAFE_ARCHIVE] = "UnsafeArchive",
        [ARTIFACT_FAILURE_DISK_SPACE] = "DiskSpace",
        [ARTIFACT_FAILURE_KUBELET_UNHEALTHY] = "KubeletUnhealthy",
};

DEFINE_STRING_TABLE_LOOKUP(artifact_failure, ArtifactFailure, failure_table);

bool artifact_failure_is_retriable(ArtifactFailure f) {
        return f == ARTIFACT_FAILURE_UNAVAILABLE || f == ARTIFACT_FAILURE_DISK_SPACE;
}
