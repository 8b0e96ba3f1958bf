/* SPDX-License-Identifier: Apache-2.0 */
/* Runs real child processes. The commands are small sh scripts written into a temporary
 * directory: the test may use a shell as the command, the agent itself never does. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include "os/os-command.h"
#include "test-loop.h"
#include "tests.h"
#include "util/fileio.h"

#define MS(n) ((uint64_t) (n) *USEC_PER_MSEC)

static char tmpdir[] = "/tmp/test-os-command-XXXXXX";

typedef struct Run {
        sd_event *event;
        OsCommand *cmd;

        bool done;
        OsCommandResult result; /* .output and .path point at the copies below */
        char *output, *path;

        unsigned n_lines;
        char *first_line, *last_line;
        unsigned n_spawns, n_retries;
        uint64_t retry_delays[32];
        unsigned veto_attempt; /* on_spawn fails for this attempt (0: never) */
        bool free_on_done;

        sd_event_source *tick;
        unsigned n_ticks, n_ticks_mid; /* mid: while the command's output was still coming */
        uint64_t last_tick, max_gap;
} Run;

static int on_spawn(OsCommand *c, unsigned attempt, void *userdata) {
        Run *r = userdata;

        r->n_spawns++;
        assert_int_equal(attempt, r->n_spawns);
        return attempt == r->veto_attempt ? -EIO : 0;
}

static void on_line(OsCommand *c, const char *line, size_t size, void *userdata) {
        Run *r = userdata;

        assert_int_equal(strlen(line), size);
        if (!r->first_line)
                r->first_line = strdup(line);
        free(r->last_line);
        r->last_line = strdup(line);
        r->n_lines++;
}

static void on_retry(OsCommand *c, const OsCommandResult *res, uint64_t delay_usec, void *userdata) {
        Run *r = userdata;

        assert_int_equal(res->class, OS_UPDATE_CLASS_RETRIABLE);
        assert_true(r->n_retries < ELEMENTSOF(r->retry_delays));
        r->retry_delays[r->n_retries++] = delay_usec;
}

static void on_done(OsCommand *c, const OsCommandResult *res, void *userdata) {
        Run *r = userdata;

        assert_false(r->done);
        r->done = true;
        r->result = *res;
        r->output = strdup(res->output);
        r->path = strdup(res->path);
        r->result.output = r->output;
        r->result.path = r->path;
        if (r->free_on_done)
                r->cmd = os_command_free(r->cmd); /* allowed inside on_done */
}

static const OsCommandCallbacks callbacks = {
        .on_spawn = on_spawn,
        .on_line = on_line,
        .on_retry = on_retry,
        .on_done = on_done,
};

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Run *r = userdata;
        uint64_t now = test_now_usec();

        if (r->last_tick > 0)
                r->max_gap = MAX(r->max_gap, now - r->last_tick);
        r->last_tick = now;
        r->n_ticks++;
        if (r->n_lines > 0 && !r->done && !streq_ptr(r->last_line, "last"))
                r->n_ticks_mid++;
        assert_true(sd_event_source_set_time_relative(s, MS(20)) >= 0);
        return 0;
}

static void run_init(Run *r) {
        *r = (Run) {};
        assert_int_equal(sd_event_new(&r->event), 0);
}

static void run_done(Run *r) {
        os_command_free(r->cmd);
        sd_event_source_disable_unref(r->tick);
        sd_event_unref(r->event);
        free(r->output);
        free(r->path);
        free(r->first_line);
        free(r->last_line);
}

static void run_start(Run *r, const char *command, char *const *args, const OsCommandOptions *o) {
        assert_int_equal(os_command_new(r->event, command, args, o, &callbacks, r, &r->cmd), 0);
        assert_int_equal(os_command_start(r->cmd), 0);
}

static void run_until_done(Run *r, uint64_t max_usec) {
        TEST_LOOP_UNTIL(r->event, r->done, max_usec);
}

