/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include "util/fileio.h"
#include "util/macro.h"

int read_full_file(const char *path, size_t max_size, char **ret_data, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;

        assert(path);

        /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever, on the
         * event loop. Only regular files are read; /proc and /sys files are regular too. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        return read_full_fd(fd, max_size, ret_data, ret_size);
}

int read_full_fd(int fd, size_t max_size, char **ret_data, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;
        struct stat st;

        assert(fd >= 0);
        assert(ret_data);

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISDIR(st.st_mode))
                return -EISDIR;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;

        for (;;) {
                ssize_t n;

                if (alloc - size < 4096) {
                        size_t na = alloc ? alloc * 2 : 8192;
                        char *nb;

                        if (na > max_size + 4097)
                                na = max_size + 4097;
                        if (na <= alloc)
                                return -EFBIG;
                        nb = realloc(buf, na);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        alloc = na;
                }
                n = read(fd, buf + size, alloc - size - 1);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
                if (size > max_size)
                        return -EFBIG;
        }

        if (!buf) {
                buf = malloc(1);
                if (!buf)
                        return -ENOMEM;
        } else if (alloc - size > 4096) {
                /* Callers keep what they read (credentials, CA bundles, the OSC) for the daemon's
                 * lifetime: hand back the bytes, not the read buffer. */
                char *nb = realloc(buf, size + 1);

                if (nb)
                        buf = nb;
        }
        buf[size] = '\0';
        *ret_data = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}

static int open_parent_dir(const char *path, const char **ret_name) {
        _cleanup_free_ char *dir = NULL;
        const char *slash = strrchr(path, '/');
        int fd;

        dir = slash == path ? strdup("/") : slash ? strndup(path, (size_t) (slash - path)) : strdup(".");
        if (!dir)
                return -ENOMEM;
        *ret_name = slash ? slash + 1 : path; /* set on every path: callers read it after a check */
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int fsync_parent_dir(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        const char *name;

        fd = open_parent_dir(path, &name);
        if (fd < 0)
                return fd;
        return fsync(fd) < 0 ? -errno : 0;
}

int fsync_directory(const char *dir) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return fsync(fd) < 0 ? -errno : 0;
}

/* One fixed name per target, hidden: a temp file left by a kill is truncated and renamed away by the
 * next write of the same target (a resumed write always comes), and readers of the directory that skip
 * dot files (kubelet's static pod directory, systemd's drop-in directories read only *.conf) never see
 * a half-written file. The process is single-threaded and one agent runs per node, so the name is
 * never written by two at once. */
int write_file_atomic_temp_name(const char *path, char **ret) {
        const char *slash = strrchr(path, '/');

        if (asprintf(ret, "%.*s.%s.tmp", slash ? (int) (slash - path + 1) : 0, path,
                     slash ? slash + 1 : path) < 0)
                return -ENOMEM;
        return 0;
}

int write_full(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t n = write(fd, p, size);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode) {
        _cleanup_close_ int dir_fd = -EBADF;
        const char *name;

        assert(path);
        dir_fd = open_parent_dir(path, &name);
        if (dir_fd < 0)
                return dir_fd;
        return write_file_atomic_at(dir_fd, name, data, size, mode);
}

/* A temp file of a killed earlier write is truncated and reused; a symlink or anything else under
 * the temp name goes first, so that O_EXCL makes the file ours (never followed, never shared). */
int create_temp_at(int dir_fd, const char *tmp, mode_t mode) {
        int fd;

        if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
                return -errno;
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        return fd < 0 ? -errno : fd;
}

int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t size, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        assert(name);
        assert(data || size == 0);

        r = write_file_atomic_temp_name(name, &tmp);
        if (r < 0)
                return r;
        fd = create_temp_at(dir_fd, tmp, mode);
        if (fd < 0)
                return fd;

        r = write_full(fd, data, size);
        if (r < 0)
                goto fail;
        if (fchmod(fd, mode) < 0 || fsync(fd) < 0) {
                r = -errno;
                goto fail;
        }
        /* renameat() replaces whatever `name` is (a symlink too: the link, not its target). */
        if (renameat(dir_fd, tmp, dir_fd, name) < 0) {
                r = -errno;
                goto fail;
        }
        return fsync(dir_fd) < 0 ? -errno : 0;

fail:
        (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

/* mkdir() with exactly `mode` (not masked by the umask) when it creates the directory. */
static int mkdir_mode(const char *path, mode_t mode) {
        if (mkdir(path, mode) < 0)
                return errno == EEXIST ? 0 : -errno;
        return chmod(path, mode) < 0 ? -errno : 0;
}

int mkdir_parents(const char *path, mode_t mode) {
        _cleanup_free_ char *copy = strdup(path);
        int r;

        if (!copy)
                return -ENOMEM;
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                r = mkdir_mode(copy, mode);
                if (r < 0)
                        return r;
                *p = '/';
        }
        return mkdir_mode(copy, mode);
}

int path_below_root(const char *root, const char *path, char **ret) {
        size_t n;

        assert(root && path && ret);
        if (path[0] != '/')
                return -EINVAL;
        n = strlen(root);
        while (n > 0 && root[n - 1] == '/')
                n--;
        return asprintf(ret, "%.*s%s", (int) n, root, path) < 0 ? -ENOMEM : 0;
}

int copy_file(const char *from, const char *to, mode_t mode) {
        _cleanup_close_ int out = -EBADF;

        out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (out < 0)
                return -errno;
        return copy_file_to_fd(from, out, mode);
}

int copy_file_to_fd(const char *from, int out, mode_t mode) {
        _cleanup_close_ int in = -EBADF;
        struct stat st;
        off_t left;

        in = open(from, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0)
                return -errno;
        if (fstat(in, &st) < 0)
                return -errno;
        for (left = st.st_size; left > 0;) {
                ssize_t n = sendfile(out, in, NULL, (size_t) MIN(left, (off_t) 1 << 30));

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO; /* the file shrank under us */
                left -= n;
        }
        return fchmod(out, mode) < 0 || fsync(out) < 0 ? -errno : 0;
}
