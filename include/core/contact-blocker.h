/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What keeps the agent from the API server before its first contact since it started
 * (gardener#15707: when a bootstrap or an in-place OS update leaves the node without an identity,
 * the Node, its Events and the log pipeline are out of reach, so the reason has to be said on the
 * node itself). The daemon tells the tracker every failed attempt (no kubeconfig, a failed
 * bootstrap, a LIST of the Node that could not connect, authenticate or was refused) and the first
 * success; the tracker decides what goes to the kernel console (each distinct reason at once, the
 * same one again at most every CONTACT_CONSOLE_REPEAT_USEC) and, at the first contact, the one
 * Warning that says what blocked the agent and for how long. Pure: no I/O, no logging. */

#include <stdbool.h>
#include <stdint.h>

#include "util/macro.h"

/* The same reason on the console again after this long: a serial console is read late, and a
 * ring buffer forgets. */
#define CONTACT_CONSOLE_REPEAT_USEC (5 * 60 * USEC_PER_SEC)
/* A reason is cut to this (a kernel log record holds about 1 KiB). */
#define CONTACT_REASON_MAX 700
/* How many distinct reasons the console rate limit remembers (two that alternate are each said
 * once per CONTACT_CONSOLE_REPEAT_USEC, not at every change). */
#define CONTACT_CONSOLE_REMEMBER 8

typedef struct ContactSaid {
        char *reason;  /* owned; NULL: a free slot */
        uint64_t usec; /* CLOCK_MONOTONIC: when the console was last told */
} ContactSaid;

typedef struct ContactBlocker {
        char *reason;                               /* owned: the current reason; NULL while not blocked */
        char *first_reason;                         /* owned: the first reason of this stretch */
        uint64_t since_usec;                        /* CLOCK_MONOTONIC: the stretch began */
        uint64_t since_realtime_usec;               /* CLOCK_REALTIME: the same moment, for people */
        ContactSaid said[CONTACT_CONSOLE_REMEMBER]; /* what the console was told, and when */
        bool contacted;                             /* the first contact happened: nothing more to track */
} ContactBlocker;

void contact_blocker_done(ContactBlocker *b);

/* A failed attempt and why (untrusted text: made valid UTF-8 and cut). Returns 1 when the reason
 * should go to the console now (b->reason: its text), 0 when not (this reason was said within
 * CONTACT_CONSOLE_REPEAT_USEC, or the first contact is behind us), -ENOMEM.
 * *ret_changed (may be NULL) tells whether the reason differs from the last one. */
int contact_blocker_set(ContactBlocker *b, const char *reason, uint64_t now_usec, uint64_t now_realtime_usec,
                        bool *ret_changed);

/* Whether the console was told anything in this stretch (then it hears that it ended, too). */
bool contact_blocker_told_console(const ContactBlocker *b);

/* Marks the console told of b->reason (call after writing it). */
void contact_blocker_console_written(ContactBlocker *b, uint64_t now_usec);

/* The first successful contact: tracking ends. *ret_message is the Warning's text when the agent
 * was blocked for at least `min_usec` (the daemon's 10 s: the network coming up a moment after the
 * agent is not worth an Event) ("no access to the API server for 2m13s before
 * the first successful contact: <last reason> (at first: <first reason>)"), else NULL. Returns 1
 * if a blocker ended here, 0 if there was none, -ENOMEM. */
int contact_blocker_contact(ContactBlocker *b, uint64_t now_usec, uint64_t min_usec, char **ret_message);

/* A phrase for an API error (-errno as net/http maps it), e.g. "connection refused",
 * "unauthorized (HTTP 401): the API server does not accept the agent's credentials". */
const char *contact_error_phrase(int error);
