/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "os/os-command.h"
#include "os/output-capture.h"
#include "os/output-redact.h"
#include "util/event-util.h"
#include "util/strv.h"

/* One read() per dispatch: a command printing without pause then costs the loop at most one
 * 64 KiB copy between other events, so timers and the bus keep being served. */
#define READ_CHUNK (64U * 1024U)

typedef enum OsCommandState {
        OS_COMMAND_IDLE,
        OS_COMMAND_RUNNING, /* a child runs, or exited and we still drain its output */
        OS_COMMAND_KILLING, /* budget exhausted: SIGTERM sent, SIGKILL pending */
        OS_COMMAND_WAITING, /* between attempts */
        OS_COMMAND_DONE,
} OsCommandState;

struct OsCommand {
        sd_event *event;          /* ref held */
        char *command;            /* owned: as given by the OSC */
        char **argv;              /* owned */
        char **envp;              /* owned */
        char *path;               /* owned: resolved executable of the current attempt */
        OsCommandOptions options; /* .environment is NULL: envp owns the copy */
        OsCommandCallbacks callbacks;
        void *userdata; /* borrowed */

        OsCommandState state;
        unsigned attempt;
        uint64_t start_usec; /* CLOCK_MONOTONIC, first spawn */

        pid_t pid;     /* running attempt (= its process group), 0 if none */
        int output_fd; /* owned: read end of the output pipe, -EBADF if none */
        bool exited, eof;
        bool last_attempt;                          /* budget exhausted or spawning failed: do not retry */
        uint64_t lines_forwarded, lines_suppressed; /* of the current attempt */
        OsUpdateOutcome outcome;                    /* of the current/last attempt */
        OsUpdateClass class;                        /* of the last finished attempt */
        OsUpdateScan scan;
        OutputRedact redact;    /* of the current attempt's lines */
        OutputCapture *capture; /* owned */
        char *summary;          /* owned: output summary of the last finished attempt */
        uint64_t summary_bytes, summary_dropped;
        char *read_buf; /* owned: READ_CHUNK bytes */

        sd_event_source *child_source; /* owned */
        sd_event_source *io_source;    /* owned */
        sd_event_source *budget_timer; /* owned */
        sd_event_source *kill_timer;   /* owned */
        sd_event_source *drain_timer;  /* owned */
        sd_event_source *retry_timer;  /* owned */
        sd_event_source *defer_source; /* owned: reports a spawn failure from the loop */
};

static int strv_check_limits(char *const *l) {
        size_t n = strv_length(l);

        if (n > OS_COMMAND_ARGS_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n; i++)
                if (strlen(l[i]) > OS_COMMAND_ARG_SIZE_MAX)
                        return -E2BIG;
        return 0;
}

