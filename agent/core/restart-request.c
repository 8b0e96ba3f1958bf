/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/restart-request.h"
#include "core/unit-name.h"
#include "util/macro.h"
#include "util/strv.h"

const char *const restart_request_replaced_units_default[] = { "gardener-node-agent.service", NULL };

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Quotes an untrusted entry for an Event message or a log line: nothing in it can break the
 * surrounding quotes or smuggle a newline, and it is bounded. */
static char *entry_display(const char *s, size_t n) {
        static const char ellipsis[] = "…";
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

char *restart_request_display(const char *s) {
        s = strempty(s);
        return entry_display(s, strlen(s));
}

/* Keeps the first RESTART_REQUEST_REJECTED_MAX rejections and counts all of them. `entry` NULL:
 * `why` is the whole message. */
static int add_rejected(RestartRequest *r, const char *entry, size_t n, const char *why) {
        RestartRejected *a;
        char *e = NULL, *w;

        r->n_rejected_total++;
        if (r->n_rejected >= RESTART_REQUEST_REJECTED_MAX)
                return 0;

        if (entry) {
                e = entry_display(entry, n);
                if (!e)
                        return -ENOMEM;
        }
        w = strdup(why);
        a = w ? reallocarray(r->rejected, r->n_rejected + 1, sizeof(*a)) : NULL;
        if (!a) {
                free(e);
                free(w);
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

/* docs/contract.md §9.12: NULL if a unit of this canonical name may be restarted, else why not. */
static const char *unit_type_refusal(const char *unit) {
        static const char *const allowed[] = { ".service", ".socket", ".timer", NULL };
        const char *type = unit_name_type(unit);

        if (strv_contains((char *const *) allowed, type))
                return NULL;
        if (streq_ptr(type, ".slice"))
                return "is a slice: restarting it restarts every unit in it, the agent, kubelet and containerd "
                       "included; only services, sockets and timers may be restarted";
        return "only services, sockets and timers may be restarted";
}

/* One comma-separated element [s, s+n), already trimmed. */
static int parse_entry(RestartRequest *r, const char *s, size_t n, const char *self_unit,
                       const char *const *replaced_units) {
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
        if (unit && (why = unit_type_refusal(unit))) {
                free(unit);
                unit = NULL;
        }

        if (!unit)
                return add_rejected(r, s, n, why ? why : "invalid unit name");

        if (strv_contains((char *const *) replaced_units, unit)) {
                /* docs/contract.md §9.4: a replaced unit is never restarted; the entry means the agent. */
                if (!self_unit)
                        return add_rejected(r, s, n,
                                            "names a unit the agent replaces, and the agent's own unit "
                                            "is not configured");
                if (free_and_strdup(&unit, self_unit) < 0)
                        return -ENOMEM;
        }

        if (has_unit(r, unit) || (streq_ptr(unit, self_unit) && r->has_self))
                return 0; /* duplicates are restarted once */
        if (streq_ptr(unit, self_unit)) {
                r->has_self = true; /* appended after everything else */
                return 0;
        }
        if (r->n_units >= RESTART_REQUEST_UNITS_MAX)
                return add_rejected(r, s, n, "more than 64 units in one request");
        return add_unit(r, TAKE_PTR(unit));
}

static int reject_value(RestartRequest *r, const char *value) {
        _cleanup_free_ char *head = NULL, *why = NULL;

        /* Only its beginning is quoted: enough to recognise it. */
        head = entry_display(value, 64);
        if (!head)
                return -ENOMEM;
        if (asprintf(&why, "rejected restart annotation of %zu bytes, more than the limit of %d: \"%s…\"",
                     strlen(value), RESTART_REQUEST_VALUE_MAX, head) < 0)
                return -ENOMEM;
        return add_rejected(r, NULL, 0, why);
}

int restart_request_parse(const char *value, const char *self_unit, const char *const *replaced_units,
                          RestartRequest **ret) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        const char *p;
        int k;

        assert(ret);

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;

        p = strempty(value);
        if (strlen(p) > RESTART_REQUEST_VALUE_MAX) {
                k = reject_value(r, p);
                if (k < 0)
                        return k;
                *ret = TAKE_PTR(r);
                return 0;
        }

        while (*p && is_blank(*p))
                p++;
        while (*p) { /* a blank value means "nothing", not "one empty entry" */
                const char *end = strchrnul(p, ','), *s = p, *e = end;

                while (s < e && is_blank(*s))
                        s++;
                while (e > s && is_blank(e[-1]))
                        e--;
                k = parse_entry(r, s, (size_t) (e - s), self_unit, replaced_units);
                if (k < 0)
                        return k;
                if (!*end)
                        break;
                p = end + 1;
                if (!*p) { /* "a," ends in an empty entry, reported like ",," */
                        k = parse_entry(r, p, 0, self_unit, replaced_units);
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
        if (!r->entry)
                return strdup(r->why);
        if (asprintf(&s, "rejected unit name \"%s\": %s", r->entry, r->why) < 0)
                return NULL;
        return s;
}

int restart_request_rejected_summary(const RestartRequest *r, char **ret) {
        _cleanup_free_ char *s = NULL;
        size_t n = 0, listed = 0;
        int k;

        assert(r);
        assert(ret);

        if (r->n_rejected_total <= RESTART_REQUEST_REJECTED_EACH_MAX) {
                *ret = NULL;
                return 0;
        }
        s = malloc(RESTART_REQUEST_MESSAGE_MAX + 1);
        if (!s)
                return -ENOMEM;
        k = snprintf(s, RESTART_REQUEST_MESSAGE_MAX + 1, "rejected %zu unit names:", r->n_rejected_total);
        n = (size_t) k;
        /* Room is kept for the longest tail, " … (+<20 digits> more)". */
        for (; listed < r->n_rejected; listed++) {
                const RestartRejected *j = &r->rejected[listed];
                size_t room = RESTART_REQUEST_MESSAGE_MAX - n;

                k = snprintf(s + n, room + 1, "%s \"%s\" (%s)", listed ? "," : "", strempty(j->entry),
                             j->why);
                if (k < 0 || (size_t) k + 32 > room) {
                        s[n] = '\0';
                        break;
                }
                n += (size_t) k;
        }
        if (listed < r->n_rejected_total)
                (void) snprintf(s + n, RESTART_REQUEST_MESSAGE_MAX + 1 - n, ", … (+%zu more)",
                                r->n_rejected_total - listed);
        *ret = TAKE_PTR(s);
        return 0;
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
