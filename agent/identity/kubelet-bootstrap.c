/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <unistd.h>

#include "identity/client-csr.h"
#include "identity/kubelet-bootstrap.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/macro.h"

#define TOKEN_MAX 4096
#define CONTEXT "kubelet-bootstrap"

json_t *kubelet_bootstrap_token_kubeconfig(const char *server, const char *ca_file, const char *token) {
        _cleanup_free_ char *url = NULL;

        assert(server && ca_file && token);
        if (strncmp(server, "https://", strlen("https://")) != 0 && asprintf(&url, "https://%s", server) < 0)
                return NULL;
        return json_pack(
                "{s:s, s:s, s:[{s:s, s:{s:s, s:s}}], s:[{s:s, s:{s:s}}], s:[{s:s, s:{s:s, s:s}}], s:s}",
                "apiVersion", "v1", "kind", "Config", "clusters", "name", CONTEXT, "cluster",
                "certificate-authority", ca_file, "server", url ?: server, "users", "name", CONTEXT, "user",
                "token", token, "contexts", "name", CONTEXT, "context", "cluster", CONTEXT, "user", CONTEXT,
                "current-context", CONTEXT);
}

static char *kubelet_file(const char *dir, const char *name) {
        char *p;

        return asprintf(&p, "%s/%s", dir, name) < 0 ? NULL : p;
}

/* The kubelet has a client certificate of its own (upstream looks at these two files). */
static int kubelet_has_credentials(const char *dir) {
        static const char *const names[] = { "kubeconfig-real", "pki/kubelet-client-current.pem" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                _cleanup_free_ char *path = kubelet_file(dir, names[i]);

                if (!path)
                        return -ENOMEM;
                if (access(path, F_OK) >= 0)
                        return 1;
                if (errno != ENOENT)
                        return -errno;
        }
        return 0;
}

static int write_kubeconfig(const KubeletBootstrapParams *p, const char *token, char **ret_error) {
        _cleanup_free_ char *path = kubelet_file(p->kubelet_directory, KUBELET_BOOTSTRAP_KUBECONFIG);
        _cleanup_(json_decrefp) json_t *doc = NULL;
        char *text;
        int r;

        if (!path)
                return -ENOMEM;
        doc = kubelet_bootstrap_token_kubeconfig(p->server, p->ca_file, token);
        text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (!text)
                return -ENOMEM;
        r = mkdir_parents(p->kubelet_directory, 0755);
        if (r >= 0)
                r = write_file_atomic(path, text, strlen(text), 0600);
        erase_and_free(text, strlen(text));
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strerror(-r));
        return 1;
}

int kubelet_bootstrap_provision(const KubeletBootstrapParams *p, char **ret_error) {
        _cleanup_free_ char *token = NULL;
        size_t size = 0;
        int r;

        assert(p && p->kubelet_directory && p->token_file);

        r = read_full_file(p->token_file, TOKEN_MAX, &token, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", p->token_file, strerror(-r));
        r = kubelet_has_credentials(p->kubelet_directory);
        if (r != 0) {
                erase_and_free(TAKE_PTR(token), size);
                return r < 0 ? error_setf(ret_error, r, "%s: %s", p->kubelet_directory, strerror(-r)) : 0;
        }
        if (isempty(p->server) || isempty(p->ca_file)) {
                erase_and_free(TAKE_PTR(token), size);
                return error_setf(
                        ret_error, -ENODATA,
                        "gardener-node-agent's component config names no "
                        "apiServer.server and apiServer.caFile for the kubelet's bootstrap kubeconfig");
        }
        /* Trimmed like upstream's strings.TrimSpace. */
        while (size > 0 && strchr(" \t\r\n", token[size - 1]))
                token[--size] = '\0';
        r = write_kubeconfig(p, token + strspn(token, " \t\r\n"), ret_error);
        erase_and_free(TAKE_PTR(token), size);
        return r;
}
