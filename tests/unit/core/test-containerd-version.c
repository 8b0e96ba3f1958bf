/* SPDX-License-Identifier: Apache-2.0 */
/* containerd's Version reply: gRPC status, framing and the VersionResponse protobuf. The replies are
 * the bytes containerd 1.6 sends (version "1.6.20~ds1", revision
 * "1.6.20~ds1-1+b1"), and every way they can be wrong. */
#include <errno.h>

#include "core/containerd-version.h"
#include "tests.h"

/* A gRPC frame around `msg` of `n` bytes. */
static size_t frame(uint8_t *buf, const char *msg, size_t n) {
        buf[0] = 0;
        buf[1] = (uint8_t) (n >> 24);
        buf[2] = (uint8_t) (n >> 16);
        buf[3] = (uint8_t) (n >> 8);
        buf[4] = (uint8_t) n;
        memcpy(buf + 5, msg, n);
        return n + 5;
}

#define REPLY        \
        "\x0a\x0a"   \
        "1.6.20~ds1" \
        "\x12\x0f"   \
        "1.6.20~ds1-1+b1"

static int decode(const char *status, const char *message, const char *msg, size_t n, ContainerdVersion *v,
                  char **error) {
        uint8_t buf[512];

        assert_true(n + 5 <= sizeof(buf));
        return containerd_version_decode(status, message, buf, frame(buf, msg, n), v, error);
}

static void test_request(void **state) {
        /* An empty message: uncompressed, length 0. */
        assert_memory_equal(containerd_version_request, "\0\0\0\0\0", 5);
}

static void test_reply(void **state) {
        _cleanup_(containerd_version_done) ContainerdVersion v = {};
        _cleanup_free_ char *error = NULL;

        assert_int_equal(decode("0", NULL, REPLY, sizeof(REPLY) - 1, &v, &error), 0);
        assert_string_equal(v.version, "1.6.20~ds1");
        assert_string_equal(v.revision, "1.6.20~ds1-1+b1");
        assert_null(error);
}

/* Unknown fields of any wire type are skipped, a repeated one's last value wins, absent ones are "". */
static void test_unknown_and_repeated_fields(void **state) {
        static const char msg[] = "\x18\x96\x01" /* 3: varint 150 */
                                  "\x21"
                                  "12345678" /* 4: fixed64 */
                                  "\x2a\x03"
                                  "abc" /* 5: bytes */
                                  "\x35"
                                  "1234" /* 6: fixed32 */
                                  "\x0a\x01"
                                  "x"
                                  "\x0a\x05"
                                  "2.0.0";
        _cleanup_(containerd_version_done) ContainerdVersion v = {}, empty = {};
        _cleanup_free_ char *error = NULL;

        assert_int_equal(decode("0", NULL, msg, sizeof(msg) - 1, &v, &error), 0);
        assert_string_equal(v.version, "2.0.0");
        assert_string_equal(v.revision, "");
        assert_int_equal(decode("0", NULL, "", 0, &empty, &error), 0);
        assert_string_equal(empty.version, "");
}

static void expect_error(const char *status, const char *message, const void *body, size_t size,
                         const char *want) {
        ContainerdVersion v = {};
        _cleanup_free_ char *error = NULL;

        assert_int_equal(containerd_version_decode(status, message, body, size, &v, &error), -EBADMSG);
        assert_non_null(error);
        if (!strstr(error, want))
                fail_msg("\"%s\" does not contain \"%s\"", error, want);
        assert_null(v.version);
}

static void expect_bad_message(const char *msg, size_t n, const char *want) {
        uint8_t buf[512];

        expect_error("0", NULL, buf, frame(buf, msg, n), want);
}

static void test_grpc_status(void **state) {
        uint8_t buf[64];
        size_t n = frame(buf, REPLY, sizeof(REPLY) - 1);

        expect_error(NULL, NULL, buf, n, "the reply carries no grpc-status");
        expect_error("14", "connection%20closed%3A%20%E2%9C%93", NULL, 0,
                     "rpc error: code = Unavailable desc = connection closed: \xe2\x9c\x93");
        expect_error("12", "unknown service containerd.services.version.v1.Version", NULL, 0,
                     "rpc error: code = Unimplemented desc = unknown service");
        expect_error("99", "%zz%4", NULL, 0, "rpc error: code = Code(99) desc = %zz%4");
        expect_error("2", "%00\x01", NULL, 0, "desc = ? "); /* NUL and control bytes made safe */
        expect_error("x", NULL, buf, n, "grpc-status \"x\" is not a status code");
        expect_error("00", NULL, buf, n, "is not a status code");
        expect_error("-1", NULL, buf, n, "is not a status code");
        expect_error("", NULL, buf, n, "is not a status code");
        expect_error("1000", NULL, buf, n, "is not a status code");
}

static void test_framing(void **state) {
        uint8_t buf[64];
        size_t n = frame(buf, REPLY, sizeof(REPLY) - 1);

        expect_error("0", NULL, buf, 4, "the reply holds 4 bytes, not a gRPC message");
        expect_error("0", NULL, buf, n - 1, "announces 29");
        buf[0] = 1;
        expect_error("0", NULL, buf, n, "compressed");
        buf[0] = 0;
        buf[1] = 0x80;
        expect_error("0", NULL, buf, n, "2147483677 bytes long (at most 4096)");
}

static void test_bad_protobuf(void **state) {
        char big[300] = "\x0a\xa9\x02"; /* field 1, 297 bytes */

        memset(big + 3, 'a', sizeof(big) - 3);
        expect_bad_message("\x0a\x10"
                           "short",
                           7, "field version runs past the message");
        expect_bad_message("\x08\x01", 2, "field version has wire type 0, not a string");
        expect_bad_message("\x15"
                           "abcd",
                           5, "field revision has wire type 5");
        expect_bad_message("\x1b", 1, "field 3 has wire type 3");
        expect_bad_message("\x1f", 1, "field 3 has wire type 7");
        expect_bad_message("\x00", 1, "field number 0 is invalid");
        expect_bad_message("\x80", 1, "a field key runs past the message");
        expect_bad_message("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 11, "field 3 runs past");
        expect_bad_message("\x21"
                           "1234",
                           5, "field 4 runs past the message");
        expect_bad_message("\x2a\x05"
                           "ab",
                           4, "field 5 runs past the message");
        expect_bad_message(big, sizeof(big), "field version is 297 bytes long (at most 256)");
        expect_bad_message("\x12\x02\xc3\x28", 4, "field revision is not UTF-8");
        expect_bad_message("\x0a\x03"
                           "a\nb",
                           5, "field version holds a control character");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_request),
                cmocka_unit_test(test_reply),
                cmocka_unit_test(test_unknown_and_repeated_fields),
                cmocka_unit_test(test_grpc_status),
                cmocka_unit_test(test_framing),
                cmocka_unit_test(test_bad_protobuf),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
