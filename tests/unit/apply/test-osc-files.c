/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "tests.h"
#include "util/fileio.h"
#include "util/in-root.h"
#include "util/strv.h"

static char root[] = "/tmp/test-osc-files-XXXXXX";
/* Outside the root: what a hostile symlink points at. Nothing may ever change here. */
static char outside[] = "/tmp/test-osc-files-out-XXXXXX";

static int setup(void **state) {
        return mkdtemp(root) && mkdtemp(outside) ? 0 : -1;
}

static int teardown(void **state) {
        return osc_remove_tree(root) < 0 || osc_remove_tree(outside) < 0 ? -1 : 0;
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

static char *out(const char *rel) {
        char *p = NULL;

        assert_true(asprintf(&p, "%s%s", outside, rel) > 0);
        return p;
}

static void link_at(const char *target, const char *rel) {
        _cleanup_free_ char *p = at(rel);

        assert_int_equal(symlink(target, p), 0);
}

static void assert_file(const char *path, const char *expected, mode_t mode) {
        _cleanup_free_ char *data = NULL;
        struct stat st;

        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_int_equal(st.st_mode & 07777, mode);
        assert_int_equal(read_full_file(path, 1 << 20, &data, NULL), 0);
        assert_string_equal(data, expected);
}

static void assert_outside_untouched(void) {
        _cleanup_free_ char *victim = out("/victim"), *dir = out("/dir"),
                            *reg = out("/docker.io/hosts.toml");
        _cleanup_free_ char *dropin = out("/10-a.conf");

        assert_file(victim, "keep", 0640);
        assert_int_equal(access(dir, F_OK), 0);
        assert_file(reg, "keep", 0640);
        assert_int_equal(access(dropin, F_OK), -1);
}

/* A fresh scratch root, and outside it a file, a directory and a registry directory. */
static void hostile_world(void) {
        _cleanup_free_ char *victim = out("/victim"), *dir = out("/dir"), *reg = out("/docker.io");
        _cleanup_free_ char *hosts = out("/docker.io/hosts.toml"), *etc = at("/etc"), *units = at("/units");

        assert_int_equal(osc_remove_tree(root), 0);
        assert_int_equal(osc_remove_tree(outside), 0);
        assert_int_equal(mkdir(root, 0755), 0);
        assert_int_equal(mkdir(outside, 0755), 0);
        assert_int_equal(mkdir(etc, 0755), 0);
        assert_int_equal(mkdir(units, 0755), 0);
        assert_int_equal(mkdir(dir, 0755), 0);
        assert_int_equal(mkdir(reg, 0755), 0);
        assert_int_equal(write_file_atomic(victim, "keep", 4, 0640), 0);
        assert_int_equal(write_file_atomic(hosts, "keep", 4, 0640), 0);
}

/* Issue 23, finding 10: parents that are symlinks out of the root, absolute or with "..", resolve
 * inside it (as in a chroot); the last component is never followed: a symlink there is replaced, its
 * target neither written nor chmod'ed. Both resolvers: openat2 and the component walk. */
static void hostile_symlinks(bool walk) {
        _cleanup_free_ char *escape = NULL, *in_root = NULL, *victim = out("/victim"), *dir = out("/dir");
        OscRegistryHost h = { .url = (char *) "https://m", .override_path = -1 };
        OscRegistry g = { .upstream = (char *) "docker.io", .hosts = &h, .n_hosts = 1 };
        OscDropIn d = { (char *) "10-a.conf", (char *) "[Service]\n" };
        OscUnit u = { .name = (char *) "x.service",
                      .drop_ins = &d,
                      .n_drop_ins = 1,
                      .enable = -1,
                      .command = _OSC_UNIT_COMMAND_INVALID };
        _cleanup_free_ char *units = at("/units");

        in_root_force_walk = walk;
        hostile_world();
        assert_true(asprintf(&escape, "../../../../../../../../..%s", outside) > 0);
        link_at(outside, "/etc/abs");   /* absolute */
        link_at(escape, "/etc/rel");    /* climbs past the root */
        link_at(victim, "/etc/target"); /* the target itself */
        link_at(dir, "/etc/target-dir");

        /* a parent that leads outside: resolved below the root, where nothing is (yet) */
        assert_int_equal(osc_write_file(root, "/etc/abs/victim", "evil", 4, 0777, false), -ENOENT);
        assert_int_equal(osc_write_file(root, "/etc/rel/victim", "evil", 4, 0777, true), -ENOENT);
        assert_int_equal(osc_write_file(root, "/etc/abs/new/deeper", "evil", 4, 0777, false), -ENOENT);
        assert_int_equal(osc_remove_file(root, "/etc/abs/victim"), 0);
        assert_outside_untouched();
        /* once the root has that directory, that is where the files go */
        in_root = at(outside);
        assert_int_equal(mkdir_parents(in_root, 0755), 0);
        assert_int_equal(osc_write_file(root, "/etc/abs/victim", "mine", 4, 0644, false), 1);
        assert_int_equal(osc_write_file(root, "/etc/rel/sub/file", "mine", 4, 0644, false), 1);
        free(in_root);
        in_root = at(victim);
        assert_file(in_root, "mine", 0644);
        assert_int_equal(osc_remove_file(root, "/etc/rel/victim"), 0);
        assert_int_equal(access(in_root, F_OK), -1);
        assert_outside_untouched();

        /* the target: same content as the link's target, so only a chmod was due: not through it */
        assert_int_equal(osc_write_file(root, "/etc/target", "keep", 4, 0777, true), 1);
        assert_content("/etc/target", "keep");
        assert_int_equal(mode_of("/etc/target"), 0777);
        assert_outside_untouched();
        assert_int_equal(osc_write_file(root, "/etc/target-dir", "x", 1, 0600, false), 1);
        assert_content("/etc/target-dir", "x");
        link_at(victim, "/etc/gone");
        assert_int_equal(osc_remove_file(root, "/etc/gone"), 0);
        assert_false(exists("/etc/gone"));
        assert_outside_untouched();

        /* containerd's certs.d, an imageRef file, a drop-in directory: the same */
        link_at(escape, "/etc/containerd");
        assert_int_equal(osc_remove_registry(root, "docker.io"), 0);
        assert_int_equal(osc_write_registry(root, &g), 0);
        assert_int_equal(osc_ensure_containerd_dirs(root), 0);
        assert_int_equal(osc_write_file(root, "/source", "bin", 3, 0600, false), 1);
        free(in_root);
        in_root = at("/source");
        assert_int_equal(osc_install_file(root, "/etc/abs/installed", in_root, 0755), 0);
        assert_outside_untouched();
        link_at(outside, "/units/x.service.d");
        assert_int_equal(osc_write_unit_files(units, &u, NULL, NULL), -ENOENT);
        assert_outside_untouched();
        in_root_force_walk = false;
}

/* An imageRef file is placed from the image store: its permissions are the OSC's, the store's copy
 * keeps its own (a hard link shares the inode: changing the placed file's mode changed the store's,
 * which then no longer held an executable and pulled the image again on every apply). */
static void test_install_keeps_the_source(void **state) {
        _cleanup_free_ char *source = NULL;

        assert_int_equal(osc_write_file(root, "/store/file", "bin", 3, 0755, false), 1);
        source = at("/store/file");
        assert_int_equal(osc_install_file(root, "/etc/installed-0644", source, 0644), 0);
        assert_int_equal(mode_of("/etc/installed-0644"), 0644);
        assert_int_equal(mode_of("/store/file"), 0755);
        assert_content("/etc/installed-0644", "bin");
        assert_int_equal(osc_install_file(root, "/etc/installed-0755", source, 0755), 0);
        assert_int_equal(mode_of("/etc/installed-0755"), 0755);
        assert_int_equal(mode_of("/store/file"), 0755);
}

static void test_hostile_symlinks(void **state) {
        hostile_symlinks(/* walk= */ false);
}

static void test_hostile_symlinks_without_openat2(void **state) {
        hostile_symlinks(/* walk= */ true);
}

/* Issue 23, finding 10: a masked drop-in (a symlink to /dev/null) was read as "File descriptor in bad
 * state" and retried for ever; a masked unit file or drop-in is left masked and named once. */
static void test_masked_unit_files(void **state) {
        _cleanup_free_ char *dir = at("/masked"), *dropin = NULL, *unit = NULL;
        _cleanup_strv_free_ char **masked = NULL;
        OscDropIn d[] = { { (char *) "10-a.conf", (char *) "A" }, { (char *) "20-b.conf", (char *) "B" } };
        OscUnit u = { .name = (char *) "m.service",
                      .content = (char *) "[Service]\n",
                      .drop_ins = d,
                      .n_drop_ins = 2,
                      .enable = -1,
                      .command = _OSC_UNIT_COMMAND_INVALID };
        char *deleted[] = { (char *) "30-c.conf", NULL };
        struct stat st;

        assert_int_equal(mkdir(dir, 0755), 0);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 1);
        assert_int_equal(osc_unit_masked(dir, "m.service"), 0);
        link_at("/dev/null", "/masked/m.service.d/30-c.conf");
        dropin = at("/masked/m.service.d/10-a.conf");
        assert_int_equal(unlink(dropin), 0);
        link_at("/dev/null", "/masked/m.service.d/10-a.conf");
        d[1].content = (char *) "B2";
        assert_int_equal(osc_write_unit_files(dir, &u, deleted, &masked), 1);
        assert_int_equal(strv_length(masked), 1);
        assert_string_equal(masked[0], dropin);
        assert_int_equal(lstat(dropin, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_true(exists("/masked/m.service.d/30-c.conf")); /* a removed drop-in's mask stays */
        assert_content("/masked/m.service.d/20-b.conf", "B2");

        unit = at("/masked/m.service");
        assert_int_equal(unlink(unit), 0);
        link_at("/dev/null", "/masked/m.service");
        assert_int_equal(osc_unit_masked(dir, "m.service"), 1);
        masked = strv_free(masked);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, &masked), 0);
        assert_int_equal(strv_length(masked), 2);
        assert_string_equal(masked[0], unit);
        assert_int_equal(osc_remove_unit_files(dir, &u), 0);
        assert_int_equal(lstat(unit, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        /* a symlink elsewhere is no mask: replaced */
        assert_int_equal(unlink(unit), 0);
        link_at("/etc/hostname", "/masked/m.service");
        assert_int_equal(osc_unit_masked(dir, "m.service"), 0);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 1);
        assert_content("/masked/m.service", "[Service]\n");
}

/* What held before the rewrite (issue 23): a directory as the target, a 300-byte component. */
static void test_bad_targets(void **state) {
        char name[302] = "/";
        _cleanup_free_ char *d = at("/isdir");

        assert_int_equal(mkdir(d, 0755), 0);
        assert_int_equal(osc_write_file(root, "/isdir", "x", 1, 0644, false), -EISDIR);
        assert_int_equal(osc_write_file(root, "/isdir", "x", 1, 0644, true), -EISDIR);
        memset(name + 1, 'a', 300);
        name[301] = '\0';
        assert_int_equal(osc_write_file(root, name, "x", 1, 0644, false), -ENAMETOOLONG);
        assert_int_equal(osc_write_file(root, "/etc/x/", "x", 1, 0644, false), -EINVAL);
        assert_int_equal(osc_write_file(root, "relative", "x", 1, 0644, false), -EINVAL);
}

/* What held before the rewrite and must still (issue 23): a full disk and an immutable target keep the
 * old content and leave no temporary file. Needs a small tmpfs (root); skipped without one. */
static void test_full_disk_and_immutable_keep_old_content(void **state) {
        _cleanup_free_ char *mnt = at("/small"), *f = at("/small/f"), *tmp = at("/small/.f.tmp"),
                            *imm = at("/small/imm");
        static char big[256 * 1024];
        int flags = FS_IMMUTABLE_FL, fd;

        assert_int_equal(mkdir(mnt, 0755), 0);
        if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") < 0)
                skip();
        assert_int_equal(osc_write_file(root, "/small/f", "old", 3, 0644, false), 1);
        memset(big, 'x', sizeof(big));
        assert_int_equal(osc_write_file(root, "/small/f", big, sizeof(big), 0644, true), -ENOSPC);
        assert_content("/small/f", "old");
        assert_int_equal(access(tmp, F_OK), -1);

        assert_int_equal(osc_write_file(root, "/small/imm", "old", 3, 0644, false), 1);
        fd = open(imm, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        if (ioctl(fd, FS_IOC_SETFLAGS, &flags) >= 0) {
                assert_int_equal(osc_write_file(root, "/small/imm", "new", 3, 0644, false), -EPERM);
                assert_content("/small/imm", "old");
                flags = 0;
                assert_int_equal(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
        }
        close(fd);
        assert_int_equal(umount(mnt), 0);
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
        assert_int_equal(mode_of("/etc/deep/dir/f"), 0644); /* the umask does not matter */
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
        _cleanup_free_ char *dir = at("/units"); /* made when missing */
        OscDropIn d[] = { { (char *) "10-a.conf", (char *) "[Service]\nA=1\n" },
                          { (char *) "20-b.conf", (char *) "B" } };
        OscUnit u = { .name = (char *) "x.service",
                      .content = (char *) "[Service]\nExecStart=/bin/true\n",
                      .drop_ins = d,
                      .n_drop_ins = 2,
                      .enable = -1,
                      .command = _OSC_UNIT_COMMAND_INVALID };
        char *deleted[] = { (char *) "20-b.conf", NULL };

        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 1);
        assert_content("/units/x.service", u.content);
        assert_int_equal(mode_of("/units/x.service"), 0600);
        assert_content("/units/x.service.d/10-a.conf", d[0].content);
        assert_int_equal(mode_of("/units/x.service.d/20-b.conf"), 0600);
        assert_int_equal(mode_of("/units/x.service.d"), 0755);
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 0); /* nothing differs */
        assert_int_equal(osc_unit_file_exists(dir, "x.service"), 1);

        u.n_drop_ins = 1;
        assert_int_equal(osc_write_unit_files(dir, &u, deleted, NULL), 1);
        assert_false(exists("/units/x.service.d/20-b.conf"));
        assert_true(exists("/units/x.service.d/10-a.conf"));

        /* a changed unit without drop-ins loses the whole .d, foreign files included (upstream) */
        {
                _cleanup_free_ char *foreign = at("/units/x.service.d/99-admin.conf");
                assert_int_equal(write_file_atomic(foreign, "x", 1, 0644), 0);
        }
        u.n_drop_ins = 0;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 0);
        assert_false(exists("/units/x.service.d"));

        u.n_drop_ins = 2;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 1);
        assert_int_equal(osc_remove_unit_files(dir, &u), 0);
        assert_false(exists("/units/x.service"));
        assert_false(exists("/units/x.service.d"));
        assert_int_equal(osc_unit_file_exists(dir, "x.service"), 0);

        /* a unit without content: only drop-ins, no unit file */
        u.content = NULL;
        assert_int_equal(osc_write_unit_files(dir, &u, NULL, NULL), 1);
        assert_false(exists("/units/x.service"));
        assert_true(exists("/units/x.service.d/10-a.conf"));
}

static void test_registry(void **state) {
        OscRegistryHost h = { .url = (char *) "https://m", .override_path = -1 };
        OscRegistry g = { .upstream = (char *) "docker.io", .hosts = &h, .n_hosts = 1 };

        assert_int_equal(osc_write_registry(root, &g), 0);
        assert_content(
                "/etc/containerd/certs.d/docker.io/hosts.toml",
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
                cmocka_unit_test(test_install_keeps_the_source),
                cmocka_unit_test(test_registry),
                cmocka_unit_test(test_remove_tree_keeps_symlink_targets),
                cmocka_unit_test(test_masked_unit_files),
                cmocka_unit_test(test_bad_targets),
                cmocka_unit_test(test_full_disk_and_immutable_keep_old_content),
                /* last: they recreate the scratch root */
                cmocka_unit_test(test_hostile_symlinks),
                cmocka_unit_test(test_hostile_symlinks_without_openat2),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
