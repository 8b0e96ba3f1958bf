/* SPDX-License-Identifier: Apache-2.0 */
/* The configuration's I/O half: config.yaml, its config.d drop-ins, and the environment. */

#include <assert.h>
#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "core/config.h"
#include "daemon/config-files.h"
#include "util/fileio.h"
#include "util/yaml-json.h"

#define CONFIG_FILE_MAX (1024 * 1024)
#define CONFIG_DROPINS_MAX 256

static int apply_file(Config *c, const char *path, bool optional, char **ret_error) {
        _cleanup_free_ char *data = NULL, *yerr = NULL;
        json_t *doc = NULL;
        size_t size;
        int r;

        r = read_full_file(path, CONFIG_FILE_MAX, &data, &size);
        if (r == -ENOENT && optional)
                return 0;
        if (r == -EFBIG)
                return config_errorf(ret_error, path, NULL, "file larger than %d bytes", CONFIG_FILE_MAX);
        if (r == -EBADFD)
                return config_errorf(ret_error, path, NULL, "not a regular file");
        if (r < 0)
                return config_errorf(ret_error, path, NULL, "cannot read: %s", strerror(-r));

        r = yaml_to_json(data, size, &doc, &yerr);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return config_errorf(ret_error, path, NULL, "invalid YAML: %s", yerr ? yerr : strerror(-r));

        r = config_apply_json(c, doc, path, ret_error);
        json_decref(doc);
        return r;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int config_load_files(Config *c, const char *path, bool optional, char **ret_error) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0;
        DIR *d;
        int r;

        assert(c);
        assert(path);

        r = apply_file(c, path, optional, ret_error);
        if (r < 0)
                return r;

        {
                const char *slash = strrchr(path, '/');
                if (asprintf(&dir, "%.*s/config.d", slash ? (int) (slash - path) : 1, slash ? path : ".") <
                    0)
                        return -ENOMEM;
                /* The directory of the file and its drop-ins: the agent's own, no OSC file goes there. */
                free(c->config_directory);
                c->config_directory = strndup(dir, strlen(dir) - strlen("/config.d"));
                if (!c->config_directory)
                        return -ENOMEM;
        }
        d = opendir(dir);
        if (!d) {
                if (errno == ENOENT)
                        return 0;
                return config_errorf(ret_error, dir, NULL, "cannot read directory: %m");
        }
        names = calloc(CONFIG_DROPINS_MAX + 1, sizeof(char *));
        if (!names) {
                closedir(d);
                return -ENOMEM;
        }
        for (struct dirent *de; (de = readdir(d));) {
                size_t l = strlen(de->d_name);

                if (l < 6 || de->d_name[0] == '.' || !streq(de->d_name + l - 5, ".yaml"))
                        continue;
                if (n >= CONFIG_DROPINS_MAX) {
                        closedir(d);
                        return config_errorf(ret_error, dir, NULL, "more than %d drop-ins",
                                             CONFIG_DROPINS_MAX);
                }
                if (asprintf(&names[n], "%s/%s", dir, de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                n++;
        }
        closedir(d);
        qsort(names, n, sizeof(char *), cmp_str);

        for (size_t i = 0; i < n; i++) {
                r = apply_file(c, names[i], /* optional= */ false, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_load_environment(Config *c, const char *node_name, const char *kubeconfig, const char *state_dir,
                            char **ret_error) {
        char host[HOST_NAME_MAX + 1] = "";
        const char *env_node = getenv("NODE_NAME");
        ConfigOverrides o = {
                .node_name = !isempty(node_name) ? node_name : env_node,
                .node_name_source = !isempty(node_name) ? "--node-name" : "$NODE_NAME",
                .kubeconfig = !isempty(kubeconfig) ? kubeconfig : getenv("KUBECONFIG"),
                .state_dir = state_dir,
                .hostname = host,
                .path = getenv("PATH"),
        };

        if (isempty(o.node_name) && gethostname(host, sizeof(host) - 1) < 0)
                return config_errorf(ret_error, "hostname", NULL, "cannot determine node name: %m");
        return config_finalize(c, &o, ret_error);
}
