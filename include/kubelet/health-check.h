/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Polls a health endpoint (kubelet.healthzURL) on the sd-event loop through http.c until it answers
 * HTTP 200 or a deadline passes, like upstream's checkKubeletHealth (GNP §9 scenario 25, Appendix A:
 * every 5 s, 10 s per request, healthTimeout overall). One probe at a time; the first one starts on
 * the next loop iteration. Does not log: the outcome is one callback.
 *
 * With `any_status` it is a reachability probe instead (a containerd registry's readinessProbe, GNP
 * §6.4 step 9): any HTTP answer ends it, only transport errors retry; `ca_pem` then names the CAs
 * a TLS endpoint is verified against (verification is never off). */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "net/http.h"
#include "util/macro.h"

#define HEALTH_CHECK_INTERVAL_DEFAULT_USEC (5 * USEC_PER_SEC)
#define HEALTH_CHECK_REQUEST_TIMEOUT_DEFAULT_USEC (10 * USEC_PER_SEC)

typedef struct HealthCheckOptions {
        const char *url;                /* copied */
        uint64_t interval_usec;         /* between the end of one probe and the next; 0 = default */
        uint64_t request_timeout_usec;  /* per probe; 0 = default */
        uint64_t timeout_usec;          /* overall, > 0 */
        bool any_status;                /* any HTTP status counts as an answer */
        const void *ca_pem;             /* copied; NULL: the system's CAs */
        size_t ca_pem_size;
} HealthCheckOptions;

typedef struct HealthCheck HealthCheck;

/* Exactly once, unless freed before. error 0: healthy after n_probes probes. error -ETIMEDOUT:
 * `message` says what the last probe saw ("HTTP 500", "connection refused", ...), and the deadline. The callback may
 * free the HealthCheck. */
typedef void (*HealthCheckDone)(HealthCheck *hc, int error, const char *message, unsigned n_probes,
                                void *userdata);

int health_check_start(sd_event *event, Http *http, const HealthCheckOptions *o, HealthCheckDone done,
                       void *userdata, HealthCheck **ret);
/* Cancels without callback. */
HealthCheck *health_check_free(HealthCheck *hc);
DEFINE_CLEANUP_FUNC(HealthCheck, health_check_free);

/* Upstream's update-failed reason: "kubelet is not healthy after in-place update: <message>". */
int health_check_failure_reason(const char *message, char **ret);