/* [first] + rest, NULL-terminated; first may be NULL (then just a copy of rest). */
static int strv_build(const char *first, char *const *rest, char ***ret) {
        size_t n = strv_length(rest), k = 0;
        _cleanup_strv_free_ char **l = NULL;

        l = calloc(n + 2, sizeof(char *));
        if (!l)
                return -ENOMEM;
        if (first) {
                l[k] = strdup(first);
                if (!l[k++])
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n && rest[i]; i++) {
                l[k] = strdup(rest[i]);
                if (!l[k++])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static const char *strv_env_get(char *const *env, const char *key) {
        size_t n = strlen(key);

        for (size_t i = 0; env && env[i]; i++)
                if (strncmp(env[i], key, n) == 0 && env[i][n] == '=')
                        return env[i] + n + 1;
        return NULL;
}

int os_command_find_executable(const char *name, const char *search_path, char **ret) {
        _cleanup_free_ char *copy = NULL;
        char *saveptr = NULL;

        assert(name);
        assert(ret);

        if (strchr(name, '/')) {
                char *s = strdup(name);
                if (!s)
                        return -ENOMEM;
                *ret = s;
                return 0;
        }

        copy = strdup(strempty(search_path));
        if (!copy)
                return -ENOMEM;
        for (char *dir = strtok_r(copy, ":", &saveptr); dir; dir = strtok_r(NULL, ":", &saveptr)) {
                _cleanup_free_ char *p = NULL;
                struct stat st;

                /* Relative entries ("" is ".") would make the result depend on the cwd; Go's
                 * LookPath refuses such results as well. */
                if (dir[0] != '/')
                        continue;
                if (asprintf(&p, "%s/%s", dir, name) < 0)
                        return -ENOMEM;
                if (stat(p, &st) < 0 || !S_ISREG(st.st_mode) || access(p, X_OK) < 0)
                        continue;
                *ret = TAKE_PTR(p);
                return 0;
        }
        return -ENOENT;
}

int os_command_new(sd_event *event, const char *command, char *const *args, const OsCommandOptions *options,
                   const OsCommandCallbacks *callbacks, void *userdata, OsCommand **ret) {
        _cleanup_(os_command_freep) OsCommand *c = NULL;
        static char *const default_env[] = {
                (char *) "PATH=" OS_COMMAND_PATH_DEFAULT,
                (char *) "LANG=C.UTF-8",
                NULL,
        };
        int r;

        assert(event);
        assert(ret);

        if (isempty(command))
                return -EINVAL;
        if (strlen(command) > OS_COMMAND_ARG_SIZE_MAX)
                return -E2BIG;
        r = strv_check_limits(args);
        if (r < 0)
                return r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->output_fd = -EBADF;
        c->event = sd_event_ref(event);
        c->userdata = userdata;
        if (options)
                c->options = *options;
        if (callbacks)
                c->callbacks = *callbacks;

        if (c->options.timeout_usec == 0)
                c->options.timeout_usec = OS_COMMAND_TIMEOUT_DEFAULT;
        if (c->options.kill_grace_usec == 0)
                c->options.kill_grace_usec = OS_COMMAND_KILL_GRACE_DEFAULT;
        if (c->options.drain_usec == 0)
                c->options.drain_usec = OS_COMMAND_DRAIN_DEFAULT;
        if (c->options.line_limit == 0)
                c->options.line_limit = OS_COMMAND_LINE_LIMIT_DEFAULT;
        if (c->options.retry.initial_delay_usec == 0)
                c->options.retry = OS_UPDATE_RETRY_POLICY_DEFAULT;

        c->command = strdup(command);
        if (!c->command)
                return -ENOMEM;
        r = strv_build(command, args, &c->argv);
        if (r < 0)
                return r;
        r = strv_build(NULL, c->options.environment ?: default_env, &c->envp);
        if (r < 0)
                return r;
        c->options.environment = NULL;

        r = output_capture_new(c->options.output_head_max, c->options.output_tail_max,
                               /* line_max= */ 0, &c->capture);
        if (r < 0)
                return r;
        c->read_buf = malloc(READ_CHUNK);
        if (!c->read_buf)
                return -ENOMEM;

        *ret = TAKE_PTR(c);
        return 0;
}

static void os_command_close_attempt(OsCommand *c) {
        c->io_source = sd_event_source_disable_unref(c->io_source);
        c->drain_timer = sd_event_source_disable_unref(c->drain_timer);
        c->kill_timer = sd_event_source_disable_unref(c->kill_timer);
        c->defer_source = sd_event_source_disable_unref(c->defer_source);
        closep(&c->output_fd);
        c->output_fd = -EBADF;
}

OsCommand *os_command_free(OsCommand *c) {
        if (!c)
                return NULL;

        /* The main process is not reaped yet (the child source still owns it), so its pid still
         * names the process group: killing the group cannot hit an unrelated process. */
        if (c->pid > 0)
                (void) kill(-c->pid, SIGKILL);
        /* With process ownership set, this SIGKILLs and reaps the main process if still there. */
        c->child_source = sd_event_source_disable_unref(c->child_source);
        os_command_close_attempt(c);
        c->budget_timer = sd_event_source_disable_unref(c->budget_timer);
        c->retry_timer = sd_event_source_disable_unref(c->retry_timer);

        output_capture_free(c->capture);
        free(c->summary);
        free(c->read_buf);
        free(c->path);
        strv_free(c->envp);
        strv_free(c->argv);
        free(c->command);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}

bool os_command_is_running(const OsCommand *c) {
        return c && c->state != OS_COMMAND_IDLE && c->state != OS_COMMAND_DONE;
}

pid_t os_command_get_pid(const OsCommand *c) {
        return c ? c->pid : 0;
}

unsigned os_command_get_attempt(const OsCommand *c) {
        return c ? c->attempt : 0;
}

static void os_command_make_result(OsCommand *c, OsCommandResult *ret) {
        *ret = (OsCommandResult) {
                .outcome = c->outcome,
                .class = c->class,
                .attempts = c->attempt,
                .duration_usec = event_now_usec(c->event) - c->start_usec,
                .path = c->path ?: c->command,
                .output = strempty(c->summary),
                .output_bytes = c->summary_bytes,
                .output_dropped = c->summary_dropped,
        };
}

static void os_command_finish(OsCommand *c) {
        OsCommandResult result;

        os_command_close_attempt(c);
        c->budget_timer = sd_event_source_disable_unref(c->budget_timer);
        c->retry_timer = sd_event_source_disable_unref(c->retry_timer);
        c->state = OS_COMMAND_DONE;

        os_command_make_result(c, &result);
        if (c->callbacks.on_done)
                c->callbacks.on_done(c, &result, c->userdata); /* may free c */
}

static int os_command_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void os_command_on_line(const char *line, size_t size, void *userdata) {
        OsCommand *c = userdata;
        _cleanup_free_ char *clean = NULL;

        if (!c->callbacks.on_line)
                return;
        if (c->lines_forwarded >= c->options.line_limit) {
                c->lines_suppressed++;
                return;
        }
        /* Lines end up in the journal: no credential goes there (os/output-redact.h). A private key's
         * lines are left out; out of memory, the line is. */
        if (output_redact_line(&c->redact, line, size, &clean) < 0 || !clean)
                return;
        c->lines_forwarded++;
        c->callbacks.on_line(c, clean, strlen(clean), c->userdata);
}

/* One closing line instead of the ones over the limit, so the journal says what it misses. */
static void os_command_report_suppressed(OsCommand *c) {
        char line[96];
        int n;

        if (c->lines_suppressed == 0 || !c->callbacks.on_line)
                return;
        n = snprintf(line, sizeof(line),
                     "[... %" PRIu64 " more lines not logged, see the output summary ...]",
                     c->lines_suppressed);
        c->callbacks.on_line(c, line, (size_t) n, c->userdata);
}

/* The current attempt is over (exited and drained, or never started): classify, then retry or
 * finish. */
static void os_command_attempt_done(OsCommand *c) {
        uint64_t delay, now;
        int r;

        output_capture_flush(c->capture, os_command_on_line, c);
        os_command_report_suppressed(c);
        os_command_close_attempt(c);

        free(c->summary);
        if (output_capture_summary(c->capture, &c->summary) < 0)
                c->summary = NULL; /* out of memory: report without output */
        c->summary_bytes = output_capture_total(c->capture);
        c->summary_dropped = output_capture_dropped(c->capture);
        c->class = os_update_classify(&c->outcome, &c->scan);

        now = event_now_usec(c->event);
        if (!c->last_attempt &&
            os_update_retry_next(&c->options.retry, c->class, c->attempt, now - c->start_usec,
                                 c->options.timeout_usec, &delay)) {
                r = sd_event_add_time_relative(c->event, &c->retry_timer, CLOCK_MONOTONIC, delay,
                                               /* accuracy= */ 0, os_command_on_retry_timer, c);
                if (r >= 0) {
                        OsCommandResult result;

                        c->state = OS_COMMAND_WAITING;
                        (void) sd_event_source_set_description(c->retry_timer, "os-command-retry");
                        os_command_make_result(c, &result);
                        if (c->callbacks.on_retry)
                                c->callbacks.on_retry(c, &result, delay, c->userdata);
                        return;
                }
                /* Cannot arm the timer: end with the retriable failure we have. */
        }

        os_command_finish(c);
}

static int os_command_on_drain_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);

        /* A leftover background process still holds the pipe: stop listening. */
        os_command_attempt_done(c);
        return 0;
}

