/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The kubelet's health probe (net/http-probe.h) as the configuration defines it, for everyone who
 * asks the kubelet whether it is healthy: the update's check after a kubelet change (executor), the
 * OSC's kubelet health item (osc-runner), a CA rotation's re-bootstrap (credential-rotation) and the
 * periodic node health duty (node-health). Pure: no I/O, no logging. */

#include <stdint.h>

#include "core/config.h"
#include "net/http-probe.h"

/* Upstream's checkKubeletHealth (docs/node-protocol.md §9 scenario 25, Appendix A): kubelet.healthzURL until
 * HTTP 200, every 5 s (a quarter of the window when that is shorter), 10 s per request,
 * kubelet.healthTimeout overall. The URL is borrowed from `c`. */
HttpProbeOptions kubelet_health_probe(const Config *c);

/* One probe of `url` (borrowed), as upstream's health check asks (healthcheck/kubelet.go: one GET, an
 * http.Client with a 10 s timeout): an HTTP status other than 200 or a refused connection fails it at
 * once, only a kubelet that does not answer takes `timeout_usec`. The node health duty's round, whose
 * next round is the retry. */
HttpProbeOptions kubelet_health_probe_once(const char *url, uint64_t timeout_usec);

/* Upstream's update-failed reason: "kubelet is not healthy after in-place update: <message>". */
int kubelet_health_failure_reason(const char *message, char **ret);
