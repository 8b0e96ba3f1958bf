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

const char *artifact_failure_to_string(ArtifactFailure f) {
        return f >= 0 && f < _ARTIFACT_FAILURE_MAX ? failure_table[f] : NULL;
}

ArtifactFailure artifact_failure_from_string(const char *s) {
        if (!s)
                return _ARTIFACT_FAILURE_INVALID;
        for (ArtifactFailure f = 0; f < _ARTIFACT_FAILURE_MAX; f++)
                if (failure_table[f] && streq(failure_table[f], s))
                        return f;
        return _ARTIFACT_FAILURE_INVALID;
}

bool artifact_failure_is_retriable(ArtifactFailure f) {
        return f == ARTIFACT_FAILURE_UNAVAILABLE || f == ARTIFACT_FAILURE_DISK_SPACE;
}
