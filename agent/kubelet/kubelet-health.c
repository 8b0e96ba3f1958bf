/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "kubelet/kubelet-health.h"

HttpProbeOptions kubelet_health_probe(const Config *c) {
        return (HttpProbeOptions) {
                .url = c->kubelet.healthz_url,
                .timeout_usec = c->kubelet.health_timeout_usec,
                .interval_usec = MIN(HTTP_PROBE_INTERVAL_DEFAULT_USEC, c->kubelet.health_timeout_usec / 4),
        };
}

HttpProbeOptions kubelet_health_probe_once(const char *url, uint64_t timeout_usec) {
        return (HttpProbeOptions) {
                .url = url,
                .request_timeout_usec = timeout_usec,
                .timeout_usec = timeout_usec,
                .once = true,
        };
}

int kubelet_health_failure_reason(const char *message, char **ret) {
        assert(ret);
        return asprintf(ret, "kubelet is not healthy after in-place update: %s", strempty(message)) < 0 ?
                -ENOMEM :
                0;
}
