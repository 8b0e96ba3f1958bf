/* SPDX-License-Identifier: Apache-2.0 */
/* Image references from the OSC: parse, print, substitute; the printed form must parse again. */
#include <assert.h>
#include <stdint.h>

#include "oci/oci-ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(oci_ref_freep) OciRef *r = NULL, *again = NULL;
        _cleanup_free_ char *s = NULL, *printed = NULL, *sub = NULL, *v = NULL;

        if (size > 4096)
                return 0;
        s = strndup((const char *) data, size);
        if (!s)
                return 0;
        IGNORE_RESULT(oci_ref_substitute_version(s, "1.31.2", &sub)); /* fuzzed: only that it holds */
        if (oci_ref_parse(s, &r) < 0)
                return 0;
        IGNORE_RESULT(oci_ref_tag_version(r, &v));
        assert(oci_ref_to_string(r, &printed) >= 0);
        assert(oci_ref_parse(printed, &again) >= 0);
        assert(streq(again->registry, r->registry) && streq(again->repository, r->repository));
        return 0;
}
