/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "util/json-util.h"
#include "util/macro.h"
#include "util/strv.h"

const json_t *json_field(const json_t *obj, const char *key) {
        const json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;

        return json_is_null(v) ? NULL : v;
}

static bool key_is_plain(const char *key) {
        if (!*key)
                return false;
        for (const char *c = key; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                      *c == '_' || *c == '-'))
                        return false;
        return true;
}

/* "<where>.<key>" or "<where>["<key>"]", then "[<index>]" for a list entry (index >= 0). */
static int field_errorv(char **ret_error, const char *where, const char *key, ssize_t index,
                        const char *format, va_list ap) {
        _cleanup_free_ char *what = NULL, *idx = NULL;
        bool plain = key_is_plain(key);

        if (!ret_error)
                return -EINVAL;
        if (vasprintf(&what, format, ap) < 0 || (index >= 0 && asprintf(&idx, "[%zd]", index) < 0)) {
                *ret_error = NULL;
                return -EINVAL;
        }
        if (asprintf(ret_error, "%s%s%s%s%s: %s", strempty(where),
                     isempty(where) ? "" :
                             plain  ? "." :
                                      "[\"",
                     key, isempty(where) || plain ? "" : "\"]", strempty(idx), what) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

int json_field_error(char **ret_error, const char *where, const char *key, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = field_errorv(ret_error, where, key, -1, format, ap);
        va_end(ap);
        return r;
}

int json_field_entry_error(char **ret_error, const char *where, const char *key, size_t index,
                           const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = field_errorv(ret_error, where, key, (ssize_t) index, format, ap);
        va_end(ap);
        return r;
}

static int field_typed(const json_t *obj, const char *where, const char *key, json_type type,
                       const char *name, const json_t **ret, char **ret_error) {
        const json_t *v = json_field(obj, key);

        *ret = NULL;
        if (v && json_typeof(v) != type)
                return json_field_error(ret_error, where, key, "expected %s", name);
        *ret = v;
        return 0;
}

int json_field_object(const json_t *obj, const char *where, const char *key, const json_t **ret,
                      char **ret_error) {
        assert(ret);
        return field_typed(obj, where, key, JSON_OBJECT, "an object", ret, ret_error);
}

int json_field_array(const json_t *obj, const char *where, const char *key, const json_t **ret,
                     char **ret_error) {
        assert(ret);
        return field_typed(obj, where, key, JSON_ARRAY, "a list", ret, ret_error);
}

int json_field_string_ref(const json_t *obj, const char *where, const char *key, const char **ret,
                          char **ret_error) {
        const json_t *v;
        int r;

        assert(ret);
        r = field_typed(obj, where, key, JSON_STRING, "a string", &v, ret_error);
        *ret = v ? json_string_value(v) : NULL;
        return r;
}

/* Why `v` is no string of at most `max` bytes without a NUL, or NULL if it is one. */
static const char *string_problem(const json_t *v, size_t max, char *buf, size_t size) {
        if (!json_is_string(v))
                return "expected a string";
        if (json_string_length(v) > max) {
                (void) snprintf(buf, size, "longer than %zu bytes", max);
                return buf;
        }
        if (strlen(json_string_value(v)) != json_string_length(v))
                return "contains a NUL character (\\u0000)";
        return NULL;
}

int json_field_string(const json_t *obj, const char *where, const char *key, size_t max,
                      JsonFieldFlags flags, char **ret, char **ret_error) {
        const json_t *v = json_field(obj, key);
        const char *problem;
        char buf[64];

        assert(ret);
        *ret = NULL;
        if (v && (problem = string_problem(v, max, buf, sizeof(buf))))
                return json_field_error(ret_error, where, key, "%s", problem);
        if (!v || json_string_length(v) == 0) {
                if ((flags & JSON_FIELD_REQUIRED))
                        return json_field_error(ret_error, where, key, "must not be empty");
                if (!v || (flags & JSON_FIELD_EMPTY_IS_UNSET))
                        return 0;
        }
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

int json_field_strv(const json_t *obj, const char *where, const char *key, size_t max_n, size_t max_len,
                    JsonFieldFlags flags, char ***ret, char **ret_error) {
        _cleanup_strv_free_ char **l = NULL;
        const json_t *v, *e;
        size_t i;
        int r;

        assert(ret);
        *ret = NULL;
        r = json_field_array(obj, where, key, &v, ret_error);
        if (r < 0)
                return r;
        if (json_array_size(v) == 0) {
                if ((flags & JSON_FIELD_REQUIRED))
                        return json_field_error(ret_error, where, key, "must not be empty");
                if (!v || (flags & JSON_FIELD_EMPTY_IS_UNSET))
                        return 0;
        }
        if (json_array_size(v) > max_n)
                return json_field_error(ret_error, where, key, "more than %zu entries", max_n);
        l = calloc(json_array_size(v) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(v, i, e) {
                char buf[64];
                const char *problem = string_problem(e, max_len, buf, sizeof(buf));

                if (problem)
                        return json_field_entry_error(ret_error, where, key, i, "%s", problem);
                l[i] = strdup(json_string_value(e));
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int json_field_bool(const json_t *obj, const char *where, const char *key, int *ret, char **ret_error) {
        const json_t *v = json_field(obj, key);

        assert(ret);
        *ret = -1;
        if (v && !json_is_boolean(v))
                return json_field_error(ret_error, where, key, "expected true or false");
        if (v)
                *ret = json_is_true(v);
        return 0;
}

int json_field_integer(const json_t *obj, const char *where, const char *key, json_int_t *ret,
                       char **ret_error) {
        const json_t *v = json_field(obj, key);

        assert(ret);
        *ret = 0;
        if (!v)
                return 0;
        if (!json_is_integer(v))
                return json_field_error(ret_error, where, key, "expected an integer");
        *ret = json_integer_value(v);
        return 1;
}

int json_field_u64(const json_t *obj, const char *where, const char *key, uint64_t max, uint64_t *ret,
                   char **ret_error) {
        const json_t *v = json_field(obj, key);

        assert(ret);
        *ret = 0;
        if (!v)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return json_field_error(ret_error, where, key, "expected a non-negative integer");
        if ((uint64_t) json_integer_value(v) > max)
                return json_field_error(ret_error, where, key, "out of range");
        *ret = (uint64_t) json_integer_value(v);
        return 1;
}
