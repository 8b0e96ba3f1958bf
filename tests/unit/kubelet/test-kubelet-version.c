/* SPDX-License-Identifier: Apache-2.0 */
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include "kubelet/kubelet-version.h"
#include "test-loop.h"
#include "tests.h"
#include "util/fileio.h"

typedef struct Ctx {
        sd_event *event;
        char dir[64];
        bool done;
        int error;
        char version[64];
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));
        sigset_t ss;

        assert_non_null(c);
        /* sd-event child sources need SIGCHLD blocked, as main.c does. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        assert_int_equal(sigprocmask(SIG_BLOCK, &ss, NULL), 0);
        assert_int_equal(sd_event_new(&c->event), 0);
        strcpy(c->dir, "/tmp/test-kversion-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        sd_event_unref(c->event);
        free(c);
        return 0;
}

static void on_done(KubeletVersionProbe *p, int error, const char *version, void *userdata) {
        Ctx *c = userdata;

        c->done = true;
        c->error = error;
        snprintf(c->version, sizeof(c->version), "%s", strempty(version));
}

static int probe(Ctx *c, const char *script, uint64_t timeout_usec) {
        _cleanup_(kubelet_version_probe_freep) KubeletVersionProbe *p = NULL;
        char path[128];
        int r;

        snprintf(path, sizeof(path), "%s/kubelet", c->dir);
        if (script)
                assert_int_equal(write_file_atomic(path, script, strlen(script), 0755), 0);
        c->done = false;
        r = kubelet_version_probe_start(c->event, path, timeout_usec, on_done, c, &p);
        if (r < 0)
                return r;
        assert_false(c->done);
        TEST_LOOP_UNTIL(c->event, c->done, 50 * USEC_PER_SEC);
        return c->error;
}

static void test_probe(void **state) {
        Ctx *c = *state;

        assert_int_equal(probe(c, "#!/bin/sh\n[ \"$1\" = --version ] && echo 'Kubernetes v1.30.9'\n", 0), 0);
        assert_string_equal(c->version, "1.30.9");
        assert_int_equal(probe(c, "#!/bin/sh\necho 'Kubernetes v1.30.9'\nexit 3\n", 0), -ENOEXEC);
        assert_int_equal(probe(c, "#!/bin/sh\necho 'something else'\n", 0), -EBADMSG);
        assert_string_equal(c->version, "");
        assert_int_equal(probe(c, "#!/bin/sh\nexec sleep 30\n", 200 * USEC_PER_MSEC), -ETIMEDOUT);
        assert_int_equal(probe(c, "not an executable format\n", 0), -ENOEXEC);
}

static void test_missing_binary(void **state) {
        Ctx *c = *state;

        assert_int_equal(probe(c, NULL, 0), -ENOENT);
}

static void test_free_kills(void **state) {
        Ctx *c = *state;
        KubeletVersionProbe *p = NULL;
        char path[128];

        snprintf(path, sizeof(path), "%s/kubelet", c->dir);
        assert_int_equal(write_file_atomic(path, "#!/bin/sh\nexec sleep 30\n", 24, 0755), 0);
        assert_int_equal(kubelet_version_probe_start(c->event, path, 0, on_done, c, &p), 0);
        assert_null(kubelet_version_probe_free(p));
        TEST_LOOP_NOT(c->event, c->done, 30 * USEC_PER_MSEC);
}

/* The output of --version, parsed into a store version. */
static void test_version_from_output(void **state) {
        _cleanup_free_ char *v = NULL;
        char *x = NULL;

        assert_int_equal(kubelet_version_from_output("Kubernetes v1.31.2\n", &v), 0);
        assert_string_equal(v, "1.31.2");
        assert_int_equal(kubelet_version_from_output("kubelet version 1", &x), -EBADMSG);
        assert_int_equal(kubelet_version_from_output("Kubernetes v../../x", &x), -EBADMSG);
        assert_int_equal(kubelet_version_from_output("Kubernetes vrc1", &x), -EBADMSG);
        assert_null(x);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_version_from_output),
                cmocka_unit_test_setup_teardown(test_probe, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missing_binary, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_kills, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
