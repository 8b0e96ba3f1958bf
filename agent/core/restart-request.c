/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/restart-request.h"
#include "core/unit-name.h"

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Quotes an untrusted entry for an Event message or a log line: nothing in it can break the
 * surrounding quotes or smuggle a newline, and it is bounded. */
static char *entry_display(const char *s, size_t n) {
        static const char ellipsis[] = "...";
        char *out, *p;

        out = malloc(RESTART_REQUEST_ENTRY_DISPLAY_MAX + sizeof(ellipsis));
        if (!out)
                return NULL;
        p = out;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = s[i];
                char tmp[5];
                size_t l;

                if (c == '"' || c == '\\')
                        l = (size_t) snprintf(tmp, sizeof(tmp), "\\%c", c);
                else if (c < 0x20 || c >= 0x7f)
                        l = (size_t) snprintf(tmp, sizeof(tmp), "\\x%02x", c);
                else
                        l = (size_t) snprintf(tmp, sizeof(tmp), "%c", c);
                if ((size_t) (p - out) + l > RESTART_REQUEST_ENTRY_DISPLAY_MAX) {
                        memcpy(p, ellipsis, sizeof(ellipsis) - 1);
                        p += sizeof(ellipsis) - 1;
                        break;
                }
                memcpy(p, tmp, l);
                p += l;
        }
        *p = '\0';
        return out;
}

static int add_rejected(RestartRequest *r, const char *entry, size_t n, const char *why) {
        RestartRejected *a;
        char *e, *w;

        e = entry_display(entry, n);
        w = strdup(why);
        a = reallocarray(r->rejected, r->n_rejected + 1, sizeof(*a));
        if (!e || !w || !a) {
                free(e);
                free(w);
                if (a)
                        r->rejected = a;
                return -ENOMEM;
        }
        r->rejected = a;
        r->rejected[r->n_rejected++] = (RestartRejected) { .entry = e, .why = w };
        return 0;
}

/* Takes ownership of `unit`. */
static int add_unit(RestartRequest *r, char *unit) {
        char **a;

        a = reallocarray(r->units, r->n_units + 2, sizeof(*a));
        if (!a) {
                free(unit);
                return -ENOMEM;
        }
        r->units = a;
        r->units[r->n_units++] = unit;
        r->units[r->n_units] = NULL;
        return 0;
}

static bool has_unit(const RestartRequest *r, const char *unit) {
        for (size_t i = 0; i < r->n_units; i++)
                if (streq(r->units[i], unit))
                        return true;
        return false;
}

/* One comma-separated element [s, s+n), already trimmed. `n_dropped` counts rejections beyond
 * RESTART_REQUEST_REJECTED_MAX, which are only summarised. */
static int parse_entry(RestartRequest *r, const char *s, size_t n, const char *self_unit,
                       size_t *n_dropped) {
        _cleanup_free_ char *raw = NULL, *unit = NULL;
        const char *why = NULL;

        raw = strndup(s, n);
        if (!raw)
                return -ENOMEM;

        /* An embedded NUL cannot come from a JSON string we decoded, but strndup() would silently
         * shorten the entry, so treat a mismatch as a control character. */
        if (strlen(raw) != n)
                why = "contains a control character";
        else if (unit_name_normalize(raw, &unit, &why) == -ENOMEM)
                return -ENOMEM;

        if (!unit) {
                if (r->n_rejected >= RESTART_REQUEST_REJECTED_MAX) {
                        (*n_dropped)++;
                        return 0;
                }
                return add_rejected(r, s, n, why ? why : "invalid unit name");
        }

        if (has_unit(r, unit) || (streq_ptr(unit, self_unit) && r->has_self))
                return 0;                       /* duplicates are restarted once */
        if (streq_ptr(unit, self_unit)) {
                r->has_self = true;             /* appended after everything else */
                return 0;
        }
        if (r->n_units >= RESTART_REQUEST_UNITS_MAX) {
                if (r->n_rejected >= RESTART_REQUEST_REJECTED_MAX) {
                        (*n_dropped)++;
                        return 0;
                }
                return add_rejected(r, s, n, "more than 64 units in one request");
        }
        return add_unit(r, TAKE_PTR(unit));
}

static int add_dropped_summary(RestartRequest *r, size_t n_dropped) {
        _cleanup_free_ char *why = NULL;
        RestartRejected *a;
        char *e;

        if (asprintf(&why, "%zu further rejected entries not listed", n_dropped) < 0)
                return -ENOMEM;
        e = strdup("...");
        a = reallocarray(r->rejected, r->n_rejected + 1, sizeof(*a));
        if (!e || !a) {
                free(e);
                if (a)
                        r->rejected = a;
                return -ENOMEM;
        }
        r->rejected = a;
        r->rejected[r->n_rejected++] = (RestartRejected) { .entry = e, .why = TAKE_PTR(why) };
        return 0;
}

int restart_request_parse(const char *value, const char *self_unit, RestartRequest **ret) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        size_t n_dropped = 0;
        const char *p;
        int k;

        assert(ret);

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;

        p = strempty(value);
        if (strlen(p) > RESTART_REQUEST_VALUE_MAX) {
                k = add_rejected(r, p, strlen(p), "annotation value longer than 16384 bytes");
                if (k < 0)
                        return k;
                *ret = TAKE_PTR(r);
                return 0;
        }

        while (*p && is_blank(*p))
                p++;
        while (*p) {                    /* a blank value means "nothing", not "one empty entry" */
                const char *end = strchrnul(p, ','), *s = p, *e = end;

                while (s < e && is_blank(*s))
                        s++;
                while (e > s && is_blank(e[-1]))
                        e--;
                k = parse_entry(r, s, (size_t) (e - s), self_unit, &n_dropped);
                if (k < 0)
                        return k;
                if (!*end)
                        break;
                p = end + 1;
                if (!*p) {              /* "a," ends in an empty entry, reported like ",," */
                        k = parse_entry(r, p, 0, self_unit, &n_dropped);
                        if (k < 0)
                                return k;
                }
        }

        if (r->has_self) {
                char *u = strdup(self_unit);
                if (!u)
                        return -ENOMEM;
                k = add_unit(r, u);
                if (k < 0)
                        return k;
        }
        if (n_dropped > 0) {
                k = add_dropped_summary(r, n_dropped);
                if (k < 0)
                        return k;
        }

        *ret = TAKE_PTR(r);
        return 0;
}

RestartRequest *restart_request_free(RestartRequest *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_units; i++)
                free(r->units[i]);
        free(r->units);
        for (size_t i = 0; i < r->n_rejected; i++) {
                free(r->rejected[i].entry);
                free(r->rejected[i].why);
        }
        free(r->rejected);
        free(r);
        return NULL;
}

char *restart_rejected_message(const RestartRejected *r) {
        char *s;

        assert(r);
        if (asprintf(&s, "rejected unit name \"%s\": %s", r->entry, r->why) < 0)
                return NULL;
        return s;
}

char *restart_result_message(const char *unit, bool ok, const char *detail) {
        char *s;
        int r;

        assert(unit);
        if (ok)
                r = asprintf(&s, "processed restart of unit %s", unit);
        else
                r = asprintf(&s, "processed restart of unit %s failed with error %s", unit,
                             detail ? detail : "unknown error");
        return r < 0 ? NULL : s;
}
