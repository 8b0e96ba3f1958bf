/* SPDX-License-Identifier: Apache-2.0 */
/* Without libFuzzer, each fuzz target is built with this main() and run over its corpus as an
 * ordinary regression test: every file (or every file in every directory) given as argument is
 * fed once to LLVMFuzzerTestOneInput. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "util/fileio.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_full_file(path, 16 * 1024 * 1024, &data, &size);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(-r));
                return r;
        }
        (void) LLVMFuzzerTestOneInput((const uint8_t *) data, size);
        return 0;
}

int main(int argc, char *argv[]) {
        unsigned n = 0;

        for (int i = 1; i < argc; i++) {
                struct stat st;
                DIR *d;

                if (stat(argv[i], &st) < 0 || !S_ISDIR(st.st_mode)) {
                        if (run_file(argv[i]) < 0)
                                return EXIT_FAILURE;
                        n++;
                        continue;
                }
                d = opendir(argv[i]);
                if (!d)
                        return EXIT_FAILURE;
                for (struct dirent *de; (de = readdir(d));) {
                        _cleanup_free_ char *p = NULL;
                        if (de->d_name[0] == '.')
                                continue;
                        if (asprintf(&p, "%s/%s", argv[i], de->d_name) < 0 || run_file(p) < 0) {
                                closedir(d);
                                return EXIT_FAILURE;
                        }
                        n++;
                }
                closedir(d);
        }
        printf("%u inputs ran\n", n);
        return EXIT_SUCCESS;
}
