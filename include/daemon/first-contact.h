/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Before the first contact with the API server (gardener#15707): the logs are out of reach from
 * outside until the API server answered once, so each reason that keeps us from it (the caller logs
 * it once) also goes to the status file `inplace-agent status` reads (daemon/status.h) and, rate-
 * limited (core/contact-blocker.h), to the kernel console (console.enabled). The first answer
 * removes the status file and sends one Warning Event (NoAPIServerAccess) saying what blocked us and
 * for how long, and the console hears that the reason no longer holds.
 *
 * Owns the Console and the blocker's state; borrows the configuration and the reporter. Logs the
 * Warning; failed status-file and console writes at debug (best effort). */

#include <stdint.h>

#include "core/config.h"
#include "report/reporter.h"
#include "util/macro.h"

typedef struct FirstContact FirstContact;

/* `event_min_usec`: a shorter wait than this sends no Event (kube-tuning.h contact_event_min_usec). */
int first_contact_new(const Config *config, Reporter *reporter, uint64_t event_min_usec,
                      FirstContact **ret) _warn_unused_result_;
FirstContact *first_contact_free(FirstContact *f);
DEFINE_CLEANUP_FUNC(FirstContact, first_contact_free);

/* A previous run's status file goes (at start). */
void first_contact_clear_stale(FirstContact *f);
/* `reason` keeps us from the API server now. */
void first_contact_blocked(FirstContact *f, const char *reason);
/* The API server answered: said once, at the first answer since start. */
void first_contact_reached(FirstContact *f);
