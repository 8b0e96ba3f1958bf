/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "kubelet/kubelet-store.h"
#include "util/fileio.h"
#include "util/strv.h"

#define SOURCE_MAX (64U * 1024U)

struct KubeletStore {
        char *root;             /* owned: <stateDirectory>/kubelet */
        char *staging;          /* owned: <stateDirectory>/staging */
        char *binary_path;      /* owned */
        unsigned keep_versions;
};

int kubelet_store_new(const char *state_directory, const char *binary_path, unsigned keep_versions,
                      KubeletStore **ret) {
        _cleanup_(kubelet_store_freep) KubeletStore *s = NULL;
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
        if (asprintf(&s->root, "%s/kubelet", state_directory) < 0 ||
            asprintf(&s->staging, "%s/staging", state_directory) < 0) {
                s->root = s->staging = NULL;
                return -ENOMEM;
        }
        s->binary_path = strdup(binary_path);
        if (!s->binary_path)
                return -ENOMEM;

        r = mkdir_parents(s->root, 0755);
        if (r < 0)
                return r;
        r = mkdir_parents(s->staging, 0700);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

KubeletStore *kubelet_store_free(KubeletStore *s) {
        if (!s)
                return NULL;
        free(s->root);
        free(s->staging);
        free(s->binary_path);
        free(s);
        return NULL;
}

const char *kubelet_store_root(const KubeletStore *s) {
        return s->root;
}

const char *kubelet_store_staging(const KubeletStore *s) {
        return s->staging;
}

const char *kubelet_store_binary_path(const KubeletStore *s) {
        return s->binary_path;
}

bool kubelet_version_is_valid(const char *v) {
        size_t n;

        if (isempty(v))
                return false;
        n = strlen(v);
        if (n > KUBELET_VERSION_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = v[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

                if (!alnum && (i == 0 || !strchr("._+-", c)))
                        return false;
        }
        return true;
}

int kubelet_version_from_output(const char *output, char **ret) {
        const char *p;
        size_t n;
        char *v;

        assert(ret);

        if (!output || strncmp(output, "Kubernetes ", 11) != 0)
                return -EBADMSG;
        p = output + 11;
        if (*p == 'v')
                p++;
        n = strcspn(p, " \t\r\n");
        v = strndup(p, n);
        if (!v)
                return -ENOMEM;
        if (!kubelet_version_is_valid(v) || v[0] < '0' || v[0] > '9') {
                free(v);
                return -EBADMSG;
        }
        *ret = v;
        return 0;
}

int kubelet_store_path(const KubeletStore *s, const char *version, char **ret) {
        assert(s);
        assert(ret);

        if (!kubelet_version_is_valid(version))
                return -EINVAL;
        return asprintf(ret, "%s/%s/kubelet", s->root, version) < 0 ? -ENOMEM : 0;
}

int kubelet_store_has(const KubeletStore *s, const char *version) {
        _cleanup_free_ char *p = NULL;
        struct stat st;
        int r;

        r = kubelet_store_path(s, version, &p);
        if (r < 0)
                return r;
        if (lstat(p, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        return S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 1 : 0;
}

static int fsync_dir(const char *dir) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return fsync(fd) < 0 ? -errno : 0;
}

int kubelet_store_install(const KubeletStore *s, const char *version, const char *staged_path,
                          const char *source_json) {
        _cleanup_free_ char *dir = NULL, *target = NULL, *source = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool created = false;
        int r;

        assert(s);
        assert(staged_path);

        if (!kubelet_version_is_valid(version))
                return -EINVAL;
        if (asprintf(&dir, "%s/%s", s->root, version) < 0 ||
            asprintf(&target, "%s/kubelet", dir) < 0 ||
            asprintf(&source, "%s/source.json", dir) < 0)
                return -ENOMEM;

        if (mkdir(dir, 0755) < 0) {
                if (errno != EEXIST)
                        return -errno;
        } else
                created = true;

        fd = open(staged_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, 0755) < 0 || fsync(fd) < 0)
                return -errno;

        /* The metadata goes first: a crash between the two leaves a stale source.json next to an
         * older binary, which only costs a re-pull; the reverse could vouch for the wrong file. */
        if (source_json) {
                (void) unlink(source);
                r = fsync_dir(dir);
                if (r < 0)
                        return r;
        }
        if (rename(staged_path, target) < 0)
                return -errno;
        r = fsync_dir(dir);
        if (r < 0)
                return r;
        if (created) {
                r = fsync_dir(s->root);
                if (r < 0)
                        return r;
        }
        if (source_json) {
                r = write_file_atomic(source, source_json, strlen(source_json), 0644);
                if (r < 0)
                        return r;
        }
        return 0;
}

int kubelet_store_read_source(const KubeletStore *s, const char *version, char **ret) {
        _cleanup_free_ char *p = NULL;

        if (!kubelet_version_is_valid(version))
                return -EINVAL;
        if (asprintf(&p, "%s/%s/source.json", s->root, version) < 0)
                return -ENOMEM;
        return read_full_file(p, SOURCE_MAX, ret, NULL);
}

int kubelet_store_current(const KubeletStore *s, char **ret_version) {
        char target[PATH_MAX];
        struct stat st;
        const char *rest, *slash;
        size_t n = strlen(s->root);
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
        if (strncmp(target, s->root, n) != 0 || target[n] != '/')
                return -EXDEV;
        rest = target + n + 1;
        slash = strchr(rest, '/');
        if (!slash || !streq(slash, "/kubelet"))
                return -EXDEV;
        v = strndup(rest, (size_t) (slash - rest));
        if (!v)
                return -ENOMEM;
        if (!kubelet_version_is_valid(v)) {
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
        return fsync_dir(dir);
}

/* binaryPath removed: only our own link into the store (or nothing at all) is ever removed. */
static int remove_link(const KubeletStore *s, char **ret_previous) {
        _cleanup_free_ char *previous = NULL, *dir = NULL;
        int r;

        r = kubelet_store_current(s, &previous);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (unlink(s->binary_path) < 0 && errno != ENOENT)
                return -errno;
        r = dirname_of(s->binary_path, &dir);
        if (r >= 0)
                r = fsync_dir(dir);
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
        r = kubelet_store_has(s, version);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENOENT;
        r = kubelet_store_path(s, version, &target);
        if (r < 0)
                return r;

        r = kubelet_store_current(s, &previous);
        if (r == -EMEDIUMTYPE)
                return r;       /* a regular file: adopt it first, never overwrite it blindly */
        if (r < 0 && r != -ENOENT && r != -EXDEV)
                return r;

        r = symlink_atomic(target, s->binary_path);
        if (r < 0)
                return r;
        if (ret_previous)
                *ret_previous = TAKE_PTR(previous);
        return 0;
}

typedef struct StoredVersion {
        char *name;
        int64_t mtime_nsec;
} StoredVersion;

static int compare_newest_first(const void *a, const void *b) {
        const StoredVersion *x = a, *y = b;

        if (x->mtime_nsec != y->mtime_nsec)
                return x->mtime_nsec > y->mtime_nsec ? -1 : 1;
        return strcmp(x->name, y->name);
}

static int remove_version(const KubeletStore *s, const char *version) {
        _cleanup_free_ char *dir = NULL;
        _cleanup_close_ int dfd = -EBADF;
        DIR *d;
        struct dirent *de;

        if (asprintf(&dir, "%s/%s", s->root, version) < 0)
                return -ENOMEM;
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return -errno;
        d = fdopendir(dfd);
        if (!d)
                return -errno;
        dfd = -EBADF;   /* owned by d now */
        /* One level only: the store holds files, never trees, so nothing recursive is needed. */
        while ((de = readdir(d)))
                if (de->d_type != DT_DIR)
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        if (rmdir(dir) < 0)
                return -errno;
        return 0;
}

int kubelet_store_gc(const KubeletStore *s, const char *const *protect) {
        _cleanup_free_ char *current = NULL;
        StoredVersion *list = NULL;
        size_t n = 0, kept = 0;
        int removed = 0, r = 0;
        DIR *d;
        struct dirent *de;

        assert(s);

        (void) kubelet_store_current(s, &current);

        d = opendir(s->root);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *bin = NULL;
                StoredVersion *nl;
                struct stat st;

                if (!kubelet_version_is_valid(de->d_name))
                        continue;       /* ".", "..", temporary names */
                if (asprintf(&bin, "%s/%s/kubelet", s->root, de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (lstat(bin, &st) < 0)
                        st.st_mtim = (struct timespec) {};
                nl = realloc(list, (n + 1) * sizeof(*list));
                if (!nl) {
                        r = -ENOMEM;
                        break;
                }
                list = nl;
                list[n].name = strdup(de->d_name);
                list[n].mtime_nsec = (int64_t) st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
                if (!list[n].name) {
                        r = -ENOMEM;
                        break;
                }
                n++;
        }
        closedir(d);

        if (r >= 0) {
                if (n > 0)
                        qsort(list, n, sizeof(*list), compare_newest_first);
                /* Protected ones count against keep_versions first; then the newest others. */
                for (size_t i = 0; i < n; i++)
                        if (streq_ptr(list[i].name, current) || strv_contains((char *const *) protect, list[i].name))
                                kept++;
                for (size_t i = 0; i < n; i++) {
                        if (streq_ptr(list[i].name, current) || strv_contains((char *const *) protect, list[i].name))
                                continue;
                        if (kept < s->keep_versions) {
                                kept++;
                                continue;
                        }
                        if (remove_version(s, list[i].name) >= 0)
                                removed++;
                }
                if (removed > 0)
                        (void) fsync_dir(s->root);
        }

        for (size_t i = 0; i < n; i++)
                free(list[i].name);
        free(list);
        return r < 0 ? r : removed;
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

        v = strdup(kubelet_version_is_valid(version) ? version : KUBELET_ADOPTED_VERSION);
        if (!v || asprintf(&staged, "%s/adopt-kubelet", s->staging) < 0)
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
        r = kubelet_store_install(s, v, staged, "{\"adopted\":true}\n");
        if (r < 0) {
                (void) unlink(staged);
                return r;
        }
        r = kubelet_store_path(s, v, &target);
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
