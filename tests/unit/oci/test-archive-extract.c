/* SPDX-License-Identifier: Apache-2.0 */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "oci/archive-extract.h"
#include "oci/gzip-source.h"
#include "oci/layer-feed.h"
#include "tests.h"

/* Layers are built here with libarchive's writer, malicious ones included, so every case is visible
 * in the test itself. */

typedef enum Kind { REG, DIR_, SYMLINK, HARDLINK, CHARDEV, SPARSE } Kind;

typedef struct Entry {
        Kind kind;
        const char *path;
        const char *data; /* REG: content; SYMLINK/HARDLINK: target */
        int64_t size;     /* SPARSE: logical size */
} Entry;

typedef struct Ctx {
        char dir[64]; /* scratch: layers and staging/ */
        char staging[96];
        unsigned n_layers;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        strcpy(c->dir, "/tmp/test-archive-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(c->staging, sizeof(c->staging), "%s/staging", c->dir);
        assert_int_equal(mkdir(c->staging, 0700), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

static char *write_layer(Ctx *c, int filter, const Entry *entries, size_t n) {
        struct archive *a = archive_write_new();
        char *path;

        assert_non_null(a);
        assert_true(asprintf(&path, "%s/layer%u", c->dir, c->n_layers++) > 0);
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter(a, filter), ARCHIVE_OK);
        assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);

        for (size_t i = 0; i < n; i++) {
                struct archive_entry *e = archive_entry_new();

                archive_entry_set_pathname(e, entries[i].path);
                archive_entry_set_mtime(e, 1700000000, 0);
                switch (entries[i].kind) {
                case REG:
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_perm(e, 0755);
                        archive_entry_set_size(e, (la_int64_t) strlen(entries[i].data));
                        break;
                case DIR_:
                        archive_entry_set_filetype(e, AE_IFDIR);
                        archive_entry_set_perm(e, 0755);
                        break;
                case SYMLINK:
                        archive_entry_set_filetype(e, AE_IFLNK);
                        archive_entry_set_symlink(e, entries[i].data);
                        break;
                case HARDLINK:
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_hardlink(e, entries[i].data);
                        archive_entry_set_size(e, 0);
                        break;
                case CHARDEV:
                        archive_entry_set_filetype(e, AE_IFCHR);
                        archive_entry_set_rdev(e, makedev(1, 3));
                        break;
                case SPARSE:
                        /* Logical size huge, almost no data: a sparse bomb. */
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_size(e, entries[i].size);
                        archive_entry_sparse_add_entry(e, 0, 512);
                        break;
                }
                assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
                if (entries[i].kind == REG)
                        assert_int_equal(archive_write_data(a, entries[i].data, strlen(entries[i].data)),
                                         (la_ssize_t) strlen(entries[i].data));
                if (entries[i].kind == SPARSE) {
                        char zero[512] = {};
                        assert_int_equal(archive_write_data(a, zero, sizeof(zero)), 512);
                }
                archive_entry_free(e);
        }
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        return path;
}

static int extract(Ctx *c, const char *layer, const char *want, const ArchiveLimits *limits,
                   ArchiveExtractResult *res, char **msg) {
        _cleanup_close_ int fd = open(layer, O_RDONLY | O_CLOEXEC);

        assert_true(fd >= 0);
        return archive_extract_layer(fd, want, c->staging, "out", limits ? limits : &ARCHIVE_LIMITS_DEFAULT,
                                     res, msg);
}

static void assert_staged(Ctx *c, const char *content) {
        char path[128], buf[256] = {};
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        snprintf(path, sizeof(path), "%s/out", c->staging);
        if (!content) {
                assert_int_equal(access(path, F_OK), -1);
                return;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(read(fd, buf, sizeof(buf) - 1), (ssize_t) strlen(content));
        assert_string_equal(buf, content);
}

static void test_formats(void **state) {
        static const int filters[] = { ARCHIVE_FILTER_GZIP, ARCHIVE_FILTER_ZSTD, ARCHIVE_FILTER_NONE };
        Ctx *c = *state;

        for (size_t i = 0; i < ELEMENTSOF(filters); i++) {
                const Entry e[] = {
                        { DIR_, "./", NULL, 0 },
                        { DIR_, "./usr/", NULL, 0 },
                        { REG, "./usr/local/bin/other", "nope", 0 },
                        { REG, "./usr/local/bin/kubelet", "KUBELET", 0 },
                        { SYMLINK, "etc/localtime", "/usr/share/zoneinfo/UTC", 0 }, /* absolute: fine */
                        { SYMLINK, "usr/lib/x", "../share/x", 0 },
                };
                _cleanup_free_ char *layer = write_layer(c, filters[i], e, ELEMENTSOF(e));
                ArchiveExtractResult res;

                assert_int_equal(extract(c, layer, "/usr/local/bin/kubelet", NULL, &res, NULL), 0);
                assert_int_equal(res.lookup, ARCHIVE_LOOKUP_FOUND);
                assert_int_equal(res.size, 7);
                assert_int_equal(res.mode, 0755);
                assert_int_equal(res.n_entries, 6);
                assert_staged(c, "KUBELET");
        }
}

static void test_last_layer_wins_and_absent(void **state) {
        Ctx *c = *state;
        const Entry base[] = { { REG, "kubelet", "OLD", 0 } };
        const Entry top[] = { { REG, "kubelet", "NEW", 0 } };
        const Entry unrelated[] = { { REG, "etc/motd", "hi", 0 } };
        _cleanup_free_ char *l0 = write_layer(c, ARCHIVE_FILTER_GZIP, base, 1);
        _cleanup_free_ char *l1 = write_layer(c, ARCHIVE_FILTER_GZIP, top, 1);
        _cleanup_free_ char *l2 = write_layer(c, ARCHIVE_FILTER_ZSTD, unrelated, 1);
        const char *stack[] = { l0, l1, l2 };
        ArchiveExtractResult res;
        ssize_t layer;

        assert_int_equal(archive_extract_from_layers(stack, 3, "/kubelet", c->staging, "out",
                                                     &ARCHIVE_LIMITS_DEFAULT, &res, &layer, NULL),
                         0);
        assert_int_equal(res.lookup, ARCHIVE_LOOKUP_FOUND);
        assert_int_equal(layer, 1);
        assert_staged(c, "NEW");

        assert_int_equal(archive_extract_from_layers(stack, 3, "/missing", c->staging, "out2",
                                                     &ARCHIVE_LIMITS_DEFAULT, &res, &layer, NULL),
                         0);
        assert_int_equal(res.lookup, ARCHIVE_LOOKUP_ABSENT);
        assert_int_equal(layer, -1);
}

static void test_same_path_twice_last_wins(void **state) {
        Ctx *c = *state;
        const Entry e[] = { { REG, "kubelet", "FIRST", 0 }, { REG, "kubelet", "SECOND", 0 } };
        _cleanup_free_ char *layer = write_layer(c, ARCHIVE_FILTER_GZIP, e, ELEMENTSOF(e));
        ArchiveExtractResult res;

        assert_int_equal(extract(c, layer, "kubelet", NULL, &res, NULL), 0);
        assert_staged(c, "SECOND");
}

static void test_whiteouts(void **state) {
        Ctx *c = *state;
        const Entry base[] = { { REG, "opt/bin/kubelet", "OLD", 0 } };
        const Entry wh_file[] = { { REG, "opt/bin/.wh.kubelet", "", 0 } };
        const Entry wh_parent[] = { { REG, "opt/.wh.bin", "", 0 } };
        const Entry opaque[] = { { DIR_, "opt/bin", NULL, 0 },
                                 { REG, "opt/bin/.wh..wh..opq", "", 0 },
                                 { REG, "opt/bin/other", "x", 0 } };
        const Entry opaque_root[] = { { REG, "opt/.wh..wh..opq", "", 0 } };
        const Entry not_dir[] = { { SYMLINK, "opt/bin", "/usr/bin", 0 } };
        /* A whiteout never hides a file of its own layer. */
        const Entry same_layer[] = { { REG, "opt/bin/.wh.kubelet", "", 0 },
                                     { REG, "opt/bin/kubelet", "NEW", 0 } };
        const Entry same_layer_opq[] = { { REG, "opt/bin/kubelet", "NEW2", 0 },
                                         { REG, "opt/bin/.wh..wh..opq", "", 0 } };
        struct {
                const Entry *e;
                size_t n;
                ArchiveLookup expect;
                const char *content;
        } cases[] = {
                { wh_file, ELEMENTSOF(wh_file), ARCHIVE_LOOKUP_WHITEOUT, NULL },
                { wh_parent, ELEMENTSOF(wh_parent), ARCHIVE_LOOKUP_WHITEOUT, NULL },
                { opaque, ELEMENTSOF(opaque), ARCHIVE_LOOKUP_OPAQUE, NULL },
                { opaque_root, ELEMENTSOF(opaque_root), ARCHIVE_LOOKUP_OPAQUE, NULL },
                { not_dir, ELEMENTSOF(not_dir), ARCHIVE_LOOKUP_NOT_DIRECTORY, NULL },
                { same_layer, ELEMENTSOF(same_layer), ARCHIVE_LOOKUP_FOUND, "NEW" },
                { same_layer_opq, ELEMENTSOF(same_layer_opq), ARCHIVE_LOOKUP_FOUND, "NEW2" },
        };
        _cleanup_free_ char *l0 = write_layer(c, ARCHIVE_FILTER_GZIP, base, 1);

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *l1 = write_layer(c, ARCHIVE_FILTER_GZIP, cases[i].e, cases[i].n);
                const char *stack[] = { l0, l1 };
                ArchiveExtractResult res;
                ssize_t layer;
                char path[128];

                snprintf(path, sizeof(path), "%s/out", c->staging);
                (void) unlink(path);
                assert_int_equal(archive_extract_from_layers(stack, 2, "/opt/bin/kubelet", c->staging, "out",
                                                             &ARCHIVE_LIMITS_DEFAULT, &res, &layer, NULL),
                                 0);
                assert_int_equal(res.lookup, cases[i].expect);
                assert_int_equal(layer, 1); /* decided by the top layer: never falls through to OLD */
                assert_staged(c, cases[i].content);
        }
}

static void test_unsafe_entries(void **state) {
        Ctx *c = *state;
        const Entry dotdot[] = { { REG, "kubelet", "K", 0 }, { REG, "../escape", "evil", 0 } };
        const Entry dotdot_mid[] = { { REG, "a/../../escape", "evil", 0 }, { REG, "kubelet", "K", 0 } };
        const Entry absolute[] = { { REG, "/etc/evil", "evil", 0 }, { REG, "kubelet", "K", 0 } };
        const Entry through_link[] = { { SYMLINK, "lnk", "/etc", 0 },
                                       { REG, "lnk/passwd", "evil", 0 },
                                       { REG, "kubelet", "K", 0 } };
        const Entry link_escape[] = { { SYMLINK, "a/b", "../../../etc", 0 }, { REG, "kubelet", "K", 0 } };
        const Entry hardlink_escape[] = { { REG, "kubelet", "K", 0 },
                                          { HARDLINK, "h", "../../etc/passwd", 0 } };
        const Entry hardlink_abs[] = { { HARDLINK, "h", "/etc/passwd", 0 }, { REG, "kubelet", "K", 0 } };
        const Entry device[] = { { REG, "kubelet", "K", 0 }, { CHARDEV, "dev/null", NULL, 0 } };
        const Entry whiteout_escape[] = { { REG, "../.wh.x", "", 0 }, { REG, "kubelet", "K", 0 } };
        struct {
                const Entry *e;
                size_t n;
                const char *message_part;
        } cases[] = {
                { dotdot, ELEMENTSOF(dotdot), "escapes" },
                { dotdot_mid, ELEMENTSOF(dotdot_mid), "escapes" },
                { absolute, ELEMENTSOF(absolute), "escapes" },
                { through_link, ELEMENTSOF(through_link), "through a symbolic link" },
                { link_escape, ELEMENTSOF(link_escape), "symbolic link escapes" },
                { hardlink_escape, ELEMENTSOF(hardlink_escape), "hard link escapes" },
                { hardlink_abs, ELEMENTSOF(hardlink_abs), "hard link escapes" },
                { device, ELEMENTSOF(device), "device node" },
                { whiteout_escape, ELEMENTSOF(whiteout_escape), "escapes" },
        };
        char outside[128];

        snprintf(outside, sizeof(outside), "%s/escape", c->dir);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *layer = write_layer(c, ARCHIVE_FILTER_GZIP, cases[i].e, cases[i].n);
                _cleanup_free_ char *msg = NULL;
                ArchiveExtractResult res = { .lookup = 42 };

                assert_int_equal(extract(c, layer, "kubelet", NULL, &res, &msg), -EXDEV);
                assert_non_null(msg);
                assert_non_null(strstr(msg, cases[i].message_part));
                assert_int_equal(res.lookup, 42); /* untouched on failure */
                assert_staged(c, NULL);           /* no half result, even if found first */
                assert_int_equal(access(outside, F_OK), -1);
        }
}

