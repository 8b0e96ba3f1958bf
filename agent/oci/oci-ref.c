/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "oci/oci-ref.h"

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c) {
        return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* path-component := [a-z0-9]+ (separator [a-z0-9]+)*, separator := [_.] | __ | [-]* */
static bool path_component_is_valid(const char *s, size_t n) {
        size_t i = 0;

        if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
                return false;
        while (i < n) {
                if (is_lower_alnum(s[i])) {
                        i++;
                        continue;
                }
                /* a separator run: ".", "_", "__" or any number of "-" */
                if (s[i] == '.' || (s[i] == '_' && s[i + 1] != '_'))
                        i++;
                else if (s[i] == '_')
                        i += 2;
                else if (s[i] == '-')
                        while (i < n && s[i] == '-')
                                i++;
                else
                        return false;
                if (i >= n || !is_lower_alnum(s[i]))
                        return false;
        }
        return true;
}

bool oci_repository_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > OCI_REPOSITORY_MAX)
                return false;
        for (const char *p = s;;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);

                if (!path_component_is_valid(p, len))
                        return false;
                if (!slash)
                        return true;
                p = slash + 1;
        }
}

bool oci_tag_is_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > OCI_TAG_MAX || !(is_alnum(s[0]) || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!(is_alnum(s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-'))
                        return false;
        return true;
}

static bool is_hex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9] */
static bool domain_component_is_valid(const char *s, size_t n) {
        if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 1; i + 1 < n; i++)
                if (!is_alnum(s[i]) && s[i] != '-')
                        return false;
        return true;
}

bool oci_registry_host_is_valid(const char *s) {
        const char *colon, *end;

        if (isempty(s) || strlen(s) > 255)
                return false;

        if (s[0] == '[') {
                /* IPv6 literal, as distribution's grammar has it: "[" [a-fA-F0-9:]+ "]". */
                end = strchr(s, ']');
                if (!end || end == s + 1)
                        return false;
                for (const char *p = s + 1; p < end; p++)
                        if (!(is_hex(*p) || *p == ':'))
                                return false;
                colon = *(end + 1) == ':' ? end + 1 : NULL;
                if (!colon && *(end + 1))
                        return false;
        } else {
                /* domain := domain-component ("." domain-component)*: no "a..b", no "a.-b". */
                colon = strchr(s, ':');
                end = colon ? colon : s + strlen(s);
                for (const char *p = s;;) {
                        const char *dot = memchr(p, '.', (size_t) (end - p));
                        const char *stop = dot ?: end;

                        if (!domain_component_is_valid(p, (size_t) (stop - p)))
                                return false;
                        if (!dot)
                                break;
                        p = dot + 1;
                }
        }

        if (colon) {
                unsigned long port = 0;
                const char *p = colon + 1;

                if (!*p || strlen(p) > 5)
                        return false;
                for (; *p; p++) {
                        if (*p < '0' || *p > '9')
                                return false;
                        port = port * 10 + (unsigned long) (*p - '0');
                }
                if (port == 0 || port > 65535)
                        return false;
        }
        return true;
}

OciRef *oci_ref_free(OciRef *r) {
        if (!r)
                return NULL;
        free(r->registry);
        free(r->repository);
        free(r->tag);
        free(r->digest);
        free(r);
        return NULL;
}

/* Docker's rule: the first component is a registry host if it contains '.' or ':' or is
 * "localhost" (or has upper-case letters, which a repository never has). */
static bool first_component_is_host(const char *s, size_t n) {
        if (n == 9 && strncmp(s, "localhost", 9) == 0)
                return true;
        for (size_t i = 0; i < n; i++)
                if (s[i] == '.' || s[i] == ':' || (s[i] >= 'A' && s[i] <= 'Z'))
                        return true;
        return false;
}

static int reject(const char **ret_why, const char *why) {
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}

