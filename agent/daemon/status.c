/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "daemon/status.h"
#include "util/fileio.h"
#include "util/macro.h"

#define STATE_FILE_MAX (1024 * 1024)

int status_print(const char *state_dir, bool json) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        json_error_t err;
        json_t *state;
        int r;

        if (asprintf(&path, "%s/state.json", state_dir) < 0)
                return EXIT_FAILURE;

        r = read_full_file(path, STATE_FILE_MAX, &data, NULL);
        if (r == -ENOENT) {
                if (json)
                        printf("{\"transaction\":null,\"phase\":\"Idle\"}\n");
                else
                        printf("No transaction recorded in %s.\n", state_dir);
                return EXIT_SUCCESS;
        }
        if (r < 0) {
                fprintf(stderr, "inplace-agent: cannot read %s: %s\n", path, strerror(-r));
                return EXIT_FAILURE;
        }
        state = json_loads(data, 0, &err);
        if (!json_is_object(state)) {
                fprintf(stderr, "inplace-agent: %s is corrupt: line %d: %s\n", path, err.line, err.text);
                json_decref(state);
                return EXIT_FAILURE;
        }

        if (json) {
                json_dumpf(state, stdout, JSON_COMPACT);
                putchar('\n');
        } else {
                const char *key;
                json_t *v;

                json_object_foreach(state, key, v) {
                        char *s = json_is_string(v) ? strdup(json_string_value(v))
                                                    : json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        printf("%-14s %s\n", key, s ? s : "?");
                        free(s);
                }
        }
        json_decref(state);
        return EXIT_SUCCESS;
}
