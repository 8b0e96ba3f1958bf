/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/version.h"

/* A parsed constraint reference (Masterminds semver v3 parseConstraint()): missing or wildcard
 * parts are "dirty" and replaced by 0 in `v`. */
typedef struct Reference {
        Version v;
        bool dirty, minor_dirty, patch_dirty;
} Reference;

static const char *const op_names[_VERSION_OP_MAX] = {
        [VERSION_OP_EQ] = "=",  [VERSION_OP_NE] = "!=", [VERSION_OP_LT] = "<",
        [VERSION_OP_LE] = "<=", [VERSION_OP_GT] = ">",  [VERSION_OP_GE] = ">=",
};

static const char *const change_names[_KUBELET_CHANGE_MAX] = {
        [KUBELET_CHANGE_NONE] = "none",   [KUBELET_CHANGE_PATCH] = "patch",
        [KUBELET_CHANGE_MINOR] = "minor", [KUBELET_CHANGE_DOWNGRADE] = "downgrade",
        [KUBELET_CHANGE_SKIP] = "skip",
};

DEFINE_STRING_TABLE_LOOKUP(version_op, VersionOp, op_names);
DEFINE_STRING_TABLE_LOOKUP(kubelet_change, KubeletChange, change_names);

static int why(const char **ret_why, const char *text) {
        if (ret_why)
                *ret_why = text;
        return -EINVAL;
}

int version_normalize(const char *s, char **ret) {
        size_t n = 0;
        char *out;

        assert(s);
        assert(ret);

        if (strlen(s) > VERSION_STRING_MAX)
                return -EINVAL;
        out = malloc(strlen(s) + 1);
        if (!out)
                return -ENOMEM;
        for (const char *c = s; *c; c++) {
                if (*c == 'v')
                        continue;
                if (*c == '-' || *c == '+' || *c == '~')
                        break;
                out[n++] = *c;
        }
        out[n] = '\0';
        *ret = out;
        return 0;
}

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

