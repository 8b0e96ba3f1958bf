/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <glob.h>
#include <stdio.h>

#include "identity/gna-config.h"
#include "util/error-message.h"
#include "util/fileio.h"

#define GNA_CONFIG_MAX (1024U * 1024U)

/* The provisioned file's path: the lexically last config-*.yaml, else config.yaml. */
static int find(const char *gna_directory, char **ret) {
        _cleanup_free_ char *pattern = NULL;
        _cleanup_(globfree) glob_t g = {};

        if (asprintf(&pattern, "%s/config-*.yaml", gna_directory) < 0)
                return -ENOMEM;
        if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0)
                *ret = strdup(g.gl_pathv[g.gl_pathc - 1]);
        else if (asprintf(ret, "%s/config.yaml", gna_directory) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

int gna_config_read(const char *gna_directory, OscComponentConfig **ret, char **ret_error) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t size;
        int r;

        assert(gna_directory && ret);

        r = find(gna_directory, &path);
        if (r < 0)
                return r;
        r = read_full_file(path, GNA_CONFIG_MAX, &data, &size);
        if (r == -ENOENT || r == -ENOMEM)
                return r;
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strerror(-r));
        return osc_component_config_from_yaml(path, data, size, ret, ret_error);
}
