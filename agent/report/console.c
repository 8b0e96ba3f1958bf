/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report/console.h"

/* "<3>" is LOG_ERR: err reaches the console of a "quiet" boot (console_loglevel 4) and passes
 * journald's MaxLevelKMsg=notice. */
#define CONSOLE_PRIORITY "<3>"

struct Console {
        char *path; /* owned; NULL: standard output */
};

int console_new(const char *path, Console **ret) {
        _cleanup_(console_freep) Console *c = NULL;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (!isempty(path) && !(c->path = strdup(path)))
                return -ENOMEM;
        *ret = TAKE_PTR(c);
        return 0;
}

Console *console_free(Console *c) {
        if (!c)
                return NULL;
        free(c->path);
        free(c);
        return NULL;
}

static int write_stdout(const char *line, size_t n) {
        struct stat st;
        ssize_t k;

        /* journald's stream socket: never wait for it. A file or a terminal takes a line at once. */
        if (fstat(STDOUT_FILENO, &st) >= 0 && S_ISSOCK(st.st_mode))
                k = send(STDOUT_FILENO, line, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        else
                k = write(STDOUT_FILENO, line, n);
        if (k < 0)
                return -errno;
        return (size_t) k == n ? 0 : -EIO;
}

static int write_path(const char *path, const char *line, size_t n) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        ssize_t k;

        if (fd < 0)
                return -errno;
        k = write(fd, line, n);
        if (k < 0)
                return -errno;
        return (size_t) k == n ? 0 : -EIO;
}

int console_write(Console *c, const char *text) {
        _cleanup_free_ char *line = NULL;
        int n;

        assert(c);
        assert(text);

        n = asprintf(&line, CONSOLE_PRIORITY "%s%s\n", c->path ? CONSOLE_PREFIX : "", text);
        if (n < 0)
                return -ENOMEM;
        for (char *p = line; p < line + n - 1; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
        return c->path ? write_path(c->path, line, (size_t) n) : write_stdout(line, (size_t) n);
}
