/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's own client identity (docs/contract.md §9.6): keeps `kubeconfig` holding a working client
 * certificate, like kubelet's TLS bootstrap and upstream's certificate controller do.
 *
 * - At start: `kubeconfig` with a valid certificate of ours → renewal scheduled; with token credentials
 *   (someone else's kubeconfig) → left alone; missing, unreadable, expired or not matching its key →
 *   bootstrap.
 * - Bootstrap: credentials from `bootstrapKubeconfig`, else GNA's `credentials/bootstrap-token` +
 *   `cluster-ca.crt` + the server of GNA's component config. A new key is generated for every attempt.
 * - Renewal: with the current certificate, at a random point in 70–90 % of its lifetime, and when asked
 *   (CA rotation: against the new bundle, GNA's apiServer.caFile, which the new kubeconfig names from
 *   then on). A renewal the server rejects with 401 falls back to a bootstrap.
 * - 401 from the API server while using our certificate (identity_unauthorized()) → bootstrap.
 * - Failures (denied, failed, not issued in time, API errors, no bootstrap credential) are retried with
 *   jittered backoff; the agent stays up, identity_status() says what is going on for STATUS=, and the
 *   failure code is BootstrapFailed (no usable certificate) or CredentialsRotationFailed (renewal asked
 *   for by a rotation).
 *
 * Files: the certificate and its key in one PEM file beside the kubeconfig (`node-agent-client.pem`,
 * 0600, written first, atomically), referenced by the kubeconfig's client-certificate and client-key
 * (kubelet's kubelet-client-current.pem pattern), so a running KubeClient picks a renewal up through its
 * credential file check (kube_client_reload_credentials()) without a restart; then the kubeconfig
 * (0600, atomically). Nothing ever logs or reports key, certificate or token bytes.
 *
 * Runs on the sd_event loop; file writes are small and local (blocking, bounded). Ownership: the daemon
 * owns the Identity; it owns the KubeClient it uses for CSRs; `event`, `http` and `tuning` are borrowed
 * and must outlive it. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "core/config.h"
#include "core/node-update.h"
#include "kube/kube-client.h"
#include "kube/kube-tuning.h"
#include "net/http.h"
#include "util/macro.h"

#define IDENTITY_PEM_NAME "node-agent-client.pem"
/* GNA's directory, below osc.rootDirectory (§9.5). */
#define IDENTITY_GNA_DIRECTORY "/var/lib/gardener-node-agent"
/* GNA's bootstrap token, relative to that directory; deleted after the first complete OSC apply. */
#define GNA_BOOTSTRAP_TOKEN "credentials/bootstrap-token"

typedef struct Identity Identity;

typedef struct IdentityParams {
        const char *kubeconfig;           /* the agent's kubeconfig (written here) */
        const char *bootstrap_kubeconfig; /* may not exist */
        const char *gna_directory;        /* <root>/var/lib/gardener-node-agent */
        const char *gna_server;           /* apiServer.server of GNA's component config; may be NULL */
        const char *node_name;            /* machine name fallback */
        unsigned expiration_seconds;      /* 0: CLIENT_CERT_EXPIRATION_SECONDS */
} IdentityParams;

typedef enum IdentityEvent {
        IDENTITY_CHANGED, /* a new certificate is in place: reload credentials */
        IDENTITY_FAILED,  /* an attempt failed; a retry is scheduled (see identity_status()) */
} IdentityEvent;

typedef void (*IdentityCallback)(Identity *id, IdentityEvent event, void *userdata);

int identity_new(sd_event *event, Http *http, const KubeTuning *tuning, const IdentityParams *p,
                 IdentityCallback cb, void *userdata, Identity **ret) _warn_unused_result_;
/* The daemon's Identity: kubeconfig and bootstrapKubeconfig of the configuration, GNA's files below
 * <osc.rootDirectory>IDENTITY_GNA_DIRECTORY, the node name as the machine name fallback. */
int identity_new_from_config(sd_event *event, Http *http, const KubeTuning *tuning, const Config *c,
                             IdentityCallback cb, void *userdata, Identity **ret) _warn_unused_result_;
Identity *identity_free(Identity *id);
DEFINE_CLEANUP_FUNC(Identity, identity_free);

/* Looks at the current kubeconfig and bootstraps or schedules the renewal. Returns 1 when the current
 * kubeconfig is usable as it is, 0 when a bootstrap was started (wait for IDENTITY_CHANGED). */
int identity_start(Identity *id);

/* The API server answered 401 to a request made with the current kubeconfig. */
void identity_unauthorized(Identity *id);
/* Hears the 401s of `client` (its unauthorized callback, kube/kube-client.h) itself from now on:
 * identity_unauthorized(). `client` must not call back after `id` is freed (free it first). */
void identity_watch_client(Identity *id, KubeClient *client);

/* Renew now with the current certificate (CA rotation); failures carry CredentialsRotationFailed. A
 * request in flight is dropped (it was made before the call) and a new one made. `ca_file` (NULL:
 * keep the kubeconfig's CA): the CA bundle to renew against, named by the new kubeconfig from then
 * on. */
int identity_renew(Identity *id, const char *ca_file) _warn_unused_result_;

/* True while the kubeconfig holds a certificate of ours that has not expired (or token credentials). */
bool identity_usable(const Identity *id);

/* The kubeconfig holds credentials this agent did not issue (a token, someone else's certificate):
 * nothing of ours to renew. */
bool identity_is_foreign(const Identity *id);

/* One line for STATUS= and logs, e.g. "waiting for CertificateSigningRequest node-agent-csr-… to be
 * issued" or "BootstrapFailed: …; retrying in 20s"; NULL when there is nothing to say. */
const char *identity_status(const Identity *id);

/* The code of the last failure, or _UPDATE_FAILURE_INVALID after a success. */
UpdateFailureCode identity_failure(const Identity *id);

/* apiServer.server and apiServer.caFile (optional) of gardener-node-agent's component config as
 * provisioned on the node (gna-config.h): the server its bootstrap token is for. Each NULL when not
 * there (no file, not readable or decodable, not set); -ENOMEM only. */
int identity_gna_api_server(const char *gna_directory, char **ret_server,
                            char **ret_ca_file) _warn_unused_result_;

/* The machine name as upstream derives it: the content of <gna_directory>/machine-name (trimmed) if
 * that file exists, else the node name. -EINVAL if the result is not a valid machine name. */
int identity_machine_name(const char *gna_directory, const char *node_name, char **ret) _warn_unused_result_;
