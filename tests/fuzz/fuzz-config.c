/* SPDX-License-Identifier: Apache-2.0 */
/* YAML -> json_t -> Config: every byte sequence must end in success or a clean error. */
#include <stdint.h>

#include "core/config.h"
#include "util/yaml-json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *yerr = NULL, *cerr = NULL;
        json_t *j = NULL;

        if (size > 256 * 1024)
                return 0;
        if (yaml_to_json((const char *) data, size, &j, &yerr) < 0)
                return 0;
        if (config_new(&c) >= 0)
                (void) config_apply_json(c, j, "fuzz", &cerr);
        json_decref(j);
        return 0;
}
