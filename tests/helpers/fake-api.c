/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake-api.h"
#include "fake-http.h"
#include "tests.h"
#include "util/base64.h"
#include "util/json-util.h"
#include "util/string-util.h"

struct FakeApi {
        FakeHttp *http;
        sd_event_source *wake; /* wakes the waiting watches after a change */
        uint64_t rv;
        json_t *node;   /* NULL: no Node */
        json_t *secret; /* NULL: no OSC Secret */
        json_t *lease;  /* NULL: none yet */
        char *answer;   /* the last body answered, borrowed by the server */
};

static bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

#define JSON_HEADERS "Content-Type: application/json\r\n"

static int api_on_wake(sd_event_source *s, void *userdata) {
        FakeApi *a = userdata;

        fake_http_wake(a->http);
        return 0;
}

/* `o` changed: a new resourceVersion. The waiting watches hear it from the loop, not from inside the
 * server's handler, which may be serving one of them. */
static void api_bump(FakeApi *a, json_t *o) {
        char rv[32];

        snprintf(rv, sizeof(rv), "%" PRIu64, ++a->rv);
        assert_int_equal(
                json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv)), 0);
        assert_true(sd_event_source_set_enabled(a->wake, SD_EVENT_ONESHOT) >= 0);
}

static uint64_t object_rv(const json_t *o) {
        const char *rv =
                json_string_value(json_object_get(json_object_get(o, "metadata"), "resourceVersion"));

        return rv ? strtoull(rv, NULL, 10) : 0;
}

/* Answers `body` (stolen), as one JSON document or, for a watch, one event line in a chunked stream. */
static bool api_reply(FakeApi *a, FakeResponse *ret, int status, json_t *body, bool stream) {
        _cleanup_free_ char *text = json_dumps(body, JSON_COMPACT);

        json_decref(body);
        assert_non_null(text);
        free(a->answer);
        assert_true(asprintf(&a->answer, "%s%s", text, stream ? "\n" : "") > 0);
        *ret = (FakeResponse) {
                .status = status, .headers = JSON_HEADERS, .body = a->answer, .chunked = stream
        };
        return true;
}

static bool api_status(FakeApi *a, FakeResponse *ret, int status, const char *reason) {
        return api_reply(a, ret, status,
                         json_pack("{s:s, s:s, s:i, s:s}", "kind", "Status", "status", "Failure", "code",
                                   status, "reason", reason),
                         /* stream= */ false);
}

/* LIST or WATCH of a collection holding at most the one object `o`. */
static bool api_collection(FakeApi *a, const char *path, json_t *o, const char *kind, FakeResponse *ret) {
        const char *since = strstr(path, "resourceVersion=");
        json_t *list;
        char rv[32];

        if (strstr(path, "watch=1")) {
                if (!o || object_rv(o) <= (since ? strtoull(since + 16, NULL, 10) : 0))
                        return false; /* nothing new: the watch waits */
                return api_reply(a, ret, 200, json_pack("{s:s, s:O}", "type", "MODIFIED", "object", o),
                                 /* stream= */ true);
        }
        snprintf(rv, sizeof(rv), "%" PRIu64, a->rv);
        list = json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", kind, "apiVersion", "v1", "metadata",
                         "resourceVersion", rv, "items");
        if (o)
                assert_int_equal(json_array_append(json_object_get(list, "items"), o), 0);
        return api_reply(a, ret, 200, list, /* stream= */ false);
}

static void merge_conditions(json_t *target, json_t *patch) {
        size_t i, j;
        json_t *p, *t;

        json_array_foreach(patch, i, p) {
                const char *type = json_string_value(json_object_get(p, "type"));
                bool found = false;

                json_array_foreach(target, j, t)
                        if (streq_ptr(json_string_value(json_object_get(t, "type")), type)) {
                                assert_int_equal(json_object_update(t, p), 0);
                                found = true;
                        }
                if (!found)
                        assert_int_equal(json_array_append(target, p), 0);
        }
}