static void test_not_regular(void **state) {
        Ctx *c = *state;
        const Entry link[] = { { SYMLINK, "kubelet", "hyperkube", 0 } };
        const Entry dir[] = { { DIR_, "kubelet", NULL, 0 } };
        _cleanup_free_ char *l1 = write_layer(c, ARCHIVE_FILTER_GZIP, link, 1);
        _cleanup_free_ char *l2 = write_layer(c, ARCHIVE_FILTER_GZIP, dir, 1);
        _cleanup_free_ char *m1 = NULL, *m2 = NULL;
        ArchiveExtractResult res;

        assert_int_equal(extract(c, l1, "/kubelet", NULL, &res, &m1), -EMEDIUMTYPE);
        assert_non_null(strstr(m1, "symbolic link"));
        assert_int_equal(extract(c, l2, "/kubelet", NULL, &res, &m2), -EMEDIUMTYPE);
        assert_staged(c, NULL);
}

static void test_hardlink_to_wanted(void **state) {
        Ctx *c = *state;
        const Entry e[] = { { REG, "hyperkube", "HYPER", 0 },
                            { HARDLINK, "kubelet", "hyperkube", 0 },
                            { REG, "hyperkube", "LATER", 0 } };
        _cleanup_free_ char *layer = write_layer(c, ARCHIVE_FILTER_ZSTD, e, ELEMENTSOF(e));
        ArchiveExtractResult res;

        assert_int_equal(extract(c, layer, "kubelet", NULL, &res, NULL), 0);
        assert_int_equal(res.lookup, ARCHIVE_LOOKUP_FOUND);
        assert_int_equal(res.size, 5);
        assert_staged(c, "HYPER"); /* what the link pointed at when it was written */
}

