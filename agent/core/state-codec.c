/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "core/state-codec.h"
#include "util/error-message.h"
#include "util/json-util.h"
#include "util/strv.h"

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
                if ((done & (UINT64_C(1) << s)) &&
                    json_array_append_new(a, json_string(update_step_to_string(s))) < 0) {
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
                        if (!json_object_get(doc, f->key) &&
                            json_object_set_new(doc, f->key, json_object()) < 0)
                                return -ENOMEM;
                        continue;
                }
                v = field_json(tx, f);
                if (!v || json_object_set_new(parent, leaf, v) < 0)
                        return -ENOMEM;
                if (streq(f->key, "phase") &&
                    json_object_set_new(doc, "version", json_integer(STATE_FILE_VERSION)) < 0)
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

_printf_(2, 3) static int bad(Decoder *d, const char *format, ...) {
        va_list ap;

        if (!d->ret_error)
                return -EBADMSG;
        va_start(ap, format);
        if (vasprintf(d->ret_error, format, ap) < 0)
                *d->ret_error = NULL;
        va_end(ap);
        return -EBADMSG;
}

/* The shared getters say -EINVAL; a state file that does not decode is -EBADMSG. */
static int badmsg(int r) {
        return r == -EINVAL ? -EBADMSG : r;
}

static int get_u64(Decoder *d, const json_t *o, const char *where, const char *key, uint64_t max,
                   uint64_t *ret) {
        int r = json_field_u64(o, where, key, max, ret, d->ret_error);

        return r < 0 ? badmsg(r) : 0;
}

/* An enum field stored by name (phase, failure code, OS backend); null/absent is `absent`. */
static int get_named(Decoder *d, const json_t *o, const char *where, const char *key, TxFieldType type,
                     int absent, int *ret) {
        _cleanup_free_ char *s = NULL;
        int r = json_field_string(o, where, key, SIZE_MAX, 0, &s, d->ret_error);

        if (r < 0)
                return badmsg(r);
        if (!s) {
                *ret = absent;
                return 0;
        }
        *ret = type == TX_FIELD_PHASE ? (int) update_phase_from_string(s) :
                type == TX_FIELD_CODE ? (int) update_failure_code_from_string(s) :
                                        (int) os_update_backend_from_string(s);
        if (*ret < 0)
                return badmsg(json_field_error(d->ret_error, where, key, "unknown %s \"%s\"",
                                               type == TX_FIELD_PHASE        ? "phase" :
                                                       type == TX_FIELD_CODE ? "failure code" :
                                                                               "backend",
                                               s));
        return 0;
}

static int decode_steps(Decoder *d, const json_t *o, const char *where, const char *key, uint64_t *ret) {
        _cleanup_strv_free_ char **l = NULL;
        int r;

        *ret = 0;
        r = json_field_strv(o, where, key, SIZE_MAX, SIZE_MAX, 0, &l, d->ret_error);
        if (r < 0)
                return badmsg(r);
        for (size_t i = 0; l && l[i]; i++) {
                UpdateStep s = update_step_from_string(l[i]);
                if (s < 0)
                        return badmsg(json_field_entry_error(d->ret_error, where, key, i, "unknown step"));
                *ret |= UINT64_C(1) << s;
        }
        return 0;
}

static int decode_field(Decoder *d, const json_t *doc, UpdateTransaction *tx, const TxField *f) {
        char object[64];
        const char *leaf = field_leaf(f, object, sizeof(object)), *where = object[0] ? object : NULL;
        const json_t *o = doc;
        uint64_t u;
        int b, r = 0;

        if (where)
                r = json_field_object(doc, NULL, object, &o, d->ret_error);
        if (r < 0)
                return badmsg(r);
        switch (f->type) {
        case TX_FIELD_STRING:
                return badmsg(
                        json_field_string(o, where, leaf, SIZE_MAX, 0, FIELD(tx, f, char *), d->ret_error));
        case TX_FIELD_STRV:
                return badmsg(json_field_strv(o, where, leaf, OSC_ARGS_MAX, SIZE_MAX, 0,
                                              FIELD(tx, f, char **), d->ret_error));
        case TX_FIELD_BOOL:
                r = json_field_bool(o, where, leaf, &b, d->ret_error);
                *FIELD(tx, f, bool) = b > 0;
                return badmsg(r);
        case TX_FIELD_UINT:
                r = get_u64(d, o, where, leaf, UINT32_MAX, &u);
                *FIELD(tx, f, unsigned) = (unsigned) u;
                return r;
        case TX_FIELD_U64:
                return get_u64(d, o, where, leaf, UINT64_MAX, FIELD(tx, f, uint64_t));
        /* Enums are int-sized (their _INVALID = -EINVAL members make them signed). */
        case TX_FIELD_PHASE:
                return get_named(d, o, where, leaf, f->type, _UPDATE_PHASE_INVALID, FIELD(tx, f, int));
        case TX_FIELD_CODE:
                return get_named(d, o, where, leaf, f->type, _UPDATE_FAILURE_INVALID, FIELD(tx, f, int));
        case TX_FIELD_BACKEND:
                return get_named(d, o, where, leaf, f->type, OS_UPDATE_BACKEND_COMMAND, FIELD(tx, f, int));
        case TX_FIELD_STEPS:
                return decode_steps(d, o, where, leaf, FIELD(tx, f, uint64_t));
        case TX_FIELD_PRESENT:
                r = json_field_object(doc, NULL, f->key, &o, d->ret_error);
                *FIELD(tx, f, bool) = r >= 0 && o;
                return badmsg(r);
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
                /* `version` lives in `doc`: format the message before letting go of it. */
                r = error_setf(ret_error, -EPROTONOSUPPORT, "written by a newer format (version %lld)",
                               (long long) json_integer_value(version));
                json_decref(doc);
                return r;
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
