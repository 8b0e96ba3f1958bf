/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "identity/client-csr.h"
#include "identity/kubelet-rebootstrap.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/yaml-json.h"

#define KUBECONFIG_REAL "kubeconfig-real"
#define KUBECONFIG_BOOTSTRAP "kubeconfig-bootstrap"
#define KUBELET_PKI "pki"
#define KUBELET_CLIENT_PEM "pki/kubelet-client-current.pem"
#define FILE_MAX (1024U * 1024U)

static const char *const step_names[_KUBELET_REBOOTSTRAP_STEP_MAX] = {
        [KUBELET_REBOOTSTRAP_WRITE_BOOTSTRAP] = "write-bootstrap",
        [KUBELET_REBOOTSTRAP_REMOVE_REAL] = "remove-real",
        [KUBELET_REBOOTSTRAP_REMOVE_PKI] = "remove-pki",
        [KUBELET_REBOOTSTRAP_RESTART_KUBELET] = "restart-kubelet",
        [KUBELET_REBOOTSTRAP_DONE] = "done",
};

DEFINE_STRING_TABLE_LOOKUP(kubelet_rebootstrap_step, KubeletRebootstrapStep, step_names);

json_t *kubelet_bootstrap_kubeconfig(const json_t *real, const char *ca_file, const char *server,
                                     const char *pem, size_t pem_size) {
        _cleanup_free_ char *data = NULL;
        json_t *out;

        if (!json_is_object(real) || base64_encode(pem, pem_size, /* url= */ false, &data) < 0)
                return NULL;
        out = json_deep_copy(real);
        if (!out)
                return NULL;
        if (json_object_set_new(out, "clusters",
                                json_pack("[{s:s, s:{s:s, s:s}}]", "name", "default-cluster", "cluster",
                                          "certificate-authority", ca_file, "server", server)) < 0 ||
            json_object_set_new(out, "users",
                                json_pack("[{s:s, s:{s:s, s:s}}]", "name", "default-auth", "user",
                                          "client-certificate-data", data, "client-key-data", data)) < 0) {
                json_decref(out);
                return NULL;
        }
        explicit_bzero(data, strlen(data));
        return out;
}

static char *kubelet_path(const KubeletRebootstrapParams *p, const char *name) {
        char *s;

        return asprintf(&s, "%s/%s", p->kubelet_directory, name) < 0 ? NULL : s;
}

static int persist(const KubeletRebootstrapParams *p, KubeletRebootstrapStep next, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (asprintf(&text, "{\"step\":\"%s\"}\n", kubelet_rebootstrap_step_to_string(next)) < 0)
                return -ENOMEM;
        r = write_file_atomic(p->state_file, text, strlen(text), 0600);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", p->state_file, strerror(-r));
        return 0;
}

static int load_step(const KubeletRebootstrapParams *p, KubeletRebootstrapStep *ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        size_t size;
        int r;

        r = read_full_file(p->state_file, 4096, &text, &size);
        if (r == -ENOENT) {
                *ret = KUBELET_REBOOTSTRAP_WRITE_BOOTSTRAP;
                return 0;
        }
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", p->state_file, strerror(-r));
        doc = json_loadb(text, size, 0, NULL);
        *ret = kubelet_rebootstrap_step_from_string(json_string_value(json_object_get(doc, "step")));
        if (*ret < 0)
                return error_setf(ret_error, -EBADMSG, "%s: no valid step", p->state_file);
        return 0;
}

