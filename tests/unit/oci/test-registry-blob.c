/* SPDX-License-Identifier: Apache-2.0 */
/* registry_fetch_blob(): verification, reuse, oversize, stalls and a transfer cut after the last byte. */
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oci/registry-blob.h"
#include "registry-fixture.h"
#include "tests.h"

static void test_blob_verified_and_oversized(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip",
                            .size = 5 };
        char partial[256];
        struct stat st;

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        registry_fixture_push(c, 200, NULL, "hello");
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, registry_fixture_on_done, c, &op),
                         0);
        registry_fixture_run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(stat(c->blob_path, &st), 0);
        assert_int_equal(st.st_size, 5);

        /* Already there: no request at all. */
        c->done = false;
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, registry_fixture_on_done, c, &op),
                         0);
        registry_fixture_run(c);
        assert_int_equal(c->error, 0);
        assert_int_equal(fake_http_requests(c->fake), 1);

        /* More bytes than the descriptor says: aborted while streaming and nothing of it kept. (The op
         * then falls back to the unreachable upstream, whose failure is the one reported.) */
        assert_int_equal(unlink(c->blob_path), 0);
        c->done = false;
        registry_fixture_push(c, 200, NULL, "hello, and a lot more than five bytes");
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, registry_fixture_on_done, c, &op),
                         0);
        registry_fixture_run(c);
        assert_true(c->error < 0);
        assert_int_equal(fake_http_requests(c->fake), 2);
        snprintf(partial, sizeof(partial), "%s/blobs/%s.partial", c->dir, &HELLO_DIGEST[7]);
        assert_true(stat(partial, &st) < 0 || st.st_size == 0);
        partial[strlen(partial) - strlen(".partial")] = '\0';
        assert_int_equal(access(partial, F_OK), -1); /* never under its final name */
}

/* Issue 16: a blob that trickles in below the floor rate fails each attempt after the window, with a
 * retriable error naming the blob and the rate, and what arrived is kept for the resume. */

/* Issue 16: a blob that trickles in below the floor rate fails each attempt after the window, with a
 * retriable error naming the blob and the rate, and what arrived is kept for the resume. */
static void test_blob_stall(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip",
                            .size = 5 };
        char partial[256], want[512];
        struct stat st;
        uint64_t t0;

        assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t0) >= 0);

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        assert_int_equal(
                fake_http_push(
                        c->fake,
                        &(FakeResponse) { .status = 200, .body = "hello", .stall = true, .stall_after = 2 }),
                0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(
                        fake_http_push(c->fake,
                                       &(FakeResponse) { .status = 206,
                                                         .headers = "Content-Range: bytes 2-4/5\r\n",
                                                         .body = "llo",
                                                         .stall = true }),
                        0);
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, registry_fixture_on_done, c, &op),
                         0);
        registry_fixture_run(c);
        assert_int_equal(fake_http_requests(c->fake), 3); /* max_attempts on the mirror */
        {
                uint64_t t1;
                assert_true(sd_event_now(c->event, CLOCK_MONOTONIC, &t1) >= 0);
                assert_true(t1 - t0 >= 3 * USEC_PER_SEC); /* each attempt waited out the window */
        }
        assert_int_equal(c->failure, ARTIFACT_FAILURE_UNAVAILABLE); /* retriable */
        snprintf(want, sizeof(want),
                 "blob " HELLO_DIGEST " from http://127.0.0.1:%u/v2/kube/kubelet/blobs/" HELLO_DIGEST
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

/* Issue 16: the connection drops after the blob's last byte (a Content-Length longer than the body
 * looks the same to the client): the bytes are all there and verified, so they are taken as they
 * are, with no second request for bytes past the end. */
static void test_blob_complete_before_error(void **state) {
        RegistryFixture *c = *state;
        RegistryOp *op = NULL;
        OciDescriptor d = { .media_type = (char *) "application/vnd.oci.image.layer.v1.tar+gzip",
                            .size = 5 };
        struct stat st;

        assert_int_equal(digest_parse(HELLO_DIGEST, &d.digest), 0);
        assert_int_equal(fake_http_push(c->fake,
                                        &(FakeResponse) { .status = 200,
                                                          .body = "hello",
                                                          .chunked = true,
                                                          .close_early = true }),
                         0);
        assert_int_equal(registry_fetch_blob(c->client, c->ref, &d, NULL, registry_fixture_on_done, c, &op),
                         0);
        registry_fixture_run(c);
        if (c->error < 0)
                fail_msg("message: %s", c->message);
        assert_int_equal(fake_http_requests(c->fake), 1);
        assert_int_equal(stat(c->blob_path, &st), 0);
        assert_int_equal(st.st_size, 5);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_blob_verified_and_oversized, registry_fixture_setup,
                                                registry_fixture_teardown),
                cmocka_unit_test_setup_teardown(test_blob_stall, registry_fixture_setup,
                                                registry_fixture_teardown),
                cmocka_unit_test_setup_teardown(test_blob_complete_before_error, registry_fixture_setup,
                                                registry_fixture_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
