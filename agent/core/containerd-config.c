/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/containerd-config.h"
#include "util/error-message.h"
#include "util/macro.h"

#define CRI_PLUGIN "io.containerd.grpc.v1.cri"

/* Where a value is, for error messages: built only when something is wrong. */
typedef struct Where {
        const struct Where *up;
        const char *key; /* ".key" (or the root's own text when up is NULL) */
        size_t index;    /* "[index]" when key is NULL */
} Where;

static void where_print(FILE *f, const Where *w) {
        if (w->up)
                where_print(f, w->up);
        if (!w->up)
                fputs(w->key, f);
        else if (w->key)
                fprintf(f, ".%s", w->key);
        else
                fprintf(f, "[%zu]", w->index);
}

static int fail(char **ret_error, const Where *w, const char *what) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0;
        FILE *f;

        if (!ret_error)
                return -EINVAL;
        f = open_memstream(&s, &n);
        if (!f)
                return -ENOMEM;
        where_print(f, w);
        if (fclose(f) != 0)
                return -ENOMEM;
        return error_setf(ret_error, -EINVAL, "%s: %s", s, what);
}

static bool key_valid(const char *k, size_t n) {
        if (n == 0 || n > CONTAINERD_CONFIG_KEY_MAX || strlen(k) != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) k[i] < 0x20 || k[i] == 0x7f)
                        return false;
        return true;
}

