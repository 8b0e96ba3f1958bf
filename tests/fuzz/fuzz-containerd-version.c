/* SPDX-License-Identifier: Apache-2.0 */
/* containerd's Version reply: the first line is grpc-status ("-" for none), the second grpc-message,
 * the rest the HTTP/2 body (gRPC prefix + VersionResponse). */
#include <stdint.h>
#include <string.h>

#include "core/containerd-version.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *line(const uint8_t **p, const uint8_t *end) {
        const uint8_t *nl = memchr(*p, '\n', (size_t) (end - *p));
        char *s;

        if (!nl)
                return NULL;
        s = strndup((const char *) *p, (size_t) (nl - *p));
        *p = nl + 1;
        return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *p = data, *end = data + size;
        _cleanup_free_ char *status = NULL, *message = NULL, *error = NULL;
        _cleanup_(containerd_version_done) ContainerdVersion v = {};

        if (size > 64 * 1024)
                return 0;
        status = line(&p, end);
        message = status ? line(&p, end) : NULL;
        if (containerd_version_decode(streq_ptr(status, "-") ? NULL : status, message, p, (size_t) (end - p),
                                      &v, &error) == 0 &&
            (!v.version || !v.revision || error))
                __builtin_trap();
        return 0;
}