static void test_limits(void **state) {
        Ctx *c = *state;
        const Entry many[] = {
                { REG, "a", "1", 0 }, { REG, "b", "2", 0 }, { REG, "c", "3", 0 }, { REG, "kubelet", "K", 0 }
        };
        const Entry big[] = { { REG, "kubelet", "0123456789", 0 } };
        char longname[5000];
        Entry longpath[] = { { REG, longname, "x", 0 } };
        _cleanup_free_ char *l1 = write_layer(c, ARCHIVE_FILTER_GZIP, many, ELEMENTSOF(many));
        _cleanup_free_ char *l2 = write_layer(c, ARCHIVE_FILTER_GZIP, big, 1);
        _cleanup_free_ char *l3 = NULL;
        ArchiveLimits lim = ARCHIVE_LIMITS_DEFAULT;
        ArchiveExtractResult res;

        lim.max_entries = 3;
        assert_int_equal(extract(c, l1, "kubelet", &lim, &res, NULL), -E2BIG);

        lim = ARCHIVE_LIMITS_DEFAULT;
        lim.max_file_size = 9;
        assert_int_equal(extract(c, l2, "kubelet", &lim, &res, NULL), -EFBIG);
        lim = ARCHIVE_LIMITS_DEFAULT;
        lim.max_unpacked = 9;
        assert_int_equal(extract(c, l2, "kubelet", &lim, &res, NULL), -EFBIG);
        assert_staged(c, NULL);

        for (size_t i = 0; i < sizeof(longname) - 1; i++)
                longname[i] = i % 100 == 99 ? '/' : 'a';
        longname[sizeof(longname) - 1] = '\0';
        l3 = write_layer(c, ARCHIVE_FILTER_GZIP, longpath, 1);
        assert_int_equal(extract(c, l3, "kubelet", NULL, &res, NULL), -ENAMETOOLONG);
}

