/* SPDX-License-Identifier: Apache-2.0 */
#include <signal.h>

#include "os/os-update-classify.h"
#include "tests.h"

#define EXITED(n) ((OsUpdateOutcome) { .termination = OS_UPDATE_EXITED, .code = (n) })
#define SIGNALED(n) ((OsUpdateOutcome) { .termination = OS_UPDATE_SIGNALED, .code = (n) })

static OsUpdateClass classify_text(OsUpdateOutcome o, const char *text) {
        OsUpdateScan scan = {};

        os_update_scan_feed(&scan, text, strlen(text));
        return os_update_classify(&o, &scan);
}

/* The upstream regexes (docs/node-protocol.md §4.2, Appendix A) applied to whole outputs. */
static void test_classify_table(void **state) {
        static const struct {
                int exit_status;
                const char *output;
                OsUpdateClass expected;
        } table[] = {
                { 0, "", OS_UPDATE_CLASS_SUCCESS },
                { 0, "network problems", OS_UPDATE_CLASS_SUCCESS }, /* success ignores output */
                { 1, "", OS_UPDATE_CLASS_UNKNOWN },
                { 3, "exit status 3: network problems\n", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "NETWORK PROBLEMS", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "Network Problems detected", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "network  problems", OS_UPDATE_CLASS_UNKNOWN }, /* literal single space */
                { 1, "network\nproblems", OS_UPDATE_CLASS_UNKNOWN },
                { 1, "networkproblems", OS_UPDATE_CLASS_UNKNOWN },
                { 1, "nnetwork problemss", OS_UPDATE_CLASS_RETRIABLE }, /* unanchored */
                { 2, "invalid arguments", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 2, "error: Invalid Arguments given", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 2, "System Failure", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 2, "a system failure occurred", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 2, "invalid argument", OS_UPDATE_CLASS_UNKNOWN },
                { 2, "system failur", OS_UPDATE_CLASS_UNKNOWN },
                /* Both present: upstream checks the retriable pattern first. */
                { 1, "system failure caused by network problems", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "network problems, then invalid arguments", OS_UPDATE_CLASS_RETRIABLE },
                /* Go's (?i) folds K (U+212A) to k and long s (U+017F) to s. */
                { 1, "networ\xe2\x84\xaa problems", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "network problem\xc5\xbf", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "\xc5\xbfystem failure", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 1, "invalid argument\xc5\xbf", OS_UPDATE_CLASS_NON_RETRIABLE },
                /* ...but nothing else non-ASCII does. */
                { 1, "networ\xe2\x84\xab problems", OS_UPDATE_CLASS_UNKNOWN },
                { 1, "network\xc2\xa0problems", OS_UPDATE_CLASS_UNKNOWN },
                { 1, "networ\xe2\x84 problems", OS_UPDATE_CLASS_UNKNOWN },
                { 1, "network problem\xc5", OS_UPDATE_CLASS_UNKNOWN },
                /* A broken sequence right before a match does not hide it. */
                { 1, "\xe2\x84network problems", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "\xc5network problems", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "\xe2\xc5\xbfystem failure", OS_UPDATE_CLASS_NON_RETRIABLE },
                /* Overlapping prefixes (KMP fallback). */
                { 1, "networnetwork problems", OS_UPDATE_CLASS_RETRIABLE },
                { 1, "system fsystem failure", OS_UPDATE_CLASS_NON_RETRIABLE },
                { 1, "invalid invalid arguments", OS_UPDATE_CLASS_NON_RETRIABLE },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                OsUpdateClass c = classify_text(EXITED(table[i].exit_status), table[i].output);
                if (c != table[i].expected)
                        fail_msg("case %zu (\"%s\"): got %s, want %s", i, table[i].output,
                                 os_update_class_to_string(c), os_update_class_to_string(table[i].expected));
        }
}

/* Every split of the input into two feeds gives the same verdict as one feed. */
static void test_scan_split_anywhere(void **state) {
        static const char *const inputs[] = {
                "xx networ\xe2\x84\xaa problem\xc5\xbf yy",
                "SYSTEM FAILURE",
                "\xe2\x84\xaa invalid arguments",
                "network problem",
        };

        for (size_t i = 0; i < ELEMENTSOF(inputs); i++) {
                size_t n = strlen(inputs[i]);
                OsUpdateScan whole = {};

                os_update_scan_feed(&whole, inputs[i], n);
                for (size_t cut = 0; cut <= n; cut++) {
                        OsUpdateScan split = {};

                        os_update_scan_feed(&split, inputs[i], cut);
                        os_update_scan_feed(&split, inputs[i] + cut, n - cut);
                        for (OsUpdatePattern p = 0; p < _OS_UPDATE_PATTERN_MAX; p++)
                                assert_int_equal(os_update_scan_matched(&split, p),
                                                 os_update_scan_matched(&whole, p));
                }
        }
}

