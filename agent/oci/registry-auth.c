/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <strings.h>

#include "oci/registry-auth.h"
#include "util/base64.h"

RegistryChallenge *registry_challenge_free(RegistryChallenge *c) {
        if (!c)
                return NULL;
        free(c->realm);
        free(c->service);
        free(c->scope);
        free(c);
        return NULL;
}

RegistryCredentials *registry_credentials_free(RegistryCredentials *c) {
        if (!c)
                return NULL;
        free(c->username);
        if (c->password) {
                explicit_bzero(c->password, strlen(c->password));
                free(c->password);
        }
        free(c);
        return NULL;
}

static bool is_tchar(char c) {
        /* RFC 7230 token characters */
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                strchr("!#$%&'*+-.^_`|~", c);
}

static const char *skip_ws(const char *p) {
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

/* Reads a token or a quoted-string at *p into a new string and advances *p. */
static int read_value(const char **p, char **ret) {
        const char *s = *p;
        char *out, *o;

        if (*s != '"') {
                const char *start = s;

                while (*s && is_tchar(*s))
                        s++;
                if (s == start)
                        return -EBADMSG;
                out = strndup(start, (size_t) (s - start));
                if (!out)
                        return -ENOMEM;
                *p = s;
                *ret = out;
                return 0;
        }

        out = o = malloc(strlen(s) + 1);
        if (!out)
                return -ENOMEM;
        for (s++; *s != '"'; s++) {
                if (!*s || (unsigned char) *s < 0x20) {
                        free(out);
                        return -EBADMSG;
                }
                if (*s == '\\' && s[1])
                        s++;
                *o++ = *s;
        }
        *o = '\0';
        *p = s + 1;
        *ret = out;
        return 0;
}

/* One challenge: scheme then auth-params up to the next scheme or the end. Returns the scheme in
 * *ret (params filled for the two we know) and advances *p. */
static int parse_one(const char **p, RegistryChallenge *c) {
        const char *s = skip_ws(*p), *start = s;
        size_t n;

        while (*s && is_tchar(*s))
                s++;
        n = (size_t) (s - start);
        if (n == 6 && strncasecmp(start, "Bearer", 6) == 0)
                c->scheme = REGISTRY_AUTH_BEARER;
        else if (n == 5 && strncasecmp(start, "Basic", 5) == 0)
                c->scheme = REGISTRY_AUTH_BASIC;
        else if (n > 0)
                c->scheme = _REGISTRY_AUTH_SCHEME_INVALID;
        else
                return -EBADMSG;

        for (;;) {
                _cleanup_free_ char *key = NULL, *value = NULL;
                const char *save;
                char **slot = NULL;
                int r;

                s = skip_ws(s);
                while (*s == ',')
                        s = skip_ws(s + 1);
                if (!*s)
                        break;
                save = s;
                start = s;
                while (*s && is_tchar(*s))
                        s++;
                if (s == start)
                        return -EBADMSG;
                key = strndup(start, (size_t) (s - start));
                if (!key)
                        return -ENOMEM;
                s = skip_ws(s);
                if (*s != '=') {
                        s = save; /* a new challenge starts here */
                        break;
                }
                s = skip_ws(s + 1);
                r = read_value(&s, &value);
                if (r < 0)
                        return r;
                if (strcasecmp(key, "realm") == 0)
                        slot = &c->realm;
                else if (strcasecmp(key, "service") == 0)
                        slot = &c->service;
                else if (strcasecmp(key, "scope") == 0)
                        slot = &c->scope;
                if (slot) {
                        free(*slot);
                        *slot = TAKE_PTR(value);
                }
        }
        *p = s;
        return 0;
}

int registry_challenge_parse(const char *header, RegistryChallenge **ret) {
        _cleanup_(registry_challenge_freep) RegistryChallenge *best = NULL;
        const char *p = header;

        assert(ret);

        if (isempty(header) || strlen(header) > REGISTRY_CHALLENGE_MAX)
                return -EBADMSG;

        while (*skip_ws(p)) {
                _cleanup_(registry_challenge_freep) RegistryChallenge *c = NULL;
                int r;

                c = calloc(1, sizeof(*c));
                if (!c)
                        return -ENOMEM;
                r = parse_one(&p, c);
                if (r < 0)
                        return r;
                if (c->scheme < 0)
                        continue;
                if (c->scheme == REGISTRY_AUTH_BEARER && isempty(c->realm))
                        return -EBADMSG;
                if (!best || (best->scheme == REGISTRY_AUTH_BASIC && c->scheme == REGISTRY_AUTH_BEARER)) {
                        registry_challenge_free(best);
                        best = TAKE_PTR(c);
                }
        }
        if (!best)
                return -EPROTONOSUPPORT;
        *ret = TAKE_PTR(best);
        return 0;
}

static int append_escaped(FILE *f, const char *s) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;

                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '.' || c == '_' || c == '~')
                        fputc(c, f);
                else
                        fprintf(f, "%%%02X", c);
        }
        return 0;
}

