/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "kubelet/kubelet-store.h"
#include "tests.h"
#include "util/fileio.h"

typedef struct Ctx {
        char dir[64];
        char state[96];
        char bin[96];
        KubeletStore *store;
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));

        assert_non_null(c);
        strcpy(c->dir, "/tmp/test-kstore-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(c->state, sizeof(c->state), "%s/state", c->dir);
        snprintf(c->bin, sizeof(c->bin), "%s/opt/bin/kubelet", c->dir);
        assert_int_equal(kubelet_store_new(c->state, c->bin, 2, &c->store), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        kubelet_store_free(c->store);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

static void stage(Ctx *c, const char *version, const char *content) {
        char path[256];

        snprintf(path, sizeof(path), "%s/staged-%s", file_store_staging(kubelet_store_files(c->store)),
                 version);
        assert_int_equal(write_file_atomic(path, content, strlen(content), 0600), 0);
        assert_int_equal(
                file_store_install(kubelet_store_files(c->store), version, path, "{\"image\":\"x\"}"), 0);
        assert_int_equal(access(path, F_OK), -1); /* moved, not copied */
}

static char *read_bin(const char *path) {
        char *data = NULL;
        assert_int_equal(read_full_file(path, 4096, &data, NULL), 0);
        return data;
}

static void test_install_switch_back(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *cur = NULL, *prev = NULL, *prev2 = NULL, *src = NULL, *data = NULL;
        char target[PATH_MAX];
        struct stat st;
        ssize_t n;

        assert_int_equal(kubelet_store_current(c->store, &cur), -ENOENT);
        assert_int_equal(kubelet_store_switch(c->store, "1.31.2", &prev), -ENOENT); /* not stored */

        stage(c, "1.31.2", "v1");
        stage(c, "1.32.0", "v2");
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.31.2"), 1);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "9.9.9"), 0);
        assert_int_equal(file_store_read_source(kubelet_store_files(c->store), "1.31.2", &src), 0);
        assert_string_equal(src, "{\"image\":\"x\"}");

        assert_int_equal(kubelet_store_switch(c->store, "1.31.2", &prev), 0);
        assert_null(prev);
        assert_int_equal(lstat(c->bin, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        n = readlink(c->bin, target, sizeof(target) - 1);
        assert_true(n > 0);
        target[n] = '\0';
        assert_non_null(strstr(target, "/state/kubelet/1.31.2/kubelet"));
        assert_int_equal(stat(c->bin, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);

        assert_int_equal(kubelet_store_switch(c->store, "1.32.0", &prev2), 0);
        assert_string_equal(prev2, "1.31.2");
        data = read_bin(c->bin);
        assert_string_equal(data, "v2");
        assert_int_equal(kubelet_store_current(c->store, &cur), 0);
        assert_string_equal(cur, "1.32.0");

        /* switch back */
        assert_int_equal(kubelet_store_switch(c->store, prev2, NULL), 0);
        free(data);
        data = read_bin(c->bin);
        assert_string_equal(data, "v1");
}

/* Back to no kubelet (a fresh node's first one failed): our link goes, and only our link. */
static void test_switch_back_to_none(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *prev = NULL, *cur = NULL, *data = NULL;
        struct stat st;

        assert_int_equal(kubelet_store_switch(c->store, NULL, &prev), 0); /* nothing there: done */
        assert_null(prev);
        stage(c, "1.31.2", "v1");
        assert_int_equal(kubelet_store_switch(c->store, "1.31.2", NULL), 0);
        assert_int_equal(kubelet_store_switch(c->store, NULL, &prev), 0);
        assert_string_equal(prev, "1.31.2");
        assert_int_equal(lstat(c->bin, &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(kubelet_store_current(c->store, &cur), -ENOENT);
        /* the store keeps it */
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.31.2"), 1);

        /* A kubelet that is not ours (a file, a link elsewhere) stays. */
        assert_int_equal(symlink("/usr/bin/true", c->bin), 0);
        assert_int_equal(kubelet_store_switch(c->store, NULL, NULL), -EXDEV);
        assert_int_equal(lstat(c->bin, &st), 0);
        assert_int_equal(unlink(c->bin), 0);
        assert_int_equal(write_file_atomic(c->bin, "own", 3, 0755), 0);
        assert_int_equal(kubelet_store_switch(c->store, NULL, NULL), -EMEDIUMTYPE);
        data = read_bin(c->bin);
        assert_string_equal(data, "own");
}

static void test_switch_leaves_no_temporaries(void **state) {
        Ctx *c = *state;
        char dir[128], cmd[256];

        stage(c, "1.0.0", "a");
        stage(c, "1.0.1", "b");
        for (int i = 0; i < 20; i++)
                assert_int_equal(kubelet_store_switch(c->store, i % 2 ? "1.0.0" : "1.0.1", NULL), 0);
        snprintf(dir, sizeof(dir), "%s/opt/bin", c->dir);
        snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq 1", dir);
        assert_int_equal(system(cmd), 0);
}

static void set_mtime(Ctx *c, const char *version, time_t t) {
        char path[256];
        struct timespec ts[2] = { { .tv_sec = t }, { .tv_sec = t } };

        snprintf(path, sizeof(path), "%s/%s/kubelet", kubelet_store_root(c->store), version);
        assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void test_gc(void **state) {
        Ctx *c = *state;
        const char *protect[] = { "1.0.0", NULL };

        stage(c, "1.0.0", "a");
        stage(c, "1.0.1", "b");
        stage(c, "1.0.2", "c");
        stage(c, "1.0.3", "d");
        set_mtime(c, "1.0.0", 1000);
        set_mtime(c, "1.0.1", 2000);
        set_mtime(c, "1.0.2", 3000);
        set_mtime(c, "1.0.3", 4000);
        assert_int_equal(kubelet_store_switch(c->store, "1.0.1", NULL), 0);

        /* keep 2: the running 1.0.1 and the protected rollback 1.0.0, even though both are oldest */
        assert_int_equal(kubelet_store_gc(c->store, protect), 2);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.0"), 1);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.1"), 1);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.2"), 0);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.3"), 0);

        /* without protection: the running one plus the newest other */
        stage(c, "1.0.4", "e");
        assert_int_equal(kubelet_store_gc(c->store, NULL), 1);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.0"), 0);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.1"), 1);
        assert_int_equal(file_store_has(kubelet_store_files(c->store), "1.0.4"), 1);
        assert_int_equal(kubelet_store_gc(c->store, NULL), 0);
}

static void test_adopt(void **state) {
        Ctx *c = *state;
        _cleanup_free_ char *v = NULL, *cur = NULL, *data = NULL, *v2 = NULL;
        char dir[128];
        struct stat st;

        snprintf(dir, sizeof(dir), "%s/opt/bin", c->dir);
        assert_int_equal(mkdir_parents(dir, 0755), 0);
        assert_int_equal(kubelet_store_needs_adoption(c->store), 0);
        assert_int_equal(write_file_atomic(c->bin, "ORIG", 4, 0755), 0);
        assert_int_equal(kubelet_store_needs_adoption(c->store), 1);
        assert_int_equal(kubelet_store_current(c->store, &cur), -EMEDIUMTYPE);
        assert_int_equal(kubelet_store_switch(c->store, "1.0.0", NULL), -ENOENT);

        assert_int_equal(kubelet_store_adopt(c->store, "1.31.2", &v), 0);
        assert_string_equal(v, "1.31.2");
        assert_int_equal(lstat(c->bin, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        data = read_bin(c->bin);
        assert_string_equal(data, "ORIG");
        assert_int_equal(kubelet_store_current(c->store, &cur), 0);
        assert_string_equal(cur, "1.31.2");
        assert_int_equal(kubelet_store_needs_adoption(c->store), 0);
        assert_int_equal(kubelet_store_adopt(c->store, NULL, &v2), -ENOENT);

        /* unknown version → "adopted" */
        assert_int_equal(unlink(c->bin), 0);
        assert_int_equal(write_file_atomic(c->bin, "ORIG2", 5, 0755), 0);
        assert_int_equal(kubelet_store_adopt(c->store, "bad/version", &v2), 0);
        assert_string_equal(v2, KUBELET_ADOPTED_VERSION);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_install_switch_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_switch_back_to_none, setup, teardown),
                cmocka_unit_test_setup_teardown(test_switch_leaves_no_temporaries, setup, teardown),
                cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
                cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
