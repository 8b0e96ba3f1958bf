/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Polls a URL on the sd-event loop through http.c until it answers HTTP 200 (or, with `any_status`,
 * anything at all) or a deadline passes: one request at a time, `interval_usec` between the end of one
 * and the next, the first on the next loop iteration. Used for the kubelet's health endpoint
 * (kubelet/kubelet-health.h builds those options from the configuration) and a containerd registry's
 * readinessProbe (docs/node-protocol.md §6.4 step 9: any HTTP answer ends it, only transport errors retry).
 * `ca_pem` names the CAs a TLS endpoint is verified against (verification is never off). Does not log: the
 * outcome is one callback. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "net/http.h"
#include "util/macro.h"

#define HTTP_PROBE_INTERVAL_DEFAULT_USEC (5 * USEC_PER_SEC)
#define HTTP_PROBE_REQUEST_TIMEOUT_DEFAULT_USEC (10 * USEC_PER_SEC)

typedef struct HttpProbeOptions {
        const char *url;               /* copied */
        uint64_t interval_usec;        /* between the end of one probe and the next; 0 = default */
        uint64_t request_timeout_usec; /* per probe; 0 = default */
        uint64_t timeout_usec;         /* overall, > 0 */
        bool any_status;               /* any HTTP status counts as an answer */
        bool once;                     /* one probe: its failure (an HTTP status other than 200, a
                                        * refused connection) ends it at once; only a probe that
                                        * hangs takes request_timeout_usec */
        const void *ca_pem;            /* copied; NULL: the system's CAs */
        size_t ca_pem_size;
} HttpProbeOptions;

typedef struct HttpProbe HttpProbe;

/* Exactly once, unless freed before. error 0: answered after n_probes probes. error -ETIMEDOUT:
 * `message` says what the last probe saw ("HTTP 500", "connection refused", ...), and the deadline.
 * With `once`, a failed probe: its -errno (-EIO for an HTTP status), `message` what it saw
 * ("Get \"<url>\": HTTP 500"). The callback may free the HttpProbe. */
typedef void (*HttpProbeDone)(HttpProbe *p, int error, const char *message, unsigned n_probes,
                              void *userdata);

int http_probe_start(sd_event *event, Http *http, const HttpProbeOptions *o, HttpProbeDone done,
                     void *userdata, HttpProbe **ret);
/* Cancels without callback. */
HttpProbe *http_probe_free(HttpProbe *p);
DEFINE_CLEANUP_FUNC(HttpProbe, http_probe_free);
