/* SPDX-License-Identifier: Apache-2.0 */
/* The watch stream framer and event decoder: bytes from the network, fed in two arbitrary pieces. */
#include <stdint.h>

#include "macro.h"

#include "watch-stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int on_event(WatchEventType type, json_t *object, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WatchStream *s = NULL;
        unsigned n = 0;
        size_t cut;

        if (size == 0 || watch_stream_new(4096, on_event, &n, &s) < 0)
                return 0;
        cut = data[0] % size;
        if (watch_stream_feed(s, data + 1, cut > 0 ? cut - 1 : 0) >= 0)
                (void) watch_stream_feed(s, data + (cut > 0 ? cut : 1), size - (cut > 0 ? cut : 1));
        watch_stream_free(s);
        return 0;
}
