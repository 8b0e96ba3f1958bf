/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include "oci/registry-mirror.h"
#include "util/macro.h"
#include "util/strv.h"

int registry_mirror_endpoints(const RegistryMirror *mirrors, size_t n_mirrors, const OciRef *ref,
                              char ***ret, size_t *ret_n) {
        _cleanup_strv_free_ char **l = NULL;
        const char *mirror = NULL;
        size_t n = 0;
        char *e;

        for (size_t i = 0; i < n_mirrors; i++)
                if (streq(mirrors[i].host, ref->registry))
                        mirror = mirrors[i].url;

        l = calloc(3, sizeof(char *));
        if (!l)
                return -ENOMEM;
        if (mirror) {
                size_t len = strlen(mirror);
                bool has_scheme = strstr(mirror, "://") != NULL;

                while (len > 0 && mirror[len - 1] == '/')
                        len--;
                if (asprintf(&e, "%s%.*s", has_scheme ? "" : "https://", (int) len, mirror) < 0)
                        return -ENOMEM;
                l[n++] = e;
        }
        if (asprintf(&e, "https://%s", oci_ref_api_host(ref)) < 0)
                return -ENOMEM;
        l[n++] = e;
        *ret = TAKE_PTR(l);
        *ret_n = n;
        return 0;
}

char *registry_mirror_endpoint_host(const char *base) {
        const char *s = strstr(base, "://");

        s = s ? s + 3 : base;
        return strndup(s, strcspn(s, "/"));
}

int registry_mirror_credentials(const char *data, size_t size, const char *endpoint, bool is_mirror,
                                const OciRef *ref, RegistryCredentials **ret) {
        _cleanup_free_ char *host = NULL;
        int r;

        if (is_mirror) {
                host = registry_mirror_endpoint_host(endpoint);
                if (!host)
                        return -ENOMEM;
                r = registry_auth_file_lookup(data, size, host, ref->repository, ret);
                if (r != -ENOENT)
                        return r;
        }
        return registry_auth_file_lookup(data, size, ref->registry, ref->repository, ret);
}

void registry_mirror_join_failure(char **message, const char *first) {
        char *joined;

        if (*message && first && !streq(*message, first) &&
            asprintf(&joined, "%s; before that: %s", *message, first) >= 0) {
                free(*message);
                *message = joined;
        }
}
