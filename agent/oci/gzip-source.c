/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "build-config.h"
#include "oci/gzip-source.h"
#include "oci/libarchive-dl.h"
#include "util/macro.h"

/* The tests build this file a second time with GZIP_SOURCE_NO_ISAL to cover the fallback. */
#if HAVE_ISAL && !defined(GZIP_SOURCE_NO_ISAL)
#include <isa-l/igzip_lib.h>

/* Large enough that one read() and one inflate call amortise their overhead; small enough to stay out
 * of the peak RSS figure (the extraction thread's whole working set is these two plus the state). */
#define IN_SIZE (128 * 1024)
#define OUT_SIZE (256 * 1024)

typedef struct GzipSource {
        int fd;          /* borrowed */
        LayerFeed *feed; /* borrowed; NULL = the layer is complete */
        bool in_eof;     /* read() returned 0 */
        bool done;       /* the last member ended */
        struct inflate_state state;
        uint8_t in[IN_SIZE];
        uint8_t out[OUT_SIZE];
} GzipSource;

bool gzip_source_is_isal(void) {
        return true;
}

static int fill(struct archive *a, GzipSource *s) {
        ssize_t n;

        if (s->state.avail_in > 0 || s->in_eof)
                return 0;
        n = layer_feed_read(s->feed, s->fd, s->in, sizeof(s->in));
        if (n < 0) {
                sym_archive_set_error(a, (int) -n, "cannot read the layer");
                return (int) n;
        }
        s->state.next_in = s->in;
        s->state.avail_in = (uint32_t) n;
        s->in_eof = n == 0;
        return 0;
}

/* After a member's trailer: another member follows only if the next bytes are a gzip magic. */
static int next_member(struct archive *a, GzipSource *s) {
        int r;

        r = fill(a, s);
        if (r < 0)
                return r;
        if (s->state.avail_in == 0) {
                s->done = true;
                return 0;
        }
        /* A magic split across two reads: move the one byte to the front and read more behind it. */
        if (s->state.avail_in == 1 && !s->in_eof) {
                ssize_t n;

                s->in[0] = s->state.next_in[0];
                n = layer_feed_read(s->feed, s->fd, s->in + 1, sizeof(s->in) - 1);
                if (n < 0) {
                        sym_archive_set_error(a, (int) -n, "cannot read the layer");
                        return (int) n;
                }
                s->state.next_in = s->in;
                s->state.avail_in = 1 + (uint32_t) n;
                s->in_eof = n == 0;
        }
        if (s->state.avail_in < 2 || s->state.next_in[0] != 0x1f || s->state.next_in[1] != 0x8b) {
                s->done = true; /* trailing bytes that are not a member: the end, like gzip -d */
                return 0;
        }
        isal_inflate_reset(&s->state);
        s->state.crc_flag = ISAL_GZIP;
        return 0;
}

static la_ssize_t gzip_read(struct archive *a, void *userdata, const void **ret) {
        GzipSource *s = userdata;

        *ret = s->out;
        s->state.next_out = s->out;
        s->state.avail_out = sizeof(s->out);
        while (!s->done && s->state.avail_out == sizeof(s->out)) {
                int r;

                r = fill(a, s);
                if (r < 0)
                        return ARCHIVE_FATAL;
                r = isal_inflate(&s->state);
                if (r < 0) {
                        sym_archive_set_error(a, EBADMSG, "corrupt gzip data (ISA-L error %d)", r);
                        return ARCHIVE_FATAL;
                }
                if (s->state.block_state == ISAL_BLOCK_FINISH) {
                        if (next_member(a, s) < 0)
                                return ARCHIVE_FATAL;
                } else if (s->in_eof && s->state.avail_in == 0 && s->state.avail_out > 0) {
                        sym_archive_set_error(a, EBADMSG, "truncated gzip data");
                        return ARCHIVE_FATAL;
                }
        }
        return (la_ssize_t) (sizeof(s->out) - s->state.avail_out);
}

static int gzip_close(struct archive *a, void *userdata) {
        free(userdata);
        return ARCHIVE_OK;
}

int gzip_source_open(struct archive *a, int fd, LayerFeed *feed) {
        GzipSource *s;

        s = malloc(sizeof(GzipSource));
        if (!s) {
                sym_archive_set_error(a, ENOMEM, "out of memory");
                return ARCHIVE_FATAL;
        }
        s->fd = fd;
        s->feed = feed;
        s->in_eof = s->done = false;
        isal_inflate_init(&s->state);
        s->state.crc_flag = ISAL_GZIP;
        return sym_archive_read_open(a, s, NULL, gzip_read, gzip_close);
}

#else

bool gzip_source_is_isal(void) {
        return false;
}

int gzip_source_open(struct archive *a, int fd, LayerFeed *feed) {
        return -EOPNOTSUPP;
}

#endif
