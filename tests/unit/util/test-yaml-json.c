/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>

#include "tests.h"
#include "util/yaml-json.h"

static json_t *parse_ok(const char *yaml) {
        json_t *j = NULL;
        assert_int_equal(yaml_to_json(yaml, strlen(yaml), &j, NULL), 0);
        assert_non_null(j);
        return j;
}

static void assert_json(const char *yaml, const char *expected) {
        json_t *j = parse_ok(yaml), *e = json_loads(expected, JSON_DECODE_ANY, NULL);
        assert_non_null(e);
        if (!json_equal(j, e)) {
                char *s = json_dumps(j, JSON_ENCODE_ANY);
                fail_msg("%s -> %s, expected %s", yaml, s, expected);
        }
        json_decref(j);
        json_decref(e);
}

static void test_scalars(void **state) {
        assert_json("a: 1\nb: -2\nc: 1.5\nd: true\ne: False\nf: null\ng: ~\nh:\ni: text\n",
                    "{\"a\":1,\"b\":-2,\"c\":1.5,\"d\":true,\"e\":false,\"f\":null,\"g\":null,"
                    "\"h\":null,\"i\":\"text\"}");
        assert_json("a: \"1\"\nb: 'true'\nc: !!str 5\nd: 1.31.2\ne: 90s\n",
                    "{\"a\":\"1\",\"b\":\"true\",\"c\":\"5\",\"d\":\"1.31.2\",\"e\":\"90s\"}");
}

static void test_structure(void **state) {
        assert_json("a:\n  b: [1, 2]\n  c:\n  - x: y\n", "{\"a\":{\"b\":[1,2],\"c\":[{\"x\":\"y\"}]}}");
        assert_json("", "null");
        assert_json("---\n", "null");
        assert_json("{\"json\": [true]}", "{\"json\":[true]}");
        assert_json("block: |\n  line1\n  line2\n", "{\"block\":\"line1\\nline2\\n\"}");
}

static void test_errors(void **state) {
        static const char *const bad[] = {
                "a: [1, 2\n", "a: 1\na: 2\n", "a: &x 1\nb: *x\n", "? [1]\n: x\n", "a: b: c\n",
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *err = NULL;
                json_t *j = NULL;
                int r = yaml_to_json(bad[i], strlen(bad[i]), &j, &err);
                assert_true(r == -EBADMSG || r == -ENOTSUP);
                assert_null(j);
                assert_non_null(err);
                assert_non_null(strstr(err, "line "));
        }
}

static void test_depth_limit(void **state) {
        char buf[4096] = "";
        _cleanup_free_ char *err = NULL;
        json_t *j = NULL;

        for (int i = 0; i < 200; i++)
                strcat(buf, "[");
        assert_int_equal(yaml_to_json(buf, strlen(buf), &j, &err), -EBADMSG);
        assert_non_null(err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_scalars),
                cmocka_unit_test(test_structure),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_depth_limit),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
