/* SPDX-License-Identifier: Apache-2.0 */
#include "tests.h"

typedef enum Colour {
        COLOUR_RED,
        COLOUR_UNNAMED,
        COLOUR_BLUE,
        _COLOUR_MAX,
        _COLOUR_INVALID = -EINVAL,
} Colour;

static const char *const colour_names[_COLOUR_MAX] = {
        [COLOUR_RED] = "red",
        [COLOUR_BLUE] = "blue",
};

const char *colour_to_string(Colour c);
Colour colour_from_string(const char *s);
DEFINE_STRING_TABLE_LOOKUP(colour, Colour, colour_names);

static void test_string_table(void **state) {
        assert_string_equal(colour_to_string(COLOUR_RED), "red");
        assert_string_equal(colour_to_string(COLOUR_BLUE), "blue");
        assert_null(colour_to_string(COLOUR_UNNAMED)); /* a gap */
        assert_null(colour_to_string(_COLOUR_MAX));
        assert_null(colour_to_string(_COLOUR_INVALID));
        assert_int_equal(colour_from_string("red"), COLOUR_RED);
        assert_int_equal(colour_from_string("blue"), COLOUR_BLUE);
        assert_int_equal(colour_from_string("Blue"), _COLOUR_INVALID);
        assert_int_equal(colour_from_string(""), _COLOUR_INVALID);
        assert_int_equal(colour_from_string(NULL), _COLOUR_INVALID);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_string_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