/* A small sparse file: the digest taken while writing covers the holes as zeros, like the file. */
static void test_sparse_digest(void **state) {
        Ctx *c = *state;
        const Entry e[] = { { SPARSE, "kubelet", NULL, 200000 } };
        _cleanup_free_ char *layer = write_layer(c, ARCHIVE_FILTER_GZIP, e, 1), *msg = NULL, *data = NULL;
        char path[128];
        ArchiveExtractResult res;
        Digest want;
        FILE *f;

        assert_int_equal(extract(c, layer, "kubelet", NULL, &res, &msg), 0);
        assert_int_equal(res.size, 200000);
        snprintf(path, sizeof(path), "%s/out", c->staging);
        data = malloc(200000);
        f = fopen(path, "re");
        assert_non_null(f);
        assert_int_equal(fread(data, 1, 200000, f), 200000);
        fclose(f);
        assert_int_equal(digest_buffer(data, 200000, &want), 0);
        assert_true(digest_equal(&res.digest, &want));
}

static void test_sparse_bomb(void **state) {
        Ctx *c = *state;
        /* 10 GiB when unpacked, a few hundred bytes on disk. */
        const Entry e[] = { { SPARSE, "kubelet", NULL, INT64_C(10) << 30 } };
        _cleanup_free_ char *layer = write_layer(c, ARCHIVE_FILTER_GZIP, e, 1);
        _cleanup_free_ char *msg = NULL;
        ArchiveExtractResult res;
        struct stat st;

        assert_int_equal(stat(layer, &st), 0);
        assert_true(st.st_size < 4096);
        assert_int_equal(extract(c, layer, "kubelet", NULL, &res, &msg), -EFBIG);
        assert_non_null(msg);
        assert_staged(c, NULL);
}