static int write_bootstrap(const KubeletRebootstrapParams *p, char **ret_error) {
        _cleanup_free_ char *real = kubelet_path(p, KUBECONFIG_REAL),
                            *boot = kubelet_path(p, KUBECONFIG_BOOTSTRAP);
        _cleanup_free_ char *pem_path = kubelet_path(p, KUBELET_CLIENT_PEM), *text = NULL, *error = NULL,
                            *out = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL, *result = NULL;
        char *pem = NULL;
        size_t size, pem_size = 0;
        int r;

        if (!real || !boot || !pem_path)
                return -ENOMEM;
        r = read_full_file(real, FILE_MAX, &text, &size);
        if (r == -ENOENT) {
                /* Upstream: nothing to convert; the bootstrap kubeconfig must be there already. */
                if (access(boot, F_OK) < 0)
                        return error_setf(ret_error, -ENOENT,
                                          "kubeconfig file \"%s\" does not exist, cannot "
                                          "proceed with rebootstrap",
                                          boot);
                return 0;
        }
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", real, strerror(-r));
        r = yaml_to_json(text, size, &doc, &error);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", real, strempty(error));
        r = read_full_file(pem_path, FILE_MAX, &pem, &pem_size);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", pem_path, strerror(-r));
        result = kubelet_bootstrap_kubeconfig(doc, p->ca_file, p->server, pem, pem_size);
        erase_and_free(pem, pem_size);
        out = result ? json_dumps(result, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (!out)
                return error_setf(ret_error, -EINVAL, "%s: not a kubeconfig object", real);
        r = write_file_atomic(boot, out, strlen(out), 0600);
        explicit_bzero(out, strlen(out));
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", boot, strerror(-r));
        return 0;
}

static void closedirp(DIR **d) {
        if (*d)
                (void) closedir(*d);
}

/* rm -rf below an open directory (the fd is taken over); symlinks are removed, never followed. */
static int remove_tree_at(int dfd) {
        _cleanup_(closedirp) DIR *d = fdopendir(dfd);
        struct dirent *de;
        int r = 0;

        if (!d) {
                r = -errno;
                close(dfd);
                return r;
        }
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISDIR(st.st_mode)) {
                        int fd = openat(dirfd(d), de->d_name,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        if (fd < 0)
                                return -errno;
                        r = remove_tree_at(fd);
                        if (r < 0)
                                return r;
                        if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                                return -errno;
                } else if (unlinkat(dirfd(d), de->d_name, 0) < 0)
                        return -errno;
        }
        return 0;
}

static int remove_path(const KubeletRebootstrapParams *p, const char *name, bool tree, char **ret_error) {
        _cleanup_free_ char *path = kubelet_path(p, name);
        int r = 0;

        if (!path)
                return -ENOMEM;
        if (tree) {
                int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                if (fd < 0 && errno != ENOENT)
                        r = -errno;
                if (fd >= 0) {
                        r = remove_tree_at(fd);
                        if (r >= 0 && rmdir(path) < 0 && errno != ENOENT)
                                r = -errno;
                }
        } else if (unlink(path) < 0 && errno != ENOENT)
                r = -errno;
        if (r < 0)
                return error_setf(ret_error, r, "removing %s: %s", path, strerror(-r));
        (void) fsync_parent_dir(path); /* best effort: the removal itself is done */
        return 0;
}

int kubelet_rebootstrap_run(const KubeletRebootstrapParams *p, KubeletRebootstrapStep *ret_next,
                            char **ret_error) {
        KubeletRebootstrapStep step = 0;
        int r;

        assert(p && p->kubelet_directory && p->state_file && p->ca_file && p->server);
        assert(ret_next);

        r = load_step(p, &step, ret_error);
        if (r < 0)
                return r;
        while (step < KUBELET_REBOOTSTRAP_RESTART_KUBELET) {
                switch (step) {
                case KUBELET_REBOOTSTRAP_WRITE_BOOTSTRAP:
                        r = write_bootstrap(p, ret_error);
                        break;
                case KUBELET_REBOOTSTRAP_REMOVE_REAL:
                        r = remove_path(p, KUBECONFIG_REAL, /* tree= */ false, ret_error);
                        break;
                case KUBELET_REBOOTSTRAP_REMOVE_PKI:
                        r = remove_path(p, KUBELET_PKI, /* tree= */ true, ret_error);
                        break;
                default:
                        r = -EINVAL;
                }
                if (r < 0)
                        return r;
                step++;
                /* The next step starts only once this one is on disk as done. */
                r = persist(p, step, ret_error);
                if (r < 0)
                        return r;
        }
        *ret_next = step;
        return 0;
}

int kubelet_rebootstrap_finish(const KubeletRebootstrapParams *p, char **ret_error) {
        assert(p);

        if (unlink(p->state_file) < 0 && errno != ENOENT)
                return error_setf(ret_error, -errno, "removing %s: %s", p->state_file, strerror(errno));
        return 0;
}
