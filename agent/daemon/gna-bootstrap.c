/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "daemon/gna-bootstrap.h"
#include "identity/identity.h"
#include "identity/kubelet-bootstrap.h"
#include "util/fileio.h"
#include "util/log.h"

/* A path the OSC's world knows, below osc.rootDirectory. */
static char *root_path(const Config *c, const char *path) {
        char *p;

        return path_below_root(c->osc.root_directory, path, &p) < 0 ? NULL : p;
}

void gna_bootstrap_provision_kubelet(const Config *config) {
        _cleanup_free_ char *gna = root_path(config, IDENTITY_GNA_DIRECTORY),
                            *kubelet = root_path(config, KUBELET_DIRECTORY),
                            *token = root_path(config, IDENTITY_GNA_DIRECTORY "/" GNA_BOOTSTRAP_TOKEN),
                            *server = NULL, *ca = NULL, *error = NULL;
        int r;

        if (!gna || !kubelet || !token || identity_gna_api_server(gna, &server, &ca) < 0) {
                log_oom();
                return;
        }
        r = kubelet_bootstrap_provision(
                &(KubeletBootstrapParams) {
                        .kubelet_directory = kubelet, .token_file = token, .server = server, .ca_file = ca },
                &error);
        if (r < 0)
                log_warning_errno(r, "Cannot write the kubelet's bootstrap kubeconfig: %s",
                                  error ?: strerror(-r));
        else if (r > 0)
                log_info(
                        "Wrote the kubelet's bootstrap kubeconfig %s/%s from gardener-node-agent's bootstrap token.",
                        kubelet, KUBELET_BOOTSTRAP_KUBECONFIG);
}