static char *write_script(const char *name, const char *body) {
        char *path = NULL, *text = NULL;

        assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
        assert_true(asprintf(&text, "#!/bin/sh\n%s\n", body) > 0);
        assert_int_equal(write_file_atomic(path, text, strlen(text), 0755), 0);
        free(text);
        return path;
}

static char *tmp_path(const char *name) {
        char *path = NULL;

        assert_true(asprintf(&path, "%s/%s", tmpdir, name) > 0);
        (void) unlink(path);
        return path;
}

/* Gone, or a zombie waiting for a reaper that is not us: either way it no longer runs. */
static bool pid_gone(pid_t pid) {
        char path[64], buf[512];
        _cleanup_close_ int fd = -EBADF;
        const char *p;
        ssize_t n;

        (void) snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return true;
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static void assert_gone_within(pid_t pid, uint64_t max_usec) {
        uint64_t deadline = test_now_usec() + max_usec;

        while (!pid_gone(pid)) {
                if (test_now_usec() > deadline)
                        fail_msg("process %d still running", (int) pid);
                (void) usleep(10000);
        }
}

static pid_t read_pid_file(const char *path, uint64_t max_usec) {
        uint64_t deadline = test_now_usec() + max_usec;

        for (;;) {
                _cleanup_free_ char *s = NULL;

                if (read_full_file(path, 64, &s, NULL) == 0 && strchr(s, '\n'))
                        return (pid_t) atoi(s);
                assert_true(test_now_usec() < deadline);
                (void) usleep(10000);
        }
}

static void test_success(void **state) {
        _cleanup_free_ char *script = write_script("ok.sh", "echo hello\necho world >&2\nexit 0");
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, NULL);
        assert_true(os_command_is_running(r.cmd));
        assert_true(os_command_get_pid(r.cmd) > 0);
        run_until_done(&r, 10 * USEC_PER_SEC);

        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_int_equal(r.result.outcome.termination, OS_UPDATE_EXITED);
        assert_int_equal(r.result.outcome.code, 0);
        assert_int_equal(r.result.attempts, 1);
        assert_string_equal(r.result.output, "hello\nworld\n"); /* stdout and stderr, in order */
        assert_string_equal(r.result.path, script);
        assert_int_equal(r.n_lines, 2);
        assert_string_equal(r.first_line, "hello");
        assert_string_equal(r.last_line, "world");
        assert_int_equal(r.n_spawns, 1);
        assert_false(os_command_is_running(r.cmd));
        assert_int_equal(os_command_get_pid(r.cmd), 0);
        assert_int_equal(os_command_start(r.cmd), -EALREADY);
        run_done(&r);
}

