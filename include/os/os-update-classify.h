/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* How one run of the Gardener OS update command (OSC status.inPlaceUpdates.osUpdate, docs/node-protocol.md
 * §4.2 step 4) is classified, whether it is retried, and the failure text reported for it. Pure: no I/O, no
 * clock (elapsed time is passed in), no logging.
 *
 * Upstream (gardener reconciler.go, updateOSInPlace) matches two regular expressions against the
 * combined output of a failed run: `(?i)network problems` first (retriable), then
 * `(?i)invalid arguments|system failure` (non-retriable); any other failure is "no specific
 * error", also final. OsUpdateScan reproduces those matches exactly, on a byte stream of any
 * length fed in pieces, so the verdict does not depend on how much output the agent keeps.
 * "Exactly" includes Go's (?i) simple case folding, under which 'k' also matches U+212A KELVIN
 * SIGN and 's' also matches U+017F LATIN SMALL LETTER LONG S; no other letter of the patterns
 * has a non-ASCII fold. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/macro.h"

typedef enum OsUpdateClass {
        OS_UPDATE_CLASS_SUCCESS,       /* exit status 0 */
        OS_UPDATE_CLASS_RETRIABLE,     /* failed; output matched (?i)network problems */
        OS_UPDATE_CLASS_NON_RETRIABLE, /* failed; output matched (?i)invalid arguments|system failure */
        OS_UPDATE_CLASS_UNKNOWN,       /* failed otherwise ("no specific error detected"); final */
        OS_UPDATE_CLASS_TIMEOUT,       /* still running when the budget ran out; killed */
        _OS_UPDATE_CLASS_MAX,
        _OS_UPDATE_CLASS_INVALID = -EINVAL,
} OsUpdateClass;

typedef enum OsUpdateTermination {
        OS_UPDATE_EXITED,       /* code: exit status */
        OS_UPDATE_SIGNALED,     /* code: signal number */
        OS_UPDATE_SPAWN_FAILED, /* code: -errno; the program never ran */
        _OS_UPDATE_TERMINATION_MAX,
        _OS_UPDATE_TERMINATION_INVALID = -EINVAL,
} OsUpdateTermination;

typedef struct OsUpdateOutcome {
        OsUpdateTermination termination;
        int code;
        bool core_dumped;
        bool timed_out; /* we killed it because the budget ran out */
} OsUpdateOutcome;

typedef enum OsUpdatePattern {
        OS_UPDATE_PATTERN_NETWORK_PROBLEMS,
        OS_UPDATE_PATTERN_INVALID_ARGUMENTS,
        OS_UPDATE_PATTERN_SYSTEM_FAILURE,
        _OS_UPDATE_PATTERN_MAX,
        _OS_UPDATE_PATTERN_INVALID = -EINVAL,
} OsUpdatePattern;

/* Streaming matcher state. Zero-initialise ((OsUpdateScan) {}) to start; reset the same way. */
typedef struct OsUpdateScan {
        unsigned position[_OS_UPDATE_PATTERN_MAX]; /* matched prefix length per pattern */
        bool matched[_OS_UPDATE_PATTERN_MAX];
        uint8_t pending[2]; /* start of a possibly folding UTF-8 rune */
        size_t n_pending;
} OsUpdateScan;

void os_update_scan_feed(OsUpdateScan *s, const void *data, size_t size);
bool os_update_scan_matched(const OsUpdateScan *s, OsUpdatePattern p);

/* The upstream decision for one run. A run that failed in any way other than our timeout
 * (non-zero exit, killed by a signal, could not be executed) is judged by its output. */
OsUpdateClass os_update_classify(const OsUpdateOutcome *o, const OsUpdateScan *scan);

/* Failure code of docs/contract.md §8.9 for a class: NULL for success, "OSCommandFailed" or
 * "OSCommandTimeout". Only RETRIABLE is a retriable failure (class "retriable"). */
const char *os_update_class_failure_code(OsUpdateClass c);
bool os_update_class_is_retriable(OsUpdateClass c);

/* Retry policy. The delay before attempt n+1 is initial * 2^(n-1), capped at max; another attempt
 * is made only after a RETRIABLE result and only if it would start with at least min_attempt of
 * the total budget left. Deterministic: no jitter (one node, one command). */
typedef struct OsUpdateRetryPolicy {
        uint64_t initial_delay_usec;
        uint64_t max_delay_usec;
        uint64_t min_attempt_usec;
} OsUpdateRetryPolicy;

/* initial 30 s is upstream's fixed retry interval (retry.UntilTimeout, docs/node-protocol.md §4.2). */
#define OS_UPDATE_RETRY_POLICY_DEFAULT                   \
        ((OsUpdateRetryPolicy) {                         \
                .initial_delay_usec = 30 * USEC_PER_SEC, \
                .max_delay_usec = 120 * USEC_PER_SEC,    \
                .min_attempt_usec = 30 * USEC_PER_SEC,   \
        })

/* After `attempts_done` (>= 1) attempts, the last classified `last`, `elapsed_usec` after the
 * first start, within `budget_usec`: returns true and *ret_delay_usec if another attempt should
 * start that long from now, false if the run is over. */
bool os_update_retry_next(const OsUpdateRetryPolicy *p, OsUpdateClass last, unsigned attempts_done,
                          uint64_t elapsed_usec, uint64_t budget_usec, uint64_t *ret_delay_usec);

/* Go's exec error text for the outcome, as upstream embeds it: "exit status 3",
 * "signal: killed", "signal: segmentation fault (core dumped)", "fork/exec <path>: no such file
 * or directory". */
int os_update_outcome_to_string(const OsUpdateOutcome *o, const char *path, char **ret);

/* The failure text in upstream's words (docs/node-protocol.md §4.2), for update-failed-reason and
 * inplace-agent/failure.message:
 *   "retriable error detected: <outcome>, output: <output>"        (also after the budget ran out)
 *   "non-retriable error detected: <outcome>, output: <output>"
 *   "no specific error detected: <outcome>, output: <output>"
 *   "timed out after <budget>: <outcome>, output: <output>"
 * Credentials in `output` are redacted first (os/output-redact.h); then only its last `max_lines`
 * lines within `max_output` bytes are kept, whole lines, "...\n" in front when lines were left out
 * (a last line longer than `max_output` alone: its end, cut at a UTF-8 boundary, "..." in front);
 * invalid UTF-8 and control characters other than '\n' and '\t' become '?', so the text is always
 * valid for a JSON string. -EINVAL for OS_UPDATE_CLASS_SUCCESS. */
int os_update_failure_message(OsUpdateClass c, const OsUpdateOutcome *o, const char *path,
                              const char *output, size_t max_lines, size_t max_output, uint64_t budget_usec,
                              char **ret);

const char *os_update_class_to_string(OsUpdateClass c);
OsUpdateClass os_update_class_from_string(const char *s);
const char *os_update_termination_to_string(OsUpdateTermination t);
OsUpdateTermination os_update_termination_from_string(const char *s);
