/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/annotation-budget.h"
#include "core/node-view.h"
#include "util/utf8.h"

/* The shares: the plan holds the OSC summary (core/osc-diff.h, OSC_PLAN_SUMMARY_BUDGET) and the
 * kubelet, OS and rotation entries; failure and reason a 4 KiB message with its escaping. */
static const struct {
        const char *key;
        size_t budget;
} shares[] = {
        { NODE_ANNOTATION_PLAN, 24 * 1024 },         { NODE_ANNOTATION_FAILURE, 8 * 1024 },
        { NODE_ANNOTATION_FAILED_REASON, 6 * 1024 }, { NODE_ANNOTATION_PROGRESS, 1024 },
        { NODE_ANNOTATION_UPDATING_OS, 256 },        { NODE_ANNOTATION_CHECKSUM, 256 },
};

size_t annotation_budget(const char *key) {
        for (size_t i = 0; key && i < ELEMENTSOF(shares); i++)
                if (streq(shares[i].key, key))
                        return shares[i].budget;
        return ANNOTATION_BUDGET_OTHER;
}

size_t annotation_budget_sum(void) {
        size_t sum = 0;

        for (size_t i = 0; i < ELEMENTSOF(shares); i++)
                sum += strlen(shares[i].key) + shares[i].budget;
        return sum;
}

char *annotation_fit_string(const char *key, const char *value) {
        size_t n = strlen(value), budget = annotation_budget(key);

        return n <= budget ? strdup(value) : utf8_sanitize(value, n, budget);
}

static char *dump(const json_t *v) {
        return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Cuts every string of `v` longer than `max` bytes (in place); the longest one's length in *longest. */
static int cut_strings(json_t *v, size_t max, size_t *longest) {
        const char *key;
        json_t *e;
        size_t i;

        if (json_is_string(v)) {
                size_t n = json_string_length(v);
                _cleanup_free_ char *s = NULL;

                *longest = MAX(*longest, n);
                if (n <= max)
                        return 0;
                s = utf8_sanitize(json_string_value(v), n, max);
                return s && json_string_set(v, s) >= 0 ? 0 : -ENOMEM;
        }
        json_array_foreach(v, i, e)
                if (cut_strings(e, max, longest) < 0)
                        return -ENOMEM;
        json_object_foreach(v, key, e)
                if (cut_strings(e, max, longest) < 0)
                        return -ENOMEM;
        return 0;
}

/* The dump of `v` with every string cut to `max` bytes; NULL: out of memory. */
static char *dump_cut(const json_t *v, size_t max, size_t *longest) {
        _cleanup_(json_decrefp) json_t *copy = json_deep_copy(v);

        if (!copy || cut_strings(copy, max, longest) < 0)
                return NULL;
        return dump(copy);
}

char *annotation_fit_json(const char *key, const json_t *value) {
        size_t budget = annotation_budget(key), longest = 0, lo = 3, hi, n;
        _cleanup_free_ char *whole = NULL, *best = NULL;
        _cleanup_(json_decrefp) json_t *pre = NULL;
        char *s;

        assert(value);
        whole = dump(value);
        if (!whole)
                return NULL;
        n = strlen(whole);
        if (n <= budget)
                return TAKE_PTR(whole);
        /* No string longer than the budget can fit: cut those once, then search on the smaller copy. */
        pre = json_deep_copy(value);
        if (!pre || cut_strings(pre, budget, &longest) < 0)
                return NULL;
        best = dump_cut(pre, lo, &(size_t) { 0 });
        if (!best)
                return NULL;
        if (strlen(best) > budget) /* too many values to fit even so: say so, with the size it had */
                return asprintf(&s, "{\"truncated\":true,\"bytes\":%zu}", n) < 0 ? NULL : s;
        /* The longest string length that fits is in [lo, hi). */
        hi = MIN(longest, budget) + 1;
        lo++;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                s = dump_cut(pre, mid, &(size_t) { 0 });
                if (!s)
                        return NULL;
                if (strlen(s) <= budget) {
                        free(best);
                        best = s;
                        lo = mid + 1;
                } else {
                        free(s);
                        hi = mid;
                }
        }
        return TAKE_PTR(best);
}
