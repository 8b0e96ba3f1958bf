/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "util/fileio.h"
#include "util/macro.h"

#define OSC_FILE_COMPARE_MAX (64 * 1024 * 1024)

static int parent_dirs(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0;
        *slash = '\0';
        return mkdir_parents(dir, 0755);
}

/* 1 if `full` holds exactly `data`, 0 if not or missing. */
static int same_content(const char *full, const void *data, size_t size) {
        _cleanup_free_ char *old = NULL;
        size_t old_size;
        int r;

        r = read_full_file(full, OSC_FILE_COMPARE_MAX, &old, &old_size);
        if (r == -ENOENT || r == -EFBIG)
                return 0;
        if (r < 0)
                return r;
        return old_size == size && memcmp(old, data, size) == 0;
}

static int write_at(const char *full, const void *data, size_t size, mode_t mode, bool if_changed) {
        int r;

        r = parent_dirs(full);
        if (r < 0)
                return r;
        if (if_changed) {
                r = same_content(full, data, size);
                if (r < 0)
                        return r;
                if (r > 0)
                        /* the mode is enforced on every apply (GNP §6.2) */
                        return chmod(full, mode) < 0 ? -errno : 0;
        }
        r = write_file_atomic(full, data, size, mode);
        return r < 0 ? r : 1;
}

int osc_write_file(const char *root, const char *path, const void *data, size_t size, mode_t mode, bool if_changed) {
        _cleanup_free_ char *full = NULL;
        int r;

        r = path_below_root(root, path, &full);
        if (r < 0)
                return r;
        return write_at(full, data, size, mode, if_changed);
}

static int sync_path(const char *path, mode_t mode) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return -errno;
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
                return -errno;
        return 0;
}

int osc_install_file(const char *root, const char *path, const char *source, mode_t mode) {
        _cleanup_free_ char *full = NULL, *tmp = NULL;
        int r;

        r = path_below_root(root, path, &full);
        if (r < 0)
                return r;
        r = parent_dirs(full);
        if (r < 0)
                return r;
        r = write_file_atomic_temp_name(full, &tmp);
        if (r < 0)
                return r;
        (void) unlink(tmp);             /* a leftover of a killed earlier attempt */
        if (link(source, tmp) >= 0)
                r = sync_path(tmp, mode);
        else
                r = errno == EXDEV ? copy_file(source, tmp, mode) : -errno;
        if (r >= 0 && rename(tmp, full) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        return fsync_parent_dir(full);
}

/* fsync of the directory a removal changed, so that a power loss cannot bring back what the saved
 * work list already counts as removed. A directory that is gone itself has nothing to sync. */
static int sync_removal(const char *full) {
        int r = fsync_parent_dir(full);

        return r == -ENOENT ? 0 : r;
}

static int remove_at(const char *full) {
        if (unlink(full) < 0 && errno != ENOENT)
                return -errno;
        return sync_removal(full);
}

int osc_remove_file(const char *root, const char *path) {
        _cleanup_free_ char *full = NULL;
        int r;

        r = path_below_root(root, path, &full);
        return r < 0 ? r : remove_at(full);
}

static int remove_tree_at(int parent, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;
        int r = 0;

        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                if (errno == ENOTDIR || errno == ELOOP)
                        return unlinkat(parent, name, 0) < 0 && errno != ENOENT ? -errno : 0;
                return -errno;
        }
        d = fdopendir(fd);
        if (!d)
                return -errno;
        fd = -EBADF;            /* owned by d now */
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type == DT_DIR)
                        r = remove_tree_at(dirfd(d), de->d_name);
                else if (unlinkat(dirfd(d), de->d_name, 0) < 0 && errno != ENOENT)
                        r = errno == EISDIR ? remove_tree_at(dirfd(d), de->d_name) : -errno;
                if (r < 0)
                        break;
        }
        closedir(d);
        if (r < 0)
                return r;
        return unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}

int osc_remove_tree(const char *path) {
        int r = remove_tree_at(AT_FDCWD, path);

        return r < 0 ? r : sync_removal(path);
}

