/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/kube-name.h"
#include "core/osc-component-config.h"
#include "core/osc.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/time-util.h"
#include "util/yaml-json.h"

OscComponentConfig *osc_component_config_free(OscComponentConfig *c) {
        if (!c)
                return NULL;
        free(c->file);
        free(c->api_server);
        free(c->ca_file);
        free(c->secret_name);
        free(c->kubernetes_version);
        for (size_t i = 0; i < c->n_token_syncs; i++) {
                free(c->token_syncs[i].secret_name);
                free(c->token_syncs[i].path);
        }
        free(c->token_syncs);
        free(c);
        return NULL;
}

static bool is_component_config(const char *path) {
        size_t n = strlen(path);

        return strncmp(path, OSC_COMPONENT_CONFIG_PREFIX, strlen(OSC_COMPONENT_CONFIG_PREFIX)) == 0 &&
                n > 5 && streq(path + n - 5, ".yaml") &&
                !strchr(path + strlen(OSC_COMPONENT_CONFIG_PREFIX), '/');
}

/* The component config file a replaced unit lists, or NULL. */
static const OscFile *find_file(const OscModel *m, char *const *replaced) {
        for (char *const *r = replaced; r && *r; r++) {
                const OscUnit *u = osc_model_find_unit(m, *r);

                for (size_t i = 0; u && i < u->n_file_paths; i++)
                        if (is_component_config(u->file_paths[i]) &&
                            osc_model_find_file(m, u->file_paths[i]))
                                return osc_model_find_file(m, u->file_paths[i]);
        }
        return NULL;
}

/* "<file>: " before a message, or nothing for a document without a file (a test's JSON). */
#define FILE_PREFIX(file) strempty(file), (file) ? ": " : ""

/* A string at a dotted path of `doc`; absent or null gives NULL, another type is an error. */
static int get(const json_t *doc, const char *const *keys, const char *name, const char *file, char **ret,
               char **ret_error) {
        const json_t *v = doc;

        for (const char *const *k = keys; *k && v; k++)
                v = json_is_object(v) ? json_object_get(v, *k) : NULL;
        *ret = NULL;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v) || json_string_length(v) > OSC_MODEL_PATH_MAX ||
            strlen(json_string_value(v)) != json_string_length(v))
                return error_setf(ret_error, -EINVAL, "%s%s%s: expected a string", FILE_PREFIX(file), name);
        if (json_string_length(v) == 0)
                return 0;
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

/* controllers.token.syncPeriod: a positive duration; absent or null leaves it unset (0). */
static int decode_sync_period(const json_t *token, OscComponentConfig *c, char **ret_error) {
        static const char *const key[] = { "syncPeriod", NULL };
        _cleanup_free_ char *period = NULL;
        int r;

        r = get(token, key, "controllers.token.syncPeriod", c->file, &period, ret_error);
        if (r < 0 || !period)
                return r;
        if (parse_duration(period, &c->token_sync_period_usec) < 0 || c->token_sync_period_usec == 0)
                return error_setf(ret_error, -EINVAL,
                                  "%s%scontrollers.token.syncPeriod: not a positive duration",
                                  FILE_PREFIX(c->file));
        return 0;
}

static int decode_sync(const json_t *e, size_t i, OscComponentConfig *c, char **ret_error) {
        static const char *const name[] = { "secretName", NULL }, *const path[] = { "path", NULL };
        OscTokenSync *t = &c->token_syncs[c->n_token_syncs++];
        _cleanup_free_ char *field = NULL;
        int r;

        r = get(e, name, "controllers.token.syncConfigs[].secretName", c->file, &t->secret_name, ret_error);
        if (r >= 0)
                r = get(e, path, "controllers.token.syncConfigs[].path", c->file, &t->path, ret_error);
        if (r < 0)
                return r;
        /* Absolute, no "." or ".." component, at most OSC_MODEL_PATH_MAX (get()): the file is written
         * below osc.rootDirectory. */
        if (!t->secret_name || !osc_path_valid(t->path))
                return error_setf(
                        ret_error, -EINVAL,
                        "%s%scontrollers.token.syncConfigs[%zu]: needs a secretName and an absolute path",
                        FILE_PREFIX(c->file), i);
        /* Each names a Secret the token sync GETs and watches: no path to another object. */
        if (kube_name_is_valid(t->secret_name, KUBE_NAME_SUBDOMAIN))
                return 0;
        if (asprintf(&field, "%s%scontrollers.token.syncConfigs[%zu].secretName", FILE_PREFIX(c->file), i) <
            0)
                return -ENOMEM;
        return kube_name_check(t->secret_name, KUBE_NAME_SUBDOMAIN, field, ret_error);
}

