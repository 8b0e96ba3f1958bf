/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the Node decoder: any JSON document the watch could hand us. */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/node-view.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        NodeView *v = NULL;
        char *err = NULL;
        json_t *j;

        j = json_loadb((const char *) data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (!j)
                return 0;
        if (node_view_decode(j, &v, &err) == 0) {
                (void) node_view_gate_open(v);
                (void) node_view_became_ready(NULL, v);
        }
        node_view_free(v);
        free(err);
        json_decref(j);
        return 0;
}
