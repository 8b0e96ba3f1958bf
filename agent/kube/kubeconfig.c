/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "kube/kubeconfig.h"
#include "util/base64.h"
#include "util/fileio.h"
#include "util/json-util.h"
#include "util/yaml-json.h"

#define SERVICE_ACCOUNT_NAMESPACE_MAX 253

KubeConfig *kubeconfig_free(KubeConfig *c) {
        if (!c)
                return NULL;
        free(c->source);
        free(c->server);
        free(c->tls_server_name);
        free(c->ca_file);
        free(c->ca_data);
        free(c->cert_file);
        free(c->cert_data);
        free(c->key_file);
        free(c->key_data);
        if (c->token)
                explicit_bzero(c->token, strlen(c->token));
        free(c->token);
        free(c->token_file);
        free(c->namespace);
        free(c);
        return NULL;
}

_printf_(4, 5) static int fail(char **ret_error, int error, const char *source, const char *fmt, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;
        int r;

        if (!ret_error)
                return error;
        va_start(ap, fmt);
        r = vasprintf(&reason, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (asprintf(ret_error, "%s: %s", source, reason) < 0) {
                *ret_error = NULL;
                return -ENOMEM;
        }
        return error;
}

/* Entries of clusters[]/users[]/contexts[] are {name: <n>, <inner>: {...}}. */
static json_t *find_named(const json_t *root, const char *list, const char *inner, const char *name) {
        json_t *e;
        size_t i;

        json_array_foreach(json_object_get(root, list), i, e)
                if (streq_ptr(json_string_value(json_object_get(e, "name")), name))
                        return json_is_object(json_object_get(e, inner)) ? json_object_get(e, inner) : NULL;
        return NULL;
}

typedef struct Ctx {
        const char *source; /* borrowed */
        char *dir;          /* owned: directory of the kubeconfig, for relative paths */
        char **error;       /* borrowed */
} Ctx;

/* Optional string field: 0 and *ret = NULL when absent, null or "" (unset, as in client-go), -EINVAL
 * when present but not a string. */
static int get_string(Ctx *x, const json_t *obj, const char *field, const char *where, const char **ret) {
        _cleanup_free_ char *why = NULL;
        int r;

        r = json_field_string_ref(obj, where, field, ret, x->error ? &why : NULL);
        if (r < 0)
                return fail(x->error, r, x->source, "%s", strempty(why));
        if (isempty(*ret))
                *ret = NULL;
        return 0;
}

static int get_path(Ctx *x, const json_t *obj, const char *field, const char *where, char **ret) {
        const char *v;
        int r;

        r = get_string(x, obj, field, where, &v);
        if (r < 0 || !v)
                return r;
        if (v[0] == '/')
                *ret = strdup(v);
        else if (asprintf(ret, "%s%s%s", x->dir, streq(x->dir, "/") ? "" : "/", v) < 0)
                *ret = NULL;
        return *ret ? 0 : -ENOMEM;
}

static int get_base64(Ctx *x, const json_t *obj, const char *field, const char *where, char **ret,
                      size_t *ret_size) {
        _cleanup_free_ char *out = NULL;
        const char *v;
        size_t len, size;
        int r;

        r = get_string(x, obj, field, where, &v);
        if (r < 0 || !v)
                return r;
        len = strlen(v);
        if (len > KUBECONFIG_FILE_MAX)
                return fail(x->error, -EINVAL, x->source, "%s.%s: too long", where, field);
        /* Not strict: YAML block scalars may leave whitespace and newlines in. */
        r = base64_decode_full(v, len, /* strict= */ false, SIZE_MAX, &out, &size);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || size == 0)
                return fail(x->error, -EINVAL, x->source, "%s.%s: not valid base64", where, field);
        *ret = TAKE_PTR(out);
        *ret_size = size;
        return 0;
}

static int parse_server(Ctx *x, KubeConfig *c, const json_t *cluster, const char *where) {
        const char *server;
        size_t len;
        int r;

        r = get_string(x, cluster, "server", where, &server);
        if (r < 0)
                return r;
        if (isempty(server))
                return fail(x->error, -EINVAL, x->source, "%s.server: missing", where);
        /* Plain http would send the credentials in the clear and skip verification altogether. */
        if (strncmp(server, "https://", 8) != 0 || !server[8] || server[8] == '/')
                return fail(x->error, -EINVAL, x->source, "%s.server: \"%s\" is not an https:// URL", where,
                            server);
        if (strpbrk(server, "?# \t\r\n"))
                return fail(x->error, -EINVAL, x->source,
                            "%s.server: \"%s\" must not contain a query, fragment "
                            "or whitespace",
                            where, server);
        len = strlen(server);
        while (len > 8 && server[len - 1] == '/')
                len--;
        c->server = strndup(server, len);
        return c->server ? 0 : -ENOMEM;
}

