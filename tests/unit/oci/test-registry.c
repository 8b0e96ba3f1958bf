/* SPDX-License-Identifier: Apache-2.0 */
/* The registry client against the canned-response server (plain HTTP, reached as a mirror; the
 * upstream is a closed port). The real registry, TLS, auth and resume are covered by the kubelet-pull
 * integration test; this pins the retry and verification decisions. */
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "fake-http.h"
#include "oci/registry.h"
#include "tests.h"

#define CONFIG_DIGEST "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
/* sha256("hello") */
#define HELLO_DIGEST "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

static const char manifest[] =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" CONFIG_DIGEST "\",\"size\":2},"
        "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" HELLO_DIGEST "\",\"size\":5}]}";

typedef struct Ctx {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        RegistryClient *client;
        OciRef *ref;
        char dir[64];
        char mirror_url[64];
        bool done;
        int error;
        ArtifactFailure failure;
        char message[1024];
        unsigned n_layers;
        char blob_path[256];
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));
        RegistryMirror mirror = { .host = (char *) "reg.test", .url = c->mirror_url };
        char blobs[128];

        assert_non_null(c);
        assert_int_equal(sd_event_new(&c->event), 0);
        assert_int_equal(fake_http_new(c->event, &c->fake), 0);
        assert_int_equal(http_new(c->event, &c->http), 0);
        strcpy(c->dir, "/tmp/test-registry-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(blobs, sizeof(blobs), "%s/blobs", c->dir);
        snprintf(c->mirror_url, sizeof(c->mirror_url), "http://127.0.0.1:%u/", fake_http_port(c->fake));
        assert_int_equal(registry_client_new(c->event, c->http,
                                             &(RegistryOptions) { .mirrors = &mirror, .n_mirrors = 1, .blob_directory = blobs,
                                                                  .max_attempts = 3, .retry_base_usec = 10 * USEC_PER_MSEC,
                                                                  .min_free_bytes = 1, .stall_usec = USEC_PER_SEC },
                                             &c->client), 0);
        /* The upstream of reg.test is https://reg.test: never reached while the mirror answers. */
        assert_int_equal(oci_ref_parse("reg.test/kube/kubelet:v1.31.2", &c->ref), 0);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;
        char cmd[128];

        registry_client_free(c->client);
        http_free(c->http);
        fake_http_free(c->fake);
        oci_ref_free(c->ref);
        sd_event_unref(c->event);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

static void on_done(RegistryOp *op, const RegistryResult *res, void *userdata) {
        Ctx *c = userdata;

        registry_op_free(op);           /* allowed, and res stays readable */
        c->done = true;
        c->error = res->error;
        c->failure = res->failure;
        snprintf(c->message, sizeof(c->message), "%s", strempty(res->message));
        c->n_layers = res->manifest ? (unsigned) res->manifest->n_layers : 0;
        snprintf(c->blob_path, sizeof(c->blob_path), "%s", strempty(res->blob_path));
}

static void run(Ctx *c) {
        for (unsigned i = 0; i < 3000 && !c->done; i++)
                assert_true(sd_event_run(c->event, 100 * USEC_PER_MSEC) >= 0);
        assert_true(c->done);
}

static void push(Ctx *c, int status, const char *headers, const char *body) {
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = status, .headers = headers, .body = body }), 0);
}

static void test_retry_then_success(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;

        push(c, 503, NULL, "busy");
        push(c, 200, "Content-Type: application/vnd.oci.image.manifest.v1+json\r\n", manifest);
        assert_int_equal(registry_resolve(c->client, c->ref, NULL, "amd64", NULL, on_done, c, &op), 0);
        assert_false(c->done);
        run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(c->n_layers, 1);
        assert_int_equal(fake_http_requests(c->fake), 2);
        assert_non_null(strstr(fake_http_last_request(c->fake), "GET /v2/kube/kubelet/manifests/v1.31.2"));
        assert_non_null(strstr(fake_http_last_request(c->fake), "application/vnd.oci.image.index.v1+json"));
}

static void test_retry_after_is_honoured(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;
        struct timespec t0, t1;

        push(c, 429, "Retry-After: 1\r\n", "slow down");
        push(c, 200, NULL, manifest);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(registry_resolve(c->client, c->ref, NULL, "amd64", NULL, on_done, c, &op), 0);
        run(c);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_int_equal(c->error, 0);
        assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 950);
}

static void test_tag_digest_header_mismatch(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;

        /* The registry vouches for another digest than what it sent: refused at the mirror; the
         * upstream (https://reg.test) cannot be reached either, so the op fails. */
        push(c, 200, "Docker-Content-Digest: " CONFIG_DIGEST "\r\n", manifest);
        assert_int_equal(registry_resolve(c->client, c->ref, NULL, "amd64", NULL, on_done, c, &op), 0);
        run(c);
        assert_true(c->error < 0);
        assert_int_equal(fake_http_requests(c->fake), 1);     /* a mismatch is not retried at the same place */
}

