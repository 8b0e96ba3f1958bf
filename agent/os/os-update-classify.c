/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "os/os-update-classify.h"
#include "os/output-redact.h"
#include "util/backoff.h"
#include "util/time-util.h"

/* Lower-case ASCII, as the folded stream presents them. */
static const char *const patterns[_OS_UPDATE_PATTERN_MAX] = {
        [OS_UPDATE_PATTERN_NETWORK_PROBLEMS] = "network problems",
        [OS_UPDATE_PATTERN_INVALID_ARGUMENTS] = "invalid arguments",
        [OS_UPDATE_PATTERN_SYSTEM_FAILURE] = "system failure",
};

static const char *const class_names[_OS_UPDATE_CLASS_MAX] = {
        [OS_UPDATE_CLASS_SUCCESS] = "success",
        [OS_UPDATE_CLASS_RETRIABLE] = "retriable",
        [OS_UPDATE_CLASS_NON_RETRIABLE] = "non-retriable",
        [OS_UPDATE_CLASS_UNKNOWN] = "unknown",
        [OS_UPDATE_CLASS_TIMEOUT] = "timeout",
};

static const char *const termination_names[_OS_UPDATE_TERMINATION_MAX] = {
        [OS_UPDATE_EXITED] = "exited",
        [OS_UPDATE_SIGNALED] = "signaled",
        [OS_UPDATE_SPAWN_FAILED] = "spawn-failed",
};

DEFINE_STRING_TABLE_LOOKUP(os_update_class, OsUpdateClass, class_names);
DEFINE_STRING_TABLE_LOOKUP(os_update_termination, OsUpdateTermination, termination_names);

/* Length of the longest prefix of p that is a suffix of p[0..q) followed by c: the next state of
 * a KMP matcher, computed directly. Patterns are short (< 20 bytes) and mismatches past the
 * first byte are rare, so no failure table is needed. */
static unsigned advance(const char *p, unsigned q, char c) {
        if (p[q] == c)
                return q + 1;
        for (unsigned k = q; k > 0; k--)
                if (p[k - 1] == c && memcmp(p, p + q + 1 - k, k - 1) == 0)
                        return k;
        return 0;
}

static void scan_char(OsUpdateScan *s, char c) {
        for (size_t i = 0; i < _OS_UPDATE_PATTERN_MAX; i++) {
                if (s->matched[i])
                        continue;
                s->position[i] = advance(patterns[i], s->position[i], c);
                if (patterns[i][s->position[i]] == '\0')
                        s->matched[i] = true;
        }
}

/* A byte that no pattern contains (anything non-ASCII that does not fold): all matches restart. */
static void scan_break(OsUpdateScan *s) {
        for (size_t i = 0; i < _OS_UPDATE_PATTERN_MAX; i++)
                s->position[i] = 0;
}

/* Folds one byte. Go decodes runes and folds them; the only runes that fold onto pattern letters
 * are ASCII letters, U+212A (E2 84 AA) -> 'k' and U+017F (C5 BF) -> 's'. Every other non-ASCII
 * byte, and any incomplete or different sequence, cannot match and breaks the match. */
static void scan_byte(OsUpdateScan *s, uint8_t b) {
        if (s->n_pending > 0) {
                if (s->pending[0] == 0xE2 && s->n_pending == 1 && b == 0x84) {
                        s->pending[s->n_pending++] = b;
                        return;
                }
                if (s->pending[0] == 0xE2 && s->n_pending == 2 && b == 0xAA) {
                        s->n_pending = 0;
                        scan_char(s, 'k');
                        return;
                }
                if (s->pending[0] == 0xC5 && b == 0xBF) {
                        s->n_pending = 0;
                        scan_char(s, 's');
                        return;
                }
                s->n_pending = 0;
                scan_break(s);
                /* fall through: b itself starts afresh */
        }

        if (b == 0xE2 || b == 0xC5) {
                s->pending[0] = b;
                s->n_pending = 1;
        } else if (b >= 0x80)
                scan_break(s);
        else
                scan_char(s, (char) (b >= 'A' && b <= 'Z' ? b - 'A' + 'a' : b));
}

void os_update_scan_feed(OsUpdateScan *s, const void *data, size_t size) {
        const uint8_t *p = data;

        assert(s);
        assert(data || size == 0);

        for (size_t i = 0; i < size; i++)
                scan_byte(s, p[i]);
}

bool os_update_scan_matched(const OsUpdateScan *s, OsUpdatePattern p) {
        assert(s);
        assert(p >= 0 && p < _OS_UPDATE_PATTERN_MAX);

        return s->matched[p];
}

