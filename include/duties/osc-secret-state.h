/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Says out loud whether the OSC Secret can be read (gardener#15528; the texts are
 * core/osc-availability.h's): while it cannot, the Node condition OSCSecretAvailable is False with
 * the reason (OSCSecretNotFound, OSCSecretForbidden, OSCSecretNotNamed), a Warning Event with the
 * same reason and message says so once per new verdict, the journal has it at warning level, and
 * STATUS= carries it as a note. Once the Secret can be read the condition turns True (OSCSecretFound)
 * and a Normal Event says so; on a Node where it was always readable the condition is never written.
 * A 403 is said from the second LIST in a row that gets one (a single one is common at first boot).
 * The condition is written only when it differs from the watched Node's (reporter_set_condition).
 * Borrows the reporter. */

#include "core/node-view.h"
#include "core/osc-availability.h"
#include "report/reporter.h"
#include "util/macro.h"

typedef struct OscSecretState OscSecretState;

int osc_secret_state_new(Reporter *reporter, OscSecretState **ret) _warn_unused_result_;
OscSecretState *osc_secret_state_free(OscSecretState *s);
DEFINE_CLEANUP_FUNC(OscSecretState, osc_secret_state_free);

/* What the Secret's watch found. UNKNOWN (not listed yet, a transient error) changes nothing: the
 * last verdict stands. `detail` is the server's message of a 403 (may be NULL). */
void osc_secret_state_set(OscSecretState *s, OscAvailability a, const OscSecretRef *ref, const char *detail);

/* The Node as watched (NULL: absent): writes the condition where it differs from the verdict. */
void osc_secret_state_sync(OscSecretState *s, const NodeView *v);
