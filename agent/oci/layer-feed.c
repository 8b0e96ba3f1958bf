/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "oci/layer-feed.h"

struct LayerFeed {
        pthread_mutex_t lock;
        pthread_cond_t grown; /* signalled when available, ended or valid change */
        uint64_t available;   /* leading bytes of the file that are final */
        bool ended;
        int error; /* with ended: 0 = EOF at available, < 0 = stop */
        bool valid;
        bool waiting; /* the reader sleeps on `grown` */
};

int layer_feed_new(LayerFeed **ret) {
        LayerFeed *f;

        assert(ret);

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        (void) pthread_mutex_init(&f->lock, NULL);
        (void) pthread_cond_init(&f->grown, NULL);
        f->valid = true;
        *ret = f;
        return 0;
}

LayerFeed *layer_feed_free(LayerFeed *f) {
        if (!f)
                return NULL;
        (void) pthread_cond_destroy(&f->grown);
        (void) pthread_mutex_destroy(&f->lock);
        free(f);
        return NULL;
}

/* Called with the lock held. Waking only a sleeping reader keeps the per-chunk cost of the download
 * side at one uncontended lock. */
static void wake(LayerFeed *f) {
        if (f->waiting)
                (void) pthread_cond_signal(&f->grown);
}

void layer_feed_advance(LayerFeed *f, uint64_t available) {
        assert(f);

        (void) pthread_mutex_lock(&f->lock);
        if (!f->ended) {
                if (available < f->available) {
                        /* Started over: what the reader took may differ from the new bytes. */
                        f->valid = false;
                        f->ended = true;
                        f->error = -ECANCELED;
                } else
                        f->available = available;
                wake(f);
        }
        (void) pthread_mutex_unlock(&f->lock);
}

void layer_feed_end(LayerFeed *f, int error) {
        assert(f);
        assert(error <= 0);

        (void) pthread_mutex_lock(&f->lock);
        if (!f->ended) {
                f->ended = true;
                f->error = error;
                if (error < 0)
                        f->valid = false;
                wake(f);
        }
        (void) pthread_mutex_unlock(&f->lock);
}

bool layer_feed_is_valid(LayerFeed *f) {
        bool v;

        assert(f);

        (void) pthread_mutex_lock(&f->lock);
        v = f->valid;
        (void) pthread_mutex_unlock(&f->lock);
        return v;
}

int64_t layer_feed_wait(LayerFeed *f, uint64_t want_end) {
        int64_t r;

        assert(f);

        (void) pthread_mutex_lock(&f->lock);
        while (!f->ended && f->available < want_end) {
                f->waiting = true;
                (void) pthread_cond_wait(&f->grown, &f->lock);
                f->waiting = false;
        }
        r = f->ended && f->error < 0 ? f->error : (int64_t) f->available;
        (void) pthread_mutex_unlock(&f->lock);
        return r;
}

ssize_t layer_feed_read(LayerFeed *f, int fd, void *buf, size_t size) {
        ssize_t n;

        if (f && size > 0) {
                off_t pos = lseek(fd, 0, SEEK_CUR);
                int64_t avail;

                if (pos < 0)
                        return -errno;
                avail = layer_feed_wait(f, (uint64_t) pos + 1);
                if (avail < 0)
                        return (ssize_t) avail;
                if ((uint64_t) avail <= (uint64_t) pos)
                        return 0; /* ended there */
                size = (size_t) MIN((uint64_t) size, (uint64_t) avail - (uint64_t) pos);
        }
        do
                n = read(fd, buf, size);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : n;
}
