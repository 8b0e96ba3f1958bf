/* SPDX-License-Identifier: Apache-2.0 */
/* /etc/os-release: the PRETTY_NAME version rule on arbitrary content. */
#include <stdint.h>

#include "os/os-release.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *v = NULL, *err = NULL, *pretty = NULL;

        if (size > 64 * 1024)
                return 0;
        (void) os_release_version((const char *) data, size, &v, &err);
        (void) os_release_pretty_name((const char *) data, size, &pretty);
        return 0;
}
