/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the OSC decoder: the input is tried both as osc.yaml bytes and, when it is
 * JSON, as a whole Secret (base64 data included), also through the intake that accepts or refuses
 * it (update/osc-intake: the model, the component config, the image references). */
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/osc.h"
#include "update/osc-intake.h"

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
        if (j) {
                static char *const replaced[] = { (char *) "gardener-node-agent.service", NULL };
                OscComponentConfig *cc = NULL;

                if (osc_intake(j, "/opt/bin/kubelet", replaced,
                               &(OscModelOptions) { .host_name = "node-1", .containerd_path = "/usr/bin" },
                               &o, &cc) == 0) {
                        /* Refused: only the reason and maybe the checksum; else never a reason. */
                        if (o->refused && (o->yaml || o->model || cc))
                                abort();
                        o = osc_desired_free(o);
                        osc_component_config_free(cc);
                }
        }
        json_decref(j);
        return 0;
}
