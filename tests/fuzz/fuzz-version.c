/* SPDX-License-Identifier: Apache-2.0 */
/* Versions come from the OSC, os-release and image tags: compare and classify any pair. */
#include <stdint.h>
#include <string.h>

#include "core/version.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *s = NULL, *n = NULL;
        const char *why, *b;
        KubeletChange ch;

        if (size > 4096)
                return 0;
        s = strndup((const char *) data, size);
        if (!s)
                return 0;
        /* "a\nb": two versions; a single string is compared with itself. */
        b = strchr(s, '\n');
        if (b)
                s[b++ - s] = '\0';
        else
                b = s;
        for (VersionOp op = 0; op < _VERSION_OP_MAX; op++)
                (void) version_compare(s, op, b, &why);
        (void) version_classify_kubelet(s, b, &ch, &why);
        if (version_normalize_kubelet(s, &n) >= 0)
                (void) version_check_kubelet_desired(n, &why);
        return 0;
}
