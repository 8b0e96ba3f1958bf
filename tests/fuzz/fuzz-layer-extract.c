/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for layer extraction (tar, tar+gzip, tar+zstd) into a real scratch directory: a
 * clean result or a clean error, and never anything in the staging directory but the one file asked
 * for — an entry that escaped, a link or a leftover temp file aborts. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "oci/archive-extract.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char staging[] = "/tmp/fuzz-layer-extract-XXXXXX";

static void remove_staging(void) {
        char path[sizeof(staging) + 16];

        snprintf(path, sizeof(path), "%s/kubelet", staging);
        (void) unlink(path);
        (void) rmdir(staging);
}

/* The staging directory holds at most the file asked for; it is removed again for the next input. */
static void check_staging(bool found) {
        DIR *d = opendir(staging);
        struct dirent *de;
        unsigned n = 0;

        if (!d)
                abort();
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (!streq(de->d_name, "kubelet") || !found || de->d_type != DT_REG)
                        abort();
                n++;
        }
        closedir(d);
        if (found && n != 1)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* Small limits, so bombs are cut off quickly and a run stays fast. */
        ArchiveLimits limits = {
                .max_entries = 1000,
                .max_path = 1024,
                .max_unpacked = 8 * 1024 * 1024,
                .max_file_size = 1024 * 1024,
        };
        ArchiveExtractResult res = {};
        char *msg = NULL, path[sizeof(staging) + 16];
        int fd, r;

        static bool made;

        if (!made) {
                if (!mkdtemp(staging))
                        abort();
                atexit(remove_staging);
                made = true;
        }
        fd = memfd_create("layer", MFD_CLOEXEC);
        if (fd < 0)
                abort();
        if (size > 0 && write(fd, data, size) != (ssize_t) size)
                abort();
        (void) lseek(fd, 0, SEEK_SET);

        r = archive_extract_layer(fd, size % 2 ? "/usr/bin/kubelet" : "kubelet", staging, "kubelet", &limits,
                                  &res, &msg);
        check_staging(r >= 0 && res.lookup == ARCHIVE_LOOKUP_FOUND);
        if (r >= 0 && res.lookup == ARCHIVE_LOOKUP_FOUND && res.size > limits.max_file_size)
                abort();
        snprintf(path, sizeof(path), "%s/kubelet", staging);
        (void) unlink(path);
        free(msg);
        close(fd);
        return 0;
}