/* RFC 7386, and for a strategic merge patch its directives skipped and conditions merged by type. */
static void merge_patch(json_t *target, json_t *patch) {
        const char *k;
        json_t *v;

        json_object_foreach(patch, k, v) {
                json_t *t = json_object_get(target, k);

                if (k[0] == '$')
                        continue;
                if (json_is_null(v))
                        (void) json_object_del(target, k);
                else if (json_is_object(v)) {
                        if (!json_is_object(t)) {
                                t = json_object();
                                assert_int_equal(json_object_set_new(target, k, t), 0);
                        }
                        merge_patch(t, v);
                } else if (streq(k, "conditions") && json_is_array(t) && json_is_array(v))
                        merge_conditions(t, v);
                else
                        assert_int_equal(json_object_set(target, k, v), 0);
        }
}

/* The object a JSON pointer's parent names, and the last token (unescaped) in *key. */
static json_t *pointer_parent(json_t *root, const char *pointer, char **key) {
        _cleanup_free_ char *copy = strdup(pointer);
        char *token, *save = NULL;
        json_t *o = root, *parent = NULL;

        assert_non_null(copy);
        for (token = strtok_r(copy, "/", &save); token; token = strtok_r(NULL, "/", &save)) {
                char *w = token;

                for (char *r = token; *r; r++) /* ~1 is '/', ~0 is '~' */
                        *w++ = r[0] == '~' && (r[1] == '0' || r[1] == '1') ? (*++r == '1' ? '/' : '~') : *r;
                *w = '\0';
                free(*key);
                *key = strdup(token);
                parent = o;
                o = json_object_get(o, token);
        }
        return parent;
}

/* RFC 6902 add, replace, remove and test on objects; false when an operation does not apply (the
 * server's 422). */
static bool json_patch(json_t *target, json_t *ops) {
        size_t i;
        json_t *op;

        json_array_foreach(ops, i, op) {
                const char *name = json_string_value(json_object_get(op, "op"));
                json_t *value = json_object_get(op, "value");
                _cleanup_free_ char *key = NULL;
                json_t *parent =
                        pointer_parent(target, json_string_value(json_object_get(op, "path")), &key);
                json_t *cur = parent ? json_object_get(parent, key) : NULL;

                if (!json_is_object(parent))
                        return false;
                if (streq(name, "test") && !json_equal(cur, value))
                        return false;
                if ((streq(name, "remove") || streq(name, "replace")) && !cur)
                        return false;
                if (streq(name, "remove"))
                        assert_int_equal(json_object_del(parent, key), 0);
                else if (streq(name, "add") || streq(name, "replace"))
                        assert_int_equal(json_object_set(parent, key, value), 0);
        }
        return true;
}

static bool api_patch_node(FakeApi *a, const char *request, const char *body, FakeResponse *ret) {
        _cleanup_(json_decrefp) json_t *patch = json_loads(body, 0, NULL);
        _cleanup_(json_decrefp) json_t *patched = NULL;

        if (!a->node)
                return api_status(a, ret, 404, "NotFound");
        assert_non_null(patch);
        patched = json_deep_copy(a->node);
        if (strcasestr(request, "Content-Type: application/json-patch+json")) {
                if (!json_patch(patched, patch))
                        return api_status(a, ret, 422, "Invalid");
        } else
                merge_patch(patched, patch);
        json_decref(a->node);
        a->node = json_incref(patched);
        api_bump(a, a->node);
        return api_reply(a, ret, 200, json_incref(a->node), /* stream= */ false);
}

/* The Lease: created (POST) and renewed (PUT) as sent. */
static bool api_lease(FakeApi *a, const char *method, const char *body, FakeResponse *ret) {
        if (streq(method, "GET"))
                return a->lease ? api_reply(a, ret, 200, json_incref(a->lease), /* stream= */ false) :
                                  api_status(a, ret, 404, "NotFound");
        if (streq(method, "POST") && a->lease)
                return api_status(a, ret, 409, "AlreadyExists");
        json_decref(a->lease);
        a->lease = json_loads(body, 0, NULL);
        assert_non_null(a->lease);
        if (!json_object_get(a->lease, "metadata"))
                assert_int_equal(json_object_set_new(a->lease, "metadata", json_object()), 0);
        api_bump(a, a->lease);
        return api_reply(a, ret, streq(method, "POST") ? 201 : 200, json_incref(a->lease),
                         /* stream= */ false);
}