OsUpdateClass os_update_classify(const OsUpdateOutcome *o, const OsUpdateScan *scan) {
        assert(o);
        assert(scan);

        if (o->timed_out)
                return OS_UPDATE_CLASS_TIMEOUT;
        if (o->termination == OS_UPDATE_EXITED && o->code == 0)
                return OS_UPDATE_CLASS_SUCCESS;

        /* Same order as upstream: the retriable pattern wins when both occur. */
        if (scan->matched[OS_UPDATE_PATTERN_NETWORK_PROBLEMS])
                return OS_UPDATE_CLASS_RETRIABLE;
        if (scan->matched[OS_UPDATE_PATTERN_INVALID_ARGUMENTS] ||
            scan->matched[OS_UPDATE_PATTERN_SYSTEM_FAILURE])
                return OS_UPDATE_CLASS_NON_RETRIABLE;
        return OS_UPDATE_CLASS_UNKNOWN;
}

const char *os_update_class_failure_code(OsUpdateClass c) {
        switch (c) {
        case OS_UPDATE_CLASS_RETRIABLE:
        case OS_UPDATE_CLASS_NON_RETRIABLE:
        case OS_UPDATE_CLASS_UNKNOWN:
                return "OSCommandFailed";
        case OS_UPDATE_CLASS_TIMEOUT:
                return "OSCommandTimeout";
        default:
                return NULL;
        }
}

bool os_update_class_is_retriable(OsUpdateClass c) {
        return c == OS_UPDATE_CLASS_RETRIABLE;
}

bool os_update_retry_next(const OsUpdateRetryPolicy *p, OsUpdateClass last, unsigned attempts_done,
                          uint64_t elapsed_usec, uint64_t budget_usec, uint64_t *ret_delay_usec) {
        uint64_t delay;

        assert(p);
        assert(attempts_done >= 1);
        assert(ret_delay_usec);

        if (last != OS_UPDATE_CLASS_RETRIABLE || elapsed_usec >= budget_usec)
                return false;

        delay = backoff_exponential(p->initial_delay_usec, p->max_delay_usec, attempts_done - 1);

        /* Written as subtractions from the budget so that no sum can overflow. */
        if (delay > budget_usec - elapsed_usec || p->min_attempt_usec > budget_usec - elapsed_usec - delay)
                return false;

        *ret_delay_usec = delay;
        return true;
}

/* Go's syscall.Signal.String() for linux (zerrors_linux_*.go), which upstream embeds. */
static const char *const go_signal_names[] = {
        [1] = "hangup",
        [2] = "interrupt",
        [3] = "quit",
        [4] = "illegal instruction",
        [5] = "trace/breakpoint trap",
        [6] = "aborted",
        [7] = "bus error",
        [8] = "floating point exception",
        [9] = "killed",
        [10] = "user defined signal 1",
        [11] = "segmentation fault",
        [12] = "user defined signal 2",
        [13] = "broken pipe",
        [14] = "alarm clock",
        [15] = "terminated",
        [16] = "stack fault",
        [17] = "child exited",
        [18] = "continued",
        [19] = "stopped (signal)",
        [20] = "stopped",
        [21] = "stopped (tty input)",
        [22] = "stopped (tty output)",
        [23] = "urgent I/O condition",
        [24] = "CPU time limit exceeded",
        [25] = "file size limit exceeded",
        [26] = "virtual timer expired",
        [27] = "profiling timer expired",
        [28] = "window changed",
        [29] = "I/O possible",
        [30] = "power failure",
        [31] = "bad system call",
};

static int spawn_error_to_string(int error, const char *path, char **ret) {
        const char *desc = strerrordesc_np(error < 0 ? -error : error);
        char first;

        if (error == -ENOENT && path && !strchr(path, '/'))
                return asprintf(ret, "exec: \"%s\": executable file not found in $PATH", path) < 0 ?
                        -ENOMEM :
                        0;
        if (!desc)
                return asprintf(ret, "fork/exec %s: errno %d", strempty(path), -error) < 0 ? -ENOMEM : 0;

        /* Go's errno texts are glibc's with a lower-case first letter. */
        first = desc[0] >= 'A' && desc[0] <= 'Z' ? (char) (desc[0] - 'A' + 'a') : desc[0];
        return asprintf(ret, "fork/exec %s: %c%s", strempty(path), first, desc + 1) < 0 ? -ENOMEM : 0;
}

int os_update_outcome_to_string(const OsUpdateOutcome *o, const char *path, char **ret) {
        int r;

        assert(o);
        assert(ret);

        switch (o->termination) {
        case OS_UPDATE_EXITED:
                r = asprintf(ret, "exit status %d", o->code);
                break;
        case OS_UPDATE_SIGNALED:
                if (o->code > 0 && (size_t) o->code < ELEMENTSOF(go_signal_names))
                        r = asprintf(ret, "signal: %s%s", go_signal_names[o->code],
                                     o->core_dumped ? " (core dumped)" : "");
                else
                        r = asprintf(ret, "signal %d%s", o->code, o->core_dumped ? " (core dumped)" : "");
                break;
        case OS_UPDATE_SPAWN_FAILED:
                return spawn_error_to_string(o->code, path, ret);
        default:
                return -EINVAL;
        }
        return r < 0 ? -ENOMEM : 0;
}

