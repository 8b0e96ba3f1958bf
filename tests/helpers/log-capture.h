/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The agent's log lines of a stretch of a unit test, to count: between log_capture_start() and
 * log_capture_stop() util/log writes to stderr and stderr goes to a file; log_capture_stop() returns
 * what was written and echoes it, so a failing test still shows it. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "tests.h"
#include "util/fileio.h"
#include "util/log.h"

typedef struct LogCapture {
        int saved; /* the test's own stderr */
        char path[256];
} LogCapture;

/* The file is `dir`/log. */
static inline void log_capture_start(LogCapture *c, const char *dir) {
        int fd;

        assert_true((size_t) snprintf(c->path, sizeof(c->path), "%s/log", dir) < sizeof(c->path));
        fd = open(c->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        c->saved = dup(STDERR_FILENO);
        assert_true(fd >= 0 && c->saved >= 0);
        log_set_target(LOG_TARGET_STDERR);
        assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        close(fd);
}

/* Returns the lines written (owned), and removes the file. */
static inline char *log_capture_stop(LogCapture *c) {
        char *text = NULL;

        assert_int_equal(dup2(c->saved, STDERR_FILENO), STDERR_FILENO);
        close(c->saved);
        assert_int_equal(read_full_file(c->path, 1 << 20, &text, NULL), 0);
        (void) unlink(c->path);
        fputs(text, stderr);
        return text;
}

/* The lines of `text` at `level` ("warning", "err": util/log's names) that contain `needle`: a line
 * said twice counts twice, however differently the two put it around `needle`. */
static inline unsigned log_count_lines(const char *text, const char *level, const char *needle) {
        _cleanup_free_ char *marker = NULL;
        unsigned n = 0;

        assert_true(asprintf(&marker, "inplace-agent[%s]: ", level) > 0);
        for (const char *line = text; line && *line;) {
                const char *end = strchrnul(line, '\n');
                const char *m = strstr(line, marker), *hit = strstr(line, needle);

                if (m && m < end && hit && hit < end)
                        n++;
                line = *end ? end + 1 : NULL;
        }
        return n;
}
