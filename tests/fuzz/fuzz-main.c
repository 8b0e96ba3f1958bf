/* SPDX-License-Identifier: Apache-2.0 */
/* Without libFuzzer: runs a fuzz target once over every file named on the command line, so the seed
 * corpus doubles as a regression test in ordinary (and sanitizer) builds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char *argv[]) {
        for (int i = 1; i < argc; i++) {
                char *data = NULL;
                size_t size = 0;
                int r = read_full_file(argv[i], 16 * 1024 * 1024, &data, &size);

                if (r < 0) {
                        fprintf(stderr, "%s: cannot read: %d\n", argv[i], r);
                        return EXIT_FAILURE;
                }
                (void) LLVMFuzzerTestOneInput((const uint8_t *) data, size);
                free(data);
        }
        return EXIT_SUCCESS;
}
