/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>

#include "daemon/state-file.h"
#include "util/fileio.h"

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

static json_t *phase_json(UpdatePhase p) {
        return str_or_null(update_phase_to_string(p));
}

static json_t *failure_json(const UpdateFailure *f) {
        if (f->code < 0 || f->code >= _UPDATE_FAILURE_MAX)
                return json_null();
        return json_pack("{s:s, s:s?, s:s?, s:i, s:I, s:b}", "code", update_failure_code_to_string(f->code),
                         "message", f->message, "step", f->step, "attempt", (int) f->attempt, "usec",
                         (json_int_t) f->usec, "keepReason", f->keep_reason);
}

static json_t *blocked_json(const UpdateTransaction *tx) {
        if (tx->blocked < 0 || tx->blocked >= _UPDATE_FAILURE_MAX)
                return json_null();
        return json_pack("{s:s, s:s?}", "code", update_failure_code_to_string(tx->blocked), "message",
                         tx->blocked_message);
}

static json_t *applied_json(const UpdateTransaction *tx) {
        if (!tx->applied.valid)
                return json_null();
        return json_pack("{s:s?, s:s?, s:s?}", "checksum", tx->applied.checksum, "certificateAuthorities",
                         tx->applied.ca_rotation, "serviceAccountKey", tx->applied.sa_rotation);
}

