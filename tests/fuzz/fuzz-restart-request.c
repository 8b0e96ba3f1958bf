/* SPDX-License-Identifier: Apache-2.0 */
/* The restart-systemd-services annotation value is set by users: any string must parse cleanly. */
#include <stdint.h>
#include <string.h>

#include "core/restart-request.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *value = NULL;
        RestartRequest *r = NULL;

        if (size > 64 * 1024)
                return 0;
        value = strndup((const char *) data, size);
        if (value &&
            restart_request_parse(value, "inplace-agent.service", restart_request_replaced_units_default,
                                  &r) >= 0) {
                _cleanup_free_ char *summary = NULL;

                (void) restart_request_rejected_summary(r, &summary);
                for (size_t i = 0; i < r->n_rejected; i++)
                        free(restart_rejected_message(&r->rejected[i]));
                restart_request_free(r);
        }
        return 0;
}
