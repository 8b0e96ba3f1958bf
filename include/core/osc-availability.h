/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Whether the agent can read its OSC Secret, said out loud (gardener#15528: upstream's agent stays
 * silent when the Secret its Node label names does not exist, because its cache never sees it).
 * The Node condition OSCSecretAvailable, a Warning Event and STATUS= carry the text made here:
 * which Secret, who named it (osc.secretName or the Node label), and what the agent waits for.
 * Pure: no I/O, no logging. */

#include <stdbool.h>

#include "core/node-view.h" /* NODE_CONDITION_OSC_SECRET */
#include "util/macro.h"

typedef enum OscAvailability {
        OSC_AVAILABILITY_UNKNOWN,   /* not listed yet, or a transient error: nothing to say */
        OSC_AVAILABILITY_FOUND,     /* the Secret exists and we may read it */
        OSC_AVAILABILITY_NOT_NAMED, /* neither osc.secretName nor the Node label names one */
        OSC_AVAILABILITY_NOT_FOUND, /* named, but it does not exist (or was deleted) */
        OSC_AVAILABILITY_FORBIDDEN, /* named, but reading it is forbidden (HTTP 403) */
        _OSC_AVAILABILITY_MAX,
        _OSC_AVAILABILITY_INVALID = -EINVAL,
} OscAvailability;

/* Where the OSC Secret's name came from, first found wins (daemon/manager). */
typedef enum OscSecretSource {
        OSC_SECRET_FROM_CONFIG,     /* osc.secretName */
        OSC_SECRET_FROM_LABEL,      /* the Node label */
        OSC_SECRET_FROM_GNA_CONFIG, /* gardener-node-agent's provisioned component config */
        _OSC_SECRET_SOURCE_MAX,
} OscSecretSource;

/* "osc.secretName", "the Node label worker.gardener.cloud/...", "gardener-node-agent's component config". */
const char *osc_secret_source_to_string(OscSecretSource s);

typedef struct OscSecretRef {
        const char *namespace;
        const char *name; /* NULL when none is named */
        OscSecretSource source;
} OscSecretRef;

/* The condition's and the Event's reason: OSCSecretFound, OSCSecretNotNamed, OSCSecretNotFound,
 * OSCSecretForbidden; NULL for UNKNOWN. */
const char *osc_availability_reason(OscAvailability a);

/* True for the states that are a problem worth a Warning (the condition is False). */
bool osc_availability_is_problem(OscAvailability a);

/* One sentence naming the Secret and its source, e.g. "OSC Secret kube-system/x (named by the Node
 * label worker.gardener.cloud/gardener-node-agent-secret-name) does not exist; waiting for it to be
 * created". `detail` is the server's message of a 403 (untrusted: cut and made valid UTF-8); may be
 * NULL. -EINVAL for UNKNOWN, -ENOMEM. */
int osc_availability_message(OscAvailability a, const OscSecretRef *ref, const char *detail, char **ret);