static bool api_handle(const char *request, FakeResponse *ret, void *userdata) {
        FakeApi *a = userdata;
        char method[16], path[2048];
        const char *body = strstr(request, "\r\n\r\n") + 4;

        assert_int_equal(sscanf(request, "%15s %2047s", method, path), 2);
        if (startswith(path, FAKE_API_NODE_PATH "?"))
                return api_collection(a, path, a->node, "NodeList", ret);
        if (startswith(path, FAKE_API_SECRET_PATH "?"))
                return api_collection(a, path, a->secret, "SecretList", ret);
        if (streq(path, FAKE_API_NODE_PATH "/node-1") || streq(path, FAKE_API_NODE_PATH "/node-1/status")) {
                if (streq(method, "PATCH"))
                        return api_patch_node(a, request, body, ret);
                return a->node ? api_reply(a, ret, 200, json_incref(a->node), /* stream= */ false) :
                                 api_status(a, ret, 404, "NotFound");
        }
        if (strstr(path, "/leases"))
                return api_lease(a, method, body, ret);
        if (strstr(path, "/events") && (streq(method, "POST") || streq(method, "PATCH")))
                return api_reply(a, ret, streq(method, "POST") ? 201 : 200, json_loads(body, 0, NULL),
                                 /* stream= */ false);
        return api_status(a, ret, 404, "NotFound");
}

FakeApi *fake_api_new(sd_event *e, const char *node) {
        FakeApi *a = calloc(1, sizeof(*a));

        assert_non_null(a);
        assert_int_equal(fake_http_new_tls(e, &a->http), 0);
        fake_http_set_handler(a->http, api_handle, a);
        assert_true(sd_event_add_defer(e, &a->wake, api_on_wake, a) >= 0);
        assert_true(sd_event_source_set_enabled(a->wake, SD_EVENT_OFF) >= 0);
        if (node) {
                a->node = json_loads(node, 0, NULL);
                assert_non_null(a->node);
                api_bump(a, a->node);
        }
        return a;
}

FakeApi *fake_api_free(FakeApi *a) {
        if (!a)
                return NULL;
        fake_http_free(a->http);
        sd_event_source_disable_unref(a->wake);
        json_decref(a->node);
        json_decref(a->secret);
        json_decref(a->lease);
        free(a->answer);
        free(a);
        return NULL;
}

const char *fake_api_ca_pem(FakeApi *a) {
        return fake_http_ca_pem(a->http);
}

unsigned fake_api_port(FakeApi *a) {
        return fake_http_port(a->http);
}

void fake_api_add_secret(FakeApi *a, const char *osc, const char *checksum) {
        _cleanup_free_ char *data = NULL;

        assert_int_equal(base64_encode(osc, strlen(osc), /* url= */ false, &data), 0);
        a->secret =
                json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s}}, s:{s:s}}", "apiVersion", "v1", "kind",
                          "Secret", "metadata", "name", "osc-1", "namespace", "kube-system", "uid", "s-1",
                          "annotations", "checksum/data-script", checksum, "data", "osc.yaml", data);
        assert_non_null(a->secret);
        api_bump(a, a->secret);
}

void fake_api_annotate_node(FakeApi *a, const char *key, const char *value) {
        json_t *annotations = json_object_get(json_object_get(a->node, "metadata"), "annotations");

        assert_int_equal(json_object_set_new(annotations, key, json_string(value)), 0);
        api_bump(a, a->node);
}

const char *fake_api_request(FakeApi *a, unsigned i) {
        return fake_http_request(a->http, i);
}

bool fake_api_saw(FakeApi *a, const char *prefix, const char *needle) {
        for (unsigned i = 0; fake_api_request(a, i); i++)
                if (startswith(fake_api_request(a, i), prefix) &&
                    (!needle || strstr(fake_api_request(a, i), needle)))
                        return true;
        return false;
}

json_t *fake_api_node(FakeApi *a) {
        return a->node;
}

json_t *fake_api_lease(FakeApi *a) {
        return a->lease;
}

static json_t *node_field(FakeApi *a, const char *section, const char *key) {
        return json_object_get(json_object_get(json_object_get(a->node, "metadata"), section), key);
}

const char *fake_api_node_label(FakeApi *a, const char *key) {
        return json_string_value(node_field(a, "labels", key));
}

const char *fake_api_node_annotation(FakeApi *a, const char *key) {
        return json_string_value(node_field(a, "annotations", key));
}

json_t *fake_api_node_condition(FakeApi *a, const char *type) {
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(json_object_get(a->node, "status"), "conditions"), i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "type")), type))
                        return c;
        return NULL;
}
