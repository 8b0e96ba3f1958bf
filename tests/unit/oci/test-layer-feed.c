/* SPDX-License-Identifier: Apache-2.0 */
/* The feed between a download and the thread that reads the file while it grows: reads wait for
 * final bytes and stop at the end; a download that starts over or gives up stops the reader and
 * leaves the feed invalid. Extraction through a feed is test-archive-extract's part. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>

#include "oci/layer-feed.h"
#include "tests.h"

/* One feed, one file: `w` is the download's end, `fd` the reader's; the reader thread reads it all. */
typedef struct Ctx {
        LayerFeed *feed;
        int w, fd;
        pthread_t thread;
        char got[64];
        size_t n;
        ssize_t last; /* the read that ended it: 0 (EOF) or -errno */
} Ctx;

static int setup(void **state) {
        Ctx *c = calloc(1, sizeof(Ctx));
        char path[] = "/tmp/test-layer-feed-XXXXXX";

        assert_non_null(c);
        assert_int_equal(layer_feed_new(&c->feed), 0);
        c->w = mkstemp(path);
        assert_true(c->w >= 0);
        c->fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(c->fd >= 0);
        (void) unlink(path);
        *state = c;
        return 0;
}

static int teardown(void **state) {
        Ctx *c = *state;

        layer_feed_free(c->feed);
        close(c->w);
        close(c->fd);
        free(c);
        return 0;
}

static void *read_all(void *userdata) {
        Ctx *c = userdata;

        for (;;) {
                ssize_t n = layer_feed_read(c->feed, c->fd, c->got + c->n, sizeof(c->got) - c->n);

                if (n <= 0) {
                        c->last = n;
                        return NULL;
                }
                c->n += (size_t) n;
        }
}

static void start_reader(Ctx *c) {
        assert_int_equal(pthread_create(&c->thread, NULL, read_all, c), 0);
}

static void join_reader(Ctx *c) {
        assert_int_equal(pthread_join(c->thread, NULL), 0);
}

static void test_reads_as_it_grows(void **state) {
        Ctx *c = *state;

        start_reader(c);
        /* Bytes on disk but not declared final are not read: "fgh" stays unseen until advanced. */
        assert_int_equal(write(c->w, "abcdefgh", 8), 8);
        layer_feed_advance(c->feed, 5);
        assert_int_equal(write(c->w, "ijk", 3), 3);
        layer_feed_advance(c->feed, 11);
        layer_feed_end(c->feed, 0);
        join_reader(c);
        assert_int_equal(c->last, 0);
        assert_int_equal(c->n, 11);
        assert_memory_equal(c->got, "abcdefghijk", 11);
        assert_true(layer_feed_is_valid(c->feed));
        /* Ended: further calls change nothing. */
        layer_feed_advance(c->feed, 3);
        layer_feed_end(c->feed, -EIO);
        assert_true(layer_feed_is_valid(c->feed));
}

static void test_end_at_count_not_file(void **state) {
        Ctx *c = *state;
        char buf[16];

        /* EOF comes where the feed says, even with more bytes in the file (stale, never declared). */
        assert_int_equal(write(c->w, "0123456789", 10), 10);
        layer_feed_advance(c->feed, 4);
        layer_feed_end(c->feed, 0);
        assert_int_equal(layer_feed_read(c->feed, c->fd, buf, sizeof(buf)), 4);
        assert_int_equal(layer_feed_read(c->feed, c->fd, buf, sizeof(buf)), 0);
        assert_int_equal(layer_feed_wait(c->feed, 100), 4);
        /* Without a feed: a plain read of the complete file. */
        assert_int_equal(layer_feed_read(NULL, c->fd, buf, sizeof(buf)), 6);
}

static void test_started_over(void **state) {
        Ctx *c = *state;

        assert_int_equal(write(c->w, "abcdef", 6), 6);
        layer_feed_advance(c->feed, 6);
        start_reader(c);
        /* The download restarts from zero: the reader stops, the feed is worthless from now on. */
        layer_feed_advance(c->feed, 0);
        join_reader(c);
        assert_int_equal(c->last, -ECANCELED);
        assert_false(layer_feed_is_valid(c->feed));
        layer_feed_advance(c->feed, 100);
        assert_false(layer_feed_is_valid(c->feed));
        assert_int_equal(layer_feed_wait(c->feed, 1), -ECANCELED);
}

static void test_given_up(void **state) {
        Ctx *c = *state;

        /* A reader waiting for bytes is let go by an error end. */
        start_reader(c);
        layer_feed_end(c->feed, -EIO);
        join_reader(c);
        assert_int_equal(c->last, -EIO);
        assert_int_equal(c->n, 0);
        assert_false(layer_feed_is_valid(c->feed));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_reads_as_it_grows, setup, teardown),
                cmocka_unit_test_setup_teardown(test_end_at_count_not_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_started_over, setup, teardown),
                cmocka_unit_test_setup_teardown(test_given_up, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
