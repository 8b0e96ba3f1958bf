/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* gardener-node-agent's component config as the OSC being applied carries it (docs/contract.md §9.4): the
 * inline file /var/lib/gardener-node-agent/config*.yaml that a replaced unit (osc.replacedUnits)
 * lists in its filePaths. The agent takes from it what GNA would: the API server and its CA file,
 * the OSC Secret's name, the Kubernetes version for worker.gardener.cloud/kubernetes-version, and
 * the token sync configs. Decoded non-strictly like upstream; bounded. Pure: no I/O, no logging.
 * The OscComponentConfig owns its strings. */

#include <jansson.h>
#include <stddef.h>

#include "core/osc-model.h"
#include "util/macro.h"

#define OSC_COMPONENT_CONFIG_PREFIX "/var/lib/gardener-node-agent/config"
#define OSC_TOKEN_SYNCS_MAX 64

typedef struct OscTokenSync {
        char *secret_name;
        char *path;
} OscTokenSync;

typedef struct OscComponentConfig {
        char *file;                /* the path it came from */
        char *api_server;          /* apiServer.server; NULL if unset */
        char *ca_file;             /* apiServer.caFile */
        char *secret_name;         /* controllers.operatingSystemConfig.secretName */
        char *kubernetes_version;  /* controllers.operatingSystemConfig.kubernetesVersion */
        OscTokenSync *token_syncs; /* controllers.token.syncConfigs */
        size_t n_token_syncs;
        uint64_t token_sync_period_usec; /* controllers.token.syncPeriod; 0: unset */
} OscComponentConfig;

OscComponentConfig *osc_component_config_free(OscComponentConfig *c);
DEFINE_CLEANUP_FUNC(OscComponentConfig, osc_component_config_free);

/* -ENOENT when no replaced unit lists such a file (the OSC is not a GNA one); -EINVAL, with
 * *ret_error naming the file and field, when the file is not inline or does not decode. */
int osc_component_config_from_model(const OscModel *m, char *const *replaced_units, OscComponentConfig **ret,
                                    char **ret_error);

/* The same from a component config file's content, e.g. the one gardener-node-init provisioned on
 * the node: -EINVAL with *ret_error naming `file` (and the field) when it does not decode. */
int osc_component_config_from_yaml(const char *file, const char *data, size_t size, OscComponentConfig **ret,
                                   char **ret_error);

/* The same from the OSC Secret itself (data["osc.yaml"], base64 YAML), for readers that need only
 * the component config (the token sync, the credentials rotation): -ENODATA without that key, the
 * errors of osc_model_decode_yaml(), then those above. */
int osc_component_config_from_secret(const json_t *secret, char *const *replaced_units,
                                     OscComponentConfig **ret, char **ret_error);

/* controllers.token of a NodeAgentConfiguration `doc` into `c` (whose token fields are unset): the one
 * parser of the token sync configs, for the OSC's component config and identity/token-sync's
 * configuration alike (there were two, with different checks; these are the stricter union):
 * syncPeriod a positive duration ("1h30m", util/time-util.h); syncConfigs a list of at most
 * OSC_TOKEN_SYNCS_MAX entries, each with a secretName that is a DNS-1123 subdomain and a path that is
 * absolute without "." or ".." components or a trailing slash, at most OSC_MODEL_PATH_MAX bytes.
 * -EINVAL with *ret_error naming the field (after "<c->file>: " when c->file is set). */
int osc_component_config_decode_token(const json_t *doc, OscComponentConfig *c, char **ret_error);

/* Whether two configs name the same token syncs, in the same order, with the same period (NULL:
 * none). */
bool osc_component_config_same_token_syncs(const OscComponentConfig *a, const OscComponentConfig *b);
