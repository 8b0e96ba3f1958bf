/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <limits.h>
#include <search.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "oci/archive-extract.h"
#include "oci/gzip-source.h"
#include "oci/libarchive-dl.h"

#define WHITEOUT_PREFIX ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"

static const char *const lookup_table[_ARCHIVE_LOOKUP_MAX] = {
        [ARCHIVE_LOOKUP_ABSENT] = "absent",
        [ARCHIVE_LOOKUP_FOUND] = "found",
        [ARCHIVE_LOOKUP_WHITEOUT] = "whiteout",
        [ARCHIVE_LOOKUP_OPAQUE] = "opaque",
        [ARCHIVE_LOOKUP_NOT_DIRECTORY] = "not-directory",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(archive_lookup, ArchiveLookup, lookup_table);

static inline void archive_read_freep(struct archive **a) {
        if (*a)
                (void) sym_archive_read_free(*a);
}

static inline void archive_write_freep(struct archive **a) {
        if (*a)
                (void) sym_archive_write_free(*a);
}

int archive_path_normalize(const char *path, bool allow_absolute, size_t max_path, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t n = 0;
        const char *p;

        assert(ret);

        if (isempty(path))
                return -EINVAL;
        if (path[0] == '/' && !allow_absolute)
                return -EXDEV;
        if (strlen(path) > max_path)
                return -ENAMETOOLONG;

        out = malloc(strlen(path) + 1);
        if (!out)
                return -ENOMEM;

        for (p = path; *p;) {
                size_t len;

                while (*p == '/')
                        p++;
                len = strcspn(p, "/");
                if (len == 0)
                        break;
                if (len > NAME_MAX)
                        return -ENAMETOOLONG;
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return -EXDEV;
                if (!(len == 1 && p[0] == '.')) {
                        if (n > 0)
                                out[n++] = '/';
                        memcpy(out + n, p, len);
                        n += len;
                }
                p += len;
        }
        out[n] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

/* Does a symlink at `link_path` with relative `target` stay inside the image root when resolved
 * lexically? (Absolute targets are image-root relative and never followed here.) */
static bool symlink_target_is_safe(const char *link_path, const char *target) {
        int depth = 0;

        if (target[0] == '/')
                return true;
        /* Start at the link's directory: one level per '/' in its path. */
        for (const char *s = link_path; *s; s++)
                if (*s == '/')
                        depth++;
        for (const char *p = target; *p;) {
                size_t len = strcspn(p, "/");

                if (len == 2 && p[0] == '.' && p[1] == '.') {
                        if (--depth < 0)
                                return false;
                } else if (len > 0 && !(len == 1 && p[0] == '.'))
                        depth++;
                p += len;
                while (*p == '/')
                        p++;
        }
        return true;
}

/* Is `prefix` a proper parent directory of `path` ("a/b" of "a/b/c"; "" of everything)? */
static bool is_parent_of(const char *prefix, const char *path) {
        size_t n = strlen(prefix);

        if (n == 0)
                return *path != '\0';
        return strncmp(prefix, path, n) == 0 && path[n] == '/';
}

typedef struct Scan {
        const ArchiveLimits *limits;
        const char *wanted;      /* borrowed: normalized path we look for */
        const char *staging_dir; /* borrowed */
        const char *out_name;    /* borrowed */
        int64_t stop_at;         /* stop before this entry index (hard link second pass), -1 = no */
        LayerFeed *feed;         /* borrowed: the layer is still being downloaded; NULL = complete */

        void *symlinks;        /* owned: tsearch tree of normalized symlink paths */
        char *message;         /* owned: why it failed */
        char *hardlink_target; /* owned: the wanted path is a hard link to this */
        int64_t hardlink_index;
        ArchiveExtractResult result;
        bool extracted; /* the staging file exists */
} Scan;

static int scan_fail(Scan *s, int error, const char *entry, const char *fmt, const char *arg) {
        free(s->message);
        s->message = NULL;
        if (asprintf(&s->message, "entry \"%s\": %s%s", strempty(entry), fmt, strempty(arg)) < 0)
                s->message = NULL;
        return error;
}

static int strcmp_void(const void *a, const void *b) {
        return strcmp(a, b);
}

/* Does `path` run through a symlink that an earlier entry of this layer created? */
static bool path_crosses_symlink(Scan *s, const char *path) {
        _cleanup_free_ char *copy = strdup(path);

        if (!copy)
                return true; /* fail closed */
        for (char *slash = strchr(copy, '/'); slash; slash = strchr(slash + 1, '/')) {
                *slash = '\0';
                if (tfind(copy, &s->symlinks, strcmp_void))
                        return true;
                *slash = '/';
        }
        return false;
}

static int remember_symlink(Scan *s, const char *path) {
        char *copy = strdup(path);
        void *node;

        if (!copy)
                return -ENOMEM;
        node = tsearch(copy, &s->symlinks, strcmp_void);
        if (!node) {
                free(copy);
                return -ENOMEM;
        }
        if (*(char **) node != copy)
                free(copy); /* already known */
        return 0;
}

static void forget_symlink(Scan *s, const char *path) {
        void *node = tfind(path, &s->symlinks, strcmp_void);
        char *key;

        if (!node)
                return;
        key = *(char **) node;
        (void) tdelete(path, &s->symlinks, strcmp_void);
        free(key);
}

static int staging_path(Scan *s, char **ret) {
        return asprintf(ret, "%s/%s", s->staging_dir, s->out_name) < 0 ? -ENOMEM : 0;
}

static void staging_remove(Scan *s) {
        _cleanup_free_ char *p = NULL;

        if (!s->extracted || staging_path(s, &p) < 0)
                return;
        (void) unlink(p);
        s->extracted = false;
}

static int check_space(const char *dir, uint64_t size) {
        struct statvfs sv;

        if (statvfs(dir, &sv) < 0)
                return -errno;
        if ((uint64_t) sv.f_bavail * sv.f_frsize < size)
                return -ENOSPC;
        return 0;
}

/* Hashes the zeros of a sparse gap (or the tail the writer extends the file with). */
static int digest_zeros(DigestContext *c, uint64_t n) {
        static const uint8_t zeros[64 * 1024];

        for (; n > 0; n -= MIN(n, sizeof(zeros))) {
                int r = digest_context_update(c, zeros, (size_t) MIN(n, sizeof(zeros)));
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Copies the entry's data blocks and hashes them on the way, so the file is never read back. The
 * file is `size` bytes at the end (archive_write_disk extends it over sparse tails), and that is what
 * is hashed; blocks come in increasing offsets (tar), so holes are hashed as zeros. */
static int copy_data(struct archive *in, struct archive *out, uint64_t size, uint64_t *ret_size,
                     Digest *ret_digest) {
        _cleanup_(digest_context_freep) DigestContext *c = NULL;
        uint64_t total = 0;
        int r;

        r = digest_context_new(&c);
        if (r < 0)
                return r;
        for (;;) {
                const void *buf;
                size_t n;
                la_int64_t offset;

                r = sym_archive_read_data_block(in, &buf, &n, &offset);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN)
                        return sym_archive_errno(in) > 0 ? -sym_archive_errno(in) : -EBADMSG;
                if (offset < 0 || (uint64_t) offset + n > size || (uint64_t) offset < digest_context_size(c))
                        return -EFBIG;
                r = digest_zeros(c, (uint64_t) offset - digest_context_size(c));
                if (r >= 0)
                        r = digest_context_update(c, buf, n);
                if (r < 0)
                        return r;
                total = MAX(total, (uint64_t) offset + n);
                if (sym_archive_write_data_block(out, buf, n, offset) < ARCHIVE_WARN)
                        return sym_archive_errno(out) > 0 ? -sym_archive_errno(out) : -EIO;
        }
        r = digest_zeros(c, size - digest_context_size(c));
        if (r >= 0)
                r = digest_context_final(c, ret_digest);
        if (r < 0)
                return r;
        *ret_size = total;
        return 0;
}

static int fsync_path(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return -errno;
        return fsync(fd) < 0 ? -errno : 0;
}

/* Writes the current entry's data to the staging file, replacing an earlier occurrence. */
static int extract_current(Scan *s, struct archive *a, struct archive_entry *entry, const char *path) {
        _cleanup_(archive_write_freep) struct archive *w = NULL;
        _cleanup_free_ char *target = NULL;
        struct archive_entry *out;
        uint64_t size = (uint64_t) MAX(sym_archive_entry_size(entry), 0), written = 0;
        int r;

        if (size > s->limits->max_file_size)
                return scan_fail(s, -EFBIG, path, "file larger than the limit", NULL);
        r = check_space(s->staging_dir, size);
        if (r < 0)
                return scan_fail(s, r, path, "no room in the staging directory", NULL);
        r = staging_path(s, &target);
        if (r < 0)
                return r;
        staging_remove(s);

        w = sym_archive_write_disk_new();
        out = sym_archive_entry_new();
        if (!w || !out) {
                sym_archive_entry_free(out);
                return -ENOMEM;
        }
        /* The path is ours, not the archive's; the flags still refuse to follow symlinks or '..'. */
        (void) sym_archive_write_disk_set_options(w,
                                                  ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                                          ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                                          ARCHIVE_EXTRACT_UNLINK | ARCHIVE_EXTRACT_PERM);
        sym_archive_entry_set_pathname(out, target);
        sym_archive_entry_set_filetype(out, AE_IFREG);
        sym_archive_entry_set_perm(out, 0600);
        sym_archive_entry_set_size(out, (la_int64_t) size);

        r = sym_archive_write_header(w, out);
        sym_archive_entry_free(out);
        if (r < ARCHIVE_WARN)
                return scan_fail(s, sym_archive_errno(w) > 0 ? -sym_archive_errno(w) : -EIO, path,
                                 "cannot create staging file: ", sym_archive_error_string(w));
        s->extracted = true;
        r = copy_data(a, w, size, &written, &s->result.digest);
        if (r < 0)
                return scan_fail(s, r, path, r == -EFBIG ? "data beyond the entry size" : "cannot extract",
                                 NULL);
        if (sym_archive_write_finish_entry(w) < ARCHIVE_WARN || sym_archive_write_close(w) < ARCHIVE_WARN)
                return scan_fail(s, sym_archive_errno(w) > 0 ? -sym_archive_errno(w) : -EIO, path,
                                 "cannot finish staging file: ", sym_archive_error_string(w));
        r = fsync_path(target);
        if (r < 0)
                return r;

        s->result.lookup = ARCHIVE_LOOKUP_FOUND;
        s->result.size = size;
        s->result.mode = sym_archive_entry_perm(entry);
        return 0;
}

/* Whiteouts: ".wh.<name>" deletes <dir>/<name>; ".wh..wh..opq" makes <dir> opaque. */
static int check_whiteout(Scan *s, const char *path) {
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        _cleanup_free_ char *dir = NULL, *victim = NULL;

        if (strncmp(base, WHITEOUT_PREFIX, strlen(WHITEOUT_PREFIX)) != 0)
                return 0;
        dir = strndup(path, slash ? (size_t) (slash - path) : 0);
        if (!dir)
                return -ENOMEM;

        if (streq(base, WHITEOUT_OPAQUE)) {
                if (is_parent_of(dir, s->wanted) && s->result.lookup == ARCHIVE_LOOKUP_ABSENT) {
                        s->result.lookup = ARCHIVE_LOOKUP_OPAQUE;
                }
                return 1;
        }
        if (!base[strlen(WHITEOUT_PREFIX)])
                return scan_fail(s, -EXDEV, path, "whiteout without a name", NULL);
        if (asprintf(&victim, "%s%s%s", dir, *dir ? "/" : "", base + strlen(WHITEOUT_PREFIX)) < 0)
                return -ENOMEM;
        if ((streq(victim, s->wanted) || is_parent_of(victim, s->wanted)) &&
            s->result.lookup == ARCHIVE_LOOKUP_ABSENT) {
                s->result.lookup = ARCHIVE_LOOKUP_WHITEOUT;
        }
        return 1;
}

static int check_entry_safety(Scan *s, struct archive_entry *entry, const char *raw, char **ret_path) {
        _cleanup_free_ char *path = NULL;
        const char *link;
        int r;

        r = archive_path_normalize(raw, /* allow_absolute= */ false, s->limits->max_path, &path);
        if (r == -EXDEV)
                return scan_fail(s, r, raw, "path escapes the staging directory", NULL);
        if (r == -ENAMETOOLONG)
                return scan_fail(s, r, NULL, "path longer than the limit", NULL);
        if (r < 0)
                return scan_fail(s, r, raw, "invalid path", NULL);
        if (path_crosses_symlink(s, path))
                return scan_fail(s, -EXDEV, raw, "path runs through a symbolic link", NULL);

        switch (sym_archive_entry_filetype(entry)) {
        case AE_IFCHR:
        case AE_IFBLK:
                return scan_fail(s, -EXDEV, raw, "device node", NULL);
        case AE_IFLNK:
                link = sym_archive_entry_symlink(entry);
                if (isempty(link) || strlen(link) > s->limits->max_path)
                        return scan_fail(s, -EXDEV, raw, "invalid symbolic link target", NULL);
                if (!symlink_target_is_safe(path, link))
                        return scan_fail(s, -EXDEV, raw, "symbolic link escapes the image root: ", link);
                break;
        default:
                break;
        }

        link = sym_archive_entry_hardlink(entry);
        if (link) {
                _cleanup_free_ char *target = NULL;

                r = archive_path_normalize(link, /* allow_absolute= */ false, s->limits->max_path, &target);
                if (r < 0 || isempty(target) || path_crosses_symlink(s, target))
                        return scan_fail(s, -EXDEV, raw, "hard link escapes the staging directory: ", link);
        }

        *ret_path = TAKE_PTR(path);
        return 0;
}

static int scan_entry(Scan *s, struct archive *a, struct archive_entry *entry, int64_t index) {
        _cleanup_free_ char *path = NULL;
        const char *raw = sym_archive_entry_pathname(entry);
        mode_t type = sym_archive_entry_filetype(entry);
        int r;

        if (!raw)
                return scan_fail(s, -EBADMSG, NULL, "entry without a path", NULL);
        r = check_entry_safety(s, entry, raw, &path);
        if (r < 0)
                return r;
        if (isempty(path))
                return 0; /* the root directory itself */

        if (type == AE_IFLNK && !sym_archive_entry_hardlink(entry)) {
                r = remember_symlink(s, path);
                if (r < 0)
                        return r;
        } else
                forget_symlink(s, path);

        r = check_whiteout(s, path);
        if (r != 0)
                return r < 0 ? r : 0;

        if (is_parent_of(path, s->wanted) && type != AE_IFDIR && s->result.lookup == ARCHIVE_LOOKUP_ABSENT) {
                s->result.lookup = ARCHIVE_LOOKUP_NOT_DIRECTORY;
        }
        if (!streq(path, s->wanted))
                return 0;

        /* The wanted path; a later occurrence in the same layer replaces an earlier one. */
        free(s->hardlink_target);
        s->hardlink_target = NULL;
        if (sym_archive_entry_hardlink(entry)) {
                r = archive_path_normalize(sym_archive_entry_hardlink(entry), /* allow_absolute= */ false,
                                           s->limits->max_path, &s->hardlink_target);
                if (r < 0)
                        return r;
                s->hardlink_index = index;
                s->result.lookup = ARCHIVE_LOOKUP_FOUND;
                return 0;
        }
        if (type != AE_IFREG) {
                staging_remove(s);
                return scan_fail(s, -EMEDIUMTYPE, raw,
                                 type == AE_IFLNK         ? "is a symbolic link, not a regular file" :
                                         type == AE_IFDIR ? "is a directory, not a regular file" :
                                                            "is not a regular file",
                                 NULL);
        }
        return extract_current(s, a, entry, raw);
}

static int scan_check_limits(Scan *s, struct archive *a, struct archive_entry *entry) {
        if (++s->result.n_entries > s->limits->max_entries)
                return scan_fail(s, -E2BIG, NULL, "more entries than the limit", NULL);
        if (sym_archive_entry_size_is_set(entry) && sym_archive_entry_size(entry) > 0)
                s->result.unpacked += (uint64_t) sym_archive_entry_size(entry);
        /* Entry sizes catch a huge file before it is inflated; the decompressor's output count
         * catches everything else (padding, long headers, garbage between entries). */
        if (s->result.unpacked > s->limits->max_unpacked ||
            (uint64_t) MAX(sym_archive_filter_bytes(a, 0), 0) > s->limits->max_unpacked + 1024 * 1024)
                return scan_fail(s, -EFBIG, sym_archive_entry_pathname(entry),
                                 "layer unpacks to more than the limit (decompression bomb?)", NULL);
        return 0;
}

/* A layer that is still growing: libarchive reads it through the feed, which waits for its bytes. */
typedef struct FeedSource {
        int fd;          /* borrowed */
        LayerFeed *feed; /* borrowed */
        uint8_t buf[64 * 1024];
} FeedSource;

static la_ssize_t feed_source_read(struct archive *a, void *userdata, const void **ret) {
        FeedSource *fs = userdata;
        ssize_t n;

        *ret = fs->buf;
        n = layer_feed_read(fs->feed, fs->fd, fs->buf, sizeof(fs->buf));
        if (n < 0) {
                sym_archive_set_error(a, (int) -n, "cannot read the layer");
                return ARCHIVE_FATAL;
        }
        return n;
}

static int feed_source_close(struct archive *a, void *userdata) {
        free(userdata);
        return ARCHIVE_OK;
}

static int feed_source_open(struct archive *a, int fd, LayerFeed *feed) {
        FeedSource *fs = malloc(sizeof(FeedSource));

        if (!fs) {
                sym_archive_set_error(a, ENOMEM, "out of memory");
                return ARCHIVE_FATAL;
        }
        fs->fd = fd;
        fs->feed = feed;
        return sym_archive_read_open(a, fs, NULL, feed_source_read, feed_source_close);
}

/* gzip goes through ISA-L when the build has it (libarchive then sees a plain tar and its gzip
 * filter stays idle); everything else, and gzip without ISA-L, through libarchive's filters.
 * -EBADMSG when libarchive refuses the stream (sym_archive_error_string() says why). */
static int open_layer(struct archive *a, int fd, LayerFeed *feed) {
        uint8_t magic[2];
        off_t pos;
        ssize_t n;
        int r;

        pos = lseek(fd, 0, SEEK_CUR);
        if (pos < 0)
                return -errno;
        if (feed) {
                int64_t avail = layer_feed_wait(feed, (uint64_t) pos + sizeof(magic));

                if (avail < 0)
                        return (int) avail;
        }
        n = pread(fd, magic, sizeof(magic), pos);
        if (n < 0)
                return -errno;
        if (n == sizeof(magic) && magic[0] == 0x1f && magic[1] == 0x8b) {
                r = gzip_source_open(a, fd, feed);
                if (r != -EOPNOTSUPP)
                        return r == ARCHIVE_OK ? 0 : -EBADMSG;
        }
        if (feed)
                return feed_source_open(a, fd, feed) == ARCHIVE_OK ? 0 : -EBADMSG;
        return sym_archive_read_open_fd(a, fd, 64 * 1024) == ARCHIVE_OK ? 0 : -EBADMSG;
}

static int scan_layer(Scan *s, int fd) {
        _cleanup_(archive_read_freep) struct archive *a = NULL;
        struct archive_entry *entry;
        int64_t index = 0;
        int r;

        a = sym_archive_read_new();
        if (!a)
                return -ENOMEM;
        /* ARCHIVE_WARN would mean "via an external program": only the linked libraries are used. */
        if (sym_archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
            sym_archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
            sym_archive_read_support_format_tar(a) != ARCHIVE_OK)
                return -EOPNOTSUPP;
        r = open_layer(a, fd, s->feed);
        if (r == -EBADMSG)
                return scan_fail(s, r, NULL, "not a tar archive: ", sym_archive_error_string(a));
        if (r < 0)
                return r;

        for (;; index++) {
                if (s->stop_at >= 0 && index >= s->stop_at)
                        break;
                r = sym_archive_read_next_header(a, &entry);
                if (r == ARCHIVE_EOF)
                        break;
                if (r < ARCHIVE_WARN)
                        return scan_fail(s, -EBADMSG, NULL,
                                         "corrupt archive: ", sym_archive_error_string(a));
                r = scan_check_limits(s, a, entry);
                if (r < 0)
                        return r;
                r = scan_entry(s, a, entry, index);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void scan_done(Scan *s) {
        tdestroy(s->symlinks, free);
        free(s->message);
        free(s->hardlink_target);
}

/* A hard link's data is that of the earlier entry it names: read the layer again up to the link and
 * take the last regular occurrence of the target. */
static int resolve_hardlink(Scan *first, int fd, const char *staging_dir, const char *out_name) {
        Scan s = {
                .limits = first->limits,
                .wanted = first->hardlink_target,
                .staging_dir = staging_dir,
                .out_name = out_name,
                .stop_at = first->hardlink_index,
                .feed = first->feed,
        };
        int r;

        if (lseek(fd, 0, SEEK_SET) < 0)
                return -errno;
        r = scan_layer(&s, fd);
        if (r >= 0 && (s.result.lookup != ARCHIVE_LOOKUP_FOUND || s.hardlink_target))
                r = scan_fail(&s, -EMEDIUMTYPE, first->wanted,
                              "hard link to a missing file: ", first->hardlink_target);
        if (r < 0) {
                staging_remove(&s);
                first->message = TAKE_PTR(s.message);
        } else {
                first->result.size = s.result.size;
                first->result.mode = s.result.mode;
                first->result.digest = s.result.digest;
        }
        scan_done(&s);
        return r;
}

int archive_extract_layer_fed(int layer_fd, LayerFeed *feed, const char *file_path, const char *staging_dir,
                              const char *out_name, const ArchiveLimits *limits, ArchiveExtractResult *ret,
                              char **ret_message) {
        _cleanup_free_ char *wanted = NULL, *real_staging = NULL;
        Scan s = {
                .limits = limits,
                .out_name = out_name,
                .stop_at = -1,
                .feed = feed,
        };
        int r;

        assert(layer_fd >= 0);
        assert(file_path);
        assert(staging_dir);
        assert(out_name && !strchr(out_name, '/'));
        assert(limits);
        assert(ret);

        r = dlopen_libarchive(ret_message);
        if (r < 0)
                return r;
        r = archive_path_normalize(file_path, /* allow_absolute= */ true, limits->max_path, &wanted);
        if (r < 0 || isempty(wanted))
                return r < 0 ? r : -EINVAL;
        s.wanted = wanted;
        /* SECURE_SYMLINKS refuses symlinks anywhere in the target path, also in the parts we chose
         * (a state directory under a symlinked /var): hand it the canonical path. */
        real_staging = realpath(staging_dir, NULL);
        if (!real_staging)
                return -errno;
        s.staging_dir = real_staging;

        r = scan_layer(&s, layer_fd);
        if (r >= 0 && s.hardlink_target)
                r = resolve_hardlink(&s, layer_fd, real_staging, out_name);
        if (r < 0) {
                staging_remove(&s);
                if (ret_message && !s.message)
                        s.message = strdup(strerror(-r));
                if (ret_message)
                        *ret_message = TAKE_PTR(s.message);
                scan_done(&s);
                return r;
        }
        *ret = s.result;
        scan_done(&s);
        return 0;
}

int archive_extract_layer(int layer_fd, const char *file_path, const char *staging_dir, const char *out_name,
                          const ArchiveLimits *limits, ArchiveExtractResult *ret, char **ret_message) {
        return archive_extract_layer_fed(layer_fd, NULL, file_path, staging_dir, out_name, limits, ret,
                                         ret_message);
}

int archive_extract_from_layers(const char *const *layer_paths, size_t n_layers, const char *file_path,
                                const char *staging_dir, const char *out_name, const ArchiveLimits *limits,
                                ArchiveExtractResult *ret, ssize_t *ret_layer, char **ret_message) {
        assert(layer_paths || n_layers == 0);
        assert(ret);

        for (size_t i = n_layers; i > 0; i--) {
                _cleanup_close_ int fd = -EBADF;
                ArchiveExtractResult res = {};
                int r;

                fd = open(layer_paths[i - 1], O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return -errno;
                r = archive_extract_layer(fd, file_path, staging_dir, out_name, limits, &res, ret_message);
                if (r < 0)
                        return r;
                if (res.lookup != ARCHIVE_LOOKUP_ABSENT) {
                        *ret = res;
                        if (ret_layer)
                                *ret_layer = (ssize_t) (i - 1);
                        return 0;
                }
        }
        *ret = (ArchiveExtractResult) { .lookup = ARCHIVE_LOOKUP_ABSENT };
        if (ret_layer)
                *ret_layer = -1;
        return 0;
}
