/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/in-root.h"
#include "util/macro.h"

/* openat2(RESOLVE_IN_ROOT) answers EAGAIN when a rename elsewhere raced its ".." checks. */
#define OPENAT2_ATTEMPTS 8

bool in_root_force_walk = false;

static bool same_inode(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The next component of *p, slashes skipped; false at the end. */
static bool next_component(const char **p, const char **ret, size_t *ret_len) {
        *p += strspn(*p, "/");
        if (!**p)
                return false;
        *ret = *p;
        *ret_len = strcspn(*p, "/");
        *p += *ret_len;
        return true;
}

static int reopen_fd(int *fd, int new_fd) {
        if (new_fd < 0)
                return -errno;
        closep(fd);
        *fd = new_fd;
        return 0;
}

/* A symlink met at `link_fd` (O_PATH | O_NOFOLLOW): its target goes in front of what is left to
 * resolve, and an absolute one starts again at the root. */
static int follow_link(int root_fd, int link_fd, int *cur, char **todo, const char **p) {
        char target[PATH_MAX], *joined;
        ssize_t k = readlinkat(link_fd, "", target, sizeof(target));

        if (k < 0)
                return -errno;
        if ((size_t) k >= sizeof(target))
                return -ENAMETOOLONG;
        target[k] = '\0';
        if (asprintf(&joined, "%s/%s", target, *p) < 0)
                return -ENOMEM;
        free(*todo);
        *todo = joined;
        *p = joined;
        return target[0] == '/' ? reopen_fd(cur, fcntl(root_fd, F_DUPFD_CLOEXEC, 3)) : 0;
}

/* What openat2(RESOLVE_IN_ROOT) does, one component at a time: nothing is ever followed by the
 * kernel (O_NOFOLLOW), ".." of the root is the root. */
static int walk_in_root(int root_fd, const char *path, int *ret_fd) {
        _cleanup_free_ char *todo = strdup(path);
        _cleanup_close_ int cur = -EBADF;
        struct stat root_st;
        unsigned links = 0;
        const char *p = todo, *c;
        size_t n;
        int r;

        if (!todo)
                return -ENOMEM;
        if (fstat(root_fd, &root_st) < 0)
                return -errno;
        r = reopen_fd(&cur, fcntl(root_fd, F_DUPFD_CLOEXEC, 3));
        while (r >= 0 && next_component(&p, &c, &n)) {
                _cleanup_close_ int fd = -EBADF;
                char name[NAME_MAX + 1];
                struct stat st;

                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(name, c, n);
                name[n] = '\0';
                if (streq(name, "."))
                        continue;
                if (streq(name, "..")) {
                        if (fstat(cur, &st) < 0)
                                return -errno;
                        if (same_inode(&st, &root_st))
                                continue; /* ".." of the root is the root */
                }
                fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &st) < 0)
                        return -errno;
                if (S_ISLNK(st.st_mode))
                        r = ++links > IN_ROOT_SYMLINKS_MAX ? -ELOOP :
                                                             follow_link(root_fd, fd, &cur, &todo, &p);
                else if (!S_ISDIR(st.st_mode))
                        r = -ENOTDIR;
                else
                        r = reopen_fd(&cur, TAKE_FD(fd));
        }
        if (r < 0)
                return r;
        *ret_fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return *ret_fd < 0 ? -errno : 0;
}

static int openat2_in_root(int root_fd, const char *path, int *ret_fd) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };

        for (unsigned i = 0; i < OPENAT2_ATTEMPTS; i++) {
                int fd = (int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how));

                if (fd >= 0) {
                        *ret_fd = fd;
                        return 0;
                }
                if (errno != EAGAIN)
                        return -errno;
        }
        return -EAGAIN;
}

int open_dir_in_root(int root_fd, const char *path, int *ret_fd) {
        static bool no_openat2;
        const char *rel = path + strspn(path, "/");
        int r;

        assert(root_fd >= 0 && ret_fd);
        if (!*rel)
                rel = ".";
        if (!in_root_force_walk && !no_openat2) {
                r = openat2_in_root(root_fd, rel, ret_fd);
                if (r != -ENOSYS)
                        return r;
                no_openat2 = true; /* the kernel will not grow it while we run */
        }
        return walk_in_root(root_fd, rel, ret_fd);
}