static void test_args_and_path_lookup(void **state) {
        char *const args[] = { (char *) "[%s]", (char *) "a b", (char *) "$HOME", (char *) "", NULL };
        Run r;

        /* A bare name is looked up in the clean PATH; arguments reach it verbatim, no shell. */
        run_init(&r);
        run_start(&r, "printf", args, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_string_equal(r.result.output, "[a b][$HOME][]");
        assert_true(streq(r.result.path, "/usr/bin/printf") || streq(r.result.path, "/bin/printf"));
        run_done(&r);
}

static void test_clean_environment(void **state) {
        Run r;

        assert_int_equal(setenv("INPLACE_TEST_SECRET", "leak", 1), 0);
        run_init(&r);
        run_start(&r, "/usr/bin/env", NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_string_equal(r.result.output, "PATH=" OS_COMMAND_PATH_DEFAULT "\nLANG=C.UTF-8\n");
        run_done(&r);

        run_init(&r);
        run_start(&r, "/usr/bin/env", NULL,
                  &(OsCommandOptions) { .environment = (char *const[]) { (char *) "A=b", NULL } });
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_string_equal(r.result.output, "A=b\n");
        run_done(&r);
}

static void test_fds_stdin_cwd(void **state) {
        _cleanup_close_ int leak = open("/dev/null", O_RDONLY); /* deliberately no O_CLOEXEC */
        Run r;

        assert_true(leak >= 0);

        /* ls holds fd 3 for the directory it lists; nothing else of ours may show up. */
        run_init(&r);
        run_start(&r, "/bin/ls", (char *const[]) { (char *) "-1", (char *) "/proc/self/fd", NULL }, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_string_equal(r.result.output, "0\n1\n2\n3\n");
        run_done(&r);

        run_init(&r);
        run_start(&r, "/bin/readlink",
                  (char *const[]) { (char *) "/proc/self/fd/0", (char *) "/proc/self/cwd", NULL }, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_string_equal(r.result.output, "/dev/null\n/\n");
        run_done(&r);
}

static void test_own_process_group_and_signals(void **state) {
        /* Field 5 of stat is the process group. */
        _cleanup_free_ char *script = write_script("pg.sh",
                                                   "read -r pid comm state ppid pgrp rest < /proc/$$/stat\n"
                                                   "[ \"$pgrp\" = \"$$\" ] && echo leader");
        unsigned long long blocked, ignored;
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_string_equal(r.result.output, "leader\n");
        run_done(&r);

        /* grep itself is the spawned process here: it reports what it inherited from us. */
        run_init(&r);
        run_start(&r, "/bin/grep",
                  (char *const[]) { (char *) "-E", (char *) "^Sig(Blk|Ign)", (char *) "/proc/self/status",
                                    NULL },
                  NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(sscanf(r.result.output, "SigBlk:\t%llx\nSigIgn:\t%llx\n", &blocked, &ignored), 2);
        assert_int_equal(blocked, 0);
        /* Signals 1..31 at their defaults. glibc's posix_spawn leaves its two internal real-time
         * signals (32, 33) ignored in the child; programs that use them install handlers. */
        assert_int_equal(ignored & 0x7fffffffULL, 0);
        run_done(&r);
}

static void test_network_problems_retried_until_success(void **state) {
        _cleanup_free_ char *counter = tmp_path("counter");
        _cleanup_free_ char *script =
                write_script("net.sh",
                             "n=$(cat \"$1\" 2>/dev/null || echo 0)\nn=$((n+1))\necho $n > \"$1\"\n"
                             "if [ $n -lt 3 ]; then echo \"exit status 3: Network Problems\"; exit 3; fi\n"
                             "echo updated");
        OsCommandOptions o = {
                .timeout_usec = 10 * USEC_PER_SEC,
                .retry = { .initial_delay_usec = MS(100),
                           .max_delay_usec = MS(150),
                           .min_attempt_usec = MS(50) },
        };
        Run r;

        run_init(&r);
        run_start(&r, script, (char *const[]) { counter, NULL }, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);

        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_int_equal(r.result.attempts, 3);
        assert_int_equal(r.n_spawns, 3);
        assert_int_equal(r.n_retries, 2);
        assert_int_equal(r.retry_delays[0], MS(100));
        assert_int_equal(r.retry_delays[1], MS(150));
        assert_true(r.result.duration_usec >= MS(250));
        assert_string_equal(r.result.output, "updated\n"); /* the last attempt's output only */
        run_done(&r);
}

static void test_network_problems_until_budget(void **state) {
        _cleanup_free_ char *script = write_script("netalways.sh", "echo 'network problems'\nexit 3");
        OsCommandOptions o = {
                .timeout_usec = MS(1000),
                .retry = { .initial_delay_usec = MS(100),
                           .max_delay_usec = MS(200),
                           .min_attempt_usec = MS(100) },
        };
        _cleanup_free_ char *msg = NULL;
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);

        /* The budget ends the retries, not the command: still a retriable failure, no timeout. */
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_RETRIABLE);
        assert_false(r.result.outcome.timed_out);
        assert_string_equal(os_update_class_failure_code(r.result.class), "OSCommandFailed");
        assert_true(r.result.attempts >= 3);
        assert_int_equal(r.n_retries, r.result.attempts - 1);
        assert_true(r.result.duration_usec < MS(1000));
        assert_int_equal(os_update_failure_message(r.result.class, &r.result.outcome, r.result.path,
                                                   r.result.output, 20, 1024, o.timeout_usec, &msg),
                         0);
        assert_string_equal(msg, "retriable error detected: exit status 3, output: network problems\n");
        run_done(&r);
}

static void test_system_failure_is_terminal(void **state) {
        _cleanup_free_ char *script =
                write_script("sysfail.sh", "echo 'update: System Failure' >&2\nexit 2");
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_NON_RETRIABLE);
        assert_int_equal(r.result.outcome.code, 2);
        assert_int_equal(r.result.attempts, 1);
        assert_int_equal(r.n_retries, 0);
        assert_false(os_update_class_is_retriable(r.result.class));
        run_done(&r);
}

static void test_other_failure_is_terminal(void **state) {
        _cleanup_free_ char *script = write_script("other.sh", "echo 'disk on fire'\nkill -SEGV $$");
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_UNKNOWN);
        assert_int_equal(r.result.outcome.termination, OS_UPDATE_SIGNALED);
        assert_int_equal(r.result.outcome.code, SIGSEGV);
        assert_int_equal(r.result.attempts, 1);
        run_done(&r);
}

static void test_not_found(void **state) {
        Run r;

        run_init(&r);
        run_start(&r, "/nonexistent/update-os", NULL, NULL);
        assert_false(r.done); /* reported from the loop, not from start() */
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_UNKNOWN);
        if (r.result.outcome.termination == OS_UPDATE_EXITED)
                /* Under valgrind posix_spawn's vfork becomes a fork and the exec error can only
                 * show as the child's exit status 127. */
                assert_int_equal(r.result.outcome.code, 127);
        else {
                assert_int_equal(r.result.outcome.termination, OS_UPDATE_SPAWN_FAILED);
                assert_int_equal(r.result.outcome.code, -ENOENT);
        }
        run_done(&r);

        run_init(&r);
        run_start(&r, "no-such-update-command", NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.outcome.code, -ENOENT);
        assert_string_equal(r.result.path, "no-such-update-command");
        run_done(&r);
}

