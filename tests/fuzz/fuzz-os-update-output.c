/* SPDX-License-Identifier: Apache-2.0 */
/* The OS update command's output is untrusted and unbounded. The verdict must not depend on how
 * it is chunked, the capture must stay bounded, and the failure text must always be valid UTF-8
 * (it ends up in a JSON string). */
#include <assert.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "os/os-update-classify.h"
#include "os/output-capture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void on_line(const char *line, size_t len, void *userdata) {
        assert(strlen(line) == len);
        assert(len <= 64);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;
        _cleanup_free_ char *summary = NULL, *msg = NULL;
        OsUpdateScan whole = {}, split = {};
        OsUpdateOutcome o = { .termination = OS_UPDATE_EXITED, .code = 1 };
        size_t chunk;

        if (size < 1 || size > 256 * 1024)
                return 0;
        chunk = (size_t) data[0] % 17 + 1;
        data++;
        size--;

        if (output_capture_new(32, 32, 64, &c) < 0)
                return 0;

        os_update_scan_feed(&whole, data, size);
        for (size_t off = 0; off < size; off += chunk) {
                size_t n = size - off < chunk ? size - off : chunk;
                os_update_scan_feed(&split, data + off, n);
                output_capture_feed(c, data + off, n, on_line, NULL);
        }
        output_capture_flush(c, on_line, NULL);
        for (OsUpdatePattern p = 0; p < _OS_UPDATE_PATTERN_MAX; p++)
                assert(os_update_scan_matched(&whole, p) == os_update_scan_matched(&split, p));

        assert(output_capture_total(c) == size);
        if (output_capture_summary(c, &summary) < 0)
                return 0;
        assert(strlen(summary) <= 32 + 32 + 64);

        if (os_update_failure_message(os_update_classify(&o, &whole), &o, "/x", summary, 3, 48, 0, &msg) ==
            0) {
                json_t *j = json_string(msg);
                assert(j); /* valid UTF-8 */
                json_decref(j);
        }
        return 0;
}
