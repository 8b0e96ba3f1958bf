/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "os/os-image.h"
#include "test-loop.h"
#include "tests.h"
#include "util/fileio.h"

#define MiB (1024ULL * 1024ULL)
#define MS(n) ((uint64_t) (n) *USEC_PER_MSEC)

static char tmpdir[] = "/tmp/test-os-image-XXXXXX";
static unsigned counter;

typedef struct Job {
        sd_event *event;
        OsImage *image;
        bool done;
        int error;

        sd_event_source *tick;
        unsigned n_ticks, n_ticks_copying;
        uint64_t last_tick, max_gap, last_progress;
        bool progress_went_back;
} Job;

/* A fresh directory per test under tmpdir. */
static char *new_dir(const char *name) {
        char *p = NULL;

        assert_true(asprintf(&p, "%s/%u-%s", tmpdir, ++counter, name) > 0);
        assert_int_equal(mkdir_parents(p, 0755), 0);
        return p;
}

static char *path_join(const char *dir, const char *name) {
        char *p = NULL;

        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

static void make_file(const char *path, uint64_t size, unsigned seed) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        _cleanup_free_ char *buf = malloc(MiB);
        uint64_t done = 0;

        assert_true(fd >= 0);
        assert_non_null(buf);
        for (size_t i = 0; i < MiB; i++)
                buf[i] = (char) ((i * 31 + seed * 7 + i / 4096) & 0xff);
        while (done < size) {
                size_t n = (size_t) MIN(size - done, MiB);
                assert_int_equal(write(fd, buf, n), (ssize_t) n);
                buf[0]++; /* make every MiB a little different */
                done += n;
        }
}

