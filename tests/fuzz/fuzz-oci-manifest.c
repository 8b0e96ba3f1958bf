/* SPDX-License-Identifier: Apache-2.0 */
/* Registry bytes -> OciManifest (+ platform selection): success or a clean error, never a crash. */
#include <stdint.h>

#include "oci/oci-manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        const OciDescriptor *d;

        if (oci_manifest_parse(data, size, size % 2 ? OCI_MT_INDEX : NULL, &m) < 0)
                return 0;
        if (m->kind == OCI_MANIFEST_INDEX)
                IGNORE_RESULT(oci_manifest_select_platform(m, "linux", "arm", "v7", &d));
        return 0;
}
