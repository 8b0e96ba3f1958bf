/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
/* Without this, sd-journal.h turns sd_journal_sendv() into a macro that adds log.c's own CODE_FILE=,
 * CODE_LINE= and CODE_FUNC=: every entry had both locations, the caller's and this file's. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>
#include <time.h>

#include "util/log.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static LogTarget log_target = LOG_TARGET_AUTO;
static int log_max_level = LOG_INFO;
static char *log_transaction;
static char *log_phase;

static const char *const level_names[] = {
        [LOG_EMERG] = "emerg",     [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "err",
        [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

void log_set_target(LogTarget t) {
        log_target = t;
}

LogTarget log_get_target(void) {
        struct stat st;

        if (log_target != LOG_TARGET_AUTO)
                return log_target;
        /* Under systemd the journal socket exists; in a terminal or a test harness it usually
         * does not, and then stderr is the only place anyone will look. */
        return stat(JOURNAL_SOCKET, &st) == 0 && S_ISSOCK(st.st_mode) ? LOG_TARGET_JOURNAL :
                                                                        LOG_TARGET_STDERR;
}

void log_set_max_level(int level) {
        assert(level >= LOG_EMERG && level <= LOG_DEBUG);
        log_max_level = level;
}

int log_get_max_level(void) {
        return log_max_level;
}

int log_level_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(level_names); i++)
                if (streq(s, level_names[i]))
                        return (int) i;
        if (streq(s, "error"))
                return LOG_ERR;
        if (streq(s, "warn"))
                return LOG_WARNING;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
                return s[0] - '0';
        return -EINVAL;
}

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(log_level, int, level_names);

void log_set_transaction(const char *transaction, const char *phase) {
        /* Logging must not fail; on OOM the context is simply dropped. */
        (void) free_and_strdup(&log_transaction, transaction);
        (void) free_and_strdup(&log_phase, phase);
}

static void log_to_stderr(int level, const char *message_id, const char *msg) {
        struct timespec ts;
        struct tm tm;
        char stamp[32] = "";

        if (clock_gettime(CLOCK_REALTIME, &ts) == 0 && gmtime_r(&ts.tv_sec, &tm))
                (void) strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);

        fprintf(stderr, "%s.%03ld inplace-agent[%s]: %s", stamp, ts.tv_nsec / 1000000L,
                strempty(log_level_to_string(level)), msg);
        if (log_transaction)
                fprintf(stderr, " [tx=%s phase=%s]", log_transaction, strempty(log_phase));
        if (message_id && log_max_level >= LOG_DEBUG)
                fprintf(stderr, " [MESSAGE_ID=%s]", message_id);
        fputc('\n', stderr);
}

static void log_to_journal(int level, int error, const char *message_id, const char *file, int line,
                           const char *func, const char *msg) {
        char f_prio[32], f_line[32], f_errno[32];
        _cleanup_free_ char *f_msg = NULL, *f_file = NULL, *f_func = NULL, *f_tx = NULL, *f_phase = NULL,
                            *f_mid = NULL;
        struct iovec iov[12];
        size_t n = 0;

#define IOV_STR(s) (iov[n++] = (struct iovec) { .iov_base = (char *) (s), .iov_len = strlen(s) })
        if (asprintf(&f_msg, "MESSAGE=%s", msg) < 0)
                return;
        IOV_STR(f_msg);
        snprintf(f_prio, sizeof(f_prio), "PRIORITY=%i", level);
        IOV_STR(f_prio);
        IOV_STR("SYSLOG_IDENTIFIER=inplace-agent");
        /* meson compiles from the build directory: __FILE__ is "../agent/...". */
        while (strncmp(file, "../", 3) == 0)
                file += 3;
        if (asprintf(&f_file, "CODE_FILE=%s", file) >= 0)
                IOV_STR(f_file);
        snprintf(f_line, sizeof(f_line), "CODE_LINE=%i", line);
        IOV_STR(f_line);
        if (asprintf(&f_func, "CODE_FUNC=%s", func) >= 0)
                IOV_STR(f_func);
        if (error != 0) {
                snprintf(f_errno, sizeof(f_errno), "ERRNO=%i", abs(error));
                IOV_STR(f_errno);
        }
        if (log_transaction && asprintf(&f_tx, "INPLACE_TRANSACTION=%s", log_transaction) >= 0)
                IOV_STR(f_tx);
        if (log_phase && asprintf(&f_phase, "INPLACE_PHASE=%s", log_phase) >= 0)
                IOV_STR(f_phase);
        if (message_id && asprintf(&f_mid, "MESSAGE_ID=%s", message_id) >= 0)
                IOV_STR(f_mid);
#undef IOV_STR

        if (sd_journal_sendv(iov, (int) n) < 0)
                log_to_stderr(level, message_id, msg);
}

int log_internal(int level, int error, const char *message_id, const char *file, int line, const char *func,
                 const char *format, ...) {
        _cleanup_free_ char *msg = NULL;
        int saved_errno = errno;
        va_list ap;

        if (error != 0)
                error = -abs(error);
        if (level > log_max_level)
                return error;

        /* Make %m print the error we were given, not whatever errno happens to be. */
        errno = error != 0 ? -error : saved_errno;
        va_start(ap, format);
        if (vasprintf(&msg, format, ap) < 0)
                msg = NULL;
        va_end(ap);

        if (msg) {
                if (log_get_target() == LOG_TARGET_JOURNAL)
                        log_to_journal(level, error, message_id, file, line, func, msg);
                else
                        log_to_stderr(level, message_id, msg);
        }

        errno = saved_errno;
        return error;
}
