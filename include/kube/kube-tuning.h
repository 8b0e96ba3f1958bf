/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Timing of the Kubernetes client: watch durations, silence detection, backoff, credential
 * re-reads, request timeouts. The defaults follow client-go (docs/kube-api.md §2.3, §3.6, §3.7, §7.4).
 *
 * Tests (and only tests) shorten them through the environment variable INPLACE_AGENT_KUBE_TUNING,
 * a comma-separated list of key=duration (durations as in the configuration: "500ms", "3s", "5m"):
 *
 *   watch-timeout=MIN-MAX   timeoutSeconds of each watch, uniform in [MIN, MAX) (whole seconds ≥ 1)
 *   watch-silence=D         reconnect a watch that delivered no byte for D (bookmarks keep it busy)
 *   startup-delay=D         random delay in [0, D) before the first LIST
 *   backoff-base=D, backoff-cap=D, backoff-reset=D    the reflector's backoff (backoff.h)
 *   reconnect-spread=D      jitter window of watch retries after a refused connection (0 = off)
 *   token-refresh=D         re-read tokenFile when the last read is older than D
 *   cert-check=D            stat() client certificate/key/CA files this often
 *   request-timeout=D, patch-timeout=D                per-request timeouts
 *   csr-poll=D, csr-timeout=D        how often a pending CSR is read, and for how long (identity/)
 *   identity-retry-base=D, identity-retry-cap=D       backoff between failed bootstraps/renewals
 *   forbidden-backoff=D     the wait between LISTs answered 403 once that lasts (configuration)
 *
 * and of the node duties that report to the API server (docs/node-protocol.md §8):
 *   units-check=D, units-stuck=D    SystemdUnitsReady period (1 min) and stuck threshold (5 min)
 *   health-check=D, health-grace=D  kubelet/containerd check period (30 s), unhealthy time before a
 *                                   restart (1 min)
 *   contact-event-min=D     how long the API server must have been out of reach before the first
 *                           contact for the Warning that says so (10 s; 0 = always)
 *   node-registration=D             how long after a fresh node's first OSC was applied without its
 *                                   Node the agent waits quietly for the kubelet to register it (5 min)
 *
 * It is deliberately not part of the configuration file (docs/contract.md §3): production nodes run with
 * the defaults. Pure: parsing only, no I/O, no logging. */

#include <stdint.h>

#include "util/macro.h"

#define KUBE_TUNING_ENV "INPLACE_AGENT_KUBE_TUNING"

typedef struct KubeTuning {
        uint64_t watch_timeout_min_usec;   /* 300 s, client-go's reflector */
        uint64_t watch_timeout_max_usec;   /* 600 s (exclusive) */
        uint64_t watch_silence_usec;       /* 90 s: bookmarks come about every 60 s */
        uint64_t watch_cap_margin_usec;    /* 30 s: hard cap = timeoutSeconds + this */
        uint64_t startup_delay_usec;       /* 2 s */
        uint64_t backoff_base_usec;        /* 0.8 s */
        uint64_t backoff_cap_usec;         /* 30 s */
        uint64_t backoff_reset_usec;       /* 2 min */
        uint64_t reconnect_spread_usec;    /* 10 s: a fleet's reconnects after a server restart */
        uint64_t token_refresh_usec;       /* 50 s: client-go caches 60 s with 10 s leeway */
        uint64_t cert_check_usec;          /* 5 min, client-go's cert rotation period */
        uint64_t request_timeout_usec;     /* 70 s: the server cuts non-watch requests at 60 s */
        uint64_t patch_timeout_usec;       /* 40 s: the server bounds PATCH at 34 s */
        uint64_t csr_poll_usec;            /* 2 s, upstream's CSR wait */
        uint64_t csr_timeout_usec;         /* 15 min, upstream's CSR wait */
        uint64_t identity_retry_base_usec; /* 10 s */
        uint64_t identity_retry_cap_usec;  /* 5 min */
        uint64_t forbidden_backoff_usec;   /* 2 min: 403 is RBAC, not load (docs/kube-api.md §6.4) */
        uint64_t units_check_usec;         /* 60 s */
        uint64_t units_stuck_usec;         /* 5 min */
        uint64_t health_check_usec;        /* 30 s */
        uint64_t health_grace_usec;        /* 60 s */
        uint64_t contact_event_min_usec;   /* 10 s (core/contact-blocker.h) */
        uint64_t node_registration_usec;   /* 5 min */
} KubeTuning;

void kube_tuning_init(KubeTuning *t);

/* Applies `spec` (NULL or empty: nothing) on top of *t. -EINVAL with a message naming the key
 * for unknown keys, bad durations, zero where a positive value is needed, or MIN ≥ MAX. *t is
 * unchanged on failure. */
int kube_tuning_parse(KubeTuning *t, const char *spec, char **ret_error) _warn_unused_result_;
