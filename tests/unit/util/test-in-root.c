/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests.h"
#include "util/fileio.h"
#include "util/in-root.h"

static char root[] = "/tmp/test-in-root-XXXXXX";
static int root_fd = -EBADF;

static int make_link(const char *target, const char *rel) {
        char p[256];

        snprintf(p, sizeof(p), "%s%s", root, rel);
        return symlink(target, p);
}

static int setup(void **state) {
        char p[256];

        if (!mkdtemp(root))
                return -1;
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        snprintf(p, sizeof(p), "%s/a/b", root);
        if (root_fd < 0 || mkdir_parents(p, 0755) < 0)
                return -1;
        /* relative, absolute, one that climbs out, a loop, dangling ones; and a file */
        if (make_link("a/b", "/rel") < 0 || make_link("/a", "/a/abs") < 0 ||
            make_link("../../../../..", "/up") < 0 || make_link("loop", "/loop") < 0 ||
            make_link("/outside-the-root", "/dangling") < 0 || make_link("missing", "/a/dangling-rel") < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/file", root);
        return write_file_atomic(p, "x", 1, 0644);
}

static int teardown(void **state) {
        char cmd[128];

        close(root_fd);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
        return system(cmd);
}

/* Where `path` below the root leads, relative to the root ("" for the root itself). */
static char *where(const char *path, int expected) {
        _cleanup_close_ int fd = -EBADF;
        char proc[64], buf[4096];
        ssize_t k;
        int r = open_dir_in_root(root_fd, path, &fd);

        if (r != expected)
                fail_msg("%s: %d, expected %d", path, r, expected);
        if (r < 0)
                return NULL;
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        k = readlink(proc, buf, sizeof(buf) - 1);
        assert_true(k > 0);
        buf[k] = 0;
        assert_true(strncmp(buf, root, strlen(root)) == 0);
        return strdup(buf + strlen(root));
}

static void check(const char *path, const char *expected) {
        _cleanup_free_ char *w = where(path, 0);

        assert_string_equal(w, expected);
}

static void resolve_all(void) {
        check("/", "");
        check("", "");
        check("a", "/a");
        check("/rel", "/a/b");
        check("/rel/..", "/a");
        check("/a/abs/abs/b", "/a/b");
        check("/up", ""); /* ".." of the root is the root */
        check("/up/a/b", "/a/b");
        check("/../../a", "/a");
        assert_null(where("/loop", -ELOOP));
        assert_null(where("/file", -ENOTDIR));
        assert_null(where("/file/x", -ENOTDIR));
        assert_null(where("/none/x", -ENOENT));
}

static void test_resolve_openat2(void **state) {
        resolve_all();
}

static void test_resolve_walk(void **state) {
        in_root_force_walk = true;
        resolve_all();
        in_root_force_walk = false;
}

static void mkdir_and_canonical(bool walk) {
        _cleanup_free_ char *c1 = NULL, *c2 = NULL, *c3 = NULL, *c4 = NULL, *e1 = NULL, *e3 = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        char p[256];

        in_root_force_walk = walk;
        /* through "up" (out of the root, so the root) and "rel" (a/b) */
        assert_int_equal(mkdir_p_in_root(root_fd, walk ? "/up/rel/w1/w2" : "/up/rel/o1/o2", 0750, &fd), 0);
        snprintf(p, sizeof(p), "%s/a/b/%s", root, walk ? "w1/w2" : "o1/o2");
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0750);
        assert_int_equal(mkdir_p_in_root(root_fd, "/loop/x", 0755, &fd), -ELOOP);

        assert_int_equal(path_in_root_canonical(root_fd, "/rel/missing/deeper/name", &c1), 0);
        assert_true(asprintf(&e1, "%s/a/b/missing/deeper/name", root) > 0);
        assert_string_equal(c1, e1);
        /* the last component is never followed */
        assert_int_equal(path_in_root_canonical(root_fd, "/up//rel", &c2), 0);
        assert_true(strlen(c2) > 4 && streq(c2 + strlen(c2) - 4, "/rel"));
        assert_int_equal(path_in_root_canonical(root_fd, "/a/abs/b/../../x", &c3), 0);
        assert_true(asprintf(&e3, "%s/x", root) > 0);
        assert_string_equal(c3, e3);
        /* Issue 32: a directory that is a dangling symlink (its target missing below the root) is not
         * created through, so nothing can be written there: not a path to write at. */
        assert_int_equal(mkdir_p_in_root(root_fd, "/dangling/x", 0755, &fd), -ENOENT);
        assert_int_equal(path_in_root_canonical(root_fd, "/dangling/name", &c4), -ENOENT);
        assert_int_equal(path_in_root_canonical(root_fd, "/a/dangling-rel/deeper/name", &c4), -ENOENT);
        assert_null(c4);
        /* the last component may dangle: it is replaced, never followed */
        assert_int_equal(path_in_root_canonical(root_fd, "/dangling", &c4), 0);
        in_root_force_walk = false;
}

static void test_mkdir_and_canonical(void **state) {
        mkdir_and_canonical(/* walk= */ false);
        mkdir_and_canonical(/* walk= */ true);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_resolve_openat2),
                cmocka_unit_test(test_resolve_walk),
                cmocka_unit_test(test_mkdir_and_canonical),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
