/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <strings.h>

#include "os/boot-entry.h"

#define EFI_SUFFIX ".efi"
#define TEMP_MARKER ".tmp-"
/* Nine digits always fit an unsigned; systemd-boot itself never writes more than a few. */
#define COUNTER_DIGITS_MAX 9

static const char *const state_names[_BOOT_ENTRY_STATE_MAX] = {
        [BOOT_ENTRY_ABSENT] = "absent",
        [BOOT_ENTRY_PENDING] = "pending",
        [BOOT_ENTRY_GOOD] = "good",
        [BOOT_ENTRY_BAD] = "bad",
};

DEFINE_STRING_TABLE_LOOKUP(boot_entry_state, BootEntryState, state_names);

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_alnum(char c) {
        return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool boot_entry_prefix_is_valid(const char *prefix) {
        size_t n;

        if (isempty(prefix))
                return false;
        n = strlen(prefix);
        if (n > BOOT_ENTRY_PREFIX_MAX || prefix[0] == '.' || prefix[0] == '-')
                return false;
        for (const char *c = prefix; *c; c++)
                if (!is_alnum(*c) && *c != '.' && *c != '_' && *c != '-')
                        return false;
        return true;
}

bool boot_entry_version_is_valid(const char *version) {
        const char *v = version;

        if (isempty(version) || strlen(version) > BOOT_ENTRY_VERSION_MAX)
                return false;
        if (*v == 'v')
                v++;
        /* Starting with a digit keeps "<prefix>-<word>..." files of other tools out of our set. */
        if (!is_digit(*v))
                return false;
        for (; *v; v++)
                if (!is_alnum(*v) && *v != '.' && *v != '_' && *v != '~' && *v != '-')
                        return false;
        return !strstr(version, "..");
}

int boot_entry_name_format(const char *prefix, const char *version, unsigned tries, char **ret) {
        char *s;
        int n;

        assert(ret);

        if (!boot_entry_prefix_is_valid(prefix) || !boot_entry_version_is_valid(version) ||
            tries > BOOT_ENTRY_TRIES_MAX)
                return -EINVAL;

        if (tries > 0)
                n = asprintf(&s, "%s-%s+%u" EFI_SUFFIX, prefix, version, tries);
        else
                n = asprintf(&s, "%s-%s" EFI_SUFFIX, prefix, version);
        if (n < 0)
                return -ENOMEM;

        *ret = s;
        return 0;
}

/* Reads 1..COUNTER_DIGITS_MAX decimal digits from [*p, end). */
static bool parse_counter_number(const char **p, const char *end, unsigned *ret) {
        unsigned v = 0;
        size_t n = 0;

        while (*p < end && is_digit(**p)) {
                if (++n > COUNTER_DIGITS_MAX)
                        return false;
                v = v * 10 + (unsigned) (**p - '0');
                (*p)++;
        }
        if (n == 0)
                return false;
        *ret = v;
        return true;
}

/* Parses "+<left>[-<done>]" spanning exactly [plus, end). */
static bool parse_counter(const char *plus, const char *end, unsigned *ret_left, unsigned *ret_done) {
        const char *p = plus + 1;
        unsigned left, done = 0;

        if (!parse_counter_number(&p, end, &left))
                return false;
        if (p < end) {
                if (*p != '-')
                        return false;
                p++;
                if (!parse_counter_number(&p, end, &done) || p != end)
                        return false;
        }
        *ret_left = left;
        *ret_done = done;
        return true;
}

static bool has_suffix_nocase(const char *s, size_t n, const char *suffix) {
        size_t l = strlen(suffix);

        return n >= l && strncasecmp(s + n - l, suffix, l) == 0;
}

/* The "+N[-M]" counter of a name body, if it has one. */
static const char *find_counter(const char *body, size_t n, unsigned *ret_left, unsigned *ret_done) {
        const char *plus = memrchr(body, '+', n);

        if (plus && parse_counter(plus, body + n, ret_left, ret_done))
                return plus;
        return NULL;
}

int boot_entry_name_parse(const char *prefix, const char *filename, BootEntryName *ret) {
        size_t lp, n, body_len;
        unsigned left = 0, done = 0;
        const char *body, *plus;
        char *version;

        assert(prefix);
        assert(filename);
        assert(ret);

        lp = strlen(prefix);
        n = strlen(filename);
        if (strncmp(filename, prefix, lp) != 0 || filename[lp] != '-')
                return -EINVAL;
        if (!has_suffix_nocase(filename, n, EFI_SUFFIX))
                return -EINVAL;
        body = filename + lp + 1;
        if (n < lp + 1 + strlen(EFI_SUFFIX))
                return -EINVAL;
        body_len = n - lp - 1 - strlen(EFI_SUFFIX);

        plus = find_counter(body, body_len, &left, &done);
        version = strndup(body, plus ? (size_t) (plus - body) : body_len);
        if (!version)
                return -ENOMEM;
        if (!boot_entry_version_is_valid(version)) {
                free(version);
                return -EINVAL;
        }

        *ret = (BootEntryName) {
                .version = version,
                .has_counter = plus != NULL,
                .tries_left = left,
                .tries_done = done,
        };
        return 0;
}

void boot_entry_name_done(BootEntryName *n) {
        if (!n)
                return;
        free(n->version);
        n->version = NULL;
}

int boot_entry_strip_counter(const char *filename, char **ret) {
        unsigned left, done;
        const char *plus;
        size_t n, body_len;
        char *s;

        assert(filename);
        assert(ret);

        n = strlen(filename);
        body_len = has_suffix_nocase(filename, n, EFI_SUFFIX) ? n - strlen(EFI_SUFFIX) : n;
        plus = find_counter(filename, body_len, &left, &done);
        if (!plus)
                s = strdup(filename);
        else if (asprintf(&s, "%.*s%s", (int) (plus - filename), filename, filename + body_len) < 0)
                s = NULL;
        if (!s)
                return -ENOMEM;

        *ret = s;
        return 0;
}

int boot_entry_temp_template(const char *final_name, char **ret) {
        char *s;

        assert(final_name);
        assert(ret);

        if (asprintf(&s, ".%s" TEMP_MARKER "XXXXXX", final_name) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

bool boot_entry_is_temp_name(const char *prefix, const char *filename) {
        size_t lp = strlen(prefix);
        const char *marker;

        if (filename[0] != '.' || strncmp(filename + 1, prefix, lp) != 0 || filename[1 + lp] != '-')
                return false;
        marker = strstr(filename, EFI_SUFFIX TEMP_MARKER);
        return marker && strlen(marker) == strlen(EFI_SUFFIX TEMP_MARKER "XXXXXX");
}

/* Splits the numeric core "1.2.0" of a version into [start, end) of components; returns the
 * number of significant components (trailing zeros dropped), or -1 if there is no numeric core. */
static int numeric_core(const char *v, const char *comp[], size_t comp_len[], size_t max) {
        int n = 0, significant = 0;

        if (*v == 'v' || *v == 'V')
                v++;
        if (!is_digit(*v))
                return -1;

        while (is_digit(*v) && n < (int) max) {
                const char *start;

                while (*v == '0' && is_digit(v[1]))
                        v++; /* "007" is 7 */
                start = v;
                while (is_digit(*v))
                        v++;
                comp[n] = start;
                comp_len[n] = (size_t) (v - start);
                n++;
                if (!(comp_len[n - 1] == 1 && *start == '0'))
                        significant = n;
                if (*v != '.' || !is_digit(v[1]))
                        break;
                v++;
        }
        return significant;
}

bool boot_entry_version_equivalent(const char *a, const char *b) {
        /* A version has at most BOOT_ENTRY_VERSION_MAX bytes, hence at most half as many parts. */
        const char *ca[BOOT_ENTRY_VERSION_MAX / 2 + 1], *cb[BOOT_ENTRY_VERSION_MAX / 2 + 1];
        size_t la[ELEMENTSOF(ca)], lb[ELEMENTSOF(cb)];
        int na, nb;

        if (!a || !b)
                return false;
        if (streq(a, b))
                return true;

        na = numeric_core(a, ca, la, ELEMENTSOF(ca));
        nb = numeric_core(b, cb, lb, ELEMENTSOF(cb));
        if (na < 0 || nb < 0 || na != nb)
                return false;
        for (int i = 0; i < na; i++)
                if (la[i] != lb[i] || memcmp(ca[i], cb[i], la[i]) != 0)
                        return false;
        return true;
}

static bool is_booted(const char *filename, const char *booted_id) {
        _cleanup_free_ char *a = NULL, *b = NULL;

        if (!booted_id)
                return false;
        /* On allocation failure claim "booted": keeping a file is always the safe answer. */
        if (boot_entry_strip_counter(filename, &a) < 0 || boot_entry_strip_counter(booted_id, &b) < 0)
                return true;
        return strcasecmp(a, b) == 0;
}

static bool should_remove(const char *prefix, const char *name, const char *install_version,
                          const char *running_version, const char *booted_id) {
        BootEntryName e;
        bool remove;

        if (boot_entry_is_temp_name(prefix, name))
                return true;
        if (boot_entry_name_parse(prefix, name, &e) < 0)
                return false; /* not ours (or out of memory): leave it alone */

        if (boot_entry_version_equivalent(e.version, running_version) || is_booted(name, booted_id))
                remove = false;
        else if (install_version && streq(e.version, install_version))
                remove = true; /* a stale copy of what we are about to install */
        else
                remove = running_version || booted_id;

        boot_entry_name_done(&e);
        return remove;
}

int boot_entry_select_removals(const char *prefix, char *const *names, size_t n_names,
                               const char *install_version, const char *running_version,
                               const char *booted_id, char ***ret) {
        _cleanup_strv_free_ char **out = NULL;
        size_t n = 0;

        assert(prefix);
        assert(names || n_names == 0);
        assert(ret);

        if (n_names > BOOT_ENTRY_LISTING_MAX)
                return -E2BIG;

        out = calloc(n_names + 1, sizeof(char *));
        if (!out)
                return -ENOMEM;

        for (size_t i = 0; i < n_names; i++) {
                if (!should_remove(prefix, names[i], install_version, running_version, booted_id))
                        continue;
                out[n] = strdup(names[i]);
                if (!out[n])
                        return -ENOMEM;
                n++;
        }

        *ret = TAKE_PTR(out);
        return 0;
}

static int state_rank(BootEntryState s) {
        switch (s) {
        case BOOT_ENTRY_GOOD:
                return 3;
        case BOOT_ENTRY_PENDING:
                return 2;
        case BOOT_ENTRY_BAD:
                return 1;
        default:
                return 0;
        }
}

BootEntryState boot_entry_state_of(const char *prefix, char *const *names, size_t n_names,
                                   const char *version) {
        BootEntryState best = BOOT_ENTRY_ABSENT;

        assert(prefix);
        assert(version);

        for (size_t i = 0; i < n_names; i++) {
                BootEntryState s;
                BootEntryName e;

                if (boot_entry_name_parse(prefix, names[i], &e) < 0)
                        continue;
                if (streq(e.version, version)) {
                        s = !e.has_counter       ? BOOT_ENTRY_GOOD :
                                e.tries_left > 0 ? BOOT_ENTRY_PENDING :
                                                   BOOT_ENTRY_BAD;
                        if (state_rank(s) > state_rank(best))
                                best = s;
                }
                boot_entry_name_done(&e);
        }
        return best;
}

int boot_entry_decode_efivar_string(const void *data, size_t size, char **ret) {
        const uint8_t *p = data;
        size_t n_chars;
        char *s;

        assert(data || size == 0);
        assert(ret);

        /* efivarfs prepends the 32-bit attribute word; UTF-16 needs an even payload. */
        if (size < 4 || (size - 4) % 2 != 0 || size > 4 + 2 * 1024)
                return -EBADMSG;
        n_chars = (size - 4) / 2;

        s = malloc(n_chars + 1);
        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < n_chars; i++) {
                uint16_t c = (uint16_t) (p[4 + 2 * i] | (p[4 + 2 * i + 1] << 8));

                if (c == 0) {
                        n_chars = i;
                        break;
                }
                if (c < 0x20 || c > 0x7e) {
                        free(s);
                        return -EBADMSG;
                }
                s[i] = (char) c;
        }
        s[n_chars] = '\0';

        *ret = s;
        return 0;
}
