/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "util/fileio.h"
#include "util/in-root.h"
#include "util/macro.h"
#include "util/strv.h"

#define OSC_FILE_COMPARE_MAX (64 * 1024 * 1024)

/* The root itself is configuration (osc.rootDirectory, systemd.unitDirectory): followed, and made
 * when missing, as before any file goes below it. */
static int open_root(const char *root) {
        int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0 && errno == ENOENT && mkdir_parents(root, 0755) >= 0)
                fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* The directory that holds `path` (absolute) below `root`, resolved without ever leaving the root
 * (util/in-root.h: a parent that is a symlink resolves inside it, as in a chroot) and, with
 * `create`, made where missing (0755). *ret_name is the last component, inside `path`. */
static int open_parent(const char *root, const char *path, bool create, int *ret_dir,
                       const char **ret_name) {
        _cleanup_close_ int root_fd = -EBADF;
        _cleanup_free_ char *dir = NULL;
        const char *slash = strrchr(path, '/');

        if (path[0] != '/' || !slash[1] || streq(slash + 1, ".") || streq(slash + 1, ".."))
                return -EINVAL; /* relative, or no file name: a directory */
        dir = strndup(path, (size_t) (slash - path));
        if (!dir)
                return -ENOMEM;
        root_fd = open_root(root);
        if (root_fd < 0)
                return root_fd;
        *ret_name = slash + 1;
        return create ? mkdir_p_in_root(root_fd, dir, 0755, ret_dir) :
                        open_dir_in_root(root_fd, dir, ret_dir);
}

/* 1 if `name` is a regular file holding exactly `data` (its mode then set to `mode`), 0 if it differs
 * or is something else that the write replaces: missing, a symlink (never followed), a FIFO. */
static int same_content(int dir_fd, const char *name, const void *data, size_t size, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *old = NULL;
        size_t old_size;
        struct stat st;
        int r;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode) || (uint64_t) st.st_size != size)
                return 0;
        fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ELOOP ? 0 : -errno;
        r = read_full_fd(fd, OSC_FILE_COMPARE_MAX, &old, &old_size);
        if (r == -EFBIG || r == -EBADFD)
                return 0;
        if (r < 0)
                return r;
        if (old_size != size || memcmp(old, data, size) != 0)
                return 0;
        /* the mode is enforced on every apply (docs/node-protocol.md §6.2), on the file itself */
        return fchmod(fd, mode) < 0 ? -errno : 1;
}

static int write_at(int dir_fd, const char *name, const void *data, size_t size, mode_t mode,
                    bool if_changed) {
        int r;

        if (if_changed) {
                r = same_content(dir_fd, name, data, size, mode);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        r = write_file_atomic_at(dir_fd, name, data, size, mode);
        return r < 0 ? r : 1;
}

int osc_write_file(const char *root, const char *path, const void *data, size_t size, mode_t mode,
                   bool if_changed) {
        _cleanup_close_ int dir = -EBADF;
        const char *name;
        int r;

        r = open_parent(root, path, /* create= */ true, &dir, &name);
        return r < 0 ? r : write_at(dir, name, data, size, mode, if_changed);
}

static int sync_at(int dir_fd, const char *name, mode_t mode) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return -errno;
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
                return -errno;
        return 0;
}

/* `source` under the name `tmp` in `dir_fd`: hard-linked when it has the mode already, else (another
 * mode: a link shares the inode, so setting the mode would change the store's copy too) or across
 * filesystems copied. */
static int place_temp(const char *source, int dir_fd, const char *tmp, mode_t mode) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
                return -errno; /* a leftover of a killed earlier attempt */
        if (stat(source, &st) < 0)
                return -errno;
        if ((st.st_mode & 07777) == mode) {
                if (linkat(AT_FDCWD, source, dir_fd, tmp, 0) >= 0)
                        return sync_at(dir_fd, tmp, mode);
                if (errno != EXDEV)
                        return -errno;
        }
        fd = create_temp_at(dir_fd, tmp, mode);
        return fd < 0 ? fd : copy_file_to_fd(source, fd, mode);
}

