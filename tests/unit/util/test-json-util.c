/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>

#include "tests.h"
#include "util/json-util.h"
#include "util/strv.h"

static json_t *doc(const char *text) {
        json_t *j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);

        assert_non_null(j);
        return j;
}

/* `error` by address: the call that sets it is an argument of the same call. */
static void expect_error(int r, char **error, const char *want) {
        assert_int_equal(r, -EINVAL);
        assert_non_null(*error);
        assert_string_equal(*error, want);
        *error = mfree(*error);
}

static void test_unset(void **state) {
        json_t *j = doc("{\"n\": null}");
        const json_t *o = (const json_t *) 1;
        const char *s = "x";
        char *c = (char *) "x", **l = (char **) &c;
        json_int_t i = 7;
        uint64_t u = 7;
        int b = 7;

        /* absent, null and a NULL or non-object parent are all unset */
        for (size_t k = 0; k < 2; k++) {
                const char *key = k == 0 ? "n" : "missing";

                assert_int_equal(json_field_object(j, "w", key, &o, NULL), 0);
                assert_null(o);
                assert_int_equal(json_field_array(j, "w", key, &o, NULL), 0);
                assert_null(o);
                assert_int_equal(json_field_string_ref(j, "w", key, &s, NULL), 0);
                assert_null(s);
                assert_int_equal(json_field_string(j, "w", key, 10, 0, &c, NULL), 0);
                assert_null(c);
                assert_int_equal(json_field_strv(j, "w", key, 10, 10, 0, &l, NULL), 0);
                assert_null(l);
                assert_int_equal(json_field_bool(j, "w", key, &b, NULL), 0);
                assert_int_equal(b, -1);
                assert_int_equal(json_field_integer(j, "w", key, &i, NULL), 0);
                assert_int_equal(i, 0);
                assert_int_equal(json_field_u64(j, "w", key, 10, &u, NULL), 0);
                assert_int_equal(u, 0);
        }
        assert_null(json_field(NULL, "n"));
        assert_null(json_field(j, "n")); /* null */
        json_decref(j);
        j = json_array();
        assert_null(json_field(j, "n"));
        assert_int_equal(json_field_object(NULL, "w", "n", &o, NULL), 0);
        json_decref(j);
}

static void test_types(void **state) {
        json_t *j = doc("{\"s\": \"a\", \"i\": -3, \"b\": false, \"l\": [\"x\", \"\"], \"o\": {}}");
        char *e = NULL, *c = NULL, **l = NULL;
        const json_t *o;
        json_int_t i;
        uint64_t u;
        int b;

        expect_error(json_field_object(j, "spec", "s", &o, &e), &e, "spec.s: expected an object");
        assert_null(o);
        expect_error(json_field_array(j, "spec", "o", &o, &e), &e, "spec.o: expected a list");
        expect_error(json_field_string(j, NULL, "i", 10, 0, &c, &e), &e, "i: expected a string");
        expect_error(json_field_bool(j, "", "s", &b, &e), &e, "s: expected true or false");
        assert_int_equal(b, -1);
        expect_error(json_field_integer(j, "x", "b", &i, &e), &e, "x.b: expected an integer");
        expect_error(json_field_u64(j, "x", "i", 10, &u, &e), &e, "x.i: expected a non-negative integer");
        expect_error(json_field_strv(j, "x", "s", 10, 10, 0, &l, &e), &e, "x.s: expected a list");

        assert_int_equal(json_field_integer(j, "x", "i", &i, NULL), 1);
        assert_int_equal(i, -3);
        assert_int_equal(json_field_bool(j, "x", "b", &b, NULL), 0);
        assert_int_equal(b, 0);
        assert_int_equal(json_field_object(j, "x", "o", &o, NULL), 0);
        assert_true(json_is_object(o));
        assert_int_equal(json_field_strv(j, "x", "l", 2, 1, 0, &l, NULL), 0);
        assert_int_equal(strv_length(l), 2);
        assert_string_equal(l[1], "");
        strv_freep(&l);
        expect_error(json_field_strv(j, "x", "l", 1, 1, 0, &l, &e), &e, "x.l: more than 1 entries");
        assert_null(l);
        json_decref(j);
}