static int parse_cluster(Ctx *x, KubeConfig *c, const json_t *cluster, const char *where) {
        static const char *const refused[] = { "proxy-url" };
        const char *name;
        json_t *insecure;
        int r;

        r = parse_server(x, c, cluster, where);
        if (r < 0)
                return r;

        insecure = json_object_get(cluster, "insecure-skip-tls-verify");
        if (insecure && !json_is_false(insecure) && !json_is_null(insecure))
                return fail(x->error, -EINVAL, x->source,
                            "%s.insecure-skip-tls-verify: not supported: the server "
                            "certificate is always verified; configure certificate-authority(-data) instead",
                            where);
        for (size_t i = 0; i < ELEMENTSOF(refused); i++)
                if (json_object_get(cluster, refused[i]))
                        return fail(x->error, -EINVAL, x->source, "%s.%s: not supported", where, refused[i]);

        r = get_string(x, cluster, "tls-server-name", where, &name);
        if (r < 0)
                return r;
        if (!isempty(name) && !(c->tls_server_name = strdup(name)))
                return -ENOMEM;

        r = get_base64(x, cluster, "certificate-authority-data", where, &c->ca_data, &c->ca_data_size);
        if (r < 0 || c->ca_data)
                return r; /* the -data form overrides the path */
        return get_path(x, cluster, "certificate-authority", where, &c->ca_file);
}

static int parse_user(Ctx *x, KubeConfig *c, const json_t *user, const char *where) {
        static const struct {
                const char *field;
                const char *why;
        } refused[] = {
                { "exec",
                  "credential plugins are not supported; use token, tokenFile or a client certificate" },
                { "auth-provider",
                  "auth providers are not supported; use token, tokenFile or a client certificate" },
                { "username", "basic authentication is not supported" },
                { "password", "basic authentication is not supported" },
                { "as", "impersonation is not supported" },
                { "as-uid", "impersonation is not supported" },
                { "as-groups", "impersonation is not supported" },
                { "as-user-extra", "impersonation is not supported" },
        };
        const char *token;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                json_t *v = json_object_get(user, refused[i].field);

                if (v && !json_is_null(v))
                        return fail(x->error, -EINVAL, x->source, "%s.%s: %s", where, refused[i].field,
                                    refused[i].why);
        }

        r = get_string(x, user, "token", where, &token);
        if (r < 0)
                return r;
        if (!isempty(token) && !(c->token = strdup(token)))
                return -ENOMEM;
        r = get_path(x, user, "tokenFile", where, &c->token_file);
        if (r < 0)
                return r;

        r = get_base64(x, user, "client-certificate-data", where, &c->cert_data, &c->cert_data_size);
        if (r >= 0 && !c->cert_data)
                r = get_path(x, user, "client-certificate", where, &c->cert_file);
        if (r < 0)
                return r;
        r = get_base64(x, user, "client-key-data", where, &c->key_data, &c->key_data_size);
        if (r >= 0 && !c->key_data)
                r = get_path(x, user, "client-key", where, &c->key_file);
        if (r < 0)
                return r;
        if (!!(c->cert_data || c->cert_file) != !!(c->key_data || c->key_file))
                return fail(x->error, -EINVAL, x->source,
                            "%s: client-certificate and client-key must be given "
                            "together",
                            where);
        return 0;
}

static void ctx_done(Ctx *x) {
        free(x->dir);
}

static int ctx_init(Ctx *x, const char *path, char **ret_error) {
        const char *slash = strrchr(path, '/');

        *x = (Ctx) { .source = path, .error = ret_error };
        if (!slash)
                x->dir = get_current_dir_name();
        else if (slash == path)
                x->dir = strdup("/");
        else
                x->dir = strndup(path, (size_t) (slash - path));
        return x->dir ? 0 : -ENOMEM;
}