/* strconv.ParseUint(s, 10, 64) over [s, s+len): digits only, overflow is an error. */
static int parse_u64(const char *s, size_t len, uint64_t *ret) {
        uint64_t v = 0;

        if (len == 0)
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (!is_digit(s[i]))
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (s[i] - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

/* Splits a normalised string into at most three dot-separated parts. More parts or an empty part
 * is an error. Returns the number of parts. */
static int split_parts(const char *s, const char *part[3], size_t len[3]) {
        int n = 0;
        const char *p = s;

        for (;;) {
                const char *dot = strchr(p, '.');
                size_t l = dot ? (size_t) (dot - p) : strlen(p);

                if (n == 3 || l == 0)
                        return -EINVAL;
                part[n] = p;
                len[n] = l;
                n++;
                if (!dot)
                        return n;
                p = dot + 1;
        }
}

/* Masterminds NewVersion() in coerce mode on an already normalised string. */
static int parse_normalized(const char *s, Version *ret, const char **ret_why) {
        const char *part[3];
        size_t len[3];
        uint64_t num[3] = {};
        int n;

        if (isempty(s))
                return why(ret_why, "invalid semantic version: empty");
        n = split_parts(s, part, len);
        if (n < 0)
                return why(ret_why, "invalid semantic version");
        for (int i = 0; i < n; i++) {
                int r = parse_u64(part[i], len[i], &num[i]);
                if (r == -ERANGE)
                        return why(ret_why, "invalid semantic version: a part does not fit in 64 bits");
                if (r < 0)
                        return why(ret_why, "invalid semantic version");
        }
        *ret = (Version) { num[0], num[1], num[2] };
        return 0;
}

int version_parse(const char *s, Version *ret, const char **ret_why) {
        _cleanup_free_ char *n = NULL;
        int r;

        assert(s);
        assert(ret);

        r = version_normalize(s, &n);
        if (r == -EINVAL)
                return why(ret_why, "invalid semantic version: too long");
        if (r < 0)
                return r;
        return parse_normalized(n, ret, ret_why);
}

int version_cmp(const Version *a, const Version *b) {
        if (a->major != b->major)
                return a->major < b->major ? -1 : 1;
        if (a->minor != b->minor)
                return a->minor < b->minor ? -1 : 1;
        if (a->patch != b->patch)
                return a->patch < b->patch ? -1 : 1;
        return 0;
}

static bool is_wildcard(const char *p, size_t l) {
        return l == 1 && (*p == 'x' || *p == 'X' || *p == '*');
}

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* parseConstraint() for "<op> <s>" where s is already normalised. Surrounding whitespace is what
 * the constraint regex tolerates; anything that would split into several constraints (inner
 * spaces, commas, "||") is rejected rather than reinterpreted. */
static int parse_reference(const char *s, Reference *ret, const char **ret_why) {
        _cleanup_free_ char *t = NULL;
        const char *part[3];
        size_t len[3], l;
        uint64_t num[3] = {};
        Reference ref = {};
        int n;

        while (is_space(*s))
                s++;
        l = strlen(s);
        while (l > 0 && is_space(s[l - 1]))
                l--;
        if (l == 0)
                return why(ret_why, "improper constraint: empty version");
        t = strndup(s, l);
        if (!t)
                return -ENOMEM;

        n = split_parts(t, part, len);
        if (n < 0)
                return why(ret_why, "improper constraint");
        for (int i = 0; i < n; i++) {
                int r;

                if (is_wildcard(part[i], len[i]))
                        continue;
                r = parse_u64(part[i], len[i], &num[i]);
                if (r == -ERANGE)
                        return why(ret_why, "improper constraint: a part does not fit in 64 bits");
                if (r < 0)
                        return why(ret_why, "improper constraint");
        }

        if (is_wildcard(part[0], len[0]))
                ref.dirty = true; /* "x": 0.0.0, neither minor nor patch dirty */
        else if (n < 2 || is_wildcard(part[1], len[1])) {
                ref.dirty = ref.minor_dirty = true;
                ref.v.major = num[0];
        } else if (n < 3 || is_wildcard(part[2], len[2])) {
                ref.dirty = ref.patch_dirty = true;
                ref.v = (Version) { num[0], num[1], 0 };
        } else
                ref.v = (Version) { num[0], num[1], num[2] };

        *ret = ref;
        return 0;
}

static bool tilde(const Version *v, const Reference *c) {
        if (version_cmp(v, &c->v) < 0)
                return false;
        if (c->v.major == 0 && c->v.minor == 0 && c->v.patch == 0 && !c->minor_dirty && !c->patch_dirty)
                return true;
        if (v->major != c->v.major)
                return false;
        if (v->minor != c->v.minor && !c->minor_dirty)
                return false;
        return true;
}

static bool not_equal(const Version *v, const Reference *c) {
        if (c->dirty) {
                if (c->v.major != v->major)
                        return true;
                if (c->v.minor != v->minor && !c->minor_dirty)
                        return true;
                if (c->minor_dirty)
                        return false;
                if (c->v.patch != v->patch && !c->patch_dirty)
                        return true;
                if (c->patch_dirty)
                        return false;
        }
        return version_cmp(v, &c->v) != 0;
}

static bool greater(const Version *v, const Reference *c) {
        if (!c->dirty)
                return version_cmp(v, &c->v) > 0;
        if (v->major != c->v.major)
                return v->major > c->v.major;
        if (c->minor_dirty)
                return false;
        if (c->patch_dirty)
                return v->minor > c->v.minor;
        return version_cmp(v, &c->v) > 0;
}

static bool less_equal(const Version *v, const Reference *c) {
        if (!c->dirty)
                return version_cmp(v, &c->v) <= 0;
        if (v->major > c->v.major)
                return false;
        if (v->major == c->v.major && v->minor > c->v.minor && !c->minor_dirty)
                return false;
        return true;
}

int version_compare(const char *a, VersionOp op, const char *b, const char **ret_why) {
        _cleanup_free_ char *na = NULL, *nb = NULL;
        Reference ref;
        Version v;
        int r;

        assert(a);
        assert(b);
        assert(op >= 0 && op < _VERSION_OP_MAX);

        /* Masterminds builds the constraint first, so a bad reference wins over a bad version. */
        r = version_normalize(b, &nb);
        if (r == -EINVAL)
                return why(ret_why, "improper constraint: too long");
        if (r < 0)
                return r;
        r = parse_reference(nb, &ref, ret_why);
        if (r < 0)
                return r;

        r = version_normalize(a, &na);
        if (r == -EINVAL)
                return why(ret_why, "invalid semantic version: too long");
        if (r < 0)
                return r;
        r = parse_normalized(na, &v, ret_why);
        if (r < 0)
                return r;

        switch (op) {
        case VERSION_OP_EQ:
                return ref.dirty ? tilde(&v, &ref) : version_cmp(&v, &ref.v) == 0;
        case VERSION_OP_NE:
                return not_equal(&v, &ref);
        case VERSION_OP_LT:
                return version_cmp(&v, &ref.v) < 0;
        case VERSION_OP_LE:
                return less_equal(&v, &ref);
        case VERSION_OP_GT:
                return greater(&v, &ref);
        case VERSION_OP_GE:
                return version_cmp(&v, &ref.v) >= 0;
        default:
                return -EINVAL;
        }
}

static bool safe_char(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' ||
                c == '_' || c == '-';
}

bool version_is_safe_name(const char *s) {
        if (!s || !is_digit(*s) || strlen(s) > VERSION_STRING_MAX)
                return false;
        for (const char *c = s; *c; c++)
                if (!safe_char(*c))
                        return false;
        /* Starting with a digit already rules out "." and ".."; no further path checks needed. */
        return true;
}

int version_normalize_kubelet(const char *s, char **ret) {
        char *out;

        assert(s);
        assert(ret);

        if (*s == 'v' || *s == 'V')
                s++;
        if (!version_is_safe_name(s))
                return -EINVAL;
        out = strdup(s);
        if (!out)
                return -ENOMEM;
        *ret = out;
        return 0;
}

int version_check_kubelet_desired(const char *v, const char **ret_why) {
        const char *why = NULL;
        Version parsed;
        size_t n;

        assert(v);

        n = strlen(v);
        if (!version_is_safe_name(v))
                why = "only [0-9A-Za-z.+_-] starting with a digit may name a version";
        else if (n > KUBELET_VERSION_MAX)
                why = "longer than 63 bytes, the limit of a label value";
        else if (strchr(v, '+') ||
                 !(is_digit(v[n - 1]) || ((v[n - 1] | 0x20) >= 'a' && (v[n - 1] | 0x20) <= 'z')))
                why = "not a valid label value";
        else if (version_parse(v, &parsed, &why) >= 0)
                return 0;
        if (!why)
                why = "not a version";
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}

int version_classify_kubelet(const char *from, const char *to, KubeletChange *ret, const char **ret_why) {
        Version f, t;
        int r;

        assert(from);
        assert(to);
        assert(ret);

        r = version_parse(from, &f, ret_why);
        if (r < 0)
                return r;
        r = version_parse(to, &t, ret_why);
        if (r < 0)
                return r;

        if (version_cmp(&t, &f) == 0)
                *ret = KUBELET_CHANGE_NONE;
        else if (version_cmp(&t, &f) < 0)
                *ret = KUBELET_CHANGE_DOWNGRADE;
        else if (t.major != f.major)
                *ret = KUBELET_CHANGE_SKIP;
        else if (t.minor == f.minor)
                *ret = KUBELET_CHANGE_PATCH;
        else if (t.minor == f.minor + 1)
                *ret = KUBELET_CHANGE_MINOR;
        else
                *ret = KUBELET_CHANGE_SKIP;
        return 0;
}
