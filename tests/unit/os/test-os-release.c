/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "os/os-release.h"
#include "tests.h"

static char *version_of(const char *text, int *ret_r, char **ret_error) {
        char *v = NULL;
        *ret_r = os_release_version(text, strlen(text), &v, ret_error);
        return v;
}

/* docs/node-protocol.md §9 scenario 27 and §4.3, plus the regex corner cases that decide real distributions.
 */
static void test_versions(void **state) {
        static const struct {
                const char *text, *version;
        } table[] = {
                { "PRETTY_NAME=\"Garden Linux 1592.6\"\n", "1592.6" },
                { "PRETTY_NAME=\"Garden Linux 1592.6.3\"\n", "1592.6.3" },
                { "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n", "12" },
                { "NAME=x\nPRETTY_NAME=Garden Linux 1443.10\nVERSION_ID=9\n", "1443.10" },
                { "PRETTY_NAME=\"SUSE Linux Enterprise Server 15 SP3\"", "15" },
                { "PRETTY_NAME=\"Flatcar Container Linux by Kinvolk 3815.2.5 (Oklo)\"\n", "3815.2.5" },
                { "PRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\r\n", "22.04.4" },
                /* a trailing letter kills the last group only: RE2 backtracks to the boundary at '.' */
                { "PRETTY_NAME=\"OS 1592.6.3a\"\n", "1592.6" },
                { "PRETTY_NAME=\"OS 1592Foo 7\"\n", "7" },
                { "PRETTY_NAME=\"x1.2 3.4\"\n", "2" }, /* "2" follows '.', a boundary */
                { "PRETTY_NAME=\"OS 1.\"\n", "1" },
                { "PRETTY_NAME=\"OS 1..2\"\n", "1" },
                { "PRETTY_NAME=\"\"\"OS 7\"\"\"\n", "7" }, /* Trim removes every '"' */
                /* first PRETTY_NAME wins, and the key may appear anywhere (unanchored regex) */
                { "PRETTY_NAME=\"A 1\"\nPRETTY_NAME=\"B 2\"\n", "1" },
                { "# comment PRETTY_NAME=\"C 3\"\nPRETTY_NAME=\"D 4\"\n", "3" },
                { "PRETTY_NAME='Single 5'\n", "5" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *v = NULL, *err = NULL;
                int r;

                v = version_of(table[i].text, &r, &err);
                if (r != 0)
                        fail_msg("%s: %d %s", table[i].text, r, strempty(err));
                assert_string_equal(v, table[i].version);
                assert_null(err);
        }
}

static void test_no_version(void **state) {
        static const struct {
                const char *text, *error;
        } table[] = {
                { "PRETTY_NAME=\"Garden Linux 1592Foo\"\n",
                  "unable to find version in \"Garden Linux 1592Foo\" with regex: \\b\\d+(?:\\.\\d+)*\\b" },
                { "NAME=Garden\nVERSION_ID=1592.6\n",
                  "unable to find version in \"\" with regex: \\b\\d+(?:\\.\\d+)*\\b" },
                { "", "unable to find version in \"\" with regex: \\b\\d+(?:\\.\\d+)*\\b" },
                { "PRETTY_NAME=\"a_1\"\n",
                  "unable to find version in \"a_1\" with regex: \\b\\d+(?:\\.\\d+)*\\b" },
                { "PRETTY_NAME=\"tab\t\\\"x\"\n",
                  "unable to find version in \"tab\\t\\\\\\\"x\" with regex: \\b\\d+(?:\\.\\d+)*\\b" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *v = NULL, *err = NULL;
                int r;

                v = version_of(table[i].text, &r, &err);
                assert_int_equal(r, -ENODATA);
                assert_null(v);
                assert_non_null(err);
                assert_string_equal(err, table[i].error);
        }

        /* No error text requested: still -ENODATA. */
        {
                char *v = NULL;
                assert_int_equal(os_release_version("X=1\n", 4, &v, NULL), -ENODATA);
                assert_null(v);
        }
}

static void test_limits_and_binary(void **state) {
        _cleanup_free_ char *big = NULL, *v = NULL, *err = NULL, *pretty = NULL;
        static const char with_nul[] = "NAME=a\0b\nPRETTY_NAME=\"OS 42\"\n";

        big = calloc(1, OS_RELEASE_MAX + 2);
        assert_non_null(big);
        memset(big, 'a', OS_RELEASE_MAX + 1);
        assert_int_equal(os_release_version(big, OS_RELEASE_MAX + 1, &v, &err), -EFBIG);
        assert_null(v);
        assert_non_null(err);

        /* An embedded NUL before the key does not hide it. */
        assert_int_equal(os_release_pretty_name(with_nul, sizeof(with_nul) - 1, &pretty), 0);
        assert_string_equal(pretty, "OS 42");

        /* Size is honoured: the key beyond `size` is not seen. */
        {
                _cleanup_free_ char *p = NULL;
                assert_int_equal(os_release_pretty_name("PRETTY_NAME=x", 5, &p), 0);
                assert_string_equal(p, "");
        }
}

static void test_read_error(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL;

        a = os_release_read_error("/etc/os-release", -ENOENT);
        assert_string_equal(a,
                            "unable to get operating system name: error opening file \"/etc/os-release\": "
                            "open /etc/os-release: file does not exist");
        b = os_release_read_error("/x", -EACCES);
        assert_non_null(strstr(b, "Permission denied"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_versions),
                cmocka_unit_test(test_no_version),
                cmocka_unit_test(test_limits_and_binary),
                cmocka_unit_test(test_read_error),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
