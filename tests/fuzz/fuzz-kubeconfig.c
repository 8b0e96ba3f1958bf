/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig YAML: success or a clean error naming the field, never a crash. */
#include <stdint.h>

#include "macro.h"

#include "kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(kubeconfig_freep) KubeConfig *kc = NULL;
        _cleanup_free_ char *error = NULL;

        if (size > 256 * 1024)
                return 0;
        (void) kubeconfig_parse((const char *) data, size, "/fuzz/kubeconfig", &kc, &error);
        return 0;
}
