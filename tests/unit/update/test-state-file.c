/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests.h"
#include "update/state-file.h"
#include "util/fileio.h"

static char dir[64];

static int setup(void **state) {
        strcpy(dir, "/tmp/test-state-file-XXXXXX");
        return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
        DIR *d = opendir(dir);
        struct dirent *e;

        while (d && (e = readdir(d))) {
                char p[512];

                if (e->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                (void) unlink(p);
        }
        if (d)
                closedir(d);
        return rmdir(dir);
}

static char *path_of(const char *name) {
        char *p;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

static char *xstrdup(const char *s) {
        char *c = strdup(s);
        assert_non_null(c);
        return c;
}

/* A record with every field set, as in the middle of a gated OS + kubelet update. */
static UpdateTransaction *full_tx(const char *id) {
        UpdateTransaction *tx = NULL;

        assert_int_equal(update_transaction_new(&tx), 0);
        tx->id = xstrdup(id);
        tx->phase = UPDATE_PHASE_REBOOTING;
        tx->checksum = xstrdup("5d41402abc4b2a76");
        tx->gated = true;
        tx->os_from = xstrdup("1592.6");
        tx->os_to = xstrdup("1592.7");
        tx->kubelet_from = xstrdup("1.31.4");
        tx->kubelet_to = xstrdup("1.32.1");
        tx->kubernetes_version = xstrdup("1.32.1");
        tx->kubelet_image = xstrdup("registry.example.com/hyperkube:v1.32.1");
        tx->kubelet_path_in_image = xstrdup("/kubelet");
        tx->os_backend = OS_UPDATE_BACKEND_IMAGE;
        tx->os_command = xstrdup("/opt/gardener/bin/inplace-update.sh");
        tx->os_args = calloc(3, sizeof(char *));
        tx->os_args[0] = xstrdup("1592.7");
        tx->os_args[1] = xstrdup("--with \"quotes\" and \\ backslash");
        tx->ca_rotation = xstrdup("2025-03-01T10:00:00Z");
        tx->rotation = true;
        tx->blocked = UPDATE_FAILURE_MIN_VERSION_NOT_MET;
        tx->blocked_message =
                xstrdup("minVersionForUpdate 1592.7 is not met by the current OS version 1592.6");
        tx->attempt = 3;
        tx->done = (UINT64_C(1) << UPDATE_STEP_PLAN) | (UINT64_C(1) << UPDATE_STEP_OS_APPLY) |
                (UINT64_C(1) << UPDATE_STEP_EVENT);
        tx->progress_phase = UPDATE_PHASE_APPLYING;
        tx->event_phase = UPDATE_PHASE_STAGED;
        tx->boot_id = xstrdup("0f3c2e6c-9a1b-4c39-8d0e-1f2a3b4c5d6e");
        tx->os_started_usec = 1740823200123456ULL;
        tx->ready_since = xstrdup("2025-03-01T10:04:00Z");
        tx->started_usec = 1740823100000000ULL;
        tx->updated_usec = 1740823300000000ULL;
        tx->retry_usec = 1740823400000000ULL;
        tx->api_failures = 2;
        tx->failure = (UpdateFailure) {
                .code = UPDATE_FAILURE_OS_COMMAND_FAILED,
                .message = xstrdup("failed to execute OS update command: gr\xc3\xbc\xc3\x9f\nline two"),
                .step = xstrdup("update-os"),
                .attempt = 2,
                .usec = 1740823250000000ULL,
                .keep_reason = true,
        };
        tx->applied.valid = true;
        tx->applied.checksum = xstrdup("0000");
        tx->applied.sa_rotation = xstrdup("2025-02-01T00:00:00Z");
        tx->marker = xstrdup("1592.7");
        return tx;
}

static void test_round_trip(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *a = full_tx("tx-1"), *b = NULL, *e = NULL,
                                                              *f = NULL;
        _cleanup_free_ char *s1 = NULL, *s2 = NULL, *s3 = NULL, *s4 = NULL, *err = NULL;

        assert_int_equal(state_codec_encode(a, &s1), 0);
        assert_int_equal(state_codec_decode(s1, strlen(s1), &b, &err), 0);
        assert_int_equal(state_codec_encode(b, &s2), 0);
        assert_string_equal(s1, s2);

        assert_string_equal(b->id, "tx-1");
        assert_int_equal(b->phase, UPDATE_PHASE_REBOOTING);
        assert_int_equal(b->os_backend, OS_UPDATE_BACKEND_IMAGE);
        assert_string_equal(b->os_args[1], "--with \"quotes\" and \\ backslash");
        assert_null(b->os_args[2]);
        assert_null(b->sa_rotation);
        assert_int_equal(b->blocked, UPDATE_FAILURE_MIN_VERSION_NOT_MET);
        assert_int_equal(b->done, a->done);
        assert_int_equal(b->progress_phase, UPDATE_PHASE_APPLYING);
        assert_int_equal(b->event_phase, UPDATE_PHASE_STAGED);
        assert_true(b->os_started_usec == 1740823200123456ULL);
        assert_int_equal(b->failure.code, UPDATE_FAILURE_OS_COMMAND_FAILED);
        assert_string_equal(b->failure.message, a->failure.message);
        assert_true(b->failure.keep_reason);
        assert_true(b->applied.valid);
        assert_null(b->applied.ca_rotation);
        assert_string_equal(b->marker, "1592.7");
        /* `inplace-agent status` shows these first */
        assert_int_equal(strncmp(s1, "{\n  \"transaction\": \"tx-1\",\n  \"phase\": \"Rebooting\",", 50), 0);

        /* an empty record: no transaction yet */
        assert_int_equal(update_transaction_new(&e), 0);
        assert_int_equal(state_codec_encode(e, &s3), 0);
        assert_int_equal(state_codec_decode(s3, strlen(s3), &f, NULL), 0);
        assert_null(f->id);
        assert_int_equal(f->phase, UPDATE_PHASE_IDLE);
        assert_int_equal(f->blocked, _UPDATE_FAILURE_INVALID);
        assert_int_equal(f->failure.code, _UPDATE_FAILURE_INVALID);
        assert_int_equal(f->progress_phase, _UPDATE_PHASE_INVALID);
        assert_false(f->applied.valid);
        assert_null(f->os_args);
        assert_int_equal(state_codec_encode(f, &s4), 0);
        assert_string_equal(s3, s4);
}

static void test_copy_matches(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *a = full_tx("tx-9"), *c = NULL;
        _cleanup_free_ char *s1 = NULL, *s2 = NULL;

        assert_int_equal(update_transaction_copy(a, &c), 0);
        assert_ptr_not_equal(a->os_args, c->os_args);
        assert_int_equal(state_codec_encode(a, &s1), 0);
        assert_int_equal(state_codec_encode(c, &s2), 0);
        assert_string_equal(s1, s2);
}

static void test_save_and_load(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *a = full_tx("tx-2"), *b = NULL;
        _cleanup_free_ char *p = path_of(STATE_FILE_NAME), *s1 = NULL, *s2 = NULL;
        UpdateTransaction *none = NULL;
        struct stat st;

        assert_int_equal(state_file_load(dir, &none, NULL), -ENOENT);
        assert_null(none);

        assert_int_equal(state_file_save(dir, a), 0);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(state_file_load(dir, &b, NULL), 0);
        assert_int_equal(state_codec_encode(a, &s1), 0);
        assert_int_equal(state_codec_encode(b, &s2), 0);
        assert_string_equal(s1, s2);

        /* saving again replaces it */
        free(a->id);
        a->id = xstrdup("tx-3");
        assert_int_equal(state_file_save(dir, a), 0);
        b = update_transaction_free(b);
        assert_int_equal(state_file_load(dir, &b, NULL), 0);
        assert_string_equal(b->id, "tx-3");
}

static void write_raw(const char *name, const char *data) {
        _cleanup_free_ char *p = path_of(name);
        FILE *f = fopen(p, "we");

        assert_non_null(f);
        assert_int_equal(fputs(data, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

static void test_corrupt_is_moved_aside(void **state) {
        static const struct {
                const char *content, *why;
        } table[] = {
                { "{\"version\":1,\"phase\":\"Stag", "line 1" },
                { "[]", "expected a JSON object" },
                { "{\"phase\":\"Idle\"}", "version: missing or invalid" },
                { "{\"version\":1}", "phase: missing" },
                { "{\"version\":1,\"phase\":\"Bogus\"}", "phase: unknown phase \"Bogus\"" },
                { "{\"version\":1,\"phase\":\"Idle\",\"attempt\":-1}",
                  "attempt: expected a non-negative integer" },
                { "{\"version\":1,\"phase\":\"Idle\",\"done\":[\"teleport\"]}", "done[0]: unknown step" },
                { "{\"version\":1,\"phase\":\"Idle\",\"os\":{\"backend\":\"floppy\"}}",
                  "os.backend: unknown backend" },
                { "{\"version\":1,\"phase\":\"Idle\",\"failure\":{\"code\":\"Oops\"}}",
                  "failure.code: unknown failure code" },
                { "{\"version\":1,\"phase\":\"Idle\",\"kubelet\":{\"to\":5}}",
                  "kubelet.to: expected a string" },
                { "{\"version\":1,\"phase\":\"Idle\",\"applied\":[]}", "applied: expected an object" },
                { "", "line 1" },
        };
        _cleanup_free_ char *p = path_of(STATE_FILE_NAME),
                            *aside = path_of(STATE_FILE_NAME STATE_FILE_CORRUPT_SUFFIX);

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *err = NULL, *kept = NULL;
                UpdateTransaction *tx = NULL;

                write_raw(STATE_FILE_NAME, table[i].content);
                assert_int_equal(state_file_load(dir, &tx, &err), -EBADMSG);
                assert_null(tx);
                if (!err || !strstr(err, table[i].why) || !strstr(err, "moved to"))
                        fail_msg("%s: \"%s\"", table[i].content, strempty(err));
                /* not dropped silently: the bytes are kept next to it, and the next start is clean */
                assert_int_equal(access(p, F_OK), -1);
                assert_int_equal(read_full_file(aside, 4096, &kept, NULL), 0);
                assert_string_equal(kept, table[i].content);
                assert_int_equal(state_file_load(dir, &tx, NULL), -ENOENT);
        }
}

static void test_too_big_and_newer(void **state) {
        _cleanup_free_ char *p = path_of(STATE_FILE_NAME), *big = NULL, *err = NULL, *err2 = NULL;
        UpdateTransaction *tx = NULL;

        big = malloc(STATE_FILE_MAX + 2);
        assert_non_null(big);
        memset(big, ' ', STATE_FILE_MAX + 1);
        big[STATE_FILE_MAX + 1] = '\0';
        write_raw(STATE_FILE_NAME, big);
        assert_int_equal(state_file_load(dir, &tx, &err), -EBADMSG);
        assert_non_null(strstr(err, "moved to"));

        /* a newer format is not ours to move: left in place */
        write_raw(STATE_FILE_NAME, "{\"version\":2,\"phase\":\"Idle\",\"newThing\":{}}");
        assert_int_equal(state_file_load(dir, &tx, &err2), -EPROTONOSUPPORT);
        assert_non_null(strstr(err2, "newer format"));
        assert_int_equal(access(p, F_OK), 0);
        assert_int_equal(unlink(p), 0);

        /* unknown keys of our own version are ignored (forward-compatible reads) */
        write_raw(STATE_FILE_NAME,
                  "{\"version\":1,\"phase\":\"Succeeded\",\"transaction\":\"t\",\"future\":[1]}");
        assert_int_equal(state_file_load(dir, &tx, NULL), 0);
        assert_int_equal(tx->phase, UPDATE_PHASE_SUCCEEDED);
        update_transaction_free(tx);
}

/* A crash after the temporary file was written but before the rename leaves the old state: the
 * leftover temp file is never read. */
static void test_crash_between_write_and_rename(void **state) {
        _cleanup_(update_transaction_freep) UpdateTransaction *old = full_tx("tx-old"), *got = NULL;
        _cleanup_free_ char *p = path_of(STATE_FILE_NAME), *tmp = NULL, *new_text = NULL;
        _cleanup_(update_transaction_freep) UpdateTransaction *newer = full_tx("tx-new");

        assert_int_equal(state_file_save(dir, old), 0);
        /* what write_file_atomic() leaves behind when killed before rename() */
        assert_int_equal(write_file_atomic_temp_name(p, &tmp), 0);
        assert_int_equal(state_codec_encode(newer, &new_text), 0);
        {
                FILE *f = fopen(tmp, "we");
                assert_non_null(f);
                assert_true(fputs(new_text, f) >= 0);
                assert_int_equal(fclose(f), 0);
        }
        assert_int_equal(state_file_load(dir, &got, NULL), 0);
        assert_string_equal(got->id, "tx-old");
        assert_int_equal(unlink(tmp), 0);
}

/* The real thing: a child saves two alternating states as fast as it can and is SIGKILLed at
 * arbitrary points. Whatever is on disk afterwards loads and is one of the two, never a mix. */
static void test_killed_while_saving(void **state) {
        for (unsigned round = 0; round < 20; round++) {
                _cleanup_(update_transaction_freep) UpdateTransaction *got = NULL;
                _cleanup_free_ char *err = NULL;
                int fds[2], status;
                pid_t pid;
                char c;

                assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
                pid = fork();
                assert_true(pid >= 0);
                if (pid == 0) {
                        UpdateTransaction *a = full_tx("tx-a"), *b = full_tx("tx-b");

                        for (unsigned i = 0;; i++) {
                                if (state_file_save(dir, i % 2 ? b : a) < 0)
                                        _exit(EXIT_FAILURE);
                                if (write(fds[1], "x", 1) != 1)
                                        _exit(EXIT_FAILURE);
                        }
                }
                assert_int_equal(close(fds[1]), 0);
                /* let it complete a varying number of saves, then kill it mid-flight */
                for (unsigned i = 0; i <= round % 5; i++)
                        assert_int_equal(read(fds[0], &c, 1), 1);
                assert_int_equal(kill(pid, SIGKILL), 0);
                assert_int_equal(waitpid(pid, &status, 0), pid);
                assert_true(WIFSIGNALED(status));
                assert_int_equal(close(fds[0]), 0);

                if (state_file_load(dir, &got, &err) < 0)
                        fail_msg("round %u: %s", round, strempty(err));
                assert_true(streq(got->id, "tx-a") || streq(got->id, "tx-b"));
                {
                        _cleanup_free_ char *tmp = NULL, *p = path_of(STATE_FILE_NAME);
                        struct stat st;

                        /* a leftover of the killed child, if any, is gone after the next save */
                        assert_int_equal(write_file_atomic_temp_name(p, &tmp), 0);
                        assert_int_equal(state_file_save(dir, got), 0);
                        assert_int_equal(stat(tmp, &st), -1);
                        assert_int_equal(errno, ENOENT);
                }
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_copy_matches, setup, teardown),
                cmocka_unit_test_setup_teardown(test_save_and_load, setup, teardown),
                cmocka_unit_test_setup_teardown(test_corrupt_is_moved_aside, setup, teardown),
                cmocka_unit_test_setup_teardown(test_too_big_and_newer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_between_write_and_rename, setup, teardown),
                cmocka_unit_test_setup_teardown(test_killed_while_saving, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