static int os_command_on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);
        ssize_t n;

        n = read(fd, c->read_buf, READ_CHUNK);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n > 0) {
                os_update_scan_feed(&c->scan, c->read_buf, (size_t) n);
                output_capture_feed(c->capture, c->read_buf, (size_t) n, os_command_on_line, c);
                return 0;
        }

        /* EOF, or a read error that will not go away: either way the output is complete. */
        c->eof = true;
        c->io_source = sd_event_source_disable_unref(c->io_source);
        closep(&c->output_fd);
        c->output_fd = -EBADF;
        if (c->exited)
                os_command_attempt_done(c);
        return 0;
}

static int os_command_on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);
        int r;

        c->outcome.termination = si->si_code == CLD_EXITED ? OS_UPDATE_EXITED : OS_UPDATE_SIGNALED;
        c->outcome.code = si->si_status;
        c->outcome.core_dumped = si->si_code == CLD_DUMPED;

        /* Still a zombie here, so the group id is still ours: finish off whatever of the group
         * ignored SIGTERM. */
        if (c->state == OS_COMMAND_KILLING)
                (void) kill(-c->pid, SIGKILL);

        c->exited = true;
        c->pid = 0;
        c->kill_timer = sd_event_source_disable_unref(c->kill_timer);
        c->child_source = sd_event_source_disable_unref(c->child_source);

        if (c->eof) {
                os_command_attempt_done(c);
                return 0;
        }

        r = sd_event_add_time_relative(c->event, &c->drain_timer, CLOCK_MONOTONIC, c->options.drain_usec,
                                       /* accuracy= */ 0, os_command_on_drain_timer, c);
        if (r < 0)
                os_command_attempt_done(c);
        else
                (void) sd_event_source_set_description(c->drain_timer, "os-command-drain");
        return 0;
}

