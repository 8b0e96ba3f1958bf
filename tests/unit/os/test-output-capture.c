/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "os/output-capture.h"
#include "tests.h"

typedef struct Lines {
        char *all; /* lines joined with '|' */
        size_t n;
} Lines;

static void collect(const char *line, size_t size, void *userdata) {
        Lines *l = userdata;
        size_t old = l->all ? strlen(l->all) : 0;

        assert_int_equal(strlen(line), size); /* NUL-terminated, no NUL inside */
        l->all = realloc(l->all, old + size + 2);
        assert_non_null(l->all);
        memcpy(l->all + old, line, size);
        l->all[old + size] = '|';
        l->all[old + size + 1] = '\0';
        l->n++;
}

static void test_small_output_kept_whole(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        _cleanup_free_ char *s = NULL;
        Lines l = {};

        assert_int_equal(output_capture_new(16, 16, 8, &c), 0);
        output_capture_feed(c, "one\ntwo\r\nthr", 12, collect, &l);
        output_capture_feed(c, "ee\n", 3, collect, &l);
        output_capture_flush(c, collect, &l);
        assert_string_equal(l.all, "one|two|three|");
        assert_int_equal(output_capture_total(c), 15);
        assert_int_equal(output_capture_dropped(c), 0);
        assert_int_equal(output_capture_summary(c, &s), 0);
        assert_string_equal(s, "one\ntwo\r\nthree\n");
        free(l.all);
}

static void test_long_lines_split(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        Lines l = {};

        assert_int_equal(output_capture_new(0, 0, 4, &c), 0);
        output_capture_feed(c, "abcdefghij\nxy", 13, collect, &l);
        output_capture_flush(c, collect, &l);
        output_capture_flush(c, collect, &l); /* nothing left: no empty line */
        assert_string_equal(l.all, "abcd|efgh|ij|xy|");
        assert_int_equal(l.n, 4);
        free(l.all);
}

static void test_exact_multiple_no_empty_piece(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        Lines l = {};

        assert_int_equal(output_capture_new(0, 0, 4, &c), 0);
        output_capture_feed(c, "abcdefgh\n\nij\n", 13, collect, &l);
        assert_string_equal(l.all, "abcd|efgh||ij|"); /* the real empty line stays */
        free(l.all);
}

static void test_nul_bytes_replaced(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        _cleanup_free_ char *s = NULL;
        Lines l = {};

        assert_int_equal(output_capture_new(0, 0, 0, &c), 0);
        output_capture_feed(c, "a\0b\n", 4, collect, &l);
        assert_string_equal(l.all, "a?b|");
        assert_int_equal(output_capture_summary(c, &s), 0);
        assert_string_equal(s, "a?b\n");
        free(l.all);
}

/* Head and tail are exact whatever the chunking, and the byte count in between is right. */
static void test_head_tail_any_chunking(void **state) {
        static const size_t chunks[] = { 1, 3, 7, 10, 11, 64, 1000 };
        char input[1000];

        for (size_t i = 0; i < sizeof(input); i++)
                input[i] = (char) ('a' + i % 26);

        for (size_t k = 0; k < ELEMENTSOF(chunks); k++) {
                _cleanup_(output_capture_freep) OutputCapture *c = NULL;
                _cleanup_free_ char *s = NULL, *expected = NULL;

                assert_int_equal(output_capture_new(10, 10, 0, &c), 0);
                for (size_t off = 0; off < sizeof(input); off += chunks[k])
                        output_capture_feed(c, input + off, MIN(chunks[k], sizeof(input) - off), NULL, NULL);

                assert_int_equal(output_capture_total(c), 1000);
                assert_int_equal(output_capture_dropped(c), 980);
                assert_int_equal(output_capture_summary(c, &s), 0);
                assert_true(asprintf(&expected, "%.10s\n[... 980 bytes omitted ...]\n%.10s", input,
                                     input + 990) > 0);
                assert_string_equal(s, expected);
        }
}

static void test_between_head_and_tail(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        _cleanup_free_ char *s = NULL;

        /* 15 bytes with head 10 + tail 10: nothing dropped, nothing duplicated. */
        assert_int_equal(output_capture_new(10, 10, 0, &c), 0);
        output_capture_feed(c, "0123456789abcde", 15, NULL, NULL);
        assert_int_equal(output_capture_dropped(c), 0);
        assert_int_equal(output_capture_summary(c, &s), 0);
        assert_string_equal(s, "0123456789abcde");
}

static void test_reset(void **state) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        _cleanup_free_ char *s = NULL;
        Lines l = {};

        assert_int_equal(output_capture_new(4, 4, 0, &c), 0);
        output_capture_feed(c, "partial line that is long", 25, NULL, NULL);
        output_capture_reset(c);
        assert_int_equal(output_capture_total(c), 0);
        output_capture_feed(c, "new\n", 4, collect, &l);
        assert_string_equal(l.all, "new|"); /* the old partial line is gone */
        assert_int_equal(output_capture_summary(c, &s), 0);
        assert_string_equal(s, "new\n");
        free(l.all);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_small_output_kept_whole),
                cmocka_unit_test(test_long_lines_split),
                cmocka_unit_test(test_exact_multiple_no_empty_piece),
                cmocka_unit_test(test_nul_bytes_replaced),
                cmocka_unit_test(test_head_tail_any_chunking),
                cmocka_unit_test(test_between_head_and_tail),
                cmocka_unit_test(test_reset),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