static int parse(const char *s, OciRef **ret, const char **ret_why) {
        _cleanup_(oci_ref_freep) OciRef *r = NULL;
        _cleanup_free_ char *name = NULL;
        const char *at, *slash, *last_slash, *colon;
        Digest d;

        if (isempty(s) || strlen(s) > OCI_REF_MAX)
                return reject(ret_why, "empty or longer than 1024 bytes");

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;

        at = strchr(s, '@');
        if (at) {
                if (digest_parse(at + 1, &d) < 0)
                        return reject(ret_why, "the digest is not sha256:<64 lower-case hex digits>");
                r->digest = strdup(at + 1);
                name = strndup(s, (size_t) (at - s));
        } else
                name = strdup(s);
        if (!name || (at && !r->digest))
                return -ENOMEM;

        slash = strchr(name, '/');
        if (slash && first_component_is_host(name, (size_t) (slash - name))) {
                r->registry = strndup(name, (size_t) (slash - name));
                if (!r->registry)
                        return -ENOMEM;
                memmove(name, slash + 1, strlen(slash + 1) + 1);
        } else {
                r->registry = strdup(OCI_DOCKER_HUB);
                if (!r->registry)
                        return -ENOMEM;
        }
        if (!oci_registry_host_is_valid(r->registry))
                return reject(
                        ret_why,
                        "the registry is not a host name, IPv4 or [IPv6] address with an optional port");

        /* A tag is a ':' after the last '/' (a ':' before it would belong to a host:port). */
        last_slash = strrchr(name, '/');
        colon = strchr(last_slash ? last_slash : name, ':');
        if (colon) {
                r->tag = strdup(colon + 1);
                if (!r->tag)
                        return -ENOMEM;
                if (!oci_tag_is_valid(r->tag))
                        return reject(ret_why, "the tag does not match [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}");
                name[colon - name] = '\0';
        } else if (!r->digest) {
                r->tag = strdup("latest");
                if (!r->tag)
                        return -ENOMEM;
        }

        if (streq(r->registry, OCI_DOCKER_HUB) && !strchr(name, '/')) {
                if (asprintf(&r->repository, "library/%s", name) < 0) {
                        r->repository = NULL;
                        return -ENOMEM;
                }
        } else {
                r->repository = strdup(name);
                if (!r->repository)
                        return -ENOMEM;
        }
        /* Each component goes into /v2/<name>/...: the grammar leaves no "..", '%', '?' or '#'. */
        if (!oci_repository_is_valid(r->repository))
                return reject(ret_why,
                              "the repository is not '/'-separated components of [a-z0-9] joined by "
                              "'.', '_', '__' or '-'");
        /* distribution's NameTotalLengthMax: the name with its registry. */
        if (strlen(r->registry) + 1 + strlen(r->repository) > OCI_NAME_MAX)
                return reject(ret_why, "the registry and repository are longer than 255 characters");

        if (ret)
                *ret = TAKE_PTR(r);
        return 0;
}

int oci_ref_parse(const char *s, OciRef **ret) {
        assert(ret);
        return parse(s, ret, NULL);
}

int oci_ref_check(const char *s, const char **ret_why) {
        return parse(s, NULL, ret_why);
}

const char *oci_ref_api_host(const OciRef *r) {
        return streq(r->registry, OCI_DOCKER_HUB) ? OCI_DOCKER_HUB_API : r->registry;
}

const char *oci_ref_manifest_reference(const OciRef *r) {
        return r->digest ? r->digest : r->tag;
}

int oci_ref_to_string(const OciRef *r, char **ret) {
        char *s;

        assert(r);
        assert(ret);

        if (asprintf(&s, "%s/%s%s%s%s%s", r->registry, r->repository, r->tag ? ":" : "", strempty(r->tag),
                     r->digest ? "@" : "", strempty(r->digest)) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int oci_ref_substitute_version(const char *template, const char *version, char **ret) {
        static const char placeholder[] = "{version}";
        const size_t plen = sizeof(placeholder) - 1;
        size_t n = 0, vlen;
        char *out, *o;

        assert(template);
        assert(ret);

        if (!oci_tag_is_valid(version))
                return -EINVAL;
        vlen = strlen(version);

        for (const char *p = strstr(template, placeholder); p; p = strstr(p + plen, placeholder))
                n++;
        out = malloc(strlen(template) - n * plen + n * vlen + 1);
        if (!out)
                return -ENOMEM;

        o = out;
        for (const char *p = template;;) {
                const char *hit = strstr(p, placeholder);

                if (!hit) {
                        memcpy(o, p, strlen(p) + 1);
                        break;
                }
                memcpy(o, p, (size_t) (hit - p));
                o += hit - p;
                memcpy(o, version, vlen);
                o += vlen;
                p = hit + plen;
        }
        *ret = out;
        return 0;
}

int oci_ref_tag_version(const OciRef *r, char **ret) {
        const char *t;
        char *v;

        assert(r);
        assert(ret);

        if (!r->tag)
                return -ENODATA;
        t = r->tag[0] == 'v' ? r->tag + 1 : r->tag;
        if (!*t)
                return -EINVAL;
        v = strdup(t);
        if (!v)
                return -ENOMEM;
        *ret = v;
        return 0;
}