static int unit_paths(const char *unit_dir, const char *name, const char *drop_in, char **ret) {
        return (drop_in ? asprintf(ret, "%s/%s.d/%s", unit_dir, name, drop_in)
                        : asprintf(ret, "%s/%s", unit_dir, name)) < 0 ? -ENOMEM : 0;
}

int osc_write_unit_files(const char *unit_dir, const OscUnit *u, char *const *deleted) {
        bool changed = false;
        int r;

        if (u->content) {
                _cleanup_free_ char *p = NULL;

                r = unit_paths(unit_dir, u->name, NULL, &p);
                if (r >= 0)
                        r = write_at(p, u->content, strlen(u->content), 0600, true);
                if (r < 0)
                        return r;
                changed |= r > 0;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                _cleanup_free_ char *p = NULL;
                const char *c = strempty(u->drop_ins[i].content);

                r = unit_paths(unit_dir, u->name, u->drop_ins[i].name, &p);
                if (r >= 0)
                        r = write_at(p, c, strlen(c), 0600, true);
                if (r < 0)
                        return r;
                changed |= r > 0;
        }
        for (char *const *d = deleted; d && *d; d++) {
                _cleanup_free_ char *p = NULL;

                r = unit_paths(unit_dir, u->name, *d, &p);
                if (r >= 0)
                        r = remove_at(p);
                if (r < 0)
                        return r;
                changed = true;
        }
        if (u->n_drop_ins == 0) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s/%s.d", unit_dir, u->name) < 0)
                        return -ENOMEM;
                r = osc_remove_tree(p);
                if (r < 0)
                        return r;
        }
        return changed;
}

int osc_unit_file_exists(const char *unit_dir, const char *name) {
        _cleanup_free_ char *p = NULL;
        int r = unit_paths(unit_dir, name, NULL, &p);

        if (r < 0)
                return r;
        if (access(p, F_OK) < 0)
                return errno == ENOENT ? 0 : -errno;
        return 1;
}

int osc_remove_unit_files(const char *unit_dir, const OscUnit *u) {
        _cleanup_free_ char *p = NULL, *dir = NULL;
        int r;

        if (u->content) {
                r = unit_paths(unit_dir, u->name, NULL, &p);
                if (r >= 0)
                        r = remove_at(p);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                _cleanup_free_ char *d = NULL;

                r = unit_paths(unit_dir, u->name, u->drop_ins[i].name, &d);
                if (r >= 0)
                        r = remove_at(d);
                if (r < 0)
                        return r;
        }
        if (asprintf(&dir, "%s/%s.d", unit_dir, u->name) < 0)
                return -ENOMEM;
        if (rmdir(dir) < 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
                return -errno;
        return 0;
}

int osc_write_registry(const char *root, const OscRegistry *g) {
        _cleanup_free_ char *toml = NULL, *path = NULL;
        int r;

        r = osc_registry_hosts_toml(g, &toml);
        if (r < 0)
                return r;
        if (asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s/hosts.toml", g->upstream) < 0)
                return -ENOMEM;
        r = osc_write_file(root, path, toml, strlen(toml), 0644, true);
        return r < 0 ? r : 0;
}

int osc_remove_registry(const char *root, const char *upstream) {
        _cleanup_free_ char *path = NULL, *full = NULL;
        int r;

        if (!osc_name_valid(upstream))
                return -EINVAL;
        if (asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s", upstream) < 0)
                return -ENOMEM;
        r = path_below_root(root, path, &full);
        return r < 0 ? r : osc_remove_tree(full);
}

int osc_ensure_containerd_dirs(const char *root) {
        static const char *const dirs[] = { OSC_CONTAINERD_BIN_DIR, "/etc/containerd", "/etc/containerd/conf.d",
                                            OSC_CONTAINERD_CERTS_DIR };

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *full = NULL;
                int r = path_below_root(root, dirs[i], &full);

                if (r >= 0)
                        r = mkdir_parents(full, 0755);
                if (r < 0)
                        return r;
        }
        return 0;
}
