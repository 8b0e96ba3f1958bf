/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"
#include "util/log-once.h"

static void test_each_distinct_once(void **state) {
        _cleanup_(log_once_done) LogOnce o = {};

        assert_true(log_once_check(&o, -EIO, "cannot read x"));
        assert_false(log_once_check(&o, -EIO, "cannot read x"));
        assert_string_equal(log_once_message(&o), "cannot read x");
        /* Another message, or the same message with another error, is news. */
        assert_true(log_once_check(&o, -EIO, "cannot read y"));
        assert_true(log_once_check(&o, -EACCES, "cannot read y"));
        assert_false(log_once_check(&o, -EACCES, "cannot read y"));
        /* Back to an earlier one: only the last is remembered. */
        assert_true(log_once_check(&o, -EIO, "cannot read x"));
}

static void test_error_only_and_zero(void **state) {
        _cleanup_(log_once_done) LogOnce o = {};

        /* Nothing remembered yet: even "no error" is news once (a first outcome to say). */
        assert_true(log_once_check(&o, 0, NULL));
        assert_false(log_once_check(&o, 0, NULL));
        assert_true(log_once_check(&o, -EPERM, NULL));
        assert_false(log_once_check(&o, -EPERM, NULL));
        assert_null(log_once_message(&o));
        /* A message where there was none is news. */
        assert_true(log_once_check(&o, -EPERM, "forbidden"));
        assert_true(log_once_check(&o, -EPERM, NULL));
}

static void test_clear(void **state) {
        _cleanup_(log_once_done) LogOnce o = {};

        assert_true(log_once_check(&o, -EIO, "broken"));
        log_once_clear(&o);
        assert_null(log_once_message(&o));
        /* It cleared: the same failure again is said again. */
        assert_true(log_once_check(&o, -EIO, "broken"));
        log_once_done(&o);
        log_once_done(&o); /* twice is fine */
        log_once_done(NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_each_distinct_once),
                cmocka_unit_test(test_error_only_and_zero),
                cmocka_unit_test(test_clear),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