int state_file_encode(const UpdateTransaction *tx, char **ret) {
        json_t *doc;
        char *s;

        assert(tx);
        assert(ret);

        /* "transaction" and "phase" first: `inplace-agent status` prints the keys in this order. */
        doc = json_pack("{s:o, s:o, s:i, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:i, s:o, s:o, s:o, s:o, s:I, s:o, "
                        "s:I, s:I, s:I, s:i, s:o, s:o}",
                        "transaction", str_or_null(tx->id),
                        "phase", phase_json(tx->phase),
                        "version", STATE_FILE_VERSION,
                        "checksum", str_or_null(tx->checksum),
                        "gated", tx->gated,
                        "os", json_pack("{s:o, s:o, s:s, s:o, s:o}", "from", str_or_null(tx->os_from), "to",
                                        str_or_null(tx->os_to), "backend", os_update_backend_to_string(tx->os_backend),
                                        "command", str_or_null(tx->os_command), "args", strv_json(tx->os_args)),
                        "kubelet", json_pack("{s:o, s:o, s:o, s:o, s:o}", "from", str_or_null(tx->kubelet_from), "to",
                                             str_or_null(tx->kubelet_to), "kubernetesVersion",
                                             str_or_null(tx->kubernetes_version), "image",
                                             str_or_null(tx->kubelet_image), "pathInImage",
                                             str_or_null(tx->kubelet_path_in_image)),
                        "rotation", json_pack("{s:b, s:o, s:o}", "requested", tx->rotation, "certificateAuthorities",
                                              str_or_null(tx->ca_rotation), "serviceAccountKey",
                                              str_or_null(tx->sa_rotation)),
                        "blocked", blocked_json(tx),
                        "done", done_json(tx->done),
                        "attempt", (int) tx->attempt,
                        "progressPhase", phase_json(tx->progress_phase),
                        "eventPhase", phase_json(tx->event_phase),
                        "bootId", str_or_null(tx->boot_id),
                        "readySince", str_or_null(tx->ready_since),
                        "osStartedUsec", (json_int_t) tx->os_started_usec,
                        "failure", failure_json(&tx->failure),
                        "startedUsec", (json_int_t) tx->started_usec,
                        "updatedUsec", (json_int_t) tx->updated_usec,
                        "retryUsec", (json_int_t) tx->retry_usec,
                        "apiFailures", (int) tx->api_failures,
                        "applied", applied_json(tx),
                        "marker", str_or_null(tx->marker));
        if (!doc)
                return -ENOMEM;
        s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
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

static int get_phase(Decoder *d, const json_t *o, const char *key, UpdatePhase *ret) {
        _cleanup_free_ char *s = NULL;
        int r = get_str(d, o, key, "", &s);

        if (r < 0)
                return r;
        if (!s) {
                *ret = _UPDATE_PHASE_INVALID;
                return 0;
        }
        *ret = update_phase_from_string(s);
        if (*ret < 0)
                return bad(d, "%s: unknown phase \"%s\"", key, s);
        return 0;
}

static int get_code(Decoder *d, const json_t *o, const char *path, UpdateFailureCode *ret) {
        _cleanup_free_ char *s = NULL;
        int r = get_str(d, o, "code", path, &s);

        if (r < 0)
                return r;
        *ret = s ? update_failure_code_from_string(s) : _UPDATE_FAILURE_INVALID;
        if (s && *ret < 0)
                return bad(d, "%scode: unknown failure code \"%s\"", path, s);
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

static int decode_done(Decoder *d, const json_t *doc, uint64_t *ret) {
        const json_t *v = json_object_get(doc, "done"), *e;
        size_t i;

        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_array(v))
                return bad(d, "done: expected a list");
        json_array_foreach(v, i, e) {
                UpdateStep s = json_is_string(e) ? update_step_from_string(json_string_value(e)) : -EINVAL;
                if (s < 0)
                        return bad(d, "done[%zu]: unknown step", i);
                *ret |= UINT64_C(1) << s;
        }
        return 0;
}

static int decode_os(Decoder *d, const json_t *doc, UpdateTransaction *tx) {
        _cleanup_free_ char *backend = NULL;
        const json_t *os;
        int r;

        r = get_obj(d, doc, "os", &os);
        r = r ?: get_str(d, os, "from", "os.", &tx->os_from);
        r = r ?: get_str(d, os, "to", "os.", &tx->os_to);
        r = r ?: get_str(d, os, "command", "os.", &tx->os_command);
        r = r ?: get_strv(d, os, "args", "os.", &tx->os_args);
        r = r ?: get_str(d, os, "backend", "os.", &backend);
        if (r < 0)
                return r;
        tx->os_backend = backend ? os_update_backend_from_string(backend) : OS_UPDATE_BACKEND_COMMAND;
        if (tx->os_backend < 0)
                return bad(d, "os.backend: unknown backend \"%s\"", backend);
        return 0;
}

static int decode_kubelet(Decoder *d, const json_t *doc, UpdateTransaction *tx) {
        const json_t *k;
        int r;

        r = get_obj(d, doc, "kubelet", &k);
        r = r ?: get_str(d, k, "from", "kubelet.", &tx->kubelet_from);
        r = r ?: get_str(d, k, "to", "kubelet.", &tx->kubelet_to);
        r = r ?: get_str(d, k, "kubernetesVersion", "kubelet.", &tx->kubernetes_version);
        r = r ?: get_str(d, k, "image", "kubelet.", &tx->kubelet_image);
        r = r ?: get_str(d, k, "pathInImage", "kubelet.", &tx->kubelet_path_in_image);
        return r;
}

static int decode_misc(Decoder *d, const json_t *doc, UpdateTransaction *tx) {
        const json_t *rot, *blocked, *failure, *applied;
        int r;

        r = get_obj(d, doc, "rotation", &rot);
        r = r ?: get_bool(d, rot, "requested", "rotation.", &tx->rotation);
        r = r ?: get_str(d, rot, "certificateAuthorities", "rotation.", &tx->ca_rotation);
        r = r ?: get_str(d, rot, "serviceAccountKey", "rotation.", &tx->sa_rotation);

        r = r ?: get_obj(d, doc, "blocked", &blocked);
        r = r ?: get_code(d, blocked, "blocked.", &tx->blocked);
        r = r ?: get_str(d, blocked, "message", "blocked.", &tx->blocked_message);

        r = r ?: get_obj(d, doc, "failure", &failure);
        r = r ?: get_code(d, failure, "failure.", &tx->failure.code);
        r = r ?: get_str(d, failure, "message", "failure.", &tx->failure.message);
        r = r ?: get_str(d, failure, "step", "failure.", &tx->failure.step);
        r = r ?: get_unsigned(d, failure, "attempt", "failure.", &tx->failure.attempt);
        r = r ?: get_u64(d, failure, "usec", "failure.", &tx->failure.usec);
        r = r ?: get_bool(d, failure, "keepReason", "failure.", &tx->failure.keep_reason);

        r = r ?: get_obj(d, doc, "applied", &applied);
        tx->applied.valid = applied;
        r = r ?: get_str(d, applied, "checksum", "applied.", &tx->applied.checksum);
        r = r ?: get_str(d, applied, "certificateAuthorities", "applied.", &tx->applied.ca_rotation);
        r = r ?: get_str(d, applied, "serviceAccountKey", "applied.", &tx->applied.sa_rotation);
        return r;
}

static int decode_document(Decoder *d, const json_t *doc, UpdateTransaction *tx) {
        int r;

        r = get_str(d, doc, "transaction", "", &tx->id);
        r = r ?: get_phase(d, doc, "phase", &tx->phase);
        if (r < 0)
                return r;
        if (tx->phase < 0)
                return bad(d, "phase: missing");
        r = get_str(d, doc, "checksum", "", &tx->checksum);
        r = r ?: get_bool(d, doc, "gated", "", &tx->gated);
        r = r ?: decode_os(d, doc, tx);
        r = r ?: decode_kubelet(d, doc, tx);
        r = r ?: decode_misc(d, doc, tx);
        r = r ?: decode_done(d, doc, &tx->done);
        r = r ?: get_unsigned(d, doc, "attempt", "", &tx->attempt);
        r = r ?: get_phase(d, doc, "progressPhase", &tx->progress_phase);
        r = r ?: get_phase(d, doc, "eventPhase", &tx->event_phase);
        r = r ?: get_str(d, doc, "bootId", "", &tx->boot_id);
        r = r ?: get_str(d, doc, "readySince", "", &tx->ready_since);
        r = r ?: get_u64(d, doc, "osStartedUsec", "", &tx->os_started_usec);
        r = r ?: get_u64(d, doc, "startedUsec", "", &tx->started_usec);
        r = r ?: get_u64(d, doc, "updatedUsec", "", &tx->updated_usec);
        r = r ?: get_u64(d, doc, "retryUsec", "", &tx->retry_usec);
        r = r ?: get_unsigned(d, doc, "apiFailures", "", &tx->api_failures);
        r = r ?: get_str(d, doc, "marker", "", &tx->marker);
        return r;
}

int state_file_decode(const char *data, size_t size, UpdateTransaction **ret, char **ret_error) {
        _cleanup_(update_transaction_freep) UpdateTransaction *tx = NULL;
        Decoder d = { .ret_error = ret_error };
        json_error_t e;
        json_t *doc, *version;
        int r;

        assert(data || size == 0);
        assert(ret);

        if (size > STATE_FILE_MAX)
                return bad(&d, "larger than %d bytes", STATE_FILE_MAX);
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

/* ---- files ---- */

int state_file_save(const char *dir, const UpdateTransaction *tx) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        int r;

        assert(dir);
        assert(tx);

        r = state_file_encode(tx, &data);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s", dir, STATE_FILE_NAME) < 0)
                return -ENOMEM;
        return write_file_atomic(path, data, strlen(data), 0600);
}

int state_file_load(const char *dir, UpdateTransaction **ret, char **ret_error) {
        _cleanup_free_ char *path = NULL, *aside = NULL, *data = NULL, *why = NULL;
        size_t size;
        int r;

        assert(dir);
        assert(ret);

        if (asprintf(&path, "%s/%s", dir, STATE_FILE_NAME) < 0 ||
            asprintf(&aside, "%s%s", path, STATE_FILE_CORRUPT_SUFFIX) < 0)
                return -ENOMEM;

        r = read_full_file(path, STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return r;
        if (r < 0 && r != -EFBIG) {
                if (ret_error && asprintf(ret_error, "cannot read %s: %s", path, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        if (r == -EFBIG)
                why = strdup("larger than the 1 MiB limit");
        else
                r = state_file_decode(data, size, ret, &why);
        if (r >= 0)
                return 0;
        if (r == -ENOMEM)
                return r;
        if (r == -EPROTONOSUPPORT) {
                if (ret_error && asprintf(ret_error, "%s: %s; left in place", path, strempty(why)) < 0)
                        *ret_error = NULL;
                return r;
        }

        /* Keep the evidence and start clean: moving it aside is what makes the next start work. */
        if (rename(path, aside) < 0) {
                r = -errno;
                if (ret_error && asprintf(ret_error, "%s is corrupt (%s) and could not be moved aside: %s", path,
                                          strempty(why), strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        (void) fsync_parent_dir(path);
        if (ret_error && asprintf(ret_error, "%s is corrupt (%s); moved to %s", path, strempty(why), aside) < 0)
                *ret_error = NULL;
        return -EBADMSG;
}