static void test_blob_verified_and_oversized(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip", .size = 5 };
        char partial[256];
        struct stat st;

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        push(c, 200, NULL, "hello");
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, on_done, c, &op), 0);
        run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(stat(c->blob_path, &st), 0);
        assert_int_equal(st.st_size, 5);

        /* Already there: no request at all. */
        c->done = false;
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, on_done, c, &op), 0);
        run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(fake_http_requests(c->fake), 1);

        /* More bytes than the descriptor says: aborted while streaming and nothing of it kept. (The op
         * then falls back to the unreachable upstream, whose failure is the one reported.) */
        assert_int_equal(unlink(c->blob_path), 0);
        c->done = false;
        push(c, 200, NULL, "hello, and a lot more than five bytes");
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, on_done, c, &op), 0);
        run(c);
        assert_true(c->error < 0);
        assert_int_equal(fake_http_requests(c->fake), 2);
        snprintf(partial, sizeof(partial), "%s/blobs/%s.partial", c->dir, &HELLO_DIGEST[7]);
        assert_true(stat(partial, &st) < 0 || st.st_size == 0);
        partial[strlen(partial) - strlen(".partial")] = '\0';
        assert_int_equal(access(partial, F_OK), -1);          /* never under its final name */
}

/* Issue 16: a blob that trickles in below the floor rate fails each attempt after the window, with a
 * retriable error naming the blob and the rate, and what arrived is kept for the resume. */
static void test_blob_stall(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip", .size = 5 };
        char partial[256], want[512];
        struct stat st;
        uint64_t t0;

        assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t0) >= 0);

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 200, .body = "hello", .stall = true,
                                                                   .stall_after = 2 }), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 206,
                                                                           .headers = "Content-Range: bytes 2-4/5\r\n",
                                                                           .body = "llo", .stall = true }), 0);
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, on_done, c, &op), 0);
        run(c);
        assert_int_equal(fake_http_requests(c->fake), 3);              /* max_attempts on the mirror */
        {
                uint64_t t1;
                assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t1) >= 0);
                assert_true(t1 - t0 >= 3 * USEC_PER_SEC);      /* each attempt waited out the window */
        }
        assert_int_equal(c->failure, ARTIFACT_FAILURE_UNAVAILABLE);     /* retriable */
        snprintf(want, sizeof(want), "blob " HELLO_DIGEST " from http://127.0.0.1:%u/v2/kube/kubelet/blobs/" HELLO_DIGEST
                 " stalled: less than 1024 bytes/s for 1 s, 2 of 5 bytes on disk, kept to resume",
                 fake_http_port(c->fake));
        if (!strstr(c->message, want))
                fail_msg("message: %s", c->message);
        snprintf(partial, sizeof(partial), "%s/blobs/%s.partial", c->dir, &HELLO_DIGEST[7]);
        assert_int_equal(stat(partial, &st), 0);
        assert_int_equal(st.st_size, 2);
}

/* Issue 16: the connection drops after the blob's last byte (a Content-Length longer than the body
 * looks the same to the client): the bytes are all there and verified, so they are taken as they
 * are, with no second request for bytes past the end. */
static void test_blob_complete_before_error(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip", .size = 5 };
        struct stat st;

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        assert_int_equal(fake_http_push(c->fake, &(FakeResponse) { .status = 200, .body = "hello", .chunked = true,
                                                                   .close_early = true }), 0);
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, on_done, c, &op), 0);
        run(c);
        if (c->error < 0)
                fail_msg("message: %s", c->message);
        assert_int_equal(fake_http_requests(c->fake), 1);
        assert_int_equal(stat(c->blob_path, &st), 0);
        assert_int_equal(st.st_size, 5);
}

static void test_free_cancels(void **state) {
        Ctx *c = *state;
        RegistryOp *op = NULL;

        push(c, 200, NULL, manifest);
        assert_int_equal(registry_resolve(c->client, c->ref, NULL, "amd64", NULL, on_done, c, &op), 0);
        assert_int_equal(sd_event_run(c->event, 10 * USEC_PER_MSEC) >= 0, 1);
        assert_null(registry_op_free(op));
        for (int i = 0; i < 5; i++)
                assert_true(sd_event_run(c->event, 10 * USEC_PER_MSEC) >= 0);
        assert_false(c->done);
        assert_int_equal(http_active(c->http), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_retry_then_success, setup, teardown),
                cmocka_unit_test_setup_teardown(test_retry_after_is_honoured, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tag_digest_header_mismatch, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blob_verified_and_oversized, setup, teardown),
                cmocka_unit_test_setup_teardown(test_free_cancels, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blob_stall, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blob_complete_before_error, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