static void test_timeout_kills_process_group(void **state) {
        _cleanup_free_ char *main_pid = tmp_path("main.pid"), *bg_pid = tmp_path("bg.pid");
        _cleanup_free_ char *script = write_script(
                "hang.sh", "echo $$ > \"$1\"\nsleep 1000 &\necho $! > \"$2\"\necho waiting\nwait");
        OsCommandOptions o = { .timeout_usec = MS(1000), .kill_grace_usec = MS(500) };
        uint64_t t0 = test_now_usec();
        pid_t p1, p2;
        Run r;

        run_init(&r);
        run_start(&r, script, (char *const[]) { main_pid, bg_pid, NULL }, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);

        assert_int_equal(r.result.class, OS_UPDATE_CLASS_TIMEOUT);
        assert_true(r.result.outcome.timed_out);
        assert_int_equal(r.result.outcome.termination, OS_UPDATE_SIGNALED);
        assert_int_equal(r.result.outcome.code, SIGTERM);
        assert_string_equal(os_update_class_failure_code(r.result.class), "OSCommandTimeout");
        assert_string_equal(r.result.output, "waiting\n");
        assert_true(test_now_usec() - t0 >= MS(1000));
        assert_true(test_now_usec() - t0 < MS(3000));

        p1 = read_pid_file(main_pid, USEC_PER_SEC);
        p2 = read_pid_file(bg_pid, USEC_PER_SEC);
        assert_gone_within(p1, 2 * USEC_PER_SEC);
        assert_gone_within(p2, 2 * USEC_PER_SEC); /* the grandchild too */
        run_done(&r);
}