/* One gzip member holding `size` bytes (zeros when data is NULL), via libarchive's raw writer. */
static void gzip_member(FILE *out, const void *data, size_t size) {
        static char zeros[1 << 20];
        struct archive *a = archive_write_new();
        struct archive_entry *e = archive_entry_new();
        size_t used = 0, cap = size / 100 + (1 << 16);
        char *buf = malloc(cap);

        assert_non_null(buf);
        assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        assert_int_equal(archive_write_set_bytes_in_last_block(a, 1), ARCHIVE_OK);
        assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
        archive_entry_set_filetype(e, AE_IFREG);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        for (size_t done = 0; done < size;) {
                size_t n = data ? size : MIN(sizeof(zeros), size - done);
                assert_int_equal(archive_write_data(a, data ? data : zeros, n), (la_ssize_t) n);
                done += n;
        }
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
        archive_entry_free(e);
        assert_int_equal(fwrite(buf, 1, used, out), used);
        free(buf);
}

static void ustar_header(char h[512], const char *name, uint64_t size) {
        unsigned sum = 0;

        memset(h, 0, 512);
        snprintf(h, 100, "%s", name);
        snprintf(h + 100, 8, "%07o", 0644);
        snprintf(h + 108, 8, "%07o", 0);
        snprintf(h + 116, 8, "%07o", 0);
        snprintf(h + 124, 12, "%011llo", (unsigned long long) size);
        snprintf(h + 136, 12, "%011o", 0);
        h[156] = '0';
        memcpy(h + 257, "ustar", 6);
        memcpy(h + 263, "00", 2);
        memset(h + 148, ' ', 8);
        for (int i = 0; i < 512; i++)
                sum += (unsigned char) h[i];
        snprintf(h + 148, 8, "%06o", sum);
}

