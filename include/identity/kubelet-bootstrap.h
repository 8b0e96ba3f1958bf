/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The kubelet's bootstrap kubeconfig on a new node, as gardener-node-agent handles it (docs/contract.md
 * §9.6):
 *
 *   - kubelet_bootstrap_provision(), at every start (upstream's bootstrapper
 *     bootstrappers/kubelet_bootstrap_kubeconfig.go, which GNA runs before its controllers): while GNA's
 *     bootstrap token is there and the kubelet has neither kubeconfig-real nor
 *     pki/kubelet-client-current.pem, <kubelet dir>/kubeconfig-bootstrap is written (0600, atomically)
 *     with that token, apiServer.server and apiServer.caFile of GNA's provisioned component config: the
 *     kubelet's --bootstrap-kubeconfig, without which a new kubelet cannot join.
 *   - removed (update/osc-runner.h osc_runner_retire_bootstrap_credentials()) before the checksum of every
 *     applied OSC (upstream's reconciler, "Deleting kubelet bootstrap kubeconfig file"): the kubelet has
 *     its own certificate by then (it registered its Node and passed the health check), and the file
 *     holds a credential.
 *
 * kubelet_bootstrap_token_kubeconfig() is pure; the rest is small blocking local file I/O. Does not log;
 * errors come back as -errno plus a message naming paths only (never the token). */

#include <jansson.h>

#include "util/macro.h"

#define KUBELET_DIRECTORY "/var/lib/kubelet" /* below osc.rootDirectory */
#define KUBELET_BOOTSTRAP_KUBECONFIG "kubeconfig-bootstrap"

typedef struct KubeletBootstrapParams {
        const char *kubelet_directory; /* <osc.rootDirectory>/var/lib/kubelet */
        const char *token_file;        /* GNA's credentials/bootstrap-token below osc.rootDirectory */
        const char *server;            /* apiServer.server; NULL: not known */
        const char *ca_file;           /* apiServer.caFile as the kubelet sees it; NULL: not known */
} KubeletBootstrapParams;

/* Pure: upstream's kubeconfig, context, cluster and user all named "kubelet-bootstrap", the server
 * with "https://" when it has no scheme. NULL on ENOMEM. */
json_t *kubelet_bootstrap_token_kubeconfig(const char *server, const char *ca_file, const char *token);

/* 1 when kubeconfig-bootstrap was written, 0 when there was nothing to do (no token, or the kubelet has
 * credentials), -errno with *ret_error naming the file or what is missing. */
int kubelet_bootstrap_provision(const KubeletBootstrapParams *p, char **ret_error) _warn_unused_result_;