/* `name` made in `dir_fd` with exactly `mode`, opened; a component that appeared meanwhile is
 * resolved again (a dangling symlink stays -ENOENT: nothing is created through it). */
static int mkdir_component(int root_fd, int dir_fd, const char *prefix, const char *name, mode_t mode,
                           int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;

        if (mkdirat(dir_fd, name, mode) < 0)
                return errno == EEXIST ? open_dir_in_root(root_fd, prefix, ret_fd) : -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fchmod(fd, mode) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int mkdir_p_in_root(int root_fd, const char *path, mode_t mode, int *ret_fd) {
        _cleanup_close_ int cur = -EBADF;
        const char *p = path, *c;
        size_t n;
        int r;

        r = open_dir_in_root(root_fd, path, ret_fd);
        if (r != -ENOENT)
                return r;
        /* Each prefix resolved in the root; a missing one made in the directory its parent resolved to. */
        r = open_dir_in_root(root_fd, ".", &cur);
        while (r >= 0 && next_component(&p, &c, &n)) {
                _cleanup_free_ char *prefix = strndup(path, (size_t) (p - path)), *name = strndup(c, n);
                int fd = -EBADF;

                if (!prefix || !name)
                        return -ENOMEM;
                r = open_dir_in_root(root_fd, prefix, &fd);
                if (r == -ENOENT)
                        r = mkdir_component(root_fd, cur, prefix, name, mode, &fd);
                if (r >= 0)
                        r = reopen_fd(&cur, fd);
        }
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(cur);
        return 0;
}

/* Appends "/<component>" for each component of `rest`. */
static int append_components(char **buf, const char *rest) {
        const char *c;
        size_t n;

        while (next_component(&rest, &c, &n)) {
                char *grown;

                if (asprintf(&grown, "%s/%.*s", *buf, (int) n, c) < 0)
                        return -ENOMEM;
                free(*buf);
                *buf = grown;
        }
        return 0;
}

/* Whether the component `name` (`n` bytes) exists in `dir_fd` although it did not resolve: a symlink
 * whose target is missing below the root. */
static bool dangling_at(int dir_fd, const char *name, size_t n) {
        char component[NAME_MAX + 1];
        struct stat st;

        if (n > NAME_MAX)
                return false;
        memcpy(component, name, n);
        component[n] = '\0';
        return fstatat(dir_fd, component, &st, AT_SYMLINK_NOFOLLOW) >= 0;
}

int path_in_root_canonical(int root_fd, const char *path, char **ret) {
        _cleanup_close_ int dir = -EBADF;
        _cleanup_free_ char *resolved = NULL;
        const char *last = strrchr(path, '/'), *p = path, *rest = path, *c;
        char proc[64], buf[PATH_MAX];
        ssize_t k;
        size_t n;
        int r;

        last = last ? last + 1 : path;
        r = open_dir_in_root(root_fd, ".", &dir);
        /* The longest existing directory prefix; the rest does not exist yet and is taken as written. */
        while (r >= 0 && next_component(&p, &c, &n) && c < last) {
                _cleanup_free_ char *prefix = strndup(path, (size_t) (p - path));
                int fd = -EBADF;

                if (!prefix)
                        return -ENOMEM;
                r = open_dir_in_root(root_fd, prefix, &fd);
                if (r == -ENOENT) {
                        /* Missing, or a dangling symlink, which no directory is created through
                         * (mkdir_p_in_root()): nothing can be written there. */
                        r = dangling_at(dir, c, n) ? -ENOENT : 0;
                        break;
                }
                if (r >= 0) {
                        r = reopen_fd(&dir, fd);
                        rest = p;
                }
        }
        if (r < 0)
                return r;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dir);
        k = readlink(proc, buf, sizeof(buf));
        if (k < 0)
                return -errno;
        if ((size_t) k >= sizeof(buf))
                return -ENAMETOOLONG;
        resolved = strndup(buf, (size_t) (k == 1 && buf[0] == '/' ? 0 : k)); /* "/" + "/etc" */
        if (!resolved)
                return -ENOMEM;
        r = append_components(&resolved, rest);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(resolved);
        return 0;
}
