/* SPDX-License-Identifier: Apache-2.0 */
/* The versioned file store: which versions are directory names, install (moved in, 0755, with its
 * source.json), has/path/read_source, and the garbage collection's order (protected first, then the
 * newest). The kubelet's symlink on top is test-kubelet-store.c's. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "oci/file-store.h"
#include "tests.h"
#include "util/fileio.h"

typedef struct Ctx {
        char dir[64];
        char root[96];
        FileStore *store;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));
        char staging[96];

        assert_non_null(c);
        strcpy(c->dir, "/tmp/test-fstore-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(c->root, sizeof(c->root), "%s/images", c->dir);
        snprintf(staging, sizeof(staging), "%s/staging", c->dir);
        assert_int_equal(file_store_new(c->root, staging, "file", &c->store), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        file_store_free(c->store);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

static void stage(Ctx *c, const char *version, const char *content, time_t mtime) {
        struct timespec ts[2] = { { .tv_sec = mtime }, { .tv_sec = mtime } };
        _cleanup_free_ char *installed = NULL;
        char path[256];

        snprintf(path, sizeof(path), "%s/staged-%s", file_store_staging(c->store), version);
        assert_int_equal(write_file_atomic(path, content, strlen(content), 0600), 0);
        assert_int_equal(file_store_install(c->store, version, path, "{\"image\":\"x\"}"), 0);
        assert_int_equal(access(path, F_OK), -1); /* moved, not copied */
        assert_int_equal(file_store_path(c->store, version, &installed), 0);
        assert_int_equal(utimensat(AT_FDCWD, installed, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void test_versions(void **state) {
        assert_true(file_store_version_is_valid("1.31.2"));
        assert_true(file_store_version_is_valid("1.31.2-rc.1+build"));
        assert_true(file_store_version_is_valid("0123456789abcdef0123456789abcdef"));
        assert_false(file_store_version_is_valid(".."));
        assert_false(file_store_version_is_valid("."));
        assert_false(file_store_version_is_valid("a/b"));
        assert_false(file_store_version_is_valid(""));
        assert_false(file_store_version_is_valid(NULL));
        assert_false(file_store_version_is_valid("-x"));
}

static void test_new_refuses_a_file_name_with_a_slash(void **state) {
        FileStore *s = NULL;

        assert_int_equal(file_store_new("/tmp/x", "/tmp/y", "a/b", &s), -EINVAL);
        assert_int_equal(file_store_new("/tmp/x", "/tmp/y", "", &s), -EINVAL);
        assert_null(s);
}

static void test_install(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *path = NULL, *data = NULL, *src = NULL;
        char expected[256];
        struct stat st;

        assert_int_equal(file_store_has(c->store, "v1"), 0);
        assert_int_equal(file_store_read_source(c->store, "v1", &src), -ENOENT);
        stage(c, "v1", "one", 1000);
        assert_int_equal(file_store_has(c->store, "v1"), 1);
        assert_int_equal(file_store_path(c->store, "v1", &path), 0);
        snprintf(expected, sizeof(expected), "%s/v1/file", c->root);
        assert_string_equal(path, expected);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(read_full_file(path, 64, &data, NULL), 0);
        assert_string_equal(data, "one");
        assert_int_equal(file_store_read_source(c->store, "v1", &src), 0);
        assert_string_equal(src, "{\"image\":\"x\"}");
        assert_int_equal(file_store_path(c->store, "../x", &path), -EINVAL);
        assert_int_equal(file_store_install(c->store, "../x", "/nowhere", NULL), -EINVAL);
}

static void test_gc(void **state) {
        Ctx *c = *state;
        const char *protect[] = { "a", NULL };

        stage(c, "a", "a", 1000);
        stage(c, "b", "b", 2000);
        stage(c, "c", "c", 3000);
        stage(c, "d", "d", 4000);
        /* keep 2: the protected (and oldest) one, then the newest other */
        assert_int_equal(file_store_gc(c->store, 2, protect), 2);
        assert_int_equal(file_store_has(c->store, "a"), 1);
        assert_int_equal(file_store_has(c->store, "b"), 0);
        assert_int_equal(file_store_has(c->store, "c"), 0);
        assert_int_equal(file_store_has(c->store, "d"), 1);
        /* protected ones are kept beyond `keep` too */
        assert_int_equal(file_store_gc(c->store, 1, (const char *const[]) { "a", "d", NULL }), 0);
        assert_int_equal(file_store_gc(c->store, 1, NULL), 1);
        assert_int_equal(file_store_has(c->store, "a"), 0);
        assert_int_equal(file_store_has(c->store, "d"), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_new_refuses_a_file_name_with_a_slash),
                cmocka_unit_test_setup_teardown(test_install, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