static int os_command_on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);

        if (c->pid > 0)
                (void) kill(-c->pid, SIGKILL);
        return 0;
}

static int os_command_on_budget(sd_event_source *s, uint64_t usec, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);
        int r;

        c->last_attempt = true;

        if (c->state == OS_COMMAND_WAITING) {
                os_command_finish(c); /* between attempts: the last verdict stands */
                return 0;
        }
        if (c->pid <= 0)
                return 0; /* exited in time, its output is being drained: verdict stands */

        c->state = OS_COMMAND_KILLING;
        c->outcome.timed_out = true;
        (void) kill(-c->pid, SIGTERM);
        r = sd_event_add_time_relative(c->event, &c->kill_timer, CLOCK_MONOTONIC, c->options.kill_grace_usec,
                                       /* accuracy= */ 0, os_command_on_kill_timer, c);
        if (r < 0)
                (void) kill(-c->pid, SIGKILL);
        else
                (void) sd_event_source_set_description(c->kill_timer, "os-command-kill");
        return 0;
}

static int os_command_on_defer(sd_event_source *s, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);

        os_command_attempt_done(c);
        return 0;
}

/* Upstream reports a command that cannot be started like any other failed run; so do we, from
 * the loop, so that on_done never runs inside os_command_start(). */
static int os_command_spawn_failed(OsCommand *c, int error) {
        int r;

        c->outcome = (OsUpdateOutcome) { .termination = OS_UPDATE_SPAWN_FAILED, .code = error };
        c->exited = c->eof = true;
        r = sd_event_add_defer(c->event, &c->defer_source, os_command_on_defer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->defer_source, "os-command-spawn-failed");
        c->state = OS_COMMAND_RUNNING;
        return 0;
}

/* posix_spawn rather than fork+exec: the kernel's vfork semantics keep it cheap in a large
 * process, exec errors come back synchronously, and every attribute the child needs is declared
 * rather than coded between fork and exec. Returns a positive errno like posix_spawn. */
static int os_command_posix_spawn(OsCommand *c, int output_fd, pid_t *ret_pid) {
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t empty, all;
        int r;

        (void) sigemptyset(&empty);
        (void) sigfillset(&all);
        (void) sigdelset(&all, SIGKILL);
        (void) sigdelset(&all, SIGSTOP);

        r = posix_spawnattr_init(&attr);
        if (r != 0)
                return r;
        r = posix_spawn_file_actions_init(&fa);
        if (r != 0) {
                (void) posix_spawnattr_destroy(&attr);
                return r;
        }

        /* Own process group, so that a timeout can kill everything the command started; the loop
         * blocks SIGCHLD/SIGTERM and may ignore SIGPIPE, which the command must not inherit. */
        r = posix_spawnattr_setflags(&attr,
                                     POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (r == 0)
                r = posix_spawnattr_setpgroup(&attr, 0);
        if (r == 0)
                r = posix_spawnattr_setsigmask(&attr, &empty);
        if (r == 0)
                r = posix_spawnattr_setsigdefault(&attr, &all);

        if (r == 0)
                r = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, output_fd, STDOUT_FILENO);
        if (r == 0)
                r = posix_spawn_file_actions_adddup2(&fa, output_fd, STDERR_FILENO);
        if (r == 0)
                r = posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
        if (r == 0)
                r = posix_spawn_file_actions_addchdir_np(&fa, "/");

        if (r == 0)
                r = posix_spawn(ret_pid, c->path, &fa, &attr, c->argv, c->envp);

        (void) posix_spawn_file_actions_destroy(&fa);
        (void) posix_spawnattr_destroy(&attr);
        return r;
}

