/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's heartbeat Lease (docs/contract.md §3 lease.*, §6; docs/kube-api.md §8): coordination.k8s.io/v1
 * Lease <namespace>/<name> with holderIdentity, leaseDurationSeconds, renewTime (MicroTime) and an
 * ownerReference to our Node (so it is garbage-collected with it). Created with GET → 404 → POST
 * (409 → GET again), then renewed every duration/4 with a PUT of the last object the server
 * returned (optimistic concurrency); a 409 on the PUT re-reads the Lease and tries again at once.
 * Failures are retried with backoff (200 ms doubling, at most the renew interval), like kubelet's
 * lease controller. Only PUT and POST are used, no PATCH: the gardener-node-agent identity may not
 * patch leases (docs/kube-api.md §6.3).
 *
 * Runs on the KubeClient's sd_event loop; logs at debug level only, except that a Lease that has to
 * stop renewing (its timer cannot be armed: the loop is finishing, or in a forked child) says so
 * through the stopped callback, or at error level when there is none. Borrows the KubeClient. */

#include <stdint.h>

#include "kube/kube-client.h"
#include "util/macro.h"

typedef struct Lease Lease;

typedef struct LeaseStats {
        unsigned renewals; /* successful PUTs */
        unsigned failures; /* failed attempts of any kind */
        int last_error;    /* of the last attempt (0 = success) */
        bool stopped;      /* renewals stopped (last_error says why) until lease_start() again */
} LeaseStats;

/* Renewals stopped and will not be tried again (-errno: the next step could not be scheduled). The
 * owner decides (lease_start() again, or exit and let systemd restart us). May free the Lease. */
typedef void (*LeaseStoppedCallback)(Lease *l, int error, void *userdata);

int lease_new(KubeClient *client, const char *namespace, const char *name, const char *holder,
              uint64_t duration_usec, Lease **ret) _warn_unused_result_;
Lease *lease_free(Lease *l);
DEFINE_CLEANUP_FUNC(Lease, lease_free);

/* The Node that owns the Lease; a changed uid (Node re-created) updates the ownerReference with the
 * next renewal. `uid` NULL: no owner yet. */
int lease_set_owner(Lease *l, const char *node_name, const char *uid) _warn_unused_result_;

/* Optional: without it, a stop is logged at error level. */
void lease_set_stopped_callback(Lease *l, LeaseStoppedCallback cb, void *userdata);

/* Starts acquiring and renewing at once; a no-op when already running. A failure is the caller's to
 * handle (it is not a stop: the callback is not called, nothing is logged). */
int lease_start(Lease *l) _warn_unused_result_;

/* Stops renewing (a request in flight is dropped) until lease_start() again, which reads the Lease
 * anew: its owner Node is gone, and a heartbeat for a Node that does not exist is none (upstream's
 * lease controller reconciles its Node and renews nothing without one). Not a "stop" of the
 * callback. */
void lease_stop(Lease *l);

void lease_get_stats(const Lease *l, LeaseStats *ret);
