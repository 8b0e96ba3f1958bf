/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "kubelet/kubelet-version.h"
#include "oci/file-store.h"

#define OUTPUT_MAX 4096

struct KubeletVersionProbe {
        sd_event_source *child; /* owned: owns the process too (killed when freed) */
        sd_event_source *timer; /* owned */
        int out_fd;             /* owned: read end of the child's stdout */
        bool timed_out;
        KubeletVersionDone done;
        void *userdata; /* borrowed */
};

int kubelet_version_from_output(const char *output, char **ret) {
        const char *p;
        size_t n;
        char *v;

        assert(ret);

        if (!output || strncmp(output, "Kubernetes ", 11) != 0)
                return -EBADMSG;
        p = output + 11;
        if (*p == 'v')
                p++;
        n = strcspn(p, " \t\r\n");
        v = strndup(p, n);
        if (!v)
                return -ENOMEM;
        if (!file_store_version_is_valid(v) || v[0] < '0' || v[0] > '9') {
                free(v);
                return -EBADMSG;
        }
        *ret = v;
        return 0;
}

KubeletVersionProbe *kubelet_version_probe_free(KubeletVersionProbe *p) {
        if (!p)
                return NULL;
        sd_event_source_disable_unref(p->child);
        sd_event_source_disable_unref(p->timer);
        if (p->out_fd >= 0)
                (void) close(p->out_fd);
        free(p);
        return NULL;
}

static int probe_on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeletVersionProbe *p = userdata;

        /* The child source reports the exit caused by this and ends the probe. */
        p->timed_out = true;
        return sd_event_source_send_child_signal(p->child, SIGKILL, NULL, 0);
}

static int probe_on_exit(sd_event_source *s, const siginfo_t *si, void *userdata) {
        KubeletVersionProbe *p = userdata;
        _cleanup_free_ char *version = NULL;
        char buf[OUTPUT_MAX + 1];
        ssize_t n;
        int r;

        /* The output is tiny and the pipe holds 64 KiB: it is all there once the child exited. */
        n = read(p->out_fd, buf, OUTPUT_MAX);
        buf[n > 0 ? n : 0] = '\0';

        if (p->timed_out)
                r = -ETIMEDOUT;
        else if (si->si_code != CLD_EXITED)
                r = -ECHILD;
        else if (si->si_status != 0)
                r = -ENOEXEC;
        else
                r = kubelet_version_from_output(buf, &version);

        p->timer = sd_event_source_disable_unref(p->timer);
        p->done(p, r < 0 ? r : 0, version, p->userdata); /* may free p */
        return 0;
}

static int spawn(const char *binary, int out_fd, pid_t *ret) {
        char *const argv[] = { (char *) binary, (char *) "--version", NULL };
        char *const envp[] = { (char *) "PATH=/usr/sbin:/usr/bin:/sbin:/bin", (char *) "LANG=C", NULL };
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none;
        int r;

        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        if (posix_spawnattr_init(&attr) != 0) {
                posix_spawn_file_actions_destroy(&fa);
                return -ENOMEM;
        }
        /* The child must not inherit our blocked SIGCHLD/SIGTERM mask. */
        sigemptyset(&none);
        r = -posix_spawnattr_setsigmask(&attr, &none);
        if (r >= 0)
                r = -posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
        if (r >= 0)
                r = -posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
        if (r >= 0)
                r = -posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
        if (r >= 0)
                r = -posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
        if (r >= 0)
                r = -posix_spawn(ret, binary, &fa, &attr, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        return r;
}

int kubelet_version_probe_start(sd_event *event, const char *binary, uint64_t timeout_usec,
                                KubeletVersionDone done, void *userdata, KubeletVersionProbe **ret) {
        _cleanup_(kubelet_version_probe_freep) KubeletVersionProbe *p = NULL;
        _cleanup_close_ int wr = -EBADF;
        int pipefd[2];
        pid_t pid;
        int r;

        assert(event);
        assert(binary);
        assert(done);
        assert(ret);

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->out_fd = -EBADF;
        p->done = done;
        p->userdata = userdata;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        p->out_fd = pipefd[0];
        wr = pipefd[1];
        /* Only our end is non-blocking: the child writes as usual. */
        if (fcntl(p->out_fd, F_SETFL, O_NONBLOCK) < 0)
                return -errno;

        r = spawn(binary, wr, &pid);
        if (r < 0)
                return r;
        r = sd_event_add_child(event, &p->child, pid, WEXITED, probe_on_exit, p);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        (void) sd_event_source_set_child_process_own(p->child, true);
        (void) sd_event_source_set_description(p->child, "kubelet-version");
        r = sd_event_add_time_relative(event, &p->timer, CLOCK_MONOTONIC,
                                       timeout_usec ? timeout_usec : KUBELET_VERSION_TIMEOUT_DEFAULT_USEC, 0,
                                       probe_on_timeout, p);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(p);
        return 0;
}
