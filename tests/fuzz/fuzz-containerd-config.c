/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the containerd config.toml renderer: the input is JSON, tried as the
 * containerd config ({sandboxImage, plugins, cgroupDriver}) and, when it is an array, as the plugins
 * list alone. The input must come out unchanged, and a rendered file must be the same on a second
 * render (the applier's write-if-changed relies on it), hold no NUL and no raw control character but
 * the newline, and end with one. */
#include <assert.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/containerd-config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const json_t *config) {
        char *a = NULL, *b = NULL, *err = NULL;
        json_t *copy = json_deep_copy(config);
        int r;

        if (!copy)
                return;
        r = containerd_config_render(config, &a, &err);
        assert(json_equal(config, copy));
        json_decref(copy);
        if (r == 0) {
                size_t n = strlen(a);

                assert(n > 0 && a[n - 1] == '\n');
                for (size_t i = 0; i < n; i++)
                        assert(a[i] == '\n' || ((unsigned char) a[i] >= 0x20 && a[i] != 0x7f));
                assert(containerd_config_render(config, &b, NULL) == 0);
                assert(strcmp(a, b) == 0);
        } else
                assert(!a);
        free(a);
        free(b);
        free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        json_t *j = json_loadb((const char *) data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

        if (!j)
                return 0;
        check(j);
        if (json_is_array(j)) {
                json_t *config = json_pack("{s:O}", "plugins", j);

                if (config)
                        check(config);
                json_decref(config);
        }
        json_decref(j);
        return 0;
}