static void test_zero_bomb_stops_at_limit(void **state) {
        Ctx *c = *state;
        const uint64_t chunk = 64ULL << 20;
        ArchiveLimits lim = ARCHIVE_LIMITS_DEFAULT;
        _cleanup_free_ char *path = NULL, *zero_member = NULL, *msg = NULL;
        size_t zero_size = 0;
        ArchiveExtractResult res;
        struct timespec t0, t1;
        struct stat st;
        FILE *f, *z;

        /* 160 entries of 64 MiB zeros = 10 GiB unpacked, ~10 MB compressed: concatenated gzip members,
         * the zero member compressed once and repeated. */
        z = open_memstream(&zero_member, &zero_size);
        gzip_member(z, NULL, chunk);
        fclose(z);
        assert_true(asprintf(&path, "%s/zero-bomb", c->dir) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        for (unsigned i = 0; i < 160; i++) {
                char h[512], name[32];

                snprintf(name, sizeof(name), "zero%u", i);
                ustar_header(h, name, chunk);
                gzip_member(f, h, sizeof(h));
                assert_int_equal(fwrite(zero_member, 1, zero_size, f), zero_size);
        }
        fclose(f);
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size < 32 << 20);

        lim.max_unpacked = 256ULL << 20;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                assert_int_equal(archive_extract_layer(fd, "kubelet", c->staging, "out", &lim, &res, &msg),
                                 -EFBIG);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_non_null(strstr(msg, "decompression bomb"));
        /* Stopped at ~256 MiB of inflation, nowhere near 10 GiB. */
        assert_true((t1.tv_sec - t0.tv_sec) < 10);
        assert_staged(c, NULL);
}

static void test_corrupt_layer(void **state) {
        Ctx *c = *state;
        char path[128];
        _cleanup_free_ char *msg = NULL;
        ArchiveExtractResult res;
        FILE *f;

        snprintf(path, sizeof(path), "%s/garbage", c->dir);
        f = fopen(path, "we");
        assert_non_null(f);
        fputs("\x1f\x8b garbage that is not gzip at all", f);
        fclose(f);
        assert_int_equal(extract(c, path, "kubelet", NULL, &res, &msg), -EBADMSG);
        assert_non_null(msg);
}

/* The gzip inflater this binary was built with (ISA-L or libarchive's filter): meson runs the test
 * twice when ISA-L is found and says which one to expect, so a silent fallback fails. */
static void test_gzip_inflater(void **state) {
        const char *expect = getenv("EXPECT_ISAL");

        if (!expect) {
                skip();
                return;
        }
        assert_int_equal(gzip_source_is_isal(), streq(expect, "1"));
}

