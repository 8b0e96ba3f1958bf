/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <yaml.h>

#include "util/macro.h"
#include "util/yaml-json.h"

typedef struct Parser {
        yaml_parser_t yaml;
        char *error; /* owned */
} Parser;

static int fail(Parser *p, int r, const yaml_mark_t *mark, const char *what) {
        free(p->error);
        if (asprintf(&p->error, "line %zu, column %zu: %s", mark->line + 1, mark->column + 1, what) < 0)
                p->error = NULL;
        return r;
}

static int next_event(Parser *p, yaml_event_t *ev) {
        if (yaml_parser_parse(&p->yaml, ev))
                return 0;
        return fail(p, -EBADMSG, &p->yaml.problem_mark, p->yaml.problem ? p->yaml.problem : "invalid YAML");
}

static bool match_any(const char *s, const char *const *words) {
        for (; *words; words++)
                if (streq(s, *words))
                        return true;
        return false;
}

static json_t *plain_scalar(const char *s, size_t len) {
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
        static const char *const trues[] = { "true", "True", "TRUE", NULL };
        static const char *const falses[] = { "false", "False", "FALSE", NULL };
        char *end;

        if (strlen(s) != len) /* embedded NUL: keep it a string, jansson copes */
                return json_stringn(s, len);
        if (match_any(s, nulls))
                return json_null();
        if (match_any(s, trues))
                return json_true();
        if (match_any(s, falses))
                return json_false();

        if ((s[0] >= '0' && s[0] <= '9') || ((s[0] == '-' || s[0] == '+') && s[1] >= '0' && s[1] <= '9')) {
                long long v;
                double d;

                errno = 0;
                v = strtoll(s, &end, 10);
                if (*end == '\0' && errno == 0)
                        return json_integer(v);
                errno = 0;
                d = strtod(s, &end);
                if (*end == '\0' && errno == 0 && strpbrk(s, ".eE"))
                        return json_real(d);
        }
        return json_stringn(s, len);
}

static int parse_node(Parser *p, yaml_event_t *ev, unsigned depth, json_t **ret);

static int parse_pair(Parser *p, json_t *obj, yaml_event_t *key_ev, unsigned depth) {
        const char *key = (const char *) key_ev->data.scalar.value;
        yaml_event_t val_ev;
        json_t *val = NULL;
        int r;

        if (key_ev->type != YAML_SCALAR_EVENT)
                return fail(p, -EBADMSG, &key_ev->start_mark, "mapping keys must be scalars");
        if (json_object_get(obj, key)) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "duplicate key \"%s\"", key) < 0)
                        m = NULL;
                return fail(p, -EBADMSG, &key_ev->start_mark, m ? m : "duplicate key");
        }

        r = next_event(p, &val_ev);
        if (r < 0)
                return r;
        r = parse_node(p, &val_ev, depth + 1, &val);
        yaml_event_delete(&val_ev);
        if (r < 0)
                return r;
        if (json_object_set_new(obj, key, val) < 0)
                return -ENOMEM;
        return 0;
}

static int parse_mapping(Parser *p, unsigned depth, json_t **ret) {
        json_t *obj = json_object();

        if (!obj)
                return -ENOMEM;
        for (;;) {
                yaml_event_t key_ev;
                int r;

                r = next_event(p, &key_ev);
                if (r >= 0 && key_ev.type == YAML_MAPPING_END_EVENT) {
                        yaml_event_delete(&key_ev);
                        *ret = obj;
                        return 0;
                }
                if (r >= 0) {
                        r = parse_pair(p, obj, &key_ev, depth);
                        yaml_event_delete(&key_ev);
                }
                if (r < 0) {
                        json_decref(obj);
                        return r;
                }
        }
}

static int parse_sequence(Parser *p, unsigned depth, json_t **ret) {
        json_t *arr = json_array();

        if (!arr)
                return -ENOMEM;
        for (;;) {
                yaml_event_t ev;
                json_t *val = NULL;
                int r;

                r = next_event(p, &ev);
                if (r < 0) {
                        json_decref(arr);
                        return r;
                }
                if (ev.type == YAML_SEQUENCE_END_EVENT) {
                        yaml_event_delete(&ev);
                        *ret = arr;
                        return 0;
                }
                r = parse_node(p, &ev, depth + 1, &val);
                yaml_event_delete(&ev);
                if (r >= 0 && json_array_append_new(arr, val) < 0)
                        r = -ENOMEM;
                if (r < 0) {
                        json_decref(arr);
                        return r;
                }
        }
}

static int parse_node(Parser *p, yaml_event_t *ev, unsigned depth, json_t **ret) {
        json_t *v;

        if (depth > YAML_JSON_MAX_DEPTH)
                return fail(p, -EBADMSG, &ev->start_mark, "nesting too deep");

        switch (ev->type) {
        case YAML_SCALAR_EVENT: {
                const char *s = (const char *) ev->data.scalar.value;
                const char *tag = (const char *) ev->data.scalar.tag;

                if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !(tag && streq(tag, YAML_STR_TAG)))
                        v = plain_scalar(s, ev->data.scalar.length);
                else
                        v = json_stringn(s, ev->data.scalar.length);
                if (!v)
                        return fail(p, -EBADMSG, &ev->start_mark, "scalar is not valid UTF-8");
                *ret = v;
                return 0;
        }
        case YAML_MAPPING_START_EVENT:
                return parse_mapping(p, depth, ret);
        case YAML_SEQUENCE_START_EVENT:
                return parse_sequence(p, depth, ret);
        case YAML_ALIAS_EVENT:
                return fail(p, -ENOTSUP, &ev->start_mark, "aliases are not supported");
        default:
                return fail(p, -EBADMSG, &ev->start_mark, "unexpected YAML event");
        }
}

int yaml_to_json(const char *data, size_t size, json_t **ret, char **ret_error) {
        Parser p = {};
        json_t *root = NULL;
        yaml_event_t ev;
        int r;

        assert(data || size == 0);
        assert(ret);

        if (!yaml_parser_initialize(&p.yaml))
                return -ENOMEM;
        yaml_parser_set_input_string(&p.yaml, (const unsigned char *) (data ? data : ""), size);

        /* STREAM-START, then DOCUMENT-START or STREAM-END for an empty input. */
        for (;;) {
                r = next_event(&p, &ev);
                if (r < 0)
                        goto finish;
                if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_START_EVENT) {
                        yaml_event_delete(&ev);
                        continue;
                }
                break;
        }
        if (ev.type == YAML_STREAM_END_EVENT) {
                yaml_event_delete(&ev);
                root = json_null();
                r = 0;
                goto finish;
        }
        r = parse_node(&p, &ev, 0, &root);
        yaml_event_delete(&ev);
        if (r < 0)
                goto finish;

        /* DOCUMENT-END; syntax errors after the value still surface here. */
        r = next_event(&p, &ev);
        if (r >= 0)
                yaml_event_delete(&ev);

finish:
        yaml_parser_delete(&p.yaml);
        if (r < 0) {
                json_decref(root);
                if (ret_error)
                        *ret_error = TAKE_PTR(p.error);
                free(p.error);
                return r;
        }
        free(p.error);
        *ret = root;
        return 0;
}
