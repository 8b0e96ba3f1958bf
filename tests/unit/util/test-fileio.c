/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

#include "tests.h"
#include "util/fileio.h"

static char dir[64];

static int setup(void **state) {
        strcpy(dir, "/tmp/test-fileio-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        _cleanup_free_ char *cmd = NULL;

        assert_true(asprintf(&cmd, "rm -rf '%s'", dir) > 0);
        return system(cmd) == 0 ? 0 : -1;
}

static unsigned count_entries(const char *d) {
        DIR *dd = opendir(d);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(dd);
        while ((de = readdir(dd)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(dd);
        return n;
}

static void assert_content(const char *path, const char *want) {
        _cleanup_free_ char *data = NULL;
        size_t size;

        assert_int_equal(read_full_file(path, 1024, &data, &size), 0);
        assert_int_equal(size, strlen(want));
        assert_memory_equal(data, want, size);
}

static void test_temp_name(void **state) {
        static const char *const cases[][2] = {
                { "/etc/kubernetes/manifests/kube-apiserver.yaml",
                  "/etc/kubernetes/manifests/.kube-apiserver.yaml.tmp" },
                { "/state.json", "/.state.json.tmp" },
                { "state.json", ".state.json.tmp" },
                { "a/b", "a/.b.tmp" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *t = NULL;

                assert_int_equal(write_file_atomic_temp_name(cases[i][0], &t), 0);
                assert_string_equal(t, cases[i][1]);
        }
}

/* A write killed before its rename() leaves the hidden temp file; the next write of the same target
 * (the resumed one) reuses and renames it, so nothing is left behind. */
static void test_leftover_of_a_killed_write_is_consumed(void **state) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        struct stat st;
        FILE *f;

        assert_true(asprintf(&path, "%s/unit.conf", dir) > 0);
        assert_int_equal(write_file_atomic(path, "old\n", 4, 0644), 0);
        assert_int_equal(write_file_atomic_temp_name(path, &tmp), 0);
        f = fopen(tmp, "we");
        assert_non_null(f);
        assert_true(fputs("half of a longer new conte", f) >= 0);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(chmod(tmp, 0777), 0);
        assert_content(path, "old\n");
        assert_int_equal(count_entries(dir), 2);

        assert_int_equal(write_file_atomic(path, "new\n", 4, 0600), 0);
        assert_content(path, "new\n");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(stat(tmp, &st), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(count_entries(dir), 1);
        assert_int_equal(unlink(path), 0);
}

/* Replacing leaves exactly the target, with the new content and mode. */
static void test_replace(void **state) {
        _cleanup_free_ char *path = NULL;
        struct stat st;

        assert_true(asprintf(&path, "%s/state.json", dir) > 0);
        assert_int_equal(write_file_atomic(path, "{}", 2, 0644), 0);
        assert_int_equal(write_file_atomic(path, "", 0, 0600), 0);
        assert_content(path, "");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(count_entries(dir), 1);
        assert_int_equal(unlink(path), 0);
}

/* Only regular files are read: a FIFO would block the event loop until a writer came (a config,
 * kubeconfig or token path pointed at one by mistake), a directory is named as one. */
static void test_read_refuses_what_is_not_a_regular_file(void **state) {
        _cleanup_free_ char *fifo = NULL, *data = NULL;
        size_t size;

        assert_true(asprintf(&fifo, "%s/fifo", dir) > 0);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        assert_int_equal(read_full_file(fifo, 1024, &data, &size), -EBADFD);
        assert_int_equal(read_full_file(dir, 1024, &data, &size), -EISDIR);
        assert_int_equal(read_full_file("/dev/null", 1024, &data, &size), -EBADFD);
        assert_null(data);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_temp_name),
                cmocka_unit_test_setup_teardown(test_leftover_of_a_killed_write_is_consumed, setup,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_replace, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_refuses_what_is_not_a_regular_file, setup,
                                                teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