/* Length of the valid UTF-8 sequence at p (at most `left` bytes), 0 if invalid. */
static size_t utf8_sequence_length(const uint8_t *p, size_t left) {
        uint8_t lo = 0x80, hi = 0xBF;
        size_t n;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xC2 && p[0] <= 0xDF)
                n = 2;
        else if (p[0] >= 0xE0 && p[0] <= 0xEF) {
                n = 3;
                if (p[0] == 0xE0)
                        lo = 0xA0; /* no overlong forms */
                else if (p[0] == 0xED)
                        hi = 0x9F; /* no surrogates */
        } else if (p[0] >= 0xF0 && p[0] <= 0xF4) {
                n = 4;
                if (p[0] == 0xF0)
                        lo = 0x90;
                else if (p[0] == 0xF4)
                        hi = 0x8F; /* nothing above U+10FFFF */
        } else
                return 0;

        if (left < n || p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (p[i] < 0x80 || p[i] > 0xBF)
                        return 0;
        return n;
}

/* The last max bytes of s, starting at a rune boundary, as valid UTF-8 without control
 * characters (other than '\n' and '\t'), "..." in front if anything was cut. */
static int sanitize_tail(const char *s, size_t max, char **ret) {
        const uint8_t *p = (const uint8_t *) strempty(s);
        size_t n = strlen((const char *) p), start = 0, j = 0;
        char *out;

        if (n > max) {
                start = n - max;
                for (size_t i = 0; i < 3 && start < n && (p[start] & 0xC0) == 0x80; i++)
                        start++;
        }

        out = malloc(n - start + 4);
        if (!out)
                return -ENOMEM;
        if (start > 0) {
                memcpy(out, "...", 3);
                j = 3;
        }
        for (size_t i = start; i < n;) {
                size_t l = utf8_sequence_length(p + i, n - i);

                if (l == 0 || (l == 1 && ((p[i] < 0x20 && p[i] != '\n' && p[i] != '\t') || p[i] == 0x7f))) {
                        out[j++] = '?';
                        i++;
                        continue;
                }
                memcpy(out + j, p + i, l);
                j += l;
                i += l;
        }
        out[j] = '\0';

        *ret = out;
        return 0;
}

/* The last max_lines lines of s within max bytes, whole lines only (a line the byte limit cuts at
 * its front is left out), "...\n" in front when lines were left out; when even the last line alone
 * is longer, the last max bytes of it, as sanitize_tail() cuts them. Then made valid. */
static int tail_lines(const char *s, size_t max_lines, size_t max, char **ret) {
        _cleanup_free_ char *t = NULL;
        size_t n = strlen(s), keep = n, pos = n, lines = 0;

        if (pos > 0 && s[pos - 1] == '\n')
                pos--; /* a final newline ends the last line, it starts none */
        for (;;) {
                size_t start = pos;

                while (start > 0 && s[start - 1] != '\n')
                        start--;
                if (lines == max_lines || n - start > max)
                        break;
                keep = start;
                lines++;
                if (start == 0)
                        break;
                pos = start - 1;
        }
        if (lines == 0)
                return sanitize_tail(s, max, ret);
        if (asprintf(&t, "%s%s", keep > 0 ? "...\n" : "", s + keep) < 0)
                return -ENOMEM;
        return sanitize_tail(t, SIZE_MAX, ret);
}

int os_update_failure_message(OsUpdateClass c, const OsUpdateOutcome *o, const char *path,
                              const char *output, size_t max_lines, size_t max_output, uint64_t budget_usec,
                              char **ret) {
        _cleanup_free_ char *outcome = NULL, *clean = NULL, *head = NULL, *redacted = NULL;
        char dur[DURATION_MAX_STR];
        int r;

        assert(o);
        assert(ret);

        switch (c) {
        case OS_UPDATE_CLASS_RETRIABLE:
                head = strdup("retriable error detected");
                break;
        case OS_UPDATE_CLASS_NON_RETRIABLE:
                head = strdup("non-retriable error detected");
                break;
        case OS_UPDATE_CLASS_UNKNOWN:
                head = strdup("no specific error detected");
                break;
        case OS_UPDATE_CLASS_TIMEOUT:
                if (asprintf(&head, "timed out after %s", format_duration(dur, sizeof(dur), budget_usec)) <
                    0)
                        head = NULL;
                break;
        default:
                return -EINVAL;
        }
        if (!head)
                return -ENOMEM;

        r = os_update_outcome_to_string(o, path, &outcome);
        if (r < 0)
                return r;
        /* Redacted before it is cut, so that no cut leaves half a secret unrecognised. */
        redacted = output_redact_text(output);
        if (!redacted)
                return -ENOMEM;
        r = tail_lines(redacted, max_lines, max_output, &clean);
        if (r < 0)
                return r;

        if (asprintf(ret, "%s: %s, output: %s", head, outcome, clean) < 0)
                return -ENOMEM;
        return 0;
}
