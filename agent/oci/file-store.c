/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "oci/file-store.h"
#include "util/fileio.h"
#include "util/strv.h"

#define SOURCE_MAX (64U * 1024U)

struct FileStore {
        char *root;      /* owned */
        char *staging;   /* owned */
        char *file_name; /* owned */
};

int file_store_new(const char *root, const char *staging, const char *file_name, FileStore **ret) {
        _cleanup_(file_store_freep) FileStore *s = NULL;
        int r;

        assert(root && staging && file_name && ret);

        if (isempty(file_name) || strchr(file_name, '/'))
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->root = strdup(root);
        s->staging = strdup(staging);
        s->file_name = strdup(file_name);
        if (!s->root || !s->staging || !s->file_name)
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

FileStore *file_store_free(FileStore *s) {
        if (!s)
                return NULL;
        free(s->root);
        free(s->staging);
        free(s->file_name);
        free(s);
        return NULL;
}

const char *file_store_root(const FileStore *s) {
        return s->root;
}

const char *file_store_staging(const FileStore *s) {
        return s->staging;
}

const char *file_store_file_name(const FileStore *s) {
        return s->file_name;
}

bool file_store_version_is_valid(const char *v) {
        size_t n;

        if (isempty(v))
                return false;
        n = strlen(v);
        if (n > FILE_STORE_VERSION_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = v[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');

                if (!alnum && (i == 0 || !strchr("._+-", c)))
                        return false;
        }
        return true;
}

int file_store_path(const FileStore *s, const char *version, char **ret) {
        assert(s);
        assert(ret);

        if (!file_store_version_is_valid(version))
                return -EINVAL;
        return asprintf(ret, "%s/%s/%s", s->root, version, s->file_name) < 0 ? -ENOMEM : 0;
}

int file_store_has(const FileStore *s, const char *version) {
        _cleanup_free_ char *p = NULL;
        struct stat st;
        int r;

        r = file_store_path(s, version, &p);
        if (r < 0)
                return r;
        if (lstat(p, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        return S_ISREG(st.st_mode) && (st.st_mode & 0111) ? 1 : 0;
}

int file_store_install(const FileStore *s, const char *version, const char *staged_path,
                       const char *source_json) {
        _cleanup_free_ char *dir = NULL, *target = NULL, *source = NULL;
        _cleanup_close_ int fd = -EBADF;
        bool created = false;
        int r;

        assert(s);
        assert(staged_path);

        if (!file_store_version_is_valid(version))
                return -EINVAL;
        if (asprintf(&dir, "%s/%s", s->root, version) < 0 ||
            asprintf(&target, "%s/%s", dir, s->file_name) < 0 ||
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
         * older file, which only costs a re-pull; the reverse could vouch for the wrong file. */
        if (source_json) {
                (void) unlink(source);
                r = fsync_directory(dir);
                if (r < 0)
                        return r;
        }
        if (rename(staged_path, target) < 0)
                return -errno;
        r = fsync_directory(dir);
        if (r < 0)
                return r;
        if (created) {
                r = fsync_directory(s->root);
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

int file_store_read_source(const FileStore *s, const char *version, char **ret) {
        _cleanup_free_ char *p = NULL;

        if (!file_store_version_is_valid(version))
                return -EINVAL;
        if (asprintf(&p, "%s/%s/source.json", s->root, version) < 0)
                return -ENOMEM;
        return read_full_file(p, SOURCE_MAX, ret, NULL);
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

static int remove_version(const FileStore *s, const char *version) {
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
        dfd = -EBADF; /* owned by d now */
        /* One level only: the store holds files, never trees, so nothing recursive is needed. */
        while ((de = readdir(d)))
                if (de->d_type != DT_DIR)
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        if (rmdir(dir) < 0)
                return -errno;
        return 0;
}

/* Every stored version with its file's modification time. */
static int list_versions(const FileStore *s, StoredVersion **ret, size_t *ret_n) {
        StoredVersion *list = NULL;
        size_t n = 0;
        int r = 0;
        DIR *d;
        struct dirent *de;

        d = opendir(s->root);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_free_ char *file = NULL;
                StoredVersion *nl;
                struct stat st;

                if (!file_store_version_is_valid(de->d_name))
                        continue; /* ".", "..", temporary names */
                if (asprintf(&file, "%s/%s/%s", s->root, de->d_name, s->file_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (lstat(file, &st) < 0)
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
        *ret = list;
        *ret_n = n;
        return r;
}

int file_store_gc(const FileStore *s, unsigned keep, const char *const *protect) {
        StoredVersion *list = NULL;
        size_t n = 0, kept = 0;
        int removed = 0, r;

        assert(s);

        r = list_versions(s, &list, &n);
        if (r >= 0) {
                if (n > 0)
                        qsort(list, n, sizeof(*list), compare_newest_first);
                /* Protected ones count against `keep` first; then the newest others. */
                for (size_t i = 0; i < n; i++)
                        if (strv_contains((char *const *) protect, list[i].name))
                                kept++;
                for (size_t i = 0; i < n; i++) {
                        if (strv_contains((char *const *) protect, list[i].name))
                                continue;
                        if (kept < keep) {
                                kept++;
                                continue;
                        }
                        if (remove_version(s, list[i].name) >= 0)
                                removed++;
                }
                if (removed > 0)
                        (void) fsync_directory(s->root);
        }

        for (size_t i = 0; i < n; i++)
                free(list[i].name);
        free(list);
        return r < 0 ? r : removed;
}