int osc_install_file(const char *root, const char *path, const char *source, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int dir = -EBADF;
        const char *name;
        int r;

        r = open_parent(root, path, /* create= */ true, &dir, &name);
        if (r >= 0)
                r = write_file_atomic_temp_name(name, &tmp);
        if (r < 0)
                return r;
        r = place_temp(source, dir, tmp, mode);
        if (r >= 0 && renameat(dir, tmp, dir, name) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir, tmp, 0);
                return r;
        }
        return fsync(dir) < 0 ? -errno : 0;
}

/* The fsync of the directory a removal changed, so that a power loss cannot bring back what the saved
 * work list already counts as removed. */
static int remove_at(int dir_fd, const char *name) {
        if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        return fsync(dir_fd) < 0 ? -errno : 0;
}

int osc_remove_file(const char *root, const char *path) {
        _cleanup_close_ int dir = -EBADF;
        const char *name;
        int r;

        r = open_parent(root, path, /* create= */ false, &dir, &name);
        if (r == -ENOENT)
                return 0; /* its directory is gone, and the file with it */
        return r < 0 ? r : remove_at(dir, name);
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
        fd = -EBADF; /* owned by d now */
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

/* rm -rf of `name` in `dir_fd`, then the fsync of `dir_fd`. */
static int remove_tree_in(int dir_fd, const char *name) {
        int r = remove_tree_at(dir_fd, name);

        return r < 0 ? r : fsync(dir_fd) < 0 ? -errno : 0;
}

int osc_remove_tree(const char *path) {
        int r = remove_tree_at(AT_FDCWD, path);

        if (r >= 0)
                r = fsync_parent_dir(path);
        return r == -ENOENT ? 0 : r; /* a directory that is gone itself has nothing to sync */
}

/* Unit files and drop-ins are resolved below unit_dir as OSC files are below the root: a <name>.d
 * that is a symlink cannot take a drop-in out of it. */
static int open_unit_parent(const char *unit_dir, const char *name, const char *drop_in, bool create,
                            int *ret_dir, char **ret_path, const char **ret_base) {
        _cleanup_free_ char *path = NULL;
        int r;

        if ((drop_in ? asprintf(&path, "/%s.d/%s", name, drop_in) : asprintf(&path, "/%s", name)) < 0)
                return -ENOMEM;
        r = open_parent(unit_dir, path, create, ret_dir, ret_base);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path); /* *ret_base points into it */
        return 0;
}

/* Whether `name` in `dir_fd` is masked: a symlink to the null device, as `systemctl mask` makes them
 * and as a drop-in is masked by hand. systemd ignores such a file; writing it would unmask it. */
static bool masked_at(int dir_fd, const char *name) {
        struct stat st;

        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISLNK(st.st_mode))
                return false;
        return fstatat(dir_fd, name, &st, 0) >= 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

static int add_masked(char ***masked, const char *unit_dir, const char *path) {
        char *p;

        if (!masked)
                return 0;
        if (asprintf(&p, "%s%s", unit_dir, path) < 0)
                return -ENOMEM;
        return strv_consume(masked, p);
}

/* One unit file or drop-in: 1 written, 0 unchanged or masked (then named in *masked, left as it is). */
static int write_unit_file(const char *unit_dir, const char *name, const char *drop_in, const char *content,
                           char ***masked) {
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *path = NULL;
        const char *base;
        int r;

        r = open_unit_parent(unit_dir, name, drop_in, /* create= */ true, &dir, &path, &base);
        if (r < 0)
                return r;
        if (masked_at(dir, base))
                return add_masked(masked, unit_dir, path);
        return write_at(dir, base, content, strlen(content), 0600, /* if_changed= */ true);
}

/* One unit file or drop-in removed; a masked one stays masked. */
static int remove_unit_file(const char *unit_dir, const char *name, const char *drop_in) {
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *path = NULL;
        const char *base;
        int r;

        r = open_unit_parent(unit_dir, name, drop_in, /* create= */ false, &dir, &path, &base);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        return masked_at(dir, base) ? 0 : remove_at(dir, base);
}