static void test_timeout_sigkill_after_grace(void **state) {
        _cleanup_free_ char *main_pid = tmp_path("main2.pid"), *bg_pid = tmp_path("bg2.pid");
        _cleanup_free_ char *script =
                write_script("stubborn.sh",
                             "trap '' TERM\necho $$ > \"$1\"\nsleep 1000 &\necho $! > \"$2\"\n"
                             "while :; do sleep 1; done");
        OsCommandOptions o = { .timeout_usec = MS(800), .kill_grace_usec = MS(400) };
        pid_t p1, p2;
        Run r;

        run_init(&r);
        run_start(&r, script, (char *const[]) { main_pid, bg_pid, NULL }, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);

        assert_int_equal(r.result.class, OS_UPDATE_CLASS_TIMEOUT);
        assert_int_equal(r.result.outcome.termination, OS_UPDATE_SIGNALED);
        assert_int_equal(r.result.outcome.code, SIGKILL);
        assert_true(r.result.duration_usec >= MS(1200));
        p1 = read_pid_file(main_pid, USEC_PER_SEC);
        p2 = read_pid_file(bg_pid, USEC_PER_SEC);
        assert_gone_within(p1, 2 * USEC_PER_SEC);
        assert_gone_within(p2, 2 * USEC_PER_SEC);
        run_done(&r);
}

static void test_big_output_capped_loop_responsive(void **state) {
        /* 20 x (512 KiB of 'x' + '\n') = 10485780 bytes, with short pauses in between. */
        _cleanup_free_ char *script = write_script(
                "big.sh",
                "echo first\ni=0\nwhile [ $i -lt 20 ]; do\n"
                "  head -c 524288 /dev/zero | tr '\\0' x\n  echo\n  sleep 0.05\n  i=$((i+1))\ndone\n"
                "echo last");
        const uint64_t total = 6 + 20 * (524288 + 1) + 5;
        Run r;

        run_init(&r);
        assert_true(sd_event_add_time_relative(r.event, &r.tick, CLOCK_MONOTONIC, MS(20), MS(1), on_tick,
                                               &r) >= 0);
        assert_true(sd_event_source_set_enabled(r.tick, SD_EVENT_ON) >= 0);
        run_start(&r, script, NULL, NULL);
        run_until_done(&r, 60 * USEC_PER_SEC);

        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_int_equal(r.result.output_bytes, total);
        assert_int_equal(r.result.output_dropped, total - 2 * 64 * 1024);
        assert_true(strlen(r.result.output) < 2 * 64 * 1024 + 64);
        assert_true(strncmp(r.result.output, "first\nxxxx", 10) == 0);
        assert_true(strlen(r.result.output) > 10);
        assert_string_equal(r.result.output + strlen(r.result.output) - 8, "xx\nlast\n");
        assert_non_null(strstr(r.result.output, "bytes omitted"));

        /* Every line reached on_line: 512 KiB lines come in 4 KiB pieces. */
        assert_string_equal(r.first_line, "first");
        assert_string_equal(r.last_line, "last");
        assert_int_equal(r.n_lines, 2 + 20 * (524288 / 4096));

        /* The loop kept turning: the 20 ms timer ran while the output was still coming. How long it
         * waited at most is a figure, not a verdict (a loaded CI machine under ASan stretches it). */
        assert_true(r.n_ticks_mid >= 5);
        print_message(
                "10 MiB output: %u ticks (%u during the output), max timer gap %llu ms, %llu ms total\n",
                r.n_ticks, r.n_ticks_mid, (unsigned long long) (r.max_gap / 1000),
                (unsigned long long) (r.result.duration_usec / 1000));
        run_done(&r);
}

