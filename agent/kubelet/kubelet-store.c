/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "kubelet/kubelet-store.h"
#include "util/fileio.h"

#define KUBELET_FILE_NAME "kubelet"

struct KubeletStore {
        FileStore *files;  /* owned: <stateDirectory>/kubelet, staging <stateDirectory>/staging */
        char *binary_path; /* owned */
        unsigned keep_versions;
};

int kubelet_store_new(const char *state_directory, const char *binary_path, unsigned keep_versions,
                      KubeletStore **ret) {
        _cleanup_(kubelet_store_freep) KubeletStore *s = NULL;
        _cleanup_free_ char *root = NULL, *staging = NULL;
        int r;

        assert(state_directory);
        assert(binary_path);
        assert(ret);

        if (binary_path[0] != '/' || keep_versions < 1)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->keep_versions = keep_versions;
        s->binary_path = strdup(binary_path);
        if (!s->binary_path || asprintf(&root, "%s/kubelet", state_directory) < 0 ||
            asprintf(&staging, "%s/staging", state_directory) < 0)
                return -ENOMEM;
        r = file_store_new(root, staging, KUBELET_FILE_NAME, &s->files);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

KubeletStore *kubelet_store_free(KubeletStore *s) {
        if (!s)
                return NULL;
        file_store_free(s->files);
        free(s->binary_path);
        free(s);
        return NULL;
}

FileStore *kubelet_store_files(const KubeletStore *s) {
        return s->files;
}

const char *kubelet_store_root(const KubeletStore *s) {
        return file_store_root(s->files);
}

const char *kubelet_store_binary_path(const KubeletStore *s) {
        return s->binary_path;
}

int kubelet_store_current(const KubeletStore *s, char **ret_version) {
        const char *root = file_store_root(s->files), *rest, *slash;
        char target[PATH_MAX];
        struct stat st;
        size_t n = strlen(root);
        ssize_t len;
        char *v;

        assert(ret_version);

        if (lstat(s->binary_path, &st) < 0)
                return -errno;
        if (S_ISREG(st.st_mode))
                return -EMEDIUMTYPE;
        if (!S_ISLNK(st.st_mode))
                return -EXDEV;
        len = readlink(s->binary_path, target, sizeof(target) - 1);
        if (len < 0)
                return -errno;
        target[len] = '\0';

        /* Only our own shape counts: <root>/<version>/kubelet. */
        if (strncmp(target, root, n) != 0 || target[n] != '/')
                return -EXDEV;
        rest = target + n + 1;
        slash = strchr(rest, '/');
        if (!slash || !streq(slash, "/" KUBELET_FILE_NAME))
                return -EXDEV;
        v = strndup(rest, (size_t) (slash - rest));
        if (!v)
                return -ENOMEM;
        if (!file_store_version_is_valid(v)) {
                free(v);
                return -EXDEV;
        }
        *ret_version = v;
        return 0;
}

static int dirname_of(const char *path, char **ret) {
        const char *slash = strrchr(path, '/');
        char *d = slash == path ? strdup("/") : strndup(path, (size_t) (slash - path));

        if (!d)
                return -ENOMEM;
        *ret = d;
        return 0;
}

static int symlink_atomic(const char *target, const char *path) {
        _cleanup_free_ char *dir = NULL, *tmp = NULL;
        uint64_t rnd;
        const char *base;
        int r;

        r = dirname_of(path, &dir);
        if (r < 0)
                return r;
        r = mkdir_parents(dir, 0755);
        if (r < 0)
                return r;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -errno;
        base = strrchr(path, '/') + 1;
        if (asprintf(&tmp, "%s/.%s.new-%016llx", dir, base, (unsigned long long) rnd) < 0)
                return -ENOMEM;
        if (symlink(target, tmp) < 0)
                return -errno;
        if (rename(tmp, path) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return fsync_directory(dir);
}

/* binaryPath removed: only our own link into the store (or nothing at all) is ever removed. */
static int remove_link(const KubeletStore *s, char **ret_previous) {
        _cleanup_free_ char *previous = NULL;
        int r;

        r = kubelet_store_current(s, &previous);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (unlink(s->binary_path) < 0 && errno != ENOENT)
                return -errno;
        r = fsync_parent_dir(s->binary_path);
        if (r < 0)
                return r;
        if (ret_previous)
                *ret_previous = TAKE_PTR(previous);
        return 0;
}

int kubelet_store_switch(const KubeletStore *s, const char *version, char **ret_previous) {
        _cleanup_free_ char *target = NULL, *previous = NULL;
        int r;

        assert(s);

        if (!version)
                return remove_link(s, ret_previous);
        r = file_store_has(s->files, version);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        r = file_store_path(s->files, version, &target);
        if (r < 0)
                return r;

        r = kubelet_store_current(s, &previous);
        if (r == -EMEDIUMTYPE)
                return r; /* a regular file: adopt it first, never overwrite it blindly */
        if (r < 0 && r != -ENOENT && r != -EXDEV)
                return r;

        r = symlink_atomic(target, s->binary_path);
        if (r < 0)
                return r;
        if (ret_previous)
                *ret_previous = TAKE_PTR(previous);
        return 0;
}

int kubelet_store_gc(const KubeletStore *s, const char *const *protect) {
        _cleanup_free_ char *current = NULL;
        const char **all;
        size_t n = 0;
        int r;

        assert(s);

        (void) kubelet_store_current(s, &current);
        while (protect && protect[n])
                n++;
        /* The running version is protected like the rollback one. */
        all = calloc(n + 2, sizeof(char *));
        if (!all)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                all[i] = protect[i];
        all[n] = current;
        r = file_store_gc(s->files, s->keep_versions, all);
        free(all);
        return r;
}

int kubelet_store_needs_adoption(const KubeletStore *s) {
        struct stat st;

        if (lstat(s->binary_path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        return S_ISREG(st.st_mode) ? 1 : 0;
}

int kubelet_store_adopt(const KubeletStore *s, const char *version, char **ret_version) {
        _cleanup_free_ char *staged = NULL, *v = NULL, *target = NULL;
        int r;

        assert(s);

        r = kubelet_store_needs_adoption(s);
        if (r <= 0)
                return r < 0 ? r : -ENOENT;

        v = strdup(file_store_version_is_valid(version) ? version : KUBELET_ADOPTED_VERSION);
        if (!v || asprintf(&staged, "%s/adopt-kubelet", file_store_staging(s->files)) < 0)
                return -ENOMEM;

        (void) unlink(staged);
        if (link(s->binary_path, staged) < 0) {
                if (errno != EXDEV && errno != EPERM)
                        return -errno;
                r = copy_file(s->binary_path, staged, 0600);
                if (r < 0) {
                        (void) unlink(staged);
                        return r;
                }
        }
        r = file_store_install(s->files, v, staged, "{\"adopted\":true}\n");
        if (r < 0) {
                (void) unlink(staged);
                return r;
        }
        r = file_store_path(s->files, v, &target);
        if (r < 0)
                return r;
        /* Not kubelet_store_switch(): that one refuses to replace a regular file, on purpose. */
        r = symlink_atomic(target, s->binary_path);
        if (r < 0)
                return r;
        if (ret_version)
                *ret_version = TAKE_PTR(v);
        return 0;
}
