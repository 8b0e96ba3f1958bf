/* SPDX-License-Identifier: Apache-2.0 */
/* Watch response bytes -> events: any byte sequence, fed whole and in small pieces, must end in
 * events or a clean error; the two feedings must agree. */
#include <stdint.h>

#include "kube/watch-stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_event(WatchEventType type, json_t *object, void *userdata) {
        unsigned *n = userdata;

        /* What kube-watch reads from every event. */
        (void) json_string_value(json_object_get(json_object_get(object, "metadata"), "resourceVersion"));
        if (type == WATCH_EVENT_ERROR)
                (void) kube_status_is_too_large_rv(object);
        (*n)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(watch_stream_freep) WatchStream *whole = NULL, *pieces = NULL;
        unsigned n_whole = 0, n_pieces = 0;
        int r_whole, r_pieces = 0;

        if (size > 1024 * 1024)
                return 0;
        /* A small line limit so the overflow path is reachable. */
        if (watch_stream_new(4096, count_event, &n_whole, &whole) < 0 ||
            watch_stream_new(4096, count_event, &n_pieces, &pieces) < 0)
                return 0;

        r_whole = watch_stream_feed(whole, data, size);
        for (size_t off = 0; off < size && r_pieces >= 0; off += 7)
                r_pieces = watch_stream_feed(pieces, data + off, MIN((size_t) 7, size - off));

        if (r_whole != r_pieces || n_whole != n_pieces ||
            (r_whole >= 0 && watch_stream_pending(whole) != watch_stream_pending(pieces)))
                __builtin_trap();
        return 0;
}