static void test_line_limit(void **state) {
        _cleanup_free_ char *script =
                write_script("lines.sh", "i=0\nwhile [ $i -lt 250 ]; do echo line$i; i=$((i+1)); done");
        OsCommandOptions o = { .line_limit = 100 };
        Run r;

        run_init(&r);
        run_start(&r, script, NULL, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_int_equal(r.n_lines, 101);
        assert_string_equal(r.first_line, "line0");
        assert_string_equal(r.last_line, "[... 150 more lines not logged, see the output summary ...]");
        /* The summary still has everything (it is small). */
        assert_non_null(strstr(r.result.output, "line249\n"));
        run_done(&r);
}

static void test_background_child_holding_pipe(void **state) {
        _cleanup_free_ char *bg_pid = tmp_path("bg3.pid");
        _cleanup_free_ char *script = write_script("bg.sh", "sleep 30 &\necho $! > \"$1\"\necho started");
        OsCommandOptions o = { .drain_usec = MS(300) };
        pid_t p;
        Run r;

        run_init(&r);
        run_start(&r, script, (char *const[]) { bg_pid, NULL }, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        assert_string_equal(r.result.output, "started\n");
        assert_true(r.result.duration_usec >= MS(300));
        assert_true(r.result.duration_usec < MS(5000));

        /* Not killed by us (like upstream); the test started it, so the test ends it. */
        p = read_pid_file(bg_pid, USEC_PER_SEC);
        assert_false(pid_gone(p));
        assert_int_equal(kill(p, SIGKILL), 0);
        assert_gone_within(p, 2 * USEC_PER_SEC);
        run_done(&r);
}

static void test_free_while_running_kills(void **state) {
        _cleanup_free_ char *main_pid = tmp_path("main4.pid"), *bg_pid = tmp_path("bg4.pid");
        _cleanup_free_ char *script =
                write_script("hang2.sh", "echo $$ > \"$1\"\nsleep 1000 &\necho $! > \"$2\"\nwait");
        pid_t p1, p2;
        Run r;

        run_init(&r);
        run_start(&r, script, (char *const[]) { main_pid, bg_pid, NULL }, NULL);
        p1 = read_pid_file(main_pid, 5 * USEC_PER_SEC);
        p2 = read_pid_file(bg_pid, 5 * USEC_PER_SEC);
        r.cmd = os_command_free(r.cmd);
        assert_false(r.done); /* no callback from free */
        assert_gone_within(p1, 2 * USEC_PER_SEC);
        assert_gone_within(p2, 2 * USEC_PER_SEC);
        run_done(&r);
}

static void test_free_in_on_done(void **state) {
        Run r;

        run_init(&r);
        r.free_on_done = true;
        run_start(&r, "true", NULL, NULL);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_null(r.cmd);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_SUCCESS);
        /* The loop keeps working after the object vanished inside its own callback. */
        assert_true(sd_event_run(r.event, 0) >= 0);
        run_done(&r);
}

static void test_spawn_veto(void **state) {
        _cleanup_free_ char *script = write_script("netalways2.sh", "echo 'network problems'\nexit 3");
        OsCommandOptions o = {
                .retry = { .initial_delay_usec = MS(50),
                           .max_delay_usec = MS(50),
                           .min_attempt_usec = MS(10) },
        };
        Run r;

        /* A veto of the first attempt comes back from start(): nothing runs, no callback. */
        run_init(&r);
        r.veto_attempt = 1;
        assert_int_equal(os_command_new(r.event, script, NULL, &o, &callbacks, &r, &r.cmd), 0);
        assert_int_equal(os_command_start(r.cmd), -EIO);
        assert_false(os_command_is_running(r.cmd));
        assert_int_equal(sd_event_run(r.event, MS(100)), 0);
        assert_false(r.done);
        run_done(&r);

        /* A veto of a retry ends the run through on_done. */
        run_init(&r);
        r.veto_attempt = 2;
        run_start(&r, script, NULL, &o);
        run_until_done(&r, 10 * USEC_PER_SEC);
        assert_int_equal(r.result.attempts, 2);
        assert_int_equal(r.result.outcome.termination, OS_UPDATE_SPAWN_FAILED);
        assert_int_equal(r.result.outcome.code, -EIO);
        assert_int_equal(r.result.class, OS_UPDATE_CLASS_UNKNOWN);
        run_done(&r);
}

static void test_limits_and_preconditions(void **state) {
        char *args[OS_COMMAND_ARGS_MAX + 2];
        char big[OS_COMMAND_ARG_SIZE_MAX + 2];
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        OsCommand *c = NULL;
        sigset_t ss;

        assert_int_equal(sd_event_new(&e), 0);
        for (size_t i = 0; i < ELEMENTSOF(args) - 1; i++)
                args[i] = (char *) "x";
        args[ELEMENTSOF(args) - 1] = NULL;
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';

        assert_int_equal(os_command_new(e, "", NULL, NULL, NULL, NULL, &c), -EINVAL);
        assert_int_equal(os_command_new(e, NULL, NULL, NULL, NULL, NULL, &c), -EINVAL);
        assert_int_equal(os_command_new(e, "true", args, NULL, NULL, NULL, &c), -E2BIG);
        assert_int_equal(os_command_new(e, "true", (char *const[]) { big, NULL }, NULL, NULL, NULL, &c),
                         -E2BIG);
        assert_int_equal(os_command_new(e, big, NULL, NULL, NULL, NULL, &c), -E2BIG);
        assert_null(c);
        args[OS_COMMAND_ARGS_MAX] = NULL;
        assert_int_equal(os_command_new(e, "true", args, NULL, NULL, NULL, &c), 0);

        /* sd_event_add_child() needs SIGCHLD blocked; we say so before spawning anything. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        assert_int_equal(sigprocmask(SIG_UNBLOCK, &ss, NULL), 0);
        assert_int_equal(os_command_start(c), -EBUSY);
        assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        assert_false(os_command_is_running(c));
        os_command_free(c);
}

static void test_find_executable(void **state) {
        char *p = NULL;

        assert_int_equal(os_command_find_executable("sh", "/nonexistent:/bin", &p), 0);
        assert_string_equal(p, "/bin/sh");
        free(p);
        assert_int_equal(os_command_find_executable("./x", "/bin", &p), 0);
        assert_string_equal(p, "./x");
        free(p);
        p = NULL;
        /* Relative and empty entries are never searched. */
        assert_int_equal(chdir("/bin"), 0);
        assert_int_equal(os_command_find_executable("sh", ":.:bin", &p), -ENOENT);
        assert_int_equal(os_command_find_executable("sh", "", &p), -ENOENT);
        /* Directories and non-executables do not count. */
        assert_int_equal(os_command_find_executable("bin", "/usr", &p), -ENOENT);
        assert_int_equal(os_command_find_executable("passwd", "/etc", &p), -ENOENT);
        assert_null(p);
        assert_int_equal(chdir("/"), 0);
}

static int setup(void **state) {
        sigset_t ss;

        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
                return -1;
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state) {
        DIR *d = opendir(tmpdir);
        struct dirent *de;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        return rmdir(tmpdir);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_success),
                cmocka_unit_test(test_args_and_path_lookup),
                cmocka_unit_test(test_clean_environment),
                cmocka_unit_test(test_fds_stdin_cwd),
                cmocka_unit_test(test_own_process_group_and_signals),
                cmocka_unit_test(test_network_problems_retried_until_success),
                cmocka_unit_test(test_network_problems_until_budget),
                cmocka_unit_test(test_system_failure_is_terminal),
                cmocka_unit_test(test_other_failure_is_terminal),
                cmocka_unit_test(test_not_found),
                cmocka_unit_test(test_timeout_kills_process_group),
                cmocka_unit_test(test_timeout_sigkill_after_grace),
                cmocka_unit_test(test_big_output_capped_loop_responsive),
                cmocka_unit_test(test_line_limit),
                cmocka_unit_test(test_background_child_holding_pipe),
                cmocka_unit_test(test_free_while_running_kills),
                cmocka_unit_test(test_free_in_on_done),
                cmocka_unit_test(test_spawn_veto),
                cmocka_unit_test(test_limits_and_preconditions),
                cmocka_unit_test(test_find_executable),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
