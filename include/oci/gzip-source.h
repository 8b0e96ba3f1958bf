/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* A libarchive read source that inflates a gzip layer with ISA-L (isal_inflate, streaming; 2-3x the
 * speed of zlib on x86-64) and hands libarchive the plain tar stream, so libarchive runs without any
 * decompression filter. Chosen at build time (meson option "isal"); without ISA-L gzip_source_open()
 * returns -EOPNOTSUPP and the caller keeps libarchive's own gzip filter.
 *
 * The source reads `fd` from its current position and does not own it; the state it allocates belongs
 * to the archive handle and is freed by archive_read_free(). Concatenated gzip members are inflated one
 * after the other, as gzip(1) and libarchive do; bytes after the last member that do not start another
 * member end the stream. A corrupt or truncated member is a fatal read error (archive_errno()
 * EBADMSG). Blocking reads: for the extraction thread, not the event loop. With a `feed` (the layer is
 * still being downloaded) reads go through layer_feed_read() and wait for the bytes; NULL = plain
 * reads of a complete file. Does not log. */

#include <archive.h>
#include <stdbool.h>

#include "oci/layer-feed.h"

/* Is this build's gzip inflater ISA-L? */
bool gzip_source_is_isal(void);

/* Opens `a` (format handlers set, no filter needed) on the inflated contents of the gzip stream at
 * `fd`: ARCHIVE_OK, ARCHIVE_FATAL (see archive_error_string()), or -EOPNOTSUPP without ISA-L. */
int gzip_source_open(struct archive *a, int fd, LayerFeed *feed) _warn_unused_result_;
