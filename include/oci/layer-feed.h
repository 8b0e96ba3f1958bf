/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A layer blob that is still being downloaded, read by the extraction thread while it grows, so that
 * inflating and writing the file overlap with the download instead of following it.
 *
 * Two sides, one object: the download side (the event loop; it owns the LayerFeed) says how many
 * leading bytes of the file on disk are final (layer_feed_advance) and, at the end, that no more will
 * come or that the reader must give up (layer_feed_end); the reading side (the extraction thread; it
 * borrows the feed) reads the file through layer_feed_read(), which waits for bytes that are not
 * there yet. Bytes once declared final must never change: a download that starts over says so by
 * advancing to a smaller count, which makes the feed invalid for good. Whatever the reader made of an
 * invalid feed is worthless, and the reader is told to stop (-ECANCELED).
 *
 * This is only about overlapping: nothing here verifies anything. The owner installs what the reader
 * produced only after the blob's digest matched and the feed stayed valid (verify-before-install).
 * The owner must end the feed before it joins the reader, or the reader may wait for ever. Does not
 * log. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/macro.h"

typedef struct LayerFeed LayerFeed;

int layer_feed_new(LayerFeed **ret) _warn_unused_result_;
LayerFeed *layer_feed_free(LayerFeed *f);
DEFINE_CLEANUP_FUNC(LayerFeed, layer_feed_free);

/* Download side. Bytes [0, available) of the file are on disk and final. A smaller count than before
 * means the file was started over: the feed becomes invalid and the reader stops. */
void layer_feed_advance(LayerFeed *f, uint64_t available);
/* No more bytes will come: error 0 = the file ends at the last count (the reader sees EOF there);
 * error < 0 = the reader fails with it (the download failed, the owner gives up). Later calls of
 * either function change nothing. */
void layer_feed_end(LayerFeed *f, int error);
/* Did every advance only ever grow the count (and no error end it)? */
bool layer_feed_is_valid(LayerFeed *f);

/* Reading side. Waits until bytes from `want_end` on are there (or the feed ended) and returns how
 * many leading bytes are final, or -ECANCELED / the end's error if the reader must stop. */
int64_t layer_feed_wait(LayerFeed *f, uint64_t want_end);
/* Like read(2) on `fd` at its current position, waiting for bytes that are not final yet: 0 only at
 * the end of a feed ended with 0; -errno on failure. f = NULL: plain read(2) (the file is complete). */
ssize_t layer_feed_read(LayerFeed *f, int fd, void *buf, size_t size);