static bool files_equal(const char *a, const char *b) {
        _cleanup_close_ int fa = open(a, O_RDONLY | O_CLOEXEC), fb = open(b, O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *ba = malloc(MiB), *bb = malloc(MiB);

        assert_true(fa >= 0 && fb >= 0);
        for (;;) {
                ssize_t na = read(fa, ba, MiB), nb = read(fb, bb, MiB);

                assert_true(na >= 0 && nb >= 0);
                if (na != nb || memcmp(ba, bb, (size_t) na) != 0)
                        return false;
                if (na == 0)
                        return true;
        }
}

/* Sorted, '|'-joined listing of a directory. */
static char *listing(const char *dir) {
        struct dirent **list = NULL;
        char *s = strdup("");
        int n = scandir(dir, &list, NULL, alphasort);

        assert_true(n >= 0);
        for (int k = 0; k < n; k++) {
                char *t = NULL;

                if (!streq(list[k]->d_name, ".") && !streq(list[k]->d_name, "..")) {
                        assert_true(asprintf(&t, "%s%s|", s, list[k]->d_name) > 0);
                        free(s);
                        s = t;
                }
                free(list[k]);
        }
        free(list);
        return s;
}

static bool has_temp(const char *dir) {
        _cleanup_free_ char *l = listing(dir);

        return strstr(l, ".tmp-") != NULL;
}

static void on_done(OsImage *image, int error, void *userdata) {
        Job *j = userdata;

        assert_false(j->done);
        j->done = true;
        j->error = error;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Job *j = userdata;
        uint64_t now = test_now_usec(), done = 0, total = 0;

        if (j->last_tick > 0)
                j->max_gap = MAX(j->max_gap, now - j->last_tick);
        j->last_tick = now;
        j->n_ticks++;
        if (j->image && !j->done) {
                j->n_ticks_copying++;
                assert_int_equal(os_image_get_progress(j->image, &done, &total), 0);
                if (done < j->last_progress)
                        j->progress_went_back = true;
                j->last_progress = done;
        }
        assert_true(sd_event_source_set_time_relative(s, MS(20)) >= 0);
        return 0;
}

static void job_init(Job *j) {
        *j = (Job) {};
        assert_int_equal(sd_event_new(&j->event), 0);
}

static void job_done(Job *j) {
        os_image_free(j->image);
        sd_event_source_disable_unref(j->tick);
        sd_event_unref(j->event);
}

static int job_start(Job *j, const OsImageInstallOptions *o) {
        assert_int_equal(os_image_install_new(j->event, o, on_done, j, &j->image), 0);
        return os_image_install_start(j->image);
}

static void job_wait(Job *j, uint64_t max_usec) {
        TEST_LOOP_UNTIL(j->event, j->done, max_usec);
}

static OsImageInstallOptions options(const char *src, const char *dir, const char *version,
                                     const char *running) {
        return (OsImageInstallOptions) {
                .source_path = src,
                .install_directory = dir,
                .name_prefix = "os",
                .version = version,
                .boot_tries = 3,
                .running_version = running,
                .efivars_directory = "",
        };
}

static void test_install_basic(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *dst = path_join(esp, "os-1.3+3.efi");
        _cleanup_free_ char *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        uint64_t done, total;
        struct stat st;
        Job j;

        make_file(src, 3 * MiB + 17, 1);
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        assert_false(j.done); /* never from inside start() */
        assert_null(os_image_get_installed_path(j.image));
        job_wait(&j, 30 * USEC_PER_SEC);

        assert_int_equal(j.error, 0);
        assert_string_equal(os_image_get_installed_path(j.image), dst);
        assert_true(files_equal(src, dst));
        assert_int_equal(stat(dst, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        l = listing(esp);
        assert_string_equal(l, "os-1.3+3.efi|"); /* nothing else: no temporary file */
        assert_null(os_image_get_removed(j.image)[0]);
        assert_int_equal(os_image_get_progress(j.image, &done, &total), 0);
        assert_int_equal(done, 3 * MiB + 17);
        assert_int_equal(total, 3 * MiB + 17);
        assert_int_equal(os_image_install_start(j.image), -EALREADY);
        job_done(&j);
}

static void test_install_without_counting_creates_directory(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *base = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *esp = path_join(base, "EFI/Linux");
        _cleanup_free_ char *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1592.7", NULL);
        Job j;

        make_file(src, 4096, 2);
        o.boot_tries = 0;
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 30 * USEC_PER_SEC);
        assert_int_equal(j.error, 0);
        l = listing(esp);
        assert_string_equal(l, "os-1592.7.efi|");
        job_done(&j);
}

static void write_efivar(const char *dir, const char *value) {
        _cleanup_free_ char *path = NULL;
        uint8_t buf[256] = { 7, 0, 0, 0 };
        size_t n = 4;

        for (const char *c = value; *c; c++) {
                buf[n++] = (uint8_t) *c;
                buf[n++] = 0;
        }
        buf[n++] = 0;
        buf[n++] = 0;
        assert_true(asprintf(&path, "%s/LoaderEntrySelected-" OS_IMAGE_LOADER_GUID, dir) > 0);
        assert_int_equal(write_file_atomic(path, buf, n, 0644), 0);
}

static void test_cleanup_keeps_running_and_booted(void **state) {
        static const char *const existing[] = {
                "os-1.0.efi",
                "os-1.1+0-3.efi",
                "os-1.2.efi",
                "os-1.3+1-2.efi",
                "os-0.9+3.efi",
                "other-1.0.efi",
                "os-extra.efi",
                "README",
                ".os-1.3+3.efi.tmp-AbCdEf",
                ".other-1.3.efi.tmp-AbCdEf",
        };
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp"), *efi = new_dir("efivars");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *l = NULL,
                            *sub = path_join(esp, "os-9.efi");
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        char *const *removed;
        size_t n_removed = 0;
        Job j;

        make_file(src, 64 * 1024, 3);
        for (size_t k = 0; k < ELEMENTSOF(existing); k++) {
                _cleanup_free_ char *p = path_join(esp, existing[k]);
                make_file(p, 100, (unsigned) k);
        }
        assert_int_equal(mkdir(sub, 0755), 0); /* a directory with our name pattern: not touched */
        write_efivar(efi, "os-0.9+2-1.efi");
        o.efivars_directory = efi;

        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 30 * USEC_PER_SEC);
        assert_int_equal(j.error, 0);

        l = listing(esp);
        assert_string_equal(l,
                            ".other-1.3.efi.tmp-AbCdEf|README|os-0.9+3.efi|os-1.2.efi|os-1.3+3.efi|os-9.efi|"
                            "os-extra.efi|other-1.0.efi|");
        removed = os_image_get_removed(j.image);
        for (; removed[n_removed]; n_removed++)
                ;
        assert_int_equal(n_removed, 4);
        job_done(&j);
}

static void test_refuses_running_version(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *old = path_join(esp, "os-1.0.efi");
        _cleanup_free_ char *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1.2", "1.2.0");
        Job j;

        make_file(src, 4096, 4);
        make_file(old, 100, 4);
        job_init(&j);
        assert_int_equal(job_start(&j, &o), -EEXIST);
        l = listing(esp);
        assert_string_equal(l, "os-1.0.efi|"); /* nothing removed either */
        assert_int_equal(sd_event_run(j.event, 0), 0);
        assert_false(j.done);
        job_done(&j);
}

static uint64_t fake_avail;

static int fake_statvfs(const char *path, struct statvfs *ret) {
        *ret = (struct statvfs) { .f_frsize = 4096, .f_bsize = 4096, .f_bavail = fake_avail / 4096 };
        return 0;
}

static void test_disk_space_simulated(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *old = path_join(esp, "os-1.0.efi");
        _cleanup_free_ char *l = NULL, *l2 = NULL;
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        Job j;

        make_file(src, 2 * MiB, 5);
        make_file(old, 64 * 1024, 5);
        o.statvfs = fake_statvfs;

        /* 1 MiB free + 64 KiB from the old entry < 2 MiB + 1 MiB reserve: refused, untouched;
         * the plan-time check says the same without an event loop. */
        fake_avail = MiB;
        assert_int_equal(os_image_check(&o), -ENOSPC);
        job_init(&j);
        assert_int_equal(job_start(&j, &o), -ENOSPC);
        assert_true(os_image_error_is_disk_space(-ENOSPC));
        l = listing(esp);
        assert_string_equal(l, "os-1.0.efi|");
        job_done(&j);
        free(l);

        /* The space the old entry frees counts: 2 MiB + 1 MiB + 64 KiB available in total. */
        fake_avail = 3 * MiB;
        assert_int_equal(os_image_check(&o), 0);
        l2 = listing(esp);
        assert_string_equal(l2, "os-1.0.efi|"); /* the check removed nothing */
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 30 * USEC_PER_SEC);
        assert_int_equal(j.error, 0);
        l = listing(esp);
        assert_string_equal(l, "os-1.3+3.efi|");
        job_done(&j);

        /* The reserve is honoured: 2.5 MiB free (1.3 now runs and stays) is short of 2 MiB plus
         * the default 1 MiB, but enough with 256 KiB. */
        fake_avail = 2 * MiB + 512 * 1024;
        o.version = "1.4";
        o.running_version = "1.3";
        job_init(&j);
        assert_int_equal(job_start(&j, &o), -ENOSPC);
        job_done(&j);
        o.reserve_bytes = 256 * 1024;
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 30 * USEC_PER_SEC);
        assert_int_equal(j.error, 0);
        job_done(&j);
}

