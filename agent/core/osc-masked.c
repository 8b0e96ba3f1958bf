/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/osc-masked.h"
#include "util/strv.h"

static OscMaskedPath *find(const OscMasked *m, const char *path) {
        for (size_t i = 0; i < m->n_paths; i++)
                if (streq(m->paths[i].path, path))
                        return &m->paths[i];
        return NULL;
}

int osc_masked_add(OscMasked *m, const char *path, const char *left_out) {
        OscMaskedPath *p, *grown;
        char *s;

        assert(m && path && left_out);
        p = find(m, path);
        if (!p) {
                grown = reallocarray(m->paths, m->n_paths + 1, sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                m->paths = grown;
                p = &grown[m->n_paths];
                *p = (OscMaskedPath) { .path = strdup(path) };
                if (!p->path)
                        return -ENOMEM;
                m->n_paths++;
        }
        if (strv_contains(p->left_out, left_out))
                return 0;
        s = strdup(left_out);
        return s ? strv_consume(&p->left_out, s) : -ENOMEM;
}

/* Appends `a`, `b` and `c` to *buf (NULL: empty so far). */
static int append(char **buf, const char *a, const char *b, const char *c) {
        char *joined;

        if (asprintf(&joined, "%s%s%s%s", strempty(*buf), a, b, c) < 0)
                return -ENOMEM;
        free(*buf);
        *buf = joined;
        return 0;
}

int osc_masked_describe(const OscMasked *m, char **ret) {
        _cleanup_free_ char *text = NULL;
        int r = 0;

        assert(m && ret);
        for (size_t i = 0; r >= 0 && i < m->n_paths; i++) {
                const OscMaskedPath *p = &m->paths[i];

                r = append(&text, i > 0 ? "; " : "", p->path, " (");
                for (char **l = p->left_out; r >= 0 && l && *l; l++)
                        r = append(&text, l == p->left_out ? "" : ", ", *l, "");
                if (r >= 0)
                        r = append(&text, ")", "", "");
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(text);
        return 0;
}

void osc_masked_done(OscMasked *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_paths; i++) {
                free(m->paths[i].path);
                strv_free(m->paths[i].left_out);
        }
        free(m->paths);
        *m = (OscMasked) {};
}
