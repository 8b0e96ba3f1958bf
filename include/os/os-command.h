/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The `command` OS backend: runs the OS extension's update command
 * (OSC status.inPlaceUpdates.osUpdate.{command,args}, docs/node-protocol.md §4.2 step 4) to completion, with
 * upstream's classification and retries inside one total time budget (osUpdate.timeout).
 *
 * Owns: the child process (its own process group), the pipe carrying its stdout+stderr, and
 * every event source (child, io, timers). Runs on the caller's sd_event loop and never blocks it;
 * SIGCHLD must be blocked process-wide before os_command_start() (sd_event_add_child requires it).
 * Does not log: lines of output go to on_line, results to the callbacks.
 *
 * The command is executed directly (posix_spawn, never a shell) with a clean environment, stdin
 * from /dev/null, working directory "/", every other fd closed, default signal dispositions and an
 * empty signal mask. A bare command name is looked up in the clean environment's PATH. When the
 * budget runs out the whole process group gets SIGTERM, then SIGKILL after kill_grace. After the
 * main process exits, output is read for up to `drain` more (a background child may still hold
 * the pipe); processes it left behind are not killed, as upstream does not kill them either. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "os/os-update-classify.h"
#include "util/macro.h"

/* Limits on what the OSC may ask us to run. */
#define OS_COMMAND_ARGS_MAX 256
#define OS_COMMAND_ARG_SIZE_MAX 4096

#define OS_COMMAND_TIMEOUT_DEFAULT (10 * 60 * USEC_PER_SEC)
#define OS_COMMAND_KILL_GRACE_DEFAULT (10 * USEC_PER_SEC)
#define OS_COMMAND_DRAIN_DEFAULT (2 * USEC_PER_SEC)
/* Lines handed to on_line per attempt; a command printing millions of lines must not flood the
 * journal. The output summary (head and tail) is kept regardless. */
#define OS_COMMAND_LINE_LIMIT_DEFAULT 10000
#define OS_COMMAND_PATH_DEFAULT "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct OsCommand OsCommand;

typedef struct OsCommandResult {
        OsUpdateOutcome outcome; /* of the last attempt */
        OsUpdateClass class;     /* of the last attempt */
        unsigned attempts;       /* attempts started, >= 1 */
        uint64_t duration_usec;  /* from the first start until now */
        const char *path;        /* borrowed: the executable actually run */
        const char *output;      /* borrowed: head/tail summary of the last attempt's output */
        uint64_t output_bytes;   /* everything the last attempt printed */
        uint64_t output_dropped; /* of which not in `output` */
} OsCommandResult;

typedef struct OsCommandCallbacks {
        /* Before every spawn (attempt counts from 1). This is where the caller persists "OS command
         * attempt N started" (docs/contract.md §7). A negative return aborts: from os_command_start() it is
         * returned; on a retry the run ends with outcome OS_UPDATE_SPAWN_FAILED and that code.
         * May be NULL. Must not free the OsCommand. */
        int (*on_spawn)(OsCommand *c, unsigned attempt, void *userdata);

        /* Each line of output (see output-capture.h), in order, with credentials redacted and a
         * private key's lines left out (output-redact.h), up to options.line_limit per attempt;
         * then one line "[... N more lines not logged, ...]" when the attempt ends.
         * May be NULL. Must not free. */
        void (*on_line)(OsCommand *c, const char *line, size_t size, void *userdata);

        /* A retriable failure that will be retried after delay_usec. May be NULL. Must not free. */
        void (*on_retry)(OsCommand *c, const OsCommandResult *r, uint64_t delay_usec, void *userdata);

        /* Exactly once per os_command_start() that returned 0, from the event loop, never from
         * within os_command_start(). The OsCommand may be freed inside; the result is valid only
         * during the call. */
        void (*on_done)(OsCommand *c, const OsCommandResult *r, void *userdata);
} OsCommandCallbacks;

typedef struct OsCommandOptions {
        uint64_t timeout_usec;     /* total budget over all attempts; 0: OS_COMMAND_TIMEOUT_DEFAULT */
        uint64_t kill_grace_usec;  /* SIGTERM -> SIGKILL; 0: default */
        uint64_t drain_usec;       /* read output after exit at most this long; 0: default */
        OsUpdateRetryPolicy retry; /* initial_delay_usec == 0: OS_UPDATE_RETRY_POLICY_DEFAULT */
        size_t output_head_max;    /* 0: OUTPUT_CAPTURE_HEAD_DEFAULT */
        size_t output_tail_max;    /* 0: OUTPUT_CAPTURE_TAIL_DEFAULT */
        uint64_t line_limit;       /* 0: OS_COMMAND_LINE_LIMIT_DEFAULT */
        char *const *environment;  /* borrowed, copied; NULL: PATH=default, LANG=C.UTF-8 */
} OsCommandOptions;

/* `command` and `args` (NULL-terminated, may be NULL) are copied. `options` and `callbacks` may be
 * NULL (defaults; no callbacks). -EINVAL for an empty command, -E2BIG beyond the limits above. */
int os_command_new(sd_event *event, const char *command, char *const *args, const OsCommandOptions *options,
                   const OsCommandCallbacks *callbacks, void *userdata, OsCommand **ret);

/* Kills a running command's process group (SIGKILL) and reaps it; no callback is called. */
OsCommand *os_command_free(OsCommand *c);
DEFINE_CLEANUP_FUNC(OsCommand, os_command_free);

/* Starts attempt 1 and arms the budget. -EALREADY if already started, -EBUSY if SIGCHLD is not
 * blocked, -errno if the setup (pipe, event sources) fails or on_spawn vetoes; then nothing runs
 * and on_done is not called. A
 * command that cannot be executed (ENOENT, EACCES) is not an error here: it is reported through
 * on_done like upstream, as a failed run. */
int os_command_start(OsCommand *c);

bool os_command_is_running(const OsCommand *c);
/* PID (= process group) of the running attempt, 0 if none. */
pid_t os_command_get_pid(const OsCommand *c);
unsigned os_command_get_attempt(const OsCommand *c);

/* Resolves a bare name in a ':'-separated search path like Go's exec.LookPath (a name with '/'
 * is used as is). -ENOENT if no executable regular file is found. */
int os_command_find_executable(const char *name, const char *search_path, char **ret);
