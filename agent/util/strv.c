/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "util/strv.h"

size_t strv_length(char *const *l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

bool strv_contains(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

char **strv_free(char **l) {
        strv_freep(&l);
        return NULL;
}

int strv_copy(char *const *l, char ***ret) {
        _cleanup_strv_free_ char **c = NULL;
        size_t n = strv_length(l);

        *ret = NULL;
        if (!l)
                return 0;
        c = calloc(n + 1, sizeof(char *));
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(l[i]);
                if (!c[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int strv_consume(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **grown;

        if (!s)
                return -ENOMEM;
        grown = realloc(*l, (n + 2) * sizeof(char *));
        if (!grown) {
                free(s);
                return -ENOMEM;
        }
        grown[n] = s;
        grown[n + 1] = NULL;
        *l = grown;
        return 0;
}

typedef struct Ranked {
        const char *s;
        size_t index;
} Ranked;

static int ranked_compare(const void *a, const void *b) {
        const Ranked *x = a, *y = b;
        int r = strcmp(x->s, y->s);

        if (r != 0)
                return r;
        return x->index < y->index ? -1 : x->index > y->index;
}

int strv_uniq(char **l) {
        size_t n = strv_length(l), kept = 0;
        _cleanup_free_ Ranked *r = calloc(n + 1, sizeof(Ranked));
        _cleanup_free_ bool *dup = calloc(n + 1, sizeof(bool));

        if (!r || !dup)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                r[i] = (Ranked) { l[i], i };
        /* Sorted by text, then position: every entry equal to its predecessor is a later copy. */
        qsort(r, n, sizeof(Ranked), ranked_compare);
        for (size_t i = 1; i < n; i++)
                if (streq(r[i].s, r[i - 1].s))
                        dup[r[i].index] = true;
        for (size_t i = 0; i < n; i++) {
                if (dup[i])
                        free(l[i]);
                else
                        l[kept++] = l[i];
        }
        if (l)
                l[kept] = NULL;
        return 0;
}