/* Plugin values: the types TOML can hold, bounded; `depth` counts the tables/arrays above `v`. */
static int check_value(const json_t *v, unsigned depth, bool in_array, const Where *w, char **ret_error) {
        const char *k;
        json_t *e;
        size_t i, kn;
        int r;

        switch (json_typeof(v)) {
        case JSON_NULL:
                return in_array ? fail(ret_error, w, "null is not allowed in an array") : 0;
        case JSON_OBJECT:
        case JSON_ARRAY:
                if (depth >= CONTAINERD_CONFIG_DEPTH_MAX)
                        return fail(ret_error, w, "nested too deeply");
                break;
        default:
                return 0;
        }
        if (json_is_array(v)) {
                if (json_array_size(v) > CONTAINERD_CONFIG_ARRAY_MAX)
                        return fail(ret_error, w, "array too long");
                json_array_foreach(v, i, e) {
                        r = check_value(e, depth + 1, /* in_array= */ true, &(Where) { .up = w, .index = i },
                                        ret_error);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        json_object_keylen_foreach((json_t *) v, k, kn, e) {
                Where c = { .up = w, .key = k };

                if (!key_valid(k, kn))
                        return fail(ret_error, &c,
                                    "invalid key (empty, too long or with control characters)");
                r = check_value(e, depth + 1, /* in_array= */ false, &c, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* The table at path[0..n) below `t`, created on the way when `create` (a missing or null entry
 * becomes an empty table; the last element is replaced by one if it is not a table, as upstream's
 * "add" does); *ret NULL when absent and not created. Any other non-table on the way is an error
 * (for "remove", all of path[0..n) is in the middle). */
static int walk(json_t *t, const json_t *path, size_t n, bool create, const Where *pw, json_t **ret,
                char **ret_error) {
        *ret = NULL;
        for (size_t i = 0; i < n; i++) {
                const json_t *e = json_array_get(path, i);
                json_t *c = json_object_getn(t, json_string_value(e), json_string_length(e));

                if (!json_is_object(c)) {
                        if (c && !json_is_null(c) && (i + 1 < n || !create))
                                return fail(ret_error, &(Where) { .up = pw, .index = i },
                                            "not a table in the containerd config");
                        if (!create)
                                return 0;
                        c = json_object();
                        if (!c ||
                            json_object_setn_new(t, json_string_value(e), json_string_length(e), c) < 0)
                                return -ENOMEM;
                }
                t = c;
        }
        *ret = t;
        return 0;
}

static int check_path(const json_t *path, const Where *pw, char **ret_error) {
        const json_t *e;
        size_t i;

        if (!json_is_array(path))
                return fail(ret_error, pw, "expected an array of strings");
        /* "plugins" and the path are the tables above the values */
        if (json_array_size(path) + 1 >= CONTAINERD_CONFIG_DEPTH_MAX)
                return fail(ret_error, pw, "nested too deeply");
        json_array_foreach(path, i, e)
                if (!json_is_string(e) || !key_valid(json_string_value(e), json_string_length(e)))
                        return fail(ret_error, &(Where) { .up = pw, .index = i },
                                    "expected a key (1..256 bytes, no control characters)");
        return 0;
}

/* op "remove": the subtree at "plugins".path goes, the tables above it stay. */
static int remove_at(json_t *root, const json_t *path, const Where *pw, char **ret_error) {
        size_t n = json_array_size(path);
        const json_t *last;
        json_t *t = NULL;
        int r;

        if (n == 0) {
                (void) json_object_del(root, "plugins");
                return 0;
        }
        r = walk(json_object_get(root, "plugins"), path, n - 1, /* create= */ false, pw, &t, ret_error);
        if (r < 0 || !t)
                return r;
        last = json_array_get(path, n - 1);
        (void) json_object_deln(t, json_string_value(last), json_string_length(last));
        return 0;
}

/* op "add": the table at "plugins".path, with `values` merged in key by key (Go's json.Unmarshal
 * into the existing map: a key replaces the whole value, nested tables are not merged). */
static int add_at(json_t *root, const json_t *path, const json_t *values, const Where *pw,
                  char **ret_error) {
        const char *k;
        size_t kn;
        json_t *t = NULL, *v;
        int r;

        if (!json_is_object(json_object_get(root, "plugins")) &&
            json_object_set_new(root, "plugins", json_object()) < 0)
                return -ENOMEM;
        r = walk(json_object_get(root, "plugins"), path, json_array_size(path), /* create= */ true, pw, &t,
                 ret_error);
        if (r < 0 || !values)
                return r;
        json_object_keylen_foreach((json_t *) values, k, kn, v) {
                /* a copy: a later plugin may add below it, and the caller's config is const */
                r = json_is_null(v) ? (json_object_deln(t, k, kn), 0) :
                                      json_object_setn_new(t, k, kn, json_deep_copy(v));
                if (r < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int apply_plugin(json_t *root, const json_t *p, const Where *w, char **ret_error) {
        const json_t *op, *values;
        Where pw = { .up = w, .key = "path" }, vw = { .up = w, .key = "values" };
        bool remove = false;
        int r;

        if (!json_is_object(p))
                return fail(ret_error, w, "expected an object");
        op = json_object_get(p, "op");
        if (op && !json_is_null(op)) {
                const char *o = json_string_value(op);

                remove = o && streq(o, "remove");
                if (!o || !(remove || streq(o, "add")))
                        return fail(ret_error, &(Where) { .up = w, .key = "op" },
                                    "operation is not supported");
        }
        r = check_path(json_object_get(p, "path"), &pw, ret_error);
        if (r < 0)
                return r;
        if (remove)
                return remove_at(root, json_object_get(p, "path"), &pw, ret_error);

        values = json_object_get(p, "values");
        if (json_is_null(values))
                values = NULL;
        if (values && !json_is_object(values))
                return fail(ret_error, &vw, "expected an object");
        if (values) {
                r = check_value(values, json_array_size(json_object_get(p, "path")) + 1,
                                /* in_array= */ false, &vw, ret_error);
                if (r < 0)
                        return r;
        }
        return add_at(root, json_object_get(p, "path"), values, &pw, ret_error);
}

/* What upstream sets on top of `containerd config default` (see the header). */
static int base_document(const json_t *config, json_t **ret, char **ret_error) {
        const json_t *sandbox = json_object_get(config, "sandboxImage"),
                     *cgroup = json_object_get(config, "cgroupDriver");
        json_t *doc, *cri;

        if (sandbox && !json_is_null(sandbox) && !json_is_string(sandbox))
                return error_setf(ret_error, -EINVAL,
                                  "spec.criConfig.containerd.sandboxImage: expected a string");
        if (cgroup && !json_is_null(cgroup) && !json_is_string(cgroup))
                return error_setf(ret_error, -EINVAL, "spec.criConfig.cgroupDriver: expected a string");
        doc = json_pack("{s:i, s:[s], s:{s:{s:{s:s}, s:{s:{s:{s:s}}}, s:{s:s}}}}", "version", 2, "imports",
                        CONTAINERD_CONFIG_IMPORTS, "plugins", CRI_PLUGIN, "cni", "bin_dir",
                        CONTAINERD_CNI_BIN_DIR, "containerd", "runtimes", "runc", "runtime_type",
                        "io.containerd.runc.v2", "registry", "config_path", CONTAINERD_CERTS_DIR);
        if (!doc)
                return -ENOMEM;
        cri = json_object_get(json_object_get(doc, "plugins"), CRI_PLUGIN);
        if (json_string_length(sandbox) > 0 && json_object_set(cri, "sandbox_image", (json_t *) sandbox) < 0)
                goto nomem;
        if (json_is_string(cgroup)) {
                json_t *runc = json_object_get(
                        json_object_get(json_object_get(cri, "containerd"), "runtimes"), "runc");

                if (json_object_set_new(runc, "options",
                                        json_pack("{s:b}", "SystemdCgroup",
                                                  streq(json_string_value(cgroup), "systemd"))) < 0)
                        goto nomem;
        }
        *ret = doc;
        return 0;
nomem:
        json_decref(doc);
        return -ENOMEM;
}

/* ---- TOML output ---- */

/* A basic string: quote, backslash and control characters escaped; UTF-8 passes through. */
static void put_string(FILE *f, const char *s, size_t n) {
        fputc('"', f);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];

                switch (c) {
                case '"':
                        fputs("\\\"", f);
                        break;
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\b':
                        fputs("\\b", f);
                        break;
                case '\t':
                        fputs("\\t", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '\f':
                        fputs("\\f", f);
                        break;
                case '\r':
                        fputs("\\r", f);
                        break;
                default:
                        if (c < 0x20 || c == 0x7f)
                                fprintf(f, "\\u%04X", c);
                        else
                                fputc(c, f);
                }
        }
        fputc('"', f);
}

static bool bare_key(const char *k, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= 'A' && k[i] <= 'Z') ||
                      (k[i] >= '0' && k[i] <= '9') || k[i] == '_' || k[i] == '-'))
                        return false;
        return n > 0;
}

static void put_key(FILE *f, const char *k, size_t n) {
        if (bare_key(k, n))
                fwrite(k, 1, n, f);
        else
                put_string(f, k, n);
}

static void put_real(FILE *f, double d) {
        char buf[64];

        /* the shortest form that reads back the same; TOML floats need a fraction or an exponent */
        snprintf(buf, sizeof(buf), "%.15g", d);
        if (strtod(buf, NULL) != d)
                snprintf(buf, sizeof(buf), "%.17g", d);
        fputs(buf, f);
        if (!strpbrk(buf, ".eEn"))
                fputs(".0", f);
}

typedef struct Entry {
        const char *key;
        size_t len;
        json_t *value;
} Entry;

static int entry_compare(const void *a, const void *b) {
        const Entry *x = a, *y = b;
        int c = memcmp(x->key, y->key, MIN(x->len, y->len));

        return c != 0 ? c : (x->len > y->len) - (x->len < y->len);
}

/* The non-null members of a table in key order. */
static int sorted_entries(const json_t *t, Entry **ret, size_t *ret_n) {
        Entry *e = calloc(json_object_size(t) + 1, sizeof(Entry));
        const char *k;
        size_t n = 0, kn;
        json_t *v;

        if (!e)
                return -ENOMEM;
        json_object_keylen_foreach((json_t *) t, k, kn, v)
                if (!json_is_null(v))
                        e[n++] = (Entry) { k, kn, v };
        if (n > 0)
                qsort(e, n, sizeof(Entry), entry_compare);
        *ret = e;
        *ret_n = n;
        return 0;
}

static int put_value(FILE *f, const json_t *v);

static int put_inline_table(FILE *f, const json_t *t) {
        _cleanup_free_ Entry *e = NULL;
        size_t n;
        int r = sorted_entries(t, &e, &n);

        if (r < 0)
                return r;
        fputc('{', f);
        for (size_t i = 0; i < n; i++) {
                fputs(i > 0 ? ", " : " ", f);
                put_key(f, e[i].key, e[i].len);
                fputs(" = ", f);
                r = put_value(f, e[i].value);
                if (r < 0)
                        return r;
        }
        fputs(n > 0 ? " }" : "}", f);
        return 0;
}

static int put_value(FILE *f, const json_t *v) {
        const json_t *e;
        size_t i;
        int r;

        switch (json_typeof(v)) {
        case JSON_STRING:
                put_string(f, json_string_value(v), json_string_length(v));
                return 0;
        case JSON_INTEGER:
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return 0;
        case JSON_REAL:
                put_real(f, json_real_value(v));
                return 0;
        case JSON_TRUE:
        case JSON_FALSE:
                fputs(json_is_true(v) ? "true" : "false", f);
                return 0;
        case JSON_OBJECT:
                return put_inline_table(f, v);
        case JSON_ARRAY:
                fputc('[', f);
                json_array_foreach(v, i, e) {
                        if (i > 0)
                                fputs(", ", f);
                        r = put_value(f, e);
                        if (r < 0)
                                return r;
                }
                fputc(']', f);
                return 0;
        default:
                return -EINVAL; /* null in an array: rejected by check_value() */
        }
}

/* One [header] section per table that has values of its own or nothing at all (an empty table is
 * kept, as upstream keeps the tables "add" creates); tables holding only tables are implied. */
typedef struct Header {
        const struct Header *up;
        const Entry *entry;
} Header;

static void put_header(FILE *f, const Header *h) {
        if (h->up && h->up->entry) {
                put_header(f, h->up);
                fputc('.', f);
        }
        put_key(f, h->entry->key, h->entry->len);
}

static int put_table(FILE *f, const json_t *t, const Header *h) {
        _cleanup_free_ Entry *e = NULL;
        size_t n, n_tables = 0;
        int r = sorted_entries(t, &e, &n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                n_tables += json_is_object(e[i].value);
        if (h->entry && (n_tables < n || n == 0)) {
                fputs("\n[", f);
                put_header(f, h);
                fputs("]\n", f);
        }
        for (size_t i = 0; i < n; i++) {
                if (json_is_object(e[i].value))
                        continue;
                put_key(f, e[i].key, e[i].len);
                fputs(" = ", f);
                r = put_value(f, e[i].value);
                if (r < 0)
                        return r;
                fputc('\n', f);
        }
        for (size_t i = 0; i < n; i++) {
                if (!json_is_object(e[i].value))
                        continue;
                r = put_table(f, e[i].value, &(Header) { .up = h, .entry = &e[i] });
                if (r < 0)
                        return r;
        }
        return 0;
}

static int render(const json_t *doc, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;
        int r;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fputs("# Written by inplace-agent from the OperatingSystemConfig (spec.criConfig); every change here is\n"
              "# overwritten. Add settings in " CONTAINERD_CONFIG_IMPORTS
              " or criConfig.containerd.plugins.\n",
              f);
        r = put_table(f, doc, &(Header) {});
        if (fclose(f) != 0)
                return -ENOMEM;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        return 0;
}

int containerd_config_render(const json_t *config, char **ret, char **ret_error) {
        const json_t *plugins = json_object_get(config, "plugins"), *p;
        json_t *doc = NULL;
        size_t i;
        int r;

        assert(ret);
        if (config && !json_is_object(config))
                return error_setf(ret_error, -EINVAL, "spec.criConfig.containerd: expected an object");
        if (plugins && !json_is_null(plugins) && !json_is_array(plugins))
                return error_setf(ret_error, -EINVAL,
                                  "spec.criConfig.containerd.plugins: expected an array");
        if (json_array_size(plugins) > CONTAINERD_CONFIG_PLUGINS_MAX)
                return error_setf(ret_error, -EINVAL,
                                  "spec.criConfig.containerd.plugins: more than %d entries",
                                  CONTAINERD_CONFIG_PLUGINS_MAX);
        r = base_document(config, &doc, ret_error);
        if (r < 0)
                return r;
        json_array_foreach(plugins, i, p) {
                Where top = { .key = "spec.criConfig.containerd.plugins" };

                r = apply_plugin(doc, p, &(Where) { .up = &top, .index = i }, ret_error);
                if (r < 0)
                        break;
        }
        if (r >= 0)
                r = render(doc, ret);
        json_decref(doc);
        return r;
}
