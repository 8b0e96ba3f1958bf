/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the OSC decoder: the input is tried both as osc.yaml bytes and, when it is
 * JSON, as a whole Secret (base64 data included). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/osc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        OscDesired *o = NULL;
        char *err = NULL, *kv = NULL;
        json_t *j;

        if (osc_decode_yaml((const char *) data, size, "checksum", "/opt/bin/kubelet", &o, &err) == 0) {
                if (osc_kubelet_version(o, &kv, &err) == 0)
                        free(kv);
                free(err);
                err = NULL;
                (void) osc_check_kubelet_file_in_image(o, &err);
        }
        o = osc_desired_free(o);
        free(err);
        err = NULL;

        j = json_loadb((const char *) data, size, JSON_DECODE_ANY, NULL);
        if (j && osc_decode_secret(j, "/opt/bin/kubelet", &o, &err) == 0)
                o = osc_desired_free(o);
        free(err);
        json_decref(j);
        return 0;
}
