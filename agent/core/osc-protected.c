/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "core/osc-protected.h"
#include "util/error-message.h"

int osc_protected_add(OscProtected *p, const char *canonical, const char *what) {
        OscProtectedPath *items;
        size_t n;

        assert(p && canonical && what);
        n = strlen(canonical);
        while (n > 1 && canonical[n - 1] == '/')
                n--;
        if (canonical[0] != '/' || n <= 1)
                return -EINVAL;
        for (size_t i = 0; i < p->n_items; i++)
                if (strlen(p->items[i].path) == n && strncmp(p->items[i].path, canonical, n) == 0)
                        return 0;
        items = reallocarray(p->items, p->n_items + 1, sizeof(*items));
        if (!items)
                return -ENOMEM;
        p->items = items;
        items[p->n_items].path = strndup(canonical, n);
        if (!items[p->n_items].path)
                return -ENOMEM;
        items[p->n_items++].what = what;
        return 0;
}

void osc_protected_done(OscProtected *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_items; i++)
                free(p->items[i].path);
        free(p->items);
        *p = (OscProtected) {};
}

const OscProtectedPath *osc_protected_find(const OscProtected *p, const char *canonical) {
        for (size_t i = 0; p && i < p->n_items; i++) {
                size_t n = strlen(p->items[i].path);

                if (strncmp(canonical, p->items[i].path, n) == 0 &&
                    (canonical[n] == '\0' || canonical[n] == '/'))
                        return &p->items[i];
        }
        return NULL;
}

static const char *file_path(const OscWork *w) {
        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
        case OSC_WORK_PULL_FILE:
        case OSC_WORK_DELETE_FILE:
                return w->file.path;
        default:
                return NULL;
        }
}

int osc_changes_check_protected(const OscChanges *c, const OscProtected *p, OscCanonicalize canonicalize,
                                void *userdata, char **ret_error) {
        for (size_t i = 0; i < c->n_items; i++) {
                const char *path = file_path(&c->items[i]);
                _cleanup_free_ char *canonical = NULL;
                const OscProtectedPath *hit;
                int r;

                if (!path || c->items[i].done)
                        continue;
                r = canonicalize(path, &canonical, userdata);
                if (r == -ENOMEM)
                        return r;
                /* A directory that cannot be resolved cannot be written into: said now, not after the
                 * items before it are written. A removal there has nothing to remove. */
                if (r < 0 && c->items[i].kind != OSC_WORK_DELETE_FILE)
                        return error_setf(
                                ret_error, r,
                                "%s: its directory cannot be resolved below osc.rootDirectory (%s): "
                                "a symlink whose target is missing, or no directory",
                                path, strerror(-r));
                hit = r >= 0 ? osc_protected_find(p, canonical) : NULL;
                if (hit)
                        return error_setf(ret_error, -EPERM,
                                          "%s: inside the agent's %s %s: an OSC never writes or removes the "
                                          "agent's own files",
                                          path, hit->what, hit->path);
        }
        return 0;
}
