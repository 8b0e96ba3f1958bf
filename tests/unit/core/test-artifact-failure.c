/* SPDX-License-Identifier: Apache-2.0 */
#include "core/artifact-failure.h"
#include "oci/file-stage.h"
#include "tests.h"

static void test_codes_match_contract(void **state) {
        static const struct {
                ArtifactFailure f;
                const char *code;
                bool retriable;
        } table[] = {
                { ARTIFACT_FAILURE_UNAVAILABLE, "ArtifactUnavailable", true },
                { ARTIFACT_FAILURE_DIGEST_MISMATCH, "DigestMismatch", false },
                { ARTIFACT_FAILURE_UNSAFE_ARCHIVE, "UnsafeArchive", false },
                { ARTIFACT_FAILURE_DISK_SPACE, "DiskSpace", true },
                { ARTIFACT_FAILURE_KUBELET_UNHEALTHY, "KubeletUnhealthy", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                assert_string_equal(artifact_failure_to_string(table[i].f), table[i].code);
                assert_int_equal(artifact_failure_from_string(table[i].code), table[i].f);
                assert_int_equal(artifact_failure_is_retriable(table[i].f), table[i].retriable);
        }
        assert_null(artifact_failure_to_string(ARTIFACT_FAILURE_NONE));
        assert_int_equal(artifact_failure_from_string("MinVersionNotMet"), _ARTIFACT_FAILURE_INVALID);
        assert_int_equal(artifact_failure_from_string(NULL), _ARTIFACT_FAILURE_INVALID);
}

static void test_extract_errors(void **state) {
        static const int unsafe[] = { -EXDEV, -E2BIG, -ENAMETOOLONG, -EFBIG, -EMEDIUMTYPE, -EBADMSG };

        for (size_t i = 0; i < ELEMENTSOF(unsafe); i++)
                assert_int_equal(file_stage_failure_from_extract_error(unsafe[i]),
                                 ARTIFACT_FAILURE_UNSAFE_ARCHIVE);
        assert_int_equal(file_stage_failure_from_extract_error(-ENOSPC), ARTIFACT_FAILURE_DISK_SPACE);
        assert_int_equal(file_stage_failure_from_extract_error(-EIO), ARTIFACT_FAILURE_UNAVAILABLE);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_codes_match_contract),
                cmocka_unit_test(test_extract_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
