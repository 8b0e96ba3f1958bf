/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/node-view.h"
#include "core/osc-availability.h"
#include "util/utf8.h"

/* A 403's message is the authorizer's sentence; enough to name the user, verb and resource. */
#define DETAIL_MAX 300

static const char *const reasons[_OSC_AVAILABILITY_MAX] = {
        [OSC_AVAILABILITY_FOUND] = "OSCSecretFound",
        [OSC_AVAILABILITY_NOT_NAMED] = "OSCSecretNotNamed",
        [OSC_AVAILABILITY_NOT_FOUND] = "OSCSecretNotFound",
        [OSC_AVAILABILITY_FORBIDDEN] = "OSCSecretForbidden",
};

const char *osc_availability_reason(OscAvailability a) {
        return a >= 0 && a < _OSC_AVAILABILITY_MAX ? reasons[a] : NULL;
}

bool osc_availability_is_problem(OscAvailability a) {
        return a == OSC_AVAILABILITY_NOT_NAMED || a == OSC_AVAILABILITY_NOT_FOUND ||
                a == OSC_AVAILABILITY_FORBIDDEN;
}

static const char *const osc_secret_source_table[_OSC_SECRET_SOURCE_MAX] = {
        [OSC_SECRET_FROM_CONFIG] = "osc.secretName",
        [OSC_SECRET_FROM_LABEL] = "the Node label " NODE_LABEL_SECRET_NAME,
        [OSC_SECRET_FROM_GNA_CONFIG] = "gardener-node-agent's component config",
};

const char *osc_secret_source_to_string(OscSecretSource s) {
        return s >= 0 && s < _OSC_SECRET_SOURCE_MAX ? osc_secret_source_table[s] : NULL;
}

int osc_availability_message(OscAvailability a, const OscSecretRef *ref, const char *detail, char **ret) {
        _cleanup_free_ char *clean = NULL;
        const char *source;
        int k;

        assert(ref);
        assert(ret);

        if (a == OSC_AVAILABILITY_NOT_NAMED) {
                k = asprintf(ret,
                             "no OSC Secret is named: the Node has no label %s and osc.secretName is not "
                             "set; waiting for the label",
                             NODE_LABEL_SECRET_NAME);
                return k < 0 ? -ENOMEM : 0;
        }
        if (!ref->name || (a != OSC_AVAILABILITY_FOUND && !osc_availability_is_problem(a)))
                return -EINVAL;
        source = osc_secret_source_to_string(ref->source);
        switch (a) {
        case OSC_AVAILABILITY_FOUND:
                k = asprintf(ret, "OSC Secret %s/%s (named by %s) is readable", ref->namespace, ref->name,
                             source);
                break;
        case OSC_AVAILABILITY_NOT_FOUND:
                k = asprintf(ret,
                             "OSC Secret %s/%s (named by %s) does not exist; waiting for it to be created",
                             ref->namespace, ref->name, source);
                break;
        default:
                clean = utf8_sanitize(strempty(detail), strlen(strempty(detail)), DETAIL_MAX);
                if (!clean)
                        return -ENOMEM;
                k = asprintf(ret,
                             "OSC Secret %s/%s (named by %s) may not be read: forbidden (HTTP 403)%s%s; "
                             "check the agent's RBAC (or the node-agent authorizer); retrying",
                             ref->namespace, ref->name, source, isempty(clean) ? "" : ": ", clean);
        }
        return k < 0 ? -ENOMEM : 0;
}