static void test_scan_byte_by_byte_long_stream(void **state) {
        OsUpdateScan scan = {};
        char junk[4096];

        memset(junk, 'n', sizeof(junk));
        for (int i = 0; i < 256; i++)
                os_update_scan_feed(&scan, junk, sizeof(junk));
        assert_false(os_update_scan_matched(&scan, OS_UPDATE_PATTERN_NETWORK_PROBLEMS));
        for (const char *p = "etwork problems"; *p; p++)
                os_update_scan_feed(&scan, p, 1);
        assert_true(os_update_scan_matched(&scan, OS_UPDATE_PATTERN_NETWORK_PROBLEMS));
        /* A match stays a match. */
        os_update_scan_feed(&scan, junk, sizeof(junk));
        assert_true(os_update_scan_matched(&scan, OS_UPDATE_PATTERN_NETWORK_PROBLEMS));
}

static void test_classify_non_exit(void **state) {
        OsUpdateOutcome spawn = { .termination = OS_UPDATE_SPAWN_FAILED, .code = -ENOENT };
        OsUpdateOutcome timeout = { .termination = OS_UPDATE_SIGNALED, .code = SIGTERM, .timed_out = true };
        OsUpdateOutcome timeout_exit0 = { .termination = OS_UPDATE_EXITED, .code = 0, .timed_out = true };

        /* A signal is a failure like a non-zero exit: the output decides. */
        assert_int_equal(classify_text(SIGNALED(SIGKILL), ""), OS_UPDATE_CLASS_UNKNOWN);
        assert_int_equal(classify_text(SIGNALED(SIGSEGV), "network problems"), OS_UPDATE_CLASS_RETRIABLE);
        assert_int_equal(classify_text(spawn, ""), OS_UPDATE_CLASS_UNKNOWN);
        /* Our own timeout wins over anything the output says, even an exit 0 during the grace. */
        assert_int_equal(classify_text(timeout, "network problems"), OS_UPDATE_CLASS_TIMEOUT);
        assert_int_equal(classify_text(timeout_exit0, ""), OS_UPDATE_CLASS_TIMEOUT);
}

static void test_failure_codes(void **state) {
        static const struct {
                OsUpdateClass c;
                const char *code;
                bool retriable;
        } table[] = {
                { OS_UPDATE_CLASS_SUCCESS, NULL, false },
                { OS_UPDATE_CLASS_RETRIABLE, "OSCommandFailed", true },
                { OS_UPDATE_CLASS_NON_RETRIABLE, "OSCommandFailed", false },
                { OS_UPDATE_CLASS_UNKNOWN, "OSCommandFailed", false },
                { OS_UPDATE_CLASS_TIMEOUT, "OSCommandTimeout", false },
        };

        assert_int_equal(ELEMENTSOF(table), _OS_UPDATE_CLASS_MAX);
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                if (table[i].code)
                        assert_string_equal(os_update_class_failure_code(table[i].c), table[i].code);
                else
                        assert_null(os_update_class_failure_code(table[i].c));
                assert_int_equal(os_update_class_is_retriable(table[i].c), table[i].retriable);
        }
}

#define S(n) ((uint64_t) (n) *USEC_PER_SEC)

