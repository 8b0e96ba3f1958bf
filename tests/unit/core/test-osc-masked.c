/* SPDX-License-Identifier: Apache-2.0 */
#include "core/osc-masked.h"
#include "tests.h"

/* Issue 32: a masked unit is named once per OSC, however many of its items were left out. */
static void test_each_path_once(void **state) {
        _cleanup_(osc_masked_done) OscMasked m = {};
        _cleanup_free_ char *text = NULL, *none = NULL;

        assert_int_equal(osc_masked_describe(&m, &none), 0);
        assert_null(none);
        assert_int_equal(osc_masked_add(&m, "/u/x.service", "not written or enabled"), 0);
        assert_int_equal(osc_masked_add(&m, "/u/x.service.d/10-a.conf", "not written"), 0);
        assert_int_equal(osc_masked_add(&m, "/u/x.service", "not restarted"), 0);
        assert_int_equal(osc_masked_add(&m, "/u/x.service", "not restarted"), 0); /* a resumed item */
        assert_int_equal(m.n_paths, 2);
        assert_int_equal(osc_masked_describe(&m, &text), 0);
        assert_string_equal(text,
                            "/u/x.service (not written or enabled, not restarted); "
                            "/u/x.service.d/10-a.conf (not written)");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_each_path_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
