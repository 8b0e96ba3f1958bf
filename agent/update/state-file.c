/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "update/state-file.h"
#include "util/fileio.h"

int state_file_save(const char *dir, const UpdateTransaction *tx) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        int r;

        assert(dir);
        assert(tx);

        r = state_codec_encode(tx, &data);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s", dir, STATE_FILE_NAME) < 0)
                return -ENOMEM;
        return write_file_atomic(path, data, strlen(data), 0600);
}

int state_file_load(const char *dir, UpdateTransaction **ret, char **ret_error) {
        _cleanup_free_ char *path = NULL, *aside = NULL, *data = NULL, *why = NULL;
        size_t size;
        int r;

        assert(dir);
        assert(ret);

        if (asprintf(&path, "%s/%s", dir, STATE_FILE_NAME) < 0 ||
            asprintf(&aside, "%s%s", path, STATE_FILE_CORRUPT_SUFFIX) < 0)
                return -ENOMEM;

        r = read_full_file(path, STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return r;
        if (r < 0 && r != -EFBIG) {
                if (ret_error && asprintf(ret_error, "cannot read %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r == -EFBIG)
                why = strdup("larger than the 1 MiB limit");
        else
                r = state_codec_decode(data, size, ret, &why);
        if (r >= 0)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r == -EPROTONOSUPPORT) {
                if (ret_error && asprintf(ret_error, "%s: %s; left in place", path, strempty(why)) < 0)
                        *ret_error = NULL;
                return r;
        }

        /* Keep the evidence and start clean: moving it aside is what makes the next start work. */
        if (rename(path, aside) < 0) {
                r = -errno;
                if (ret_error &&
                    asprintf(ret_error, "%s is corrupt (%s) and could not be moved aside: %s", path,
                             strempty(why), strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        (void) fsync_parent_dir(path);
        if (ret_error &&
            asprintf(ret_error, "%s is corrupt (%s); moved to %s", path, strempty(why), aside) < 0)
                *ret_error = NULL;
        return -EBADMSG;
}