static void test_source_and_name_errors(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *empty = path_join(stage, "empty.efi");
        _cleanup_free_ char *missing = path_join(stage, "missing.efi"), *l = NULL;
        OsImageInstallOptions o;
        OsImage *image = NULL;
        Job j;

        make_file(src, 4096, 6);
        make_file(empty, 0, 6);

        static const struct {
                int which; /* 0 missing, 1 dir, 2 empty, 3 bad version, 4 bad prefix */
                int error;
        } table[] = { { 0, -ENOENT }, { 1, -EINVAL }, { 2, -EINVAL }, { 3, -EINVAL }, { 4, -EINVAL } };

        for (size_t k = 0; k < ELEMENTSOF(table); k++) {
                o = options(src, esp, "1.3", "1.2");
                switch (table[k].which) {
                case 0:
                        o.source_path = missing;
                        break;
                case 1:
                        o.source_path = stage;
                        break;
                case 2:
                        o.source_path = empty;
                        break;
                case 3:
                        o.version = "1.3/../../x";
                        break;
                case 4:
                        o.name_prefix = "a+b";
                        break;
                }
                job_init(&j);
                assert_int_equal(job_start(&j, &o), table[k].error);
                job_done(&j);
        }
        l = listing(esp);
        assert_string_equal(l, "");

        /* The check does not create a missing directory. */
        {
                _cleanup_free_ char *nodir = path_join(esp, "missing/EFI/Linux");
                o = options(src, nodir, "1.3", "1.2");
                assert_int_equal(os_image_check(&o), -ENOENT);
                assert_int_equal(access(nodir, F_OK), -1);
                o = options(src, esp, "1.2.0", "1.2");
                assert_int_equal(os_image_check(&o), -EEXIST);
        }

        job_init(&j);
        o = options(NULL, esp, "1.3", NULL);
        assert_int_equal(os_image_install_new(j.event, &o, on_done, &j, &image), -EINVAL);
        assert_null(image);
        job_done(&j);
}

