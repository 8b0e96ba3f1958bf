/* SPDX-License-Identifier: Apache-2.0 */
/* kubeconfig text -> KubeConfig: every byte sequence must end in success or a clean error with a
 * message. */
#include <stdint.h>

#include "kube/kubeconfig.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        if (size > KUBECONFIG_FILE_MAX)
                return 0;
        r = kubeconfig_parse((const char *) data, size, "/fuzz/kubeconfig", &c, &error);
        if (r == -EINVAL && !error)
                __builtin_trap(); /* every refusal names its reason */
        if (r >= 0 && (!c->server || strncmp(c->server, "https://", 8) != 0))
                __builtin_trap();
        return 0;
}
