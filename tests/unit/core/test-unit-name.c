/* SPDX-License-Identifier: Apache-2.0 */
#include "core/unit-name.h"
#include "tests.h"

static void test_valid(void **state) {
        static const struct {
                const char *in, *out;
        } table[] = {
                { "kubelet", "kubelet.service" },
                { "kubelet.service", "kubelet.service" },
                { "foo.timer", "foo.timer" },
                { "getty@tty1", "getty@tty1.service" },
                { "getty@tty1.service", "getty@tty1.service" },
                { "a:b_c-d.e", "a:b_c-d.e.service" },
                { "containerd", "containerd.service" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(unit_name_normalize(table[i].in, &out, NULL), 0);
                assert_string_equal(out, table[i].out);
        }
}

static void test_invalid(void **state) {
        char longname[300];
        static const char *const bad[] = {
                "",
                "../../etc/passwd",
                "foo;rm -rf /",
                "a b",
                "a\tb",
                "foo/bar",
                "a\nb",
                "..",
                ".hidden",
                "-x",
                "foo@.service",
                "a@b@c",
                "x$y",
                "x\\x2dy",
                "trailing.",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *out = NULL;
                const char *why = NULL;
                assert_int_equal(unit_name_normalize(bad[i], &out, &why), -EINVAL);
                assert_null(out);
                assert_non_null(why);
        }

        memset(longname, 'a', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        {
                char *out = NULL;
                assert_int_equal(unit_name_normalize(longname, &out, NULL), -EINVAL);
        }
        /* 247 + ".service" = 255: still fine; 248 is one too many. */
        longname[247] = '\0';
        {
                _cleanup_free_ char *out = NULL;
                assert_int_equal(unit_name_normalize(longname, &out, NULL), 0);
                assert_int_equal(strlen(out), 255);
        }
        longname[247] = 'a';
        longname[248] = '\0';
        {
                char *out = NULL;
                assert_int_equal(unit_name_normalize(longname, &out, NULL), -EINVAL);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),
                cmocka_unit_test(test_invalid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