static void test_strings(void **state) {
        json_t *j = doc(
                "{\"e\": \"\", \"long\": \"abcdef\", \"nul\": \"a\\u0000b\", \"a.b/c\": 1, \"l\": [\"ok\", 2]}");
        char *e = NULL, *c = NULL, **l = NULL;
        const char *s;

        assert_int_equal(json_field_string(j, "w", "e", 10, 0, &c, NULL), 0);
        assert_string_equal(c, ""); /* kept without the flag */
        free(c);
        assert_int_equal(json_field_string(j, "w", "e", 10, JSON_FIELD_EMPTY_IS_UNSET, &c, NULL), 0);
        assert_null(c);
        expect_error(json_field_string(j, "w", "e", 10, JSON_FIELD_REQUIRED, &c, &e), &e,
                     "w.e: must not be empty");
        expect_error(json_field_string(j, "w", "gone", 10, JSON_FIELD_REQUIRED, &c, &e), &e,
                     "w.gone: must not be empty");
        expect_error(json_field_string(j, "w", "long", 5, 0, &c, &e), &e, "w.long: longer than 5 bytes");
        assert_int_equal(json_field_string(j, "w", "long", 6, 0, &c, NULL), 0);
        assert_string_equal(c, "abcdef");
        free(c);
        expect_error(json_field_string(j, "w", "nul", 10, 0, &c, &e), &e,
                     "w.nul: contains a NUL character (\\u0000)");
        assert_int_equal(json_field_string_ref(j, "w", "nul", &s, NULL), 0); /* borrowed: type only */
        assert_string_equal(s, "a");
        /* a key that is no identifier is quoted */
        expect_error(json_field_string(j, "metadata.labels", "a.b/c", 10, 0, &c, &e), &e,
                     "metadata.labels[\"a.b/c\"]: expected a string");
        expect_error(json_field_strv(j, "w", "l", 10, 10, 0, &l, &e), &e, "w.l[1]: expected a string");
        expect_error(json_field_strv(j, "w", "l", 10, 1, 0, &l, &e), &e, "w.l[0]: longer than 1 bytes");
        expect_error(json_field_error(&e, "a[2]", "b", "bad %d", 5), &e, "a[2].b: bad 5");
        json_decref(j);
}

static void test_lists(void **state) {
        json_t *j = doc("{\"l\": []}");
        char *e = NULL, **l = NULL;

        assert_int_equal(json_field_strv(j, "w", "l", 10, 10, 0, &l, NULL), 0);
        assert_non_null(l); /* [] is an empty list without the flag */
        assert_null(l[0]);
        strv_freep(&l);
        assert_int_equal(json_field_strv(j, "w", "l", 10, 10, JSON_FIELD_EMPTY_IS_UNSET, &l, NULL), 0);
        assert_null(l);
        expect_error(json_field_strv(j, "w", "l", 10, 10, JSON_FIELD_REQUIRED, &l, &e), &e,
                     "w.l: must not be empty");
        json_decref(j);
}

static void test_u64(void **state) {
        json_t *j = doc("{\"u\": 4294967296}");
        char *e = NULL;
        uint64_t u;

        assert_int_equal(json_field_u64(j, "w", "u", UINT64_MAX, &u, NULL), 1);
        assert_true(u == UINT64_C(4294967296));
        expect_error(json_field_u64(j, "w", "u", UINT32_MAX, &u, &e), &e, "w.u: out of range");
        assert_true(u == 0);
        json_decref(j);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_unset), cmocka_unit_test(test_types), cmocka_unit_test(test_strings),
                cmocka_unit_test(test_lists), cmocka_unit_test(test_u64),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