/* A tar of one file "kubelet" holding `size` bytes of a pattern that does not compress to nothing. */
static char *tar_of(size_t size, size_t *ret_size) {
        size_t padded = (size + 511) / 512 * 512, total = 512 + padded + 1024;
        char *t = calloc(1, total);

        assert_non_null(t);
        ustar_header(t, "kubelet", size);
        for (size_t i = 0; i < size; i++)
                t[512 + i] = (char) ((i * 2654435761u) >> 13);
        *ret_size = total;
        return t;
}

/* A layer split into two gzip members in the middle of the file, then bytes that are not a member:
 * both inflaters read on across the members and stop at the junk, as gzip -d does. */
static void test_gzip_members_and_trailer(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *tar = NULL, *msg = NULL, *path = NULL;
        ArchiveExtractResult res;
        size_t size, half;
        Digest want;
        FILE *f;

        tar = tar_of(300000, &size);
        half = 512 + 100000;
        assert_true(asprintf(&path, "%s/members", c->dir) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        gzip_member(f, tar, half);
        gzip_member(f, tar + half, size - half);
        fputs("trailing junk", f);
        fclose(f);
        assert_int_equal(extract(c, path, "/kubelet", NULL, &res, &msg), 0);
        assert_int_equal(res.lookup, ARCHIVE_LOOKUP_FOUND);
        assert_int_equal(res.size, 300000);
        /* The digest is of what was written, taken on the way. */
        assert_int_equal(digest_buffer(tar + 512, 300000, &want), 0);
        assert_true(digest_equal(&res.digest, &want));
}

/* A gzip layer cut short in the middle of its deflate stream is corrupt, not a shorter archive. */
static void test_gzip_truncated(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *tar = NULL, *gz = NULL, *msg = NULL, *path = NULL;
        ArchiveExtractResult res;
        size_t size, gz_size = 0;
        FILE *f;

        tar = tar_of(300000, &size);
        f = open_memstream(&gz, &gz_size);
        gzip_member(f, tar, size);
        fclose(f);
        assert_true(asprintf(&path, "%s/truncated", c->dir) > 0);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fwrite(gz, 1, gz_size / 2, f), gz_size / 2);
        fclose(f);
        assert_int_equal(extract(c, path, "/kubelet", NULL, &res, &msg), -EBADMSG);
        assert_non_null(msg);
        assert_staged(c, NULL);
}

/* The download side of a growing layer: copies `src` into `dst_fd` in small chunks, telling the feed
 * after each, and ends it with `end` once `stop_at` bytes (or all) are there. */
typedef struct Grower {
        const char *src;
        int dst_fd;
        LayerFeed *feed;
        uint64_t stop_at;
        int end;
} Grower;

static void *grow(void *userdata) {
        Grower *g = userdata;
        _cleanup_close_ int in = open(g->src, O_RDONLY | O_CLOEXEC);
        char buf[1000];
        uint64_t total = 0;
        ssize_t n;

        assert_true(in >= 0);
        while (total < g->stop_at && (n = read(in, buf, sizeof(buf))) > 0) {
                assert_int_equal(write(g->dst_fd, buf, (size_t) n), n);
                total += (uint64_t) n;
                layer_feed_advance(g->feed, total);
        }
        layer_feed_end(g->feed, g->end);
        return NULL;
}

static int extract_growing(Ctx *c, const char *layer, uint64_t stop_at, int end, ArchiveExtractResult *res) {
        _cleanup_(layer_feed_freep) LayerFeed *feed = NULL;
        _cleanup_close_ int dst = -EBADF, fd = -EBADF;
        _cleanup_free_ char *path = NULL;
        pthread_t t;
        int r;

        assert_true(asprintf(&path, "%s/growing", c->dir) > 0);
        dst = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(dst >= 0 && fd >= 0);
        assert_int_equal(layer_feed_new(&feed), 0);
        Grower g = { .src = layer, .dst_fd = dst, .feed = feed, .stop_at = stop_at, .end = end };
        assert_int_equal(pthread_create(&t, NULL, grow, &g), 0);
        r = archive_extract_layer_fed(fd, feed, "/bin/kubelet", c->staging, "out", &ARCHIVE_LIMITS_DEFAULT,
                                      res, NULL);
        assert_int_equal(pthread_join(t, NULL), 0);
        return r;
}