int osc_component_config_decode_token(const json_t *doc, OscComponentConfig *c, char **ret_error) {
        const json_t *token = json_object_get(json_object_get(doc, "controllers"), "token");
        const json_t *l = json_object_get(token, "syncConfigs"), *e;
        size_t i;
        int r;

        assert(c);
        assert(!c->token_syncs);

        r = decode_sync_period(token, c, ret_error);
        if (r < 0 || !l || json_is_null(l))
                return r;
        if (!json_is_array(l) || json_array_size(l) > OSC_TOKEN_SYNCS_MAX)
                return error_setf(ret_error, -EINVAL,
                                  "%s%scontrollers.token.syncConfigs: expected a list of at most %d",
                                  FILE_PREFIX(c->file), OSC_TOKEN_SYNCS_MAX);
        c->token_syncs = calloc(json_array_size(l) + 1, sizeof(OscTokenSync));
        if (!c->token_syncs)
                return -ENOMEM;
        json_array_foreach(l, i, e) {
                r = decode_sync(e, i, c, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode(const json_t *doc, OscComponentConfig *c, char **ret_error) {
        static const char *const server[] = { "apiServer", "server", NULL },
                                 *const ca[] = { "apiServer", "caFile", NULL },
                                 *const secret[] = { "controllers", "operatingSystemConfig", "secretName",
                                                     NULL },
                                 *const version[] = { "controllers", "operatingSystemConfig",
                                                      "kubernetesVersion", NULL };
        int r;

        if (!json_is_object(doc))
                return error_setf(ret_error, -EINVAL, "%s: expected a NodeAgentConfiguration", c->file);
        r = get(doc, server, "apiServer.server", c->file, &c->api_server, ret_error);
        if (r >= 0)
                r = get(doc, ca, "apiServer.caFile", c->file, &c->ca_file, ret_error);
        if (r >= 0)
                r = get(doc, secret, "controllers.operatingSystemConfig.secretName", c->file,
                        &c->secret_name, ret_error);
        if (r >= 0)
                r = get(doc, version, "controllers.operatingSystemConfig.kubernetesVersion", c->file,
                        &c->kubernetes_version, ret_error);
        if (r >= 0)
                r = osc_component_config_decode_token(doc, c, ret_error);
        return r;
}

int osc_component_config_from_yaml(const char *file, const char *data, size_t size, OscComponentConfig **ret,
                                   char **ret_error) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *c = NULL;
        _cleanup_free_ char *yerr = NULL;
        json_t *doc = NULL;
        int r;

        assert(file && ret);

        c = calloc(1, sizeof(*c));
        if (!c || !(c->file = strdup(file)))
                return -ENOMEM;
        r = yaml_to_json(data, size, &doc, &yerr);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return error_setf(ret_error, -EINVAL, "%s: %s", file, yerr ?: "cannot decode");
        r = decode(doc, c, ret_error);
        json_decref(doc);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int osc_component_config_from_model(const OscModel *m, char *const *replaced_units, OscComponentConfig **ret,
                                    char **ret_error) {
        _cleanup_free_ char *content = NULL;
        const OscFile *f;
        size_t size;
        int r;

        assert(m && ret);

        f = find_file(m, replaced_units);
        if (!f)
                return -ENOENT;
        if (f->source != OSC_FILE_INLINE)
                return error_setf(ret_error, -EINVAL, "%s: the component config must be inline", f->path);
        r = osc_file_inline_content(f, &content, &size);
        if (r < 0)
                return r == -ENOMEM ? r : error_setf(ret_error, -EINVAL, "%s: cannot decode", f->path);
        return osc_component_config_from_yaml(f->path, content, size, ret, ret_error);
}

int osc_component_config_from_secret(const json_t *secret, char *const *replaced_units,
                                     OscComponentConfig **ret, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        const json_t *v = json_object_get(json_object_get(secret, "data"), OSC_DATA_KEY);
        _cleanup_free_ char *yaml = NULL;
        size_t size;
        int r;

        assert(ret);

        if (!json_is_string(v))
                return error_setf(ret_error, -ENODATA, "no %s key found in OSC secret", OSC_DATA_KEY);
        if (json_string_length(v) > (size_t) OSC_YAML_MAX / 3 * 4 + 4)
                return error_setf(ret_error, -EFBIG, "%s is larger than %d bytes", OSC_DATA_KEY,
                                  OSC_YAML_MAX);
        r = base64_decode_full(json_string_value(v), json_string_length(v), /* strict= */ true, SIZE_MAX,
                               &yaml, &size);
        if (r < 0)
                return r == -ENOMEM ?
                        r :
                        error_setf(ret_error, -EBADMSG, "data.%s: invalid base64 data", OSC_DATA_KEY);
        r = osc_model_decode_yaml(yaml, size, &(OscModelOptions) {}, &m, ret_error);
        if (r < 0)
                return r;
        return osc_component_config_from_model(m, replaced_units, ret, ret_error);
}

bool osc_component_config_same_token_syncs(const OscComponentConfig *a, const OscComponentConfig *b) {
        size_t n = a ? a->n_token_syncs : 0;

        if (n != (b ? b->n_token_syncs : 0) ||
            (n > 0 && a->token_sync_period_usec != b->token_sync_period_usec))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a->token_syncs[i].secret_name, b->token_syncs[i].secret_name) ||
                    !streq(a->token_syncs[i].path, b->token_syncs[i].path))
                        return false;
        return true;
}