static void test_cancel_never_leaves_partial_entry(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *dst = path_join(esp, "os-1.3+3.efi");
        _cleanup_free_ char *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        struct stat st;
        Job j;

        make_file(src, 64 * MiB, 7);
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        j.image = os_image_free(j.image); /* cancel at once */
        assert_false(j.done);

        l = listing(esp);
        assert_false(has_temp(esp));
        if (stat(dst, &st) == 0) /* the child may have won the race: then complete */
                assert_int_equal(st.st_size, 64 * MiB);
        else
                assert_string_equal(l, "");
        job_done(&j);
}

static void test_large_copy_loop_responsive(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *dst = path_join(esp, "os-1.3+3.efi");
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        uint64_t t0, elapsed;
        Job j;

        make_file(src, 100 * MiB, 8);
        job_init(&j);
        assert_true(sd_event_add_time_relative(j.event, &j.tick, CLOCK_MONOTONIC, MS(20), MS(1), on_tick,
                                               &j) >= 0);
        assert_true(sd_event_source_set_enabled(j.tick, SD_EVENT_ON) >= 0);
        t0 = test_now_usec();
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 120 * USEC_PER_SEC);
        elapsed = test_now_usec() - t0;
        assert_int_equal(j.error, 0);
        assert_true(files_equal(src, dst));
        assert_false(j.progress_went_back);
        /* The copy happens elsewhere: the 20 ms timer kept firing while it ran. */
        if (j.max_gap > MS(150))
                fail_msg("timer starved for %llu ms", (unsigned long long) (j.max_gap / 1000));
        if (elapsed >= MS(100))
                assert_true(j.n_ticks_copying >= 2);
        print_message("100 MiB install: %llu ms, %u ticks during the copy, max timer gap %llu ms\n",
                      (unsigned long long) (elapsed / 1000), j.n_ticks_copying,
                      (unsigned long long) (j.max_gap / 1000));
        job_done(&j);
}