/* <name>.d: removed with everything in it (`tree`), or only if empty. */
static int remove_drop_in_dir(const char *unit_dir, const char *name, bool tree) {
        _cleanup_free_ char *path = NULL, *d = NULL;
        _cleanup_close_ int dir = -EBADF;
        const char *base;
        int r;

        if (asprintf(&d, "%s.d", name) < 0)
                return -ENOMEM;
        r = open_unit_parent(unit_dir, d, NULL, /* create= */ false, &dir, &path, &base);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (tree)
                return remove_tree_in(dir, base);
        if (unlinkat(dir, base, AT_REMOVEDIR) < 0 && errno != ENOENT && errno != ENOTEMPTY &&
            errno != EEXIST)
                return -errno;
        return 0;
}

int osc_restore_unit_files(const char *unit_dir, const OscUnit *u, char ***masked) {
        bool changed = false;
        int r;

        if (u->content) {
                r = write_unit_file(unit_dir, u->name, NULL, u->content, masked);
                if (r < 0)
                        return r;
                changed |= r > 0;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                r = write_unit_file(unit_dir, u->name, u->drop_ins[i].name, strempty(u->drop_ins[i].content),
                                    masked);
                if (r < 0)
                        return r;
                changed |= r > 0;
        }
        return changed;
}

int osc_write_unit_files(const char *unit_dir, const OscUnit *u, char *const *deleted, char ***masked) {
        bool changed;
        int r;

        r = osc_restore_unit_files(unit_dir, u, masked);
        if (r < 0)
                return r;
        changed = r > 0;
        for (char *const *d = deleted; d && *d; d++) {
                r = remove_unit_file(unit_dir, u->name, *d);
                if (r < 0)
                        return r;
                changed = true;
        }
        if (u->n_drop_ins == 0) {
                r = remove_drop_in_dir(unit_dir, u->name, /* tree= */ true);
                if (r < 0)
                        return r;
        }
        return changed;
}

int osc_unit_file_exists(const char *unit_dir, const char *name) {
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *path = NULL;
        const char *base;
        int r;

        r = open_unit_parent(unit_dir, name, NULL, /* create= */ false, &dir, &path, &base);
        if (r >= 0 && faccessat(dir, base, F_OK, 0) < 0)
                r = -errno;
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : 1;
}

int osc_unit_masked(const char *unit_dir, const char *name) {
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *path = NULL;
        const char *base;
        int r;

        r = open_unit_parent(unit_dir, name, NULL, /* create= */ false, &dir, &path, &base);
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : masked_at(dir, base);
}

int osc_remove_unit_files(const char *unit_dir, const OscUnit *u) {
        int r;

        if (u->content) {
                r = remove_unit_file(unit_dir, u->name, NULL);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                r = remove_unit_file(unit_dir, u->name, u->drop_ins[i].name);
                if (r < 0)
                        return r;
        }
        return remove_drop_in_dir(unit_dir, u->name, /* tree= */ false);
}

int osc_write_registry(const char *root, const OscRegistry *g) {
        _cleanup_free_ char *toml = NULL, *path = NULL;
        int r;

        r = osc_registry_hosts_toml(g, &toml);
        if (r < 0)
                return r;
        if (asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s/hosts.toml", g->upstream) < 0)
                return -ENOMEM;
        r = osc_write_file(root, path, toml, strlen(toml), 0644, /* if_changed= */ true);
        return r < 0 ? r : 0;
}

int osc_remove_registry(const char *root, const char *upstream) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int dir = -EBADF;
        const char *name;
        int r;

        if (!osc_name_valid(upstream))
                return -EINVAL;
        if (asprintf(&path, OSC_CONTAINERD_CERTS_DIR "/%s", upstream) < 0)
                return -ENOMEM;
        r = open_parent(root, path, /* create= */ false, &dir, &name);
        if (r == -ENOENT)
                return 0;
        return r < 0 ? r : remove_tree_in(dir, name);
}

int osc_ensure_containerd_dirs(const char *root) {
        static const char *const dirs[] = { OSC_CONTAINERD_BIN_DIR, "/etc/containerd",
                                            "/etc/containerd/conf.d", OSC_CONTAINERD_CERTS_DIR };
        _cleanup_close_ int root_fd = open_root(root);

        if (root_fd < 0)
                return root_fd;
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_close_ int fd = -EBADF;
                int r = mkdir_p_in_root(root_fd, dirs[i], 0755, &fd);

                if (r < 0)
                        return r;
        }
        return 0;
}