static void test_retry_policy_table(void **state) {
        const OsUpdateRetryPolicy def = OS_UPDATE_RETRY_POLICY_DEFAULT;
        static const struct {
                OsUpdateClass last;
                unsigned attempts;
                uint64_t elapsed, budget;
                bool retry;
                uint64_t delay;
        } table[] = {
                { OS_UPDATE_CLASS_RETRIABLE, 1, S(5), S(600), true, S(30) },
                { OS_UPDATE_CLASS_RETRIABLE, 2, S(60), S(600), true, S(60) },
                { OS_UPDATE_CLASS_RETRIABLE, 3, S(150), S(600), true, S(120) },
                { OS_UPDATE_CLASS_RETRIABLE, 4, S(300), S(600), true, S(120) },    /* capped */
                { OS_UPDATE_CLASS_RETRIABLE, 1000, S(300), S(600), true, S(120) }, /* no overflow */
                /* 600 - 450 = 150 left: 120 wait + 30 minimum run fits exactly. */
                { OS_UPDATE_CLASS_RETRIABLE, 4, S(450), S(600), true, S(120) },
                { OS_UPDATE_CLASS_RETRIABLE, 4, S(451), S(600), false, 0 },
                { OS_UPDATE_CLASS_RETRIABLE, 1, S(540), S(600), true, S(30) },
                { OS_UPDATE_CLASS_RETRIABLE, 1, S(541), S(600), false, 0 },
                { OS_UPDATE_CLASS_RETRIABLE, 1, S(600), S(600), false, 0 },
                { OS_UPDATE_CLASS_RETRIABLE, 1, S(700), S(600), false, 0 },
                { OS_UPDATE_CLASS_RETRIABLE, 1, 0, UINT64_MAX, true, S(30) },
                { OS_UPDATE_CLASS_SUCCESS, 1, S(5), S(600), false, 0 },
                { OS_UPDATE_CLASS_NON_RETRIABLE, 1, S(5), S(600), false, 0 },
                { OS_UPDATE_CLASS_UNKNOWN, 1, S(5), S(600), false, 0 },
                { OS_UPDATE_CLASS_TIMEOUT, 1, S(600), S(600), false, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                uint64_t delay = 4711;
                bool r = os_update_retry_next(&def, table[i].last, table[i].attempts, table[i].elapsed,
                                              table[i].budget, &delay);

                if (r != table[i].retry)
                        fail_msg("case %zu: retry=%d", i, r);
                assert_int_equal(delay, table[i].retry ? table[i].delay : 4711);
        }
}

/* With the default policy and a 10 min budget, a command that fails instantly with "network
 * problems" runs at 0, 30, 90, 210, 330, 450, 570 s and then gives up: deterministic. The last
 * attempt starts with exactly min_attempt (30 s) of the budget left. */
static void test_retry_schedule_deterministic(void **state) {
        const OsUpdateRetryPolicy def = OS_UPDATE_RETRY_POLICY_DEFAULT;
        static const uint64_t expected[] = { 0, S(30), S(90), S(210), S(330), S(450), S(570) };
        uint64_t t = 0, delay;
        unsigned attempts = 1;

        while (os_update_retry_next(&def, OS_UPDATE_CLASS_RETRIABLE, attempts, t, S(600), &delay)) {
                assert_true(attempts < ELEMENTSOF(expected));
                t += delay;
                assert_int_equal(t, expected[attempts]);
                attempts++;
        }
        assert_int_equal(attempts, ELEMENTSOF(expected));
}

static void test_outcome_strings(void **state) {
        static const struct {
                OsUpdateOutcome o;
                const char *path, *text;
        } table[] = {
                { EXITED(3), "/x", "exit status 3" },
                { EXITED(0), "/x", "exit status 0" },
                { SIGNALED(SIGKILL), "/x", "signal: killed" },
                { SIGNALED(SIGTERM), "/x", "signal: terminated" },
                { { .termination = OS_UPDATE_SIGNALED, .code = SIGSEGV, .core_dumped = true },
                  "/x",
                  "signal: segmentation fault (core dumped)" },
                { SIGNALED(40), "/x", "signal 40" },
                { { .termination = OS_UPDATE_SPAWN_FAILED, .code = -ENOENT },
                  "/opt/x",
                  "fork/exec /opt/x: no such file or directory" },
                { { .termination = OS_UPDATE_SPAWN_FAILED, .code = -EACCES },
                  "/opt/x",
                  "fork/exec /opt/x: permission denied" },
                { { .termination = OS_UPDATE_SPAWN_FAILED, .code = -ENOENT },
                  "update-os",
                  "exec: \"update-os\": executable file not found in $PATH" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *s = NULL;

                assert_int_equal(os_update_outcome_to_string(&table[i].o, table[i].path, &s), 0);
                assert_string_equal(s, table[i].text);
        }
}

static void test_failure_message(void **state) {
        OsUpdateOutcome o = EXITED(3);
        OsUpdateOutcome t = { .termination = OS_UPDATE_SIGNALED, .code = SIGKILL, .timed_out = true };
        char *s = NULL;

        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_RETRIABLE, &o, "/x", "network problems\n",
                                                   SIZE_MAX, 1024, S(600), &s),
                         0);
        assert_string_equal(s, "retriable error detected: exit status 3, output: network problems\n");
        free(s);

        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_NON_RETRIABLE, &o, "/x", "system failure",
                                                   SIZE_MAX, 1024, S(600), &s),
                         0);
        assert_string_equal(s, "non-retriable error detected: exit status 3, output: system failure");
        free(s);

        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x", NULL, SIZE_MAX, 1024,
                                                   S(600), &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 3, output: ");
        free(s);

        assert_int_equal(
                os_update_failure_message(OS_UPDATE_CLASS_TIMEOUT, &t, "/x", "x", SIZE_MAX, 1024, S(90), &s),
                0);
        assert_string_equal(s, "timed out after 1m30s: signal: killed, output: x");
        free(s);

        s = NULL;
        assert_int_equal(
                os_update_failure_message(OS_UPDATE_CLASS_SUCCESS, &o, "/x", "", SIZE_MAX, 1024, S(1), &s),
                -EINVAL);
        assert_null(s);
}

