/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/osc-drift.h"
#include "util/strv.h"

typedef struct Findings {
        OscDriftFinding *list;
        size_t n;
} Findings;

void osc_drift_findings_free(OscDriftFinding *f, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(f[i].message);
        free(f);
}

static int add(Findings *f, const char *reason, const char *fmt, ...) _printf_(3, 4);
static int add(Findings *f, const char *reason, const char *fmt, ...) {
        OscDriftFinding *l;
        va_list ap;
        char *msg;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        l = reallocarray(f->list, f->n + 1, sizeof(*l));
        if (!l) {
                free(msg);
                return -ENOMEM;
        }
        l[f->n++] = (OscDriftFinding) { .reason = reason, .message = msg };
        f->list = l;
        return 0;
}

/* Lower-case hex SHA-256, as upstream's utils.ComputeSHA256Hex. */
static int sha256_hex(const char *data, size_t size, char ret[static 65]) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned len = 0;

        if (!EVP_Digest(data, size, md, &len, EVP_sha256(), NULL) || len != 32)
                return -ENOMEM;
        for (unsigned i = 0; i < len; i++)
                sprintf(ret + 2 * i, "%02x", md[i]);
        return 0;
}

static bool same(const char *a, size_t na, const char *b, size_t nb) {
        return na == nb && memcmp(a, b, na) == 0;
}

static int check_file(Findings *f, const OscFile *file, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *want = NULL, *have = NULL;
        char want_hex[65], have_hex[65];
        size_t nwant, nhave;
        int r;

        if (file->source != OSC_FILE_INLINE || isempty(file->data))
                return 0;
        r = osc_file_inline_content(file, &want, &nwant);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return add(f, "FileDecodeError", "Failed to decode base64 content for file %s", file->path);
        r = read(OSC_DRIFT_NODE_FILE, file->path, false, &have, &nhave, userdata);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT)
                return add(f, "FileMissing", "File %s is missing", file->path);
        if (r < 0)
                return add(f, "FileReadError", "Failed to read file %s", file->path);
        if (same(want, nwant, have, nhave))
                return 0;
        if (sha256_hex(want, nwant, want_hex) < 0 || sha256_hex(have, nhave, have_hex) < 0)
                return -ENOMEM;
        return add(f, "FileMismatch", "File %s mismatch: expected %s, actual %s", file->path, want_hex, have_hex);
}

static int check_drop_in(Findings *f, const OscUnit *u, const OscDropIn *d, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *path = NULL, *have = NULL;
        size_t nhave;
        int r;

        if (asprintf(&path, "%s.d/%s", u->name, d->name) < 0)
                return -ENOMEM;
        r = read(OSC_DRIFT_DROP_IN, path, false, &have, &nhave, userdata);
        if (r == -ENOMEM)
                return r;
        /* Upstream says "missing" for any read error here. */
        if (r < 0)
                return add(f, "DropInMissing", "Drop-in %s for unit %s is missing", d->name, u->name);
        if (!same(strempty(d->content), strlen(strempty(d->content)), have, nhave))
                return add(f, "DropInMismatch", "Drop-in %s for unit %s mismatch", d->name, u->name);
        return 0;
}

static int check_unit(Findings *f, const OscUnit *u, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *have = NULL;
        size_t nhave;
        int r;

        /* A unit with content is the applier's file in the unit directory; one without (an OS unit
         * with drop-ins) may be anywhere systemd looks. */
        r = read(OSC_DRIFT_UNIT_FILE, u->name, !u->content, &have, &nhave, userdata);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return add(f, "UnitFileMissing", "Unit file %s is missing", u->name);
        if (u->content && !same(u->content, strlen(u->content), have, nhave)) {
                r = add(f, "UnitMismatch", "Unit %s content mismatch", u->name);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                r = check_drop_in(f, u, &u->drop_ins[i], read, userdata);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_file_paths; i++) {
                r = read(OSC_DRIFT_NODE_FILE, u->file_paths[i], false, NULL, NULL, userdata);
                if (r == -ENOMEM)
                        return r;
                if (r < 0 && add(f, "DependencyMissing", "Dependency file %s for unit %s is missing", u->file_paths[i],
                                 u->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int osc_drift_check(const OscModel *m, char *const *skip_units, OscDriftRead read, void *userdata,
                    OscDriftFinding **ret, size_t *ret_n) {
        Findings f = {};
        int r = 0;

        assert(m);
        assert(read);
        assert(ret);
        assert(ret_n);
        for (size_t i = 0; r >= 0 && i < m->n_files; i++)
                r = check_file(&f, &m->files[i], read, userdata);
        for (size_t i = 0; r >= 0 && i < m->n_units; i++)
                if (!strv_contains(skip_units, m->units[i].name))
                        r = check_unit(&f, &m->units[i], read, userdata);
        if (r < 0) {
                osc_drift_findings_free(f.list, f.n);
                return r;
        }
        *ret = f.list;
        *ret_n = f.n;
        return 0;
}
