/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/containerd-config.h"
#include "core/osc-drift.h"
#include "util/string-util.h"
#include "util/strv.h"

#define CERTS_DIR "/etc/containerd/certs.d"

void osc_drift_done(OscDrift *d) {
        if (!d)
                return;
        for (size_t i = 0; i < d->n_items; i++) {
                free(d->items[i].message);
                free(d->items[i].subject);
        }
        free(d->items);
        *d = (OscDrift) {};
}

static int add(OscDrift *d, OscDriftKind kind, const char *subject, const char *reason, const char *fmt, ...)
        _printf_(5, 6);
static int add(OscDrift *d, OscDriftKind kind, const char *subject, const char *reason, const char *fmt,
               ...) {
        _cleanup_free_ char *msg = NULL, *s = strdup(subject);
        OscDriftFinding *l;
        va_list ap;

        va_start(ap, fmt);
        msg = strdup_vprintf(fmt, ap);
        va_end(ap);
        if (!msg || !s)
                return -ENOMEM;
        l = reallocarray(d->items, d->n_items + 1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l[d->n_items++] = (OscDriftFinding) {
                .reason = reason, .message = TAKE_PTR(msg), .kind = kind, .subject = TAKE_PTR(s)
        };
        d->items = l;
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

bool osc_drift_skips_unit(const OscDriftParams *p, const char *unit) {
        return strv_contains(p->skip_units, unit);
}

/* A file the agent renders or has the content of (`want`, NULL: presence and mode only), read at
 * `path`; findings of `kind` about `subject`. */
static int check_content(OscDrift *d, OscDriftKind kind, const char *subject, const char *path,
                         const char *want, size_t nwant, uint32_t mode, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *have = NULL;
        char want_hex[65], have_hex[65];
        uint32_t have_mode = 0;
        size_t nhave = 0;
        int r;

        r = read(OSC_DRIFT_NODE_FILE, path, /* fallback= */ false, want ? &have : NULL, want ? &nhave : NULL,
                 &have_mode, userdata);
        if (r == -ENOMEM)
                return r;
        if (r == -ENOENT)
                return add(d, kind, subject, "FileMissing", "File %s is missing", path);
        /* Larger than any content an OSC can carry: other content, whatever it is. */
        if (r == -EFBIG && want) {
                if (sha256_hex(want, nwant, want_hex) < 0)
                        return -ENOMEM;
                return add(d, kind, subject, "FileMismatch",
                           "File %s mismatch: expected %s, actual larger than %d bytes", path, want_hex,
                           OSC_DRIFT_READ_MAX);
        }
        if (r < 0)
                return add(d, OSC_DRIFT_REPORT_ONLY, subject, "FileReadError", "Failed to read file %s",
                           path);
        if (want && !same(want, nwant, have, nhave)) {
                if (sha256_hex(want, nwant, want_hex) < 0 || sha256_hex(have, nhave, have_hex) < 0)
                        return -ENOMEM;
                r = add(d, kind, subject, "FileMismatch", "File %s mismatch: expected %s, actual %s", path,
                        want_hex, have_hex);
                if (r < 0)
                        return r;
        }
        if ((have_mode & 0777) != (mode & 0777))
                return add(d, kind, subject, "FileModeMismatch",
                           "File %s mode mismatch: expected %04o, actual %04o", path, mode & 0777,
                           have_mode & 0777);
        return 0;
}

static int check_file(OscDrift *d, const OscDriftParams *p, const char *const *replaced_only,
                      const OscFile *file, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *want = NULL;
        size_t nwant = 0;
        int r;

        /* The kubelet's binary is the kubelet store's; a replaced unit's own files (gardener-node-agent's
         * binary and config) are neither written nor checked (docs/contract.md §9.4); a file without
         * content (OSC_FILE_NONE) is never written, so there is nothing to compare. */
        if (streq_ptr(file->path, p->skip_file) || file->source == OSC_FILE_NONE ||
            strv_contains((char *const *) replaced_only, file->path))
                return 0;
        if (file->source == OSC_FILE_INLINE) {
                r = osc_file_inline_content(file, &want, &nwant);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return add(d, OSC_DRIFT_REPORT_ONLY, file->path, "FileDecodeError",
                                   "Failed to decode base64 content for file %s", file->path);
        }
        return check_content(d, OSC_DRIFT_FILE, file->path, file->path, want, nwant, osc_file_mode(file),
                             read, userdata);
}

/* What the applier renders from criConfig: config.toml (0644) and each registry's hosts.toml (0644). */
static int check_containerd(OscDrift *d, const OscModel *m, OscDriftRead read, void *userdata) {
        _cleanup_free_ char *toml = NULL;
        int r;

        if (!m->has_containerd)
                return 0;
        /* One the applier cannot render is held as UnsupportedChange when applied: never last-applied. */
        r = containerd_config_render(m->containerd_config, &toml, NULL);
        if (r == -ENOMEM)
                return r;
        if (r >= 0) {
                r = check_content(d, OSC_DRIFT_CONTAINERD_CONFIG, CONTAINERD_CONFIG_FILE,
                                  CONTAINERD_CONFIG_FILE, toml, strlen(toml), 0644, read, userdata);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < m->n_registries; i++) {
                const OscRegistry *g = &m->registries[i];
                _cleanup_free_ char *hosts = NULL, *path = NULL;

                if (osc_registry_hosts_toml(g, &hosts) < 0 ||
                    asprintf(&path, CERTS_DIR "/%s/hosts.toml", g->upstream) < 0)
                        return -ENOMEM;
                r = check_content(d, OSC_DRIFT_REGISTRY, g->upstream, path, hosts, strlen(hosts), 0644, read,
                                  userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int check_drop_in(OscDrift *d, const OscUnit *u, const OscDropIn *di, OscDriftRead read,
                         void *userdata) {
        _cleanup_free_ char *path = NULL, *have = NULL;
        size_t nhave;
        int r;

        if (asprintf(&path, "%s.d/%s", u->name, di->name) < 0)
                return -ENOMEM;
        r = read(OSC_DRIFT_DROP_IN, path, /* fallback= */ false, &have, &nhave, NULL, userdata);
        if (r == -ENOMEM)
                return r;
        if (r == OSC_DRIFT_MASKED)
                return 0;
        /* Upstream says "missing" for any read error here. */
        if (r < 0)
                return add(d, OSC_DRIFT_UNIT_FILES, u->name, "DropInMissing",
                           "Drop-in %s for unit %s is missing", di->name, u->name);
        if (!same(strempty(di->content), strlen(strempty(di->content)), have, nhave))
                return add(d, OSC_DRIFT_UNIT_FILES, u->name, "DropInMismatch",
                           "Drop-in %s for unit %s mismatch", di->name, u->name);
        return 0;
}

static int path_compare(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* The OSC's file paths, sorted: a wiped node has a missing dependency for every unit. */
static int sorted_paths(const OscModel *m, const char ***ret) {
        const char **l = calloc(m->n_files + 1, sizeof(char *));

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_files; i++)
                l[i] = m->files[i].path;
        qsort(l, m->n_files, sizeof(char *), path_compare);
        *ret = l;
        return 0;
}

static bool is_osc_file(const OscDriftParams *p, const char *const *paths, const char *path) {
        return p->model->n_files > 0 && !streq_ptr(path, p->skip_file) &&
                bsearch(&path, paths, p->model->n_files, sizeof(char *), path_compare);
}

static int check_unit(OscDrift *d, const OscDriftParams *p, const char *const *paths, const OscUnit *u,
                      OscDriftRead read, void *userdata) {
        _cleanup_free_ char *have = NULL;
        size_t nhave;
        int r;

        /* A unit with content is the applier's file in the unit directory; one without (an OS unit
         * with drop-ins) may be anywhere systemd looks, and is not the agent's to restore. */
        r = read(OSC_DRIFT_UNIT_FILE, u->name, !u->content, &have, &nhave, NULL, userdata);
        if (r == -ENOMEM)
                return r;
        if (r == OSC_DRIFT_MASKED)
                return 0;
        if (r < 0)
                return add(d, u->content ? OSC_DRIFT_UNIT_FILES : OSC_DRIFT_REPORT_ONLY, u->name,
                           "UnitFileMissing", "Unit file %s is missing", u->name);
        if (u->content && !same(u->content, strlen(u->content), have, nhave)) {
                r = add(d, OSC_DRIFT_UNIT_FILES, u->name, "UnitMismatch", "Unit %s content mismatch",
                        u->name);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_drop_ins; i++) {
                r = check_drop_in(d, u, &u->drop_ins[i], read, userdata);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < u->n_file_paths; i++) {
                const char *path = u->file_paths[i];

                if (streq_ptr(path, p->skip_file))
                        continue;
                r = read(OSC_DRIFT_NODE_FILE, path, /* fallback= */ false, NULL, NULL, NULL, userdata);
                if (r == -ENOMEM)
                        return r;
                /* An OSC file is restored as a file (its FileMissing), and restarts this unit then. */
                if (r < 0 &&
                    add(d, is_osc_file(p, paths, path) ? OSC_DRIFT_FILE : OSC_DRIFT_REPORT_ONLY, path,
                        "DependencyMissing", "Dependency file %s for unit %s is missing", path, u->name) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int osc_drift_check_disk(const OscDriftParams *p, OscDriftRead read, void *userdata, OscDrift *d) {
        _cleanup_free_ const char **paths = NULL, **replaced_only = NULL;
        const OscModel *m;
        int r;

        assert(p && p->model);
        assert(read);
        assert(d);
        m = p->model;
        r = sorted_paths(m, &paths);
        if (r >= 0)
                r = osc_model_files_only_for_units(m, p->skip_units, &replaced_only);
        for (size_t i = 0; r >= 0 && i < m->n_files; i++)
                r = check_file(d, p, replaced_only, &m->files[i], read, userdata);
        if (r >= 0)
                r = check_containerd(d, m, read, userdata);
        for (size_t i = 0; r >= 0 && i < m->n_units; i++)
                if (!osc_drift_skips_unit(p, m->units[i].name))
                        r = check_unit(d, p, paths, &m->units[i], read, userdata);
        return r;
}

static int check_unit_state(OscDrift *d, const OscUnit *u, const UnitHealthState *s) {
        bool want_enabled = u->enable != 0, enabled;
        const char *ufs = s->unit_file_state;
        int r;

        /* Not loaded: its unit file is the disk pass's; masked: the admin's decision. */
        if (!streq_ptr(s->load_state, "loaded"))
                return 0;
        /* What the applier left: enabled unless `enable: false` (EnableUnitFiles for every unit it
         * writes). Only enabled and disabled are compared: static, indirect, generated, alias,
         * linked and masked units have no enablement of their own to restore. */
        if (streq_ptr(ufs, "enabled") || streq_ptr(ufs, "enabled-runtime") || streq_ptr(ufs, "disabled")) {
                enabled = !streq(ufs, "disabled");
                if (enabled != want_enabled) {
                        r = add(d, OSC_DRIFT_UNIT_ENABLEMENT, u->name, "UnitEnableMismatch",
                                "Unit %s enable state mismatch: expected %s, actual %s", u->name,
                                want_enabled ? "true" : "false", enabled ? "true" : "false");
                        if (r < 0)
                                return r;
                }
        }
        if (osc_unit_effective_command(u) != OSC_UNIT_COMMAND_STOP && unit_health_inactive_unexpected(s))
                return add(d, OSC_DRIFT_UNIT_INACTIVE, u->name, "UnitInactive",
                           "Unit %s is inactive but should be active", u->name);
        return 0;
}

int osc_drift_check_units(const OscDriftParams *p, const UnitHealthState *states, size_t n, OscDrift *d) {
        assert(p && p->model);
        assert(states || n == 0);
        assert(d);
        for (size_t i = 0; i < n; i++) {
                const OscUnit *u = osc_model_find_unit(p->model, states[i].name);
                int r;

                if (!u || osc_drift_skips_unit(p, u->name))
                        continue;
                r = check_unit_state(d, u, &states[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}