int registry_challenge_token_url(const RegistryChallenge *c, const char *default_scope, char **ret) {
        _cleanup_free_ char *buf = NULL;
        const char *scope;
        size_t size = 0;
        char sep;
        FILE *f;

        assert(c);
        assert(ret);

        if (c->scheme != REGISTRY_AUTH_BEARER || isempty(c->realm))
                return -EINVAL;
        if (strncmp(c->realm, "https://", 8) != 0 && strncmp(c->realm, "http://", 7) != 0)
                return -EINVAL;
        for (const char *s = c->realm; *s; s++)
                if ((unsigned char) *s <= ' ' || (unsigned char) *s >= 0x7f)
                        return -EINVAL;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fputs(c->realm, f);
        sep = strchr(c->realm, '?') ? '&' : '?';
        if (c->service) {
                fprintf(f, "%cservice=", sep);
                append_escaped(f, c->service);
                sep = '&';
        }
        scope = c->scope ? c->scope : default_scope;
        if (scope) {
                fprintf(f, "%cscope=", sep);
                append_escaped(f, scope);
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        *ret = TAKE_PTR(buf);
        return 0;
}

int registry_token_parse(const void *data, size_t size, char **ret_token, uint64_t *ret_expires_in_usec) {
        json_auto_t *root = NULL;
        json_t *tok, *exp;
        json_error_t err;
        uint64_t expires = 60;
        const char *t;
        char *copy;

        assert(ret_token);

        if (size > REGISTRY_TOKEN_MAX * 2)
                return -EFBIG;
        root = json_loadb(data, size, 0, &err);
        if (!json_is_object(root))
                return -EBADMSG;
        tok = json_object_get(root, "token");
        if (!json_is_string(tok) || json_string_length(tok) == 0)
                tok = json_object_get(root, "access_token");
        if (!json_is_string(tok) || json_string_length(tok) == 0 ||
            json_string_length(tok) > REGISTRY_TOKEN_MAX)
                return -EBADMSG;
        t = json_string_value(tok);
        for (const char *s = t; *s; s++)
                if ((unsigned char) *s <= ' ' || (unsigned char) *s >= 0x7f)
                        return -EBADMSG; /* would break or smuggle into the header */

        exp = json_object_get(root, "expires_in");
        if (json_is_integer(exp) && json_integer_value(exp) > 0)
                expires = (uint64_t) MIN(json_integer_value(exp), (json_int_t) 86400);

        copy = strdup(t);
        if (!copy)
                return -ENOMEM;
        *ret_token = copy;
        if (ret_expires_in_usec)
                *ret_expires_in_usec = expires * USEC_PER_SEC;
        return 0;
}

/* Strips "http(s)://" and a trailing "/", "/v1/", "/v2/"; reports whether it was a legacy key (then
 * only the host part counts). */
static char *normalize_key(const char *key, bool *ret_legacy) {
        const char *s = key;
        size_t n;
        char *out;

        *ret_legacy = false;
        if (strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0) {
                s = strstr(s, "://") + 3;
                *ret_legacy = true;
        }
        out = strdup(s);
        if (!out)
                return NULL;
        n = strlen(out);
        while (n > 0 && out[n - 1] == '/')
                out[--n] = '\0';
        if (n > 3 && (strcmp(out + n - 3, "/v1") == 0 || strcmp(out + n - 3, "/v2") == 0)) {
                out[n - 3] = '\0';
                *ret_legacy = true;
        }
        if (*ret_legacy) {
                char *slash = strchr(out, '/');
                if (slash)
                        *slash = '\0';
        }
        if (streq(out, "index.docker.io") || streq(out, "registry-1.docker.io")) {
                free(out);
                out = strdup("docker.io");
        }
        return out;
}

/* How well `key` matches "registry/repository": -1 no match, else the length of the matched key
 * (longer = more specific). */
static ssize_t key_specificity(const char *key, const char *registry, const char *repository) {
        _cleanup_free_ char *full = NULL;
        size_t n = strlen(key);

        if (asprintf(&full, "%s/%s", registry, repository) < 0)
                return -1;
        if (strncmp(full, key, n) != 0)
                return -1;
        if (full[n] != '\0' && full[n] != '/')
                return -1;
        if (n < strlen(registry))
                return -1;
        return (ssize_t) n;
}

/* An entry's "auth": base64 of "user:password" (docker's config.json, Go's StdEncoding), as a C
 * string: one with a NUL inside is refused. */
static int decode_auth(const char *in, char **ret) {
        _cleanup_free_ char *out = NULL;
        size_t n = strlen(in), size;
        int r;

        if (n == 0 || n > 8192)
                return -EBADMSG;
        r = base64_decode_full(in, n, /* strict= */ true, SIZE_MAX, &out, &size);
        if (r < 0)
                return r;
        if (memchr(out, '\0', size)) {
                explicit_bzero(out, size);
                return -EBADMSG;
        }
        *ret = TAKE_PTR(out);
        return 0;
}

static int credentials_from_entry(json_t *entry, RegistryCredentials **ret) {
        _cleanup_(registry_credentials_freep) RegistryCredentials *c = NULL;
        json_t *auth, *user, *pass;
        int r;

        if (!json_is_object(entry))
                return -EBADMSG;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;

        auth = json_object_get(entry, "auth");
        user = json_object_get(entry, "username");
        pass = json_object_get(entry, "password");
        if (json_is_string(auth) && json_string_length(auth) > 0) {
                _cleanup_free_ char *decoded = NULL;
                char *colon;

                r = decode_auth(json_string_value(auth), &decoded);
                if (r < 0)
                        return r;
                colon = strchr(decoded, ':');
                if (!colon)
                        return -EBADMSG;
                c->username = strndup(decoded, (size_t) (colon - decoded));
                c->password = strdup(colon + 1);
                explicit_bzero(decoded, strlen(decoded));
        } else if (json_is_string(user) && json_is_string(pass)) {
                c->username = strdup(json_string_value(user));
                c->password = strdup(json_string_value(pass));
        } else
                return -ENOENT; /* e.g. an entry holding only an identitytoken */
        if (!c->username || !c->password)
                return -ENOMEM;
        if (isempty(c->username))
                return -EBADMSG;
        *ret = TAKE_PTR(c);
        return 0;
}

int registry_auth_file_lookup(const void *data, size_t size, const char *registry, const char *repository,
                              RegistryCredentials **ret) {
        json_auto_t *root = NULL;
        json_t *auths, *entry, *best = NULL;
        const char *key;
        ssize_t best_score = -1;
        json_error_t err;

        assert(registry);
        assert(repository);
        assert(ret);

        if (size > REGISTRY_AUTH_FILE_MAX)
                return -EFBIG;
        root = json_loadb(data, size, 0, &err);
        if (!json_is_object(root))
                return -EBADMSG;
        auths = json_object_get(root, "auths");
        if (!auths)
                return -ENOENT;
        if (!json_is_object(auths))
                return -EBADMSG;

        json_object_foreach(auths, key, entry) {
                _cleanup_free_ char *norm = NULL;
                bool legacy;
                ssize_t score;

                norm = normalize_key(key, &legacy);
                if (!norm)
                        return -ENOMEM;
                score = key_specificity(norm, registry, repository);
                if (score > best_score) {
                        best_score = score;
                        best = entry;
                }
        }
        if (!best)
                return -ENOENT;
        return credentials_from_entry(best, ret);
}

int registry_credentials_basic_header(const RegistryCredentials *c, char **ret) {
        _cleanup_free_ char *plain = NULL, *encoded = NULL;
        int n, r;

        assert(c);
        assert(ret);

        n = asprintf(&plain, "%s:%s", c->username, c->password);
        if (n < 0)
                return -ENOMEM;
        r = base64_encode(plain, (size_t) n, /* url= */ false, &encoded);
        explicit_bzero(plain, (size_t) n);
        if (r < 0)
                return r;
        if (asprintf(ret, "Basic %s", encoded) < 0)
                r = -ENOMEM;
        explicit_bzero(encoded, strlen(encoded));
        return r;
}