static void test_growing_layer(void **state) {
        static const int filters[] = { ARCHIVE_FILTER_GZIP, ARCHIVE_FILTER_ZSTD, ARCHIVE_FILTER_NONE };
        Ctx *c = *state;
        _cleanup_free_ char *big = malloc(300001);
        uint32_t x = 1;

        /* Text that compresses only somewhat, so the layer spans many of the grower's chunks. */
        assert_non_null(big);
        for (size_t i = 0; i < 300000; i++) {
                x = x * 1103515245 + 12345;
                big[i] = (char) ('a' + (x >> 16) % 26);
        }
        big[300000] = 0;
        for (size_t i = 0; i < ELEMENTSOF(filters); i++) {
                const Entry e[] = { { REG, "bin/other", big + 1000, 0 },
                                    { REG, "bin/kubelet", big, 0 },
                                    { HARDLINK, "bin/kubelet2", "bin/kubelet", 0 } };
                _cleanup_free_ char *layer = write_layer(c, filters[i], e, ELEMENTSOF(e));
                ArchiveExtractResult plain, fed;

                /* Read while it grows: the same file and digest as from the complete layer. */
                assert_int_equal(extract(c, layer, "/bin/kubelet", NULL, &plain, NULL), 0);
                assert_int_equal(extract_growing(c, layer, UINT64_MAX, 0, &fed), 0);
                assert_int_equal(fed.lookup, ARCHIVE_LOOKUP_FOUND);
                assert_int_equal(fed.size, 300000);
                assert_memory_equal(&fed.digest, &plain.digest, sizeof(Digest));

                /* The download gives up part-way (at or before the wanted entry): the reader fails and
                 * leaves nothing behind. */
                for (uint64_t stop = 20000; stop <= 320000; stop += 300000) {
                        char out[128];

                        snprintf(out, sizeof(out), "%s/out", c->staging);
                        (void) unlink(out);
                        assert_true(extract_growing(c, layer, stop, -ECANCELED, &fed) < 0);
                        assert_staged(c, NULL);
                }
        }
}

static void test_path_normalize(void **state) {
        static const struct {
                const char *in;
                bool abs;
                int r;
                const char *out;
        } table[] = {
                { "./a/b", false, 0, "a/b" },
                { "a//b/./c/", false, 0, "a/b/c" },
                { "./", false, 0, "" },
                { "/kubelet", true, 0, "kubelet" },
                { "/kubelet", false, -EXDEV, NULL },
                { "a/../b", false, -EXDEV, NULL },
                { "..", false, -EXDEV, NULL },
                { "", false, -EINVAL, NULL },
                { "a/..b/c..", false, 0, "a/..b/c.." },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL;

                assert_int_equal(archive_path_normalize(table[i].in, table[i].abs, 4096, &out), table[i].r);
                if (table[i].out)
                        assert_string_equal(out, table[i].out);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_formats, setup, teardown),
                cmocka_unit_test_setup_teardown(test_last_layer_wins_and_absent, setup, teardown),
                cmocka_unit_test_setup_teardown(test_same_path_twice_last_wins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_whiteouts, setup, teardown),
                cmocka_unit_test_setup_teardown(test_unsafe_entries, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_regular, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hardlink_to_wanted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sparse_digest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sparse_bomb, setup, teardown),
                cmocka_unit_test_setup_teardown(test_zero_bomb_stops_at_limit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_layer, setup, teardown),
                cmocka_unit_test(test_gzip_inflater),
                cmocka_unit_test_setup_teardown(test_gzip_members_and_trailer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gzip_truncated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_growing_layer, setup, teardown),
                cmocka_unit_test(test_path_normalize),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