static void test_entry_state(void **state) {
        static const struct {
                const char *file;
                BootEntryState s;
        } table[] = {
                { NULL, BOOT_ENTRY_ABSENT },
                { "os-1.3+3.efi", BOOT_ENTRY_PENDING },
                { "os-1.3+2-1.efi", BOOT_ENTRY_PENDING },
                { "os-1.3+0-3.efi", BOOT_ENTRY_BAD },
                { "os-1.3.efi", BOOT_ENTRY_GOOD },
        };

        for (size_t k = 0; k < ELEMENTSOF(table); k++) {
                _cleanup_free_ char *esp = new_dir("esp");
                BootEntryState s;

                if (table[k].file) {
                        _cleanup_free_ char *p = path_join(esp, table[k].file);
                        make_file(p, 10, 0);
                }
                assert_int_equal(os_image_entry_state(esp, "os", "1.3", &s), 0);
                assert_int_equal(s, table[k].s);
        }
}

static void test_read_booted_entry(void **state) {
        _cleanup_free_ char *efi = new_dir("efivars");
        char *s = NULL;

        assert_int_equal(os_image_read_booted_entry(efi, &s), -ENOENT);
        write_efivar(efi, "os-1.2.efi");
        assert_int_equal(os_image_read_booted_entry(efi, &s), 0);
        assert_string_equal(s, "os-1.2.efi");
        free(s);
}

static void test_sigchld_must_be_blocked(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("esp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        sigset_t ss;
        Job j;

        make_file(src, 4096, 9);
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        assert_int_equal(sigprocmask(SIG_UNBLOCK, &ss, NULL), 0);
        job_init(&j);
        assert_int_equal(job_start(&j, &o), -EBUSY);
        job_done(&j);
        assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        l = listing(esp);
        assert_string_equal(l, "");
}

/* A real small file system. Needs a private mount namespace (root, CAP_SYS_ADMIN); skipped where
 * that is not available. Runs last: the namespace stays for the rest of this process. */
static void test_disk_space_real_tmpfs(void **state) {
        _cleanup_free_ char *stage = new_dir("stage"), *esp = new_dir("tinyesp");
        _cleanup_free_ char *src = path_join(stage, "image.efi"), *l = NULL;
        OsImageInstallOptions o = options(src, esp, "1.3", "1.2");
        Job j;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("tmpfs", esp, "tmpfs", 0, "size=1m") < 0) {
                print_message("no private tmpfs possible (%s): skipping\n", strerror(errno));
                skip();
        }
        make_file(src, 2 * MiB, 10);

        /* The real statvfs sees 1 MiB. */
        job_init(&j);
        assert_int_equal(job_start(&j, &o), -ENOSPC);
        job_done(&j);

        /* If the space check is fooled (space taken by someone else meanwhile), the copy itself
         * runs out: reported as ENOSPC, and neither a temporary nor a partial entry remains. */
        fake_avail = 100 * MiB;
        o.statvfs = fake_statvfs;
        job_init(&j);
        assert_int_equal(job_start(&j, &o), 0);
        job_wait(&j, 30 * USEC_PER_SEC);
        assert_int_equal(j.error, -ENOSPC);
        assert_true(os_image_error_is_disk_space(j.error));
        l = listing(esp);
        assert_string_equal(l, "");
        job_done(&j);

        assert_int_equal(umount2(esp, MNT_DETACH), 0);
}

static int setup(void **state) {
        sigset_t ss;

        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
                return -1;
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path) < 0 ? -1 : 0;
}

static int teardown(void **state) {
        /* Test-owned scratch tree only; depth first. */
        return nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_install_basic),
                cmocka_unit_test(test_install_without_counting_creates_directory),
                cmocka_unit_test(test_cleanup_keeps_running_and_booted),
                cmocka_unit_test(test_refuses_running_version),
                cmocka_unit_test(test_disk_space_simulated),
                cmocka_unit_test(test_source_and_name_errors),
                cmocka_unit_test(test_cancel_never_leaves_partial_entry),
                cmocka_unit_test(test_large_copy_loop_responsive),
                cmocka_unit_test(test_entry_state),
                cmocka_unit_test(test_read_booted_entry),
                cmocka_unit_test(test_sigchld_must_be_blocked),
                cmocka_unit_test(test_disk_space_real_tmpfs),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
