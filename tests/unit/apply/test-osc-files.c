/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "tests.h"
#include "util/fileio.h"

static char root[] = "/tmp/test-osc-files-XXXXXX";

static int setup(void **state) {
        return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
        return osc_remove_tree(root);
}

static char *at(const char *rel) {
        char *p = NULL;

        assert_true(asprintf(&p, "%s%s", root, rel) > 0);
        return p;
}

static mode_t mode_of(const char *rel) {
        _cleanup_free_ char *p = at(rel);
        struct stat st;

        assert_int_equal(stat(p, &st), 0);
        return st.st_mode & 07777;
}

static void assert_content(const char *rel, const char *expected) {
        _cleanup_free_ char *p = at(rel), *data = NULL;

        assert_int_equal(read_full_file(p, 1 << 20, &data, NULL), 0);
        assert_string_equal(data, expected);
}

static bool exists(const char *rel) {
        _cleanup_free_ char *p = at(rel);

        return access(p, F_OK) == 0;
}

static void test_root_path(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        assert_int_equal(path_below_root("/", "/etc/x", &a), 0);
        assert_string_equal(a, "/etc/x");
        assert_int_equal(path_below_root("/scratch/", "/etc/x", &b), 0);
        assert_string_equal(b, "/scratch/etc/x");
        assert_int_equal(path_below_root("/scratch", "/etc/x", &c), 0);
        assert_string_equal(c, "/scratch/etc/x");
        assert_int_equal(path_below_root("/", "etc/x", &c), -EINVAL);
}

static void test_write_file(void **state) {
        umask(077);
        assert_int_equal(osc_write_file(root, "/etc/deep/dir/f", "one", 3, 0644, false), 1);
        assert_content("/etc/deep/dir/f", "one");
        assert_int_equal(mode_of("/etc/deep/dir/f"), 0644);     /* the umask does not matter */
        assert_int_equal(mode_of("/etc/deep"), 0755);
        /* same content: not rewritten, but the mode is enforced */
        assert_int_equal(osc_write_file(root, "/etc/deep/dir/f", "one", 3, 0600, true), 0);
        assert_int_equal(mode_of("/etc/deep/dir/f"), 0600);
        assert_int_equal(osc_write_file(root, "/etc/deep/dir/f", "two", 3, 0640, true), 1);
        assert_content("/etc/deep/dir/f", "two");
        assert_int_equal(mode_of("/etc/deep/dir/f"), 0640);
        assert_int_equal(osc_remove_file(root, "/etc/deep/dir/f"), 0);
        assert_false(exists("/etc/deep/dir/f"));
        assert_int_equal(osc_remove_file(root, "/etc/deep/dir/f"), 0);
}

static void test_unit_files(void **state) {
        _cleanup_free_ char *dir = at("/units");
        OscDropIn d[] = { { (char *) "10-a.conf", (char *) "[Service]\nA=1\n" }, { (char *) "20-b.conf", (char *) "B" } };
        OscUnit u = { .name = (char *) "x.service", .content = (char *) "[Service]\nExecStart=/bin/true\n",
                      .drop_ins = d, .n_drop_ins = 2, .enable = -1, .command = _OSC_UNIT_COMMAND_INVALID };
        char *deleted[] = { (char *) "20-b.conf", NULL };

        assert_int_equal(mkdir(dir, 0755), 0);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL), 1);
        assert_content("/units/x.service", u.content);
        assert_int_equal(mode_of("/units/x.service"), 0600);
        assert_content("/units/x.service.d/10-a.conf", d[0].content);
        assert_int_equal(mode_of("/units/x.service.d/20-b.conf"), 0600);
        assert_int_equal(mode_of("/units/x.service.d"), 0755);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL), 0);       /* nothing differs */
        assert_int_equal(osc_unit_file_exists(dir, "x.service"), 1);

        u.n_drop_ins = 1;
        assert_int_equal(osc_write_unit_files(dir, &u, deleted), 1);
        assert_false(exists("/units/x.service.d/20-b.conf"));
        assert_true(exists("/units/x.service.d/10-a.conf"));

        /* a changed unit without drop-ins loses the whole .d, foreign files included (upstream) */
        {
                _cleanup_free_ char *foreign = at("/units/x.service.d/99-admin.conf");
                assert_int_equal(write_file_atomic(foreign, "x", 1, 0644), 0);
        }
        u.n_drop_ins = 0;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL), 0);
        assert_false(exists("/units/x.service.d"));

        u.n_drop_ins = 2;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL), 1);
        assert_int_equal(osc_remove_unit_files(dir, &u), 0);
        assert_false(exists("/units/x.service"));
        assert_false(exists("/units/x.service.d"));
        assert_int_equal(osc_unit_file_exists(dir, "x.service"), 0);

        /* a unit without content: only drop-ins, no unit file */
        u.content = NULL;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL), 1);
        assert_false(exists("/units/x.service"));
        assert_true(exists("/units/x.service.d/10-a.conf"));
}

static void test_registry(void **state) {
        OscRegistryHost h = { .url = (char *) "https://m", .override_path = -1 };
        OscRegistry g = { .upstream = (char *) "docker.io", .hosts = &h, .n_hosts = 1 };

        assert_int_equal(osc_write_registry(root, &g), 0);
        assert_content("/etc/containerd/certs.d/docker.io/hosts.toml",
                       "# managed by gardener-node-agent\n[host.\"https://m\"]\n  capabilities = [\"pull\",\"resolve\"]\n\n");
        assert_int_equal(mode_of("/etc/containerd/certs.d/docker.io/hosts.toml"), 0644);
        assert_int_equal(osc_remove_registry(root, "docker.io"), 0);
        assert_false(exists("/etc/containerd/certs.d/docker.io"));
        assert_int_equal(osc_remove_registry(root, ".."), -EINVAL);
        assert_int_equal(osc_ensure_containerd_dirs(root), 0);
        assert_true(exists("/var/bin/containerruntimes"));
        assert_true(exists("/etc/containerd/conf.d"));
}

static void test_remove_tree_keeps_symlink_targets(void **state) {
        _cleanup_free_ char *target = at("/keep"), *tree = at("/tree"), *link = at("/tree/link");

        assert_int_equal(mkdir(target, 0755), 0);
        assert_int_equal(osc_write_file(root, "/keep/file", "k", 1, 0600, false), 1);
        assert_int_equal(osc_write_file(root, "/tree/a/b/c", "x", 1, 0600, false), 1);
        assert_int_equal(symlink(target, link), 0);
        assert_int_equal(osc_remove_tree(tree), 0);
        assert_false(exists("/tree"));
        assert_true(exists("/keep/file"));
        assert_int_equal(osc_remove_tree(tree), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_root_path),
                cmocka_unit_test(test_write_file),
                cmocka_unit_test(test_unit_files),
                cmocka_unit_test(test_registry),
                cmocka_unit_test(test_remove_tree_keeps_symlink_targets),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