static void test_failure_message_sanitizes(void **state) {
        OsUpdateOutcome o = EXITED(1);
        char *s = NULL;

        /* Control characters and invalid UTF-8 become '?'; valid UTF-8, \n and \t stay. */
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x",
                                                   "a\x1b[31mb\tc\n\xff\xc3\xa9\xed\xa0\x80\x7f", SIZE_MAX,
                                                   1024, 0, &s),
                         0);
        assert_string_equal(s,
                            "no specific error detected: exit status 1, output: "
                            "a?[31mb\tc\n?\xc3\xa9???"
                            "?");
        free(s);

        /* Only the tail is kept, cut at a rune boundary: "é" is two bytes, the cut falls inside. */
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x",
                                                   "0123456789\xc3\xa9xyz", SIZE_MAX, 4, 0, &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 1, output: ...xyz");
        free(s);
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x",
                                                   "0123456789\xc3\xa9xyz", SIZE_MAX, 5, 0, &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 1, output: ...\xc3\xa9xyz");
        free(s);
}

static void test_failure_message_tail_lines_redacted(void **state) {
        OsUpdateOutcome o = EXITED(1);
        char *s = NULL;

        /* The last 3 lines; what was left out is marked. */
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x", "1\n2\n3\n4\n5\n", 3,
                                                   1024, 0, &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 1, output: ...\n3\n4\n5\n");
        free(s);
        /* The byte limit takes whole lines only: "long line" does not fit after the cut. */
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x", "long line\nab\ncd",
                                                   20, 6, 0, &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 1, output: ...\nab\ncd");
        free(s);
        /* Nothing left out: no marker. */
        assert_int_equal(os_update_failure_message(OS_UPDATE_CLASS_UNKNOWN, &o, "/x", "ab\ncd", 2, 5, 0, &s),
                         0);
        assert_string_equal(s, "no specific error detected: exit status 1, output: ab\ncd");
        free(s);
        /* Credentials are gone before the cut, a private key with all its lines. */
        assert_int_equal(os_update_failure_message(
                                 OS_UPDATE_CLASS_NON_RETRIABLE, &o, "/x",
                                 "curl -H 'Authorization: Bearer t0k3n'\n-----BEGIN PRIVATE KEY-----\n"
                                 "k1\nk2\n-----END PRIVATE KEY-----\nsystem failure\n",
                                 3, 1024, 0, &s),
                         0);
        assert_string_equal(
                s,
                "non-retriable error detected: exit status 1, output: curl -H 'Authorization: Bearer "
                "[redacted]'\n[redacted private key]\nsystem failure\n");
        free(s);
}

static void test_strings(void **state) {
        for (OsUpdateClass c = 0; c < _OS_UPDATE_CLASS_MAX; c++)
                assert_int_equal(os_update_class_from_string(os_update_class_to_string(c)), c);
        for (OsUpdateTermination t = 0; t < _OS_UPDATE_TERMINATION_MAX; t++)
                assert_int_equal(os_update_termination_from_string(os_update_termination_to_string(t)), t);
        assert_null(os_update_class_to_string(_OS_UPDATE_CLASS_MAX));
        assert_int_equal(os_update_class_from_string("bogus"), _OS_UPDATE_CLASS_INVALID);
        assert_int_equal(os_update_termination_from_string(NULL), _OS_UPDATE_TERMINATION_INVALID);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_classify_table),
                cmocka_unit_test(test_scan_split_anywhere),
                cmocka_unit_test(test_scan_byte_by_byte_long_stream),
                cmocka_unit_test(test_classify_non_exit),
                cmocka_unit_test(test_failure_codes),
                cmocka_unit_test(test_retry_policy_table),
                cmocka_unit_test(test_retry_schedule_deterministic),
                cmocka_unit_test(test_outcome_strings),
                cmocka_unit_test(test_failure_message),
                cmocka_unit_test(test_failure_message_sanitizes),
                cmocka_unit_test(test_failure_message_tail_lines_redacted),
                cmocka_unit_test(test_strings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