int kubeconfig_parse(const char *text, size_t size, const char *path, KubeConfig **ret, char **ret_error) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *yaml_error = NULL, *cluster_where = NULL, *user_where = NULL;
        json_auto_t *root = NULL;
        const char *current, *cluster_name, *user_name, *ns;
        json_t *context, *cluster, *user;
        _cleanup_(ctx_done) Ctx x = {};
        int r;

        assert(text || size == 0);
        assert(path);
        assert(ret);

        r = yaml_to_json(text, size, &root, &yaml_error);
        if (r < 0)
                return fail(ret_error, r, path, "%s", yaml_error ? yaml_error : strerror(-r));
        if (!json_is_object(root))
                return fail(ret_error, -EINVAL, path, "not a kubeconfig (expected a mapping)");

        r = ctx_init(&x, path, ret_error);
        if (r < 0)
                return r;

        r = get_string(&x, root, "current-context", "", &current);
        if (r < 0)
                return r;
        if (isempty(current))
                return fail(ret_error, -EINVAL, path, "current-context: not set");
        context = find_named(root, "contexts", "context", current);
        if (!context)
                return fail(ret_error, -EINVAL, path, "current-context: no context named \"%s\"", current);

        if ((r = get_string(&x, context, "cluster", "context", &cluster_name)) < 0 ||
            (r = get_string(&x, context, "user", "context", &user_name)) < 0 ||
            (r = get_string(&x, context, "namespace", "context", &ns)) < 0)
                return r;
        cluster = find_named(root, "clusters", "cluster", cluster_name);
        if (!cluster)
                return fail(ret_error, -EINVAL, path,
                            "contexts[\"%s\"].context.cluster: no cluster named \"%s\"", current,
                            strempty(cluster_name));
        c = calloc(1, sizeof(*c));
        if (!c || !(c->source = strdup(path)))
                return -ENOMEM;
        if (!isempty(ns) && !(c->namespace = strdup(ns)))
                return -ENOMEM;

        if (asprintf(&cluster_where, "clusters[\"%s\"].cluster", cluster_name) < 0)
                return -ENOMEM;
        r = parse_cluster(&x, c, cluster, cluster_where);
        if (r < 0)
                return r;
        /* A context without a user means anonymous access: allowed, the server decides. */
        user = isempty(user_name) ? NULL : find_named(root, "users", "user", user_name);
        if (!isempty(user_name) && !user)
                return fail(ret_error, -EINVAL, path, "contexts[\"%s\"].context.user: no user named \"%s\"",
                            current, user_name);
        if (user) {
                if (asprintf(&user_where, "users[\"%s\"].user", user_name) < 0)
                        return -ENOMEM;
                r = parse_user(&x, c, user, user_where);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(c);
        return 0;
}

static int read_namespace(const char *sa_dir, char **ret) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t size;
        int r;

        if (asprintf(&path, "%s/namespace", sa_dir) < 0)
                return -ENOMEM;
        r = read_full_file(path, SERVICE_ACCOUNT_NAMESPACE_MAX, &data, &size);
        if (r < 0)
                return 0; /* optional, like client-go */
        while (size > 0 && strchr(" \t\r\n", data[size - 1]))
                data[--size] = '\0';
        if (size > 0)
                *ret = TAKE_PTR(data);
        return 0;
}

int kubeconfig_in_cluster(const char *host, const char *port, const char *sa_dir, KubeConfig **ret,
                          char **ret_error) {
        _cleanup_(kubeconfig_freep) KubeConfig *c = NULL;
        bool v6;
        int r;

        assert(sa_dir);
        assert(ret);

        if (isempty(host) || isempty(port))
                return fail(ret_error, -ENOENT, "in-cluster",
                            "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                            "are not set");
        if (strpbrk(host, "/?#@ []") || strspn(port, "0123456789") != strlen(port))
                return fail(ret_error, -EINVAL, "in-cluster",
                            "invalid KUBERNETES_SERVICE_HOST/PORT \"%s\" \"%s\"", host, port);

        c = calloc(1, sizeof(*c));
        if (!c || !(c->source = strdup("in-cluster")))
                return -ENOMEM;
        v6 = strchr(host, ':');
        if (asprintf(&c->server, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0) {
                c->server = NULL;
                return -ENOMEM;
        }
        if (asprintf(&c->token_file, "%s/token", sa_dir) < 0) {
                c->token_file = NULL;
                return -ENOMEM;
        }
        if (asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
                c->ca_file = NULL;
                return -ENOMEM;
        }
        if (access(c->token_file, R_OK) < 0)
                return fail(ret_error, -errno, "in-cluster", "cannot read %s: %m", c->token_file);
        if (access(c->ca_file, R_OK) < 0)
                return fail(ret_error, -errno, "in-cluster", "cannot read %s: %m", c->ca_file);
        r = read_namespace(sa_dir, &c->namespace);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

int kubeconfig_load(const char *path, KubeConfig **ret, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        assert(path);
        assert(ret);

        r = read_full_file(path, KUBECONFIG_FILE_MAX, &data, &size);
        if (r == -ENOENT) {
                const char *host = getenv("KUBERNETES_SERVICE_HOST"),
                           *port = getenv("KUBERNETES_SERVICE_PORT");

                if (isempty(host))
                        return fail(ret_error, -ENOENT, path,
                                    "does not exist, and not running in a cluster "
                                    "(KUBERNETES_SERVICE_HOST is not set)");
                return kubeconfig_in_cluster(host, port, KUBECONFIG_SERVICE_ACCOUNT_DIR, ret, ret_error);
        }
        if (r < 0)
                return fail(ret_error, r, path, "cannot read: %s", strerror(-r));

        r = kubeconfig_parse(data, size, path, ret, ret_error);
        explicit_bzero(data, size); /* may hold a token or a private key */
        return r;
}
