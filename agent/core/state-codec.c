/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/state-codec.h"

/* ---- encoding ---- */

static json_t *str_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

static json_t *strv_json(char *const *l) {
        json_t *a;

        if (!l)
                return json_null();
        a = json_array();
        for (; a && *l; l++)
                if (json_array_append_new(a, json_string(*l)) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *done_json(uint64_t done) {
        json_t *a = json_array();

        for (UpdateStep s = 0; a && s < _UPDATE_STEP_MAX; s++)
                if ((done & (UINT64_C(1) << s)) && json_array_append_new(a, json_string(update_step_to_string(s))) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

#define FIELD(tx, f, type) ((type *) ((uint8_t *) (tx) + (f)->offset))

/* Splits "object.key" into the object name (NULL: top level) and the key. */
static const char *field_leaf(const TxField *f, char *object, size_t size) {
        const char *dot = strchr(f->key, '.');

        object[0] = 0;
        if (!dot)
                return f->key;
        snprintf(object, size, "%.*s", (int) (dot - f->key), f->key);
        return dot + 1;
}

static bool field_empty(const UpdateTransaction *tx, const TxField *f) {
        if (f->type == TX_FIELD_CODE) {
                UpdateFailureCode c = *FIELD(tx, f, UpdateFailureCode);
                return c < 0 || c >= _UPDATE_FAILURE_MAX;
        }
        return f->type == TX_FIELD_PRESENT && !*FIELD(tx, f, bool);
}

static json_t *field_json(const UpdateTransaction *tx, const TxField *f) {
        switch (f->type) {
        case TX_FIELD_STRING:
                return str_or_null(*FIELD(tx, f, char *));
        case TX_FIELD_STRV:
                return strv_json(*FIELD(tx, f, char **));
        case TX_FIELD_BOOL:
                return json_boolean(*FIELD(tx, f, bool));
        case TX_FIELD_UINT:
                return json_integer(*FIELD(tx, f, unsigned));
        case TX_FIELD_U64:
                return json_integer((json_int_t) *FIELD(tx, f, uint64_t));
        case TX_FIELD_PHASE:
                return str_or_null(update_phase_to_string(*FIELD(tx, f, UpdatePhase)));
        case TX_FIELD_CODE:
                return str_or_null(update_failure_code_to_string(*FIELD(tx, f, UpdateFailureCode)));
        case TX_FIELD_BACKEND:
                return str_or_null(os_update_backend_to_string(*FIELD(tx, f, OsUpdateBackend)));
        case TX_FIELD_STEPS:
                return done_json(*FIELD(tx, f, uint64_t));
        case TX_FIELD_PRESENT:
        default:
                return json_object();
        }
}

/* The document, in the order of update_transaction_fields (JSON_PRESERVE_ORDER). */
static int encode_document(const UpdateTransaction *tx, json_t *doc) {
        char object[64], skipped[64] = "";

        for (size_t i = 0; i < update_transaction_n_fields; i++) {
                const TxField *f = &update_transaction_fields[i];
                const char *leaf = field_leaf(f, object, sizeof(object));
                const char *name = object[0] ? object : f->key;
                json_t *parent = doc, *v;

                if (f->gate && field_empty(tx, f)) {
                        if (json_object_set_new(doc, name, json_null()) < 0)
                                return -ENOMEM;
                        snprintf(skipped, sizeof(skipped), "%s", name);
                        continue;
                }
                if (object[0]) {
                        if (streq(object, skipped))
                                continue;
                        parent = json_object_get(doc, object);
                        if (!parent && json_object_set_new(doc, object, parent = json_object()) < 0)
                                return -ENOMEM;
                }
                if (f->type == TX_FIELD_PRESENT) {
                        if (!json_object_get(doc, f->key) && json_object_set_new(doc, f->key, json_object()) < 0)
                                return -ENOMEM;
                        continue;
                }
                v = field_json(tx, f);
                if (!v || json_object_set_new(parent, leaf, v) < 0)
                        return -ENOMEM;
                if (streq(f->key, "phase") && json_object_set_new(doc, "version", json_integer(STATE_FILE_VERSION)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int state_codec_encode(const UpdateTransaction *tx, char **ret) {
        json_t *doc;
        char *s;
        int r;

        assert(tx);
        assert(ret);

        doc = json_object();
        if (!doc)
                return -ENOMEM;
        r = encode_document(tx, doc);
        s = r >= 0 ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(doc);
        if (!s)
                return -ENOMEM;
        {
                size_t n = strlen(s);
                char *t = realloc(s, n + 2);

                if (!t) {
                        free(s);
                        return -ENOMEM;
                }
                t[n] = '\n';
                t[n + 1] = '\0';
                s = t;
        }
        *ret = s;
        return 0;
}

/* ---- decoding ---- */

typedef struct Decoder {
        char **ret_error;
} Decoder;

_printf_(2, 3)
static int bad(Decoder *d, const char *format, ...) {
        va_list ap;

        if (!d->ret_error)
                return -EBADMSG;
        va_start(ap, format);
        if (vasprintf(d->ret_error, format, ap) < 0)
                *d->ret_error = NULL;
        va_end(ap);
        return -EBADMSG;
}

static int get_str(Decoder *d, const json_t *o, const char *key, const char *path, char **ret) {
        const json_t *v = o ? json_object_get(o, key) : NULL;

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
                return bad(d, "%s%s: expected a string", path, key);
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static int get_u64(Decoder *d, const json_t *o, const char *key, const char *path, uint64_t *ret) {
        const json_t *v = o ? json_object_get(o, key) : NULL;

        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return bad(d, "%s%s: expected a non-negative integer", path, key);
        *ret = (uint64_t) json_integer_value(v);
        return 0;
}

static int get_unsigned(Decoder *d, const json_t *o, const char *key, const char *path, unsigned *ret) {
        uint64_t v;
        int r = get_u64(d, o, key, path, &v);

        if (r < 0)
                return r;
        if (v > UINT32_MAX)
                return bad(d, "%s%s: out of range", path, key);
        *ret = (unsigned) v;
        return 0;
}

static int get_bool(Decoder *d, const json_t *o, const char *key, const char *path, bool *ret) {
        const json_t *v = o ? json_object_get(o, key) : NULL;

        *ret = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_boolean(v))
                return bad(d, "%s%s: expected true or false", path, key);
        *ret = json_is_true(v);
        return 0;
}

static int get_obj(Decoder *d, const json_t *o, const char *key, const json_t **ret) {
        const json_t *v = json_object_get(o, key);

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_object(v))
                return bad(d, "%s: expected an object", key);
        *ret = v;
        return 0;
}

/* An enum field stored by name (phase, failure code, OS backend); null/absent is `absent`. */
static int get_named(Decoder *d, const json_t *o, const char *key, const char *path, TxFieldType type, int absent,
                     int *ret) {
        _cleanup_free_ char *s = NULL;
        int r = get_str(d, o, key, path, &s);

        if (r < 0)
                return r;
        if (!s) {
                *ret = absent;
                return 0;
        }
        *ret = type == TX_FIELD_PHASE ? (int) update_phase_from_string(s) :
               type == TX_FIELD_CODE ? (int) update_failure_code_from_string(s) :
                                       (int) os_update_backend_from_string(s);
        if (*ret < 0)
                return bad(d, "%s%s: unknown %s \"%s\"", path, key,
                           type == TX_FIELD_PHASE ? "phase" : type == TX_FIELD_CODE ? "failure code" : "backend", s);
        return 0;
}

static int get_strv(Decoder *d, const json_t *o, const char *key, const char *path, char ***ret) {
        const json_t *v = o ? json_object_get(o, key) : NULL, *e;
        char **l;
        size_t i;

        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v) || json_array_size(v) > OSC_ARGS_MAX)
                return bad(d, "%s%s: expected a list of at most %d strings", path, key, OSC_ARGS_MAX);
        l = calloc(json_array_size(v) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(v, i, e) {
                if (!json_is_string(e)) {
                        strv_freep(&l);
                        return bad(d, "%s%s[%zu]: expected a string", path, key, i);
                }
                l[i] = strdup(json_string_value(e));
                if (!l[i]) {
                        strv_freep(&l);
                        return -ENOMEM;
                }
        }
        *ret = l;
        return 0;
}

static int decode_steps(Decoder *d, const json_t *o, const char *key, const char *path, uint64_t *ret) {
        const json_t *v = o ? json_object_get(o, key) : NULL, *e;
        size_t i;

        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return bad(d, "%s%s: expected a list", path, key);
        json_array_foreach(v, i, e) {
                UpdateStep s = json_is_string(e) ? update_step_from_string(json_string_value(e)) : -EINVAL;
                if (s < 0)
                        return bad(d, "%s%s[%zu]: unknown step", path, key, i);
                *ret |= UINT64_C(1) << s;
        }
        return 0;
}

static int decode_field(Decoder *d, const json_t *doc, UpdateTransaction *tx, const TxField *f) {
        char object[64], path[66] = "";
        const char *leaf = field_leaf(f, object, sizeof(object));
        const json_t *o = doc;
        int r;

        if (object[0]) {
                snprintf(path, sizeof(path), "%s.", object);
                r = get_obj(d, doc, object, &o);
                if (r < 0)
                        return r;
        }
        switch (f->type) {
        case TX_FIELD_STRING:
                return get_str(d, o, leaf, path, FIELD(tx, f, char *));
        case TX_FIELD_STRV:
                return get_strv(d, o, leaf, path, FIELD(tx, f, char **));
        case TX_FIELD_BOOL:
                return get_bool(d, o, leaf, path, FIELD(tx, f, bool));
        case TX_FIELD_UINT:
                return get_unsigned(d, o, leaf, path, FIELD(tx, f, unsigned));
        case TX_FIELD_U64:
                return get_u64(d, o, leaf, path, FIELD(tx, f, uint64_t));
        /* Enums are int-sized (their _INVALID = -EINVAL members make them signed). */
        case TX_FIELD_PHASE:
                return get_named(d, o, leaf, path, f->type, _UPDATE_PHASE_INVALID, FIELD(tx, f, int));
        case TX_FIELD_CODE:
                return get_named(d, o, leaf, path, f->type, _UPDATE_FAILURE_INVALID, FIELD(tx, f, int));
        case TX_FIELD_BACKEND:
                return get_named(d, o, leaf, path, f->type, OS_UPDATE_BACKEND_COMMAND, FIELD(tx, f, int));
        case TX_FIELD_STEPS:
                return decode_steps(d, o, leaf, path, FIELD(tx, f, uint64_t));
        case TX_FIELD_PRESENT:
                r = get_obj(d, doc, f->key, &o);
                *FIELD(tx, f, bool) = r >= 0 && o;
                return r;
        }
        return -EINVAL;
}

static int decode_document(Decoder *d, const json_t *doc, UpdateTransaction *tx) {
        for (size_t i = 0; i < update_transaction_n_fields; i++) {
                int r = decode_field(d, doc, tx, &update_transaction_fields[i]);

                if (r < 0)
                        return r;
        }
        if (tx->phase < 0)
                return bad(d, "phase: missing");
        return 0;
}

int state_codec_decode(const char *data, size_t size, UpdateTransaction **ret, char **ret_error) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        Decoder d = { .ret_error = ret_error };
        json_error_t e;
        json_t *doc, *version;
        int r;

        assert(data || size == 0);
        assert(ret);

        if (size > STATE_CODEC_MAX)
                return bad(&d, "larger than %d bytes", STATE_CODEC_MAX);
        doc = json_loadb(data, size, 0, &e);
        if (!doc)
                return bad(&d, "line %d: %s", e.line, e.text);
        if (!json_is_object(doc)) {
                json_decref(doc);
                return bad(&d, "expected a JSON object");
        }

        version = json_object_get(doc, "version");
        if (!json_is_integer(version) || json_integer_value(version) < 1) {
                json_decref(doc);
                return bad(&d, "version: missing or invalid");
        }
        if (json_integer_value(version) > STATE_FILE_VERSION) {
                json_decref(doc);
                if (ret_error && asprintf(ret_error, "written by a newer format (version %lld)",
                                          (long long) json_integer_value(version)) < 0)
                        *ret_error = NULL;
                return -EPROTONOSUPPORT;
        }

        r = update_transaction_new(&tx);
        if (r >= 0)
                r = decode_document(&d, doc, tx);
        json_decref(doc);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(tx);
        return 0;
}