static int os_command_spawn(OsCommand *c) {
        _cleanup_close_ int rfd = -EBADF, wfd = -EBADF;
        int fds[2], r;
        pid_t pid;

        c->exited = c->eof = false;
        c->lines_forwarded = c->lines_suppressed = 0;
        c->outcome = (OsUpdateOutcome) {};
        c->scan = (OsUpdateScan) {};
        c->redact = (OutputRedact) {};
        output_capture_reset(c->capture);

        free(c->path);
        c->path = NULL;
        r = os_command_find_executable(c->command, strempty(strv_env_get(c->envp, "PATH")), &c->path);
        if (r == -ENOENT)
                return os_command_spawn_failed(c, r);
        if (r < 0)
                return r;

        if (pipe2(fds, O_CLOEXEC) < 0)
                return -errno;
        rfd = fds[0];
        wfd = fds[1];
        if (fcntl(rfd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;

        r = os_command_posix_spawn(c, wfd, &pid);
        if (r != 0)
                return os_command_spawn_failed(c, -r);
        closep(&wfd);
        wfd = -EBADF;

        r = sd_event_add_child(c->event, &c->child_source, pid, WEXITED, os_command_on_child, c);
        if (r < 0) {
                /* Nobody would reap it: do it here, it dies at once. */
                (void) kill(-pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        c->pid = pid;
        (void) sd_event_source_set_description(c->child_source, "os-command-child");
        (void) sd_event_source_set_child_process_own(c->child_source, true);

        r = sd_event_add_io(c->event, &c->io_source, rfd, EPOLLIN, os_command_on_output, c);
        if (r < 0) {
                (void) kill(-pid, SIGKILL);
                c->pid = 0;
                c->child_source = sd_event_source_disable_unref(c->child_source);
                return r;
        }
        (void) sd_event_source_set_description(c->io_source, "os-command-output");
        c->output_fd = TAKE_FD(rfd);
        c->state = OS_COMMAND_RUNNING;
        return 0;
}

static int os_command_begin_attempt(OsCommand *c) {
        int r;

        c->attempt++;
        if (c->callbacks.on_spawn) {
                r = c->callbacks.on_spawn(c, c->attempt, c->userdata);
                if (r < 0)
                        return r;
        }
        return os_command_spawn(c);
}

static int os_command_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        OsCommand *c = ASSERT_PTR(userdata);
        int r;

        c->retry_timer = sd_event_source_disable_unref(c->retry_timer);
        r = os_command_begin_attempt(c);
        if (r < 0) {
                /* The caller vetoed or we could not set up: end the run, reported like a command
                 * that could not be started. */
                c->outcome = (OsUpdateOutcome) { .termination = OS_UPDATE_SPAWN_FAILED, .code = r };
                c->scan = (OsUpdateScan) {};
                output_capture_reset(c->capture);
                c->last_attempt = true;
                c->state = OS_COMMAND_RUNNING;
                os_command_attempt_done(c);
        }
        return 0;
}

static bool sigchld_blocked(void) {
        sigset_t ss;

        return sigprocmask(SIG_SETMASK, NULL, &ss) >= 0 && sigismember(&ss, SIGCHLD) == 1;
}

int os_command_start(OsCommand *c) {
        int r;

        assert(c);

        if (c->state != OS_COMMAND_IDLE)
                return -EALREADY;
        if (!sigchld_blocked())
                return -EBUSY;

        c->start_usec = event_now_usec(c->event);
        r = sd_event_add_time(c->event, &c->budget_timer, CLOCK_MONOTONIC,
                              c->start_usec + c->options.timeout_usec, /* accuracy= */ 0,
                              os_command_on_budget, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->budget_timer, "os-command-budget");

        r = os_command_begin_attempt(c);
        if (r < 0) {
                c->budget_timer = sd_event_source_disable_unref(c->budget_timer);
                c->attempt = 0;
                c->state = OS_COMMAND_IDLE;
                return r;
        }
        return 0;
}
