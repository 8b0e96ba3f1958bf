/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "core/osc-diff.h"
#include "core/version.h"
#include "util/error-message.h"
#include "util/strv.h"
#include "util/utf8.h"

static const char *const work_kind_table[_OSC_WORK_KIND_MAX] = {
        [OSC_WORK_CONTAINERD_CONFIG] = "containerd-config",
        [OSC_WORK_WRITE_FILE] = "write-file",
        [OSC_WORK_SKIP_FILE] = "skip-file",
        [OSC_WORK_REGISTRY] = "registry",
        [OSC_WORK_PULL_FILE] = "pull-file",
        [OSC_WORK_WRITE_UNIT] = "write-unit",
        [OSC_WORK_DELETE_UNIT] = "delete-unit",
        [OSC_WORK_DAEMON_RELOAD] = "daemon-reload",
        [OSC_WORK_UNIT_COMMAND] = "unit-command",
        [OSC_WORK_KUBELET_HEALTH] = "kubelet-health",
        [OSC_WORK_DELETE_REGISTRY] = "delete-registry",
        [OSC_WORK_DELETE_FILE] = "delete-file",
};

DEFINE_STRING_TABLE_LOOKUP(osc_work_kind, OscWorkKind, work_kind_table);

static void work_done(OscWork *w) {
        osc_file_done(&w->file);
        osc_unit_done(&w->unit);
        strv_freep(&w->drop_ins_deleted);
        free(w->name);
        osc_registry_done(&w->registry);
        json_decref(w->containerd);
}

OscChanges *osc_changes_free(OscChanges *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_items; i++)
                work_done(&c->items[i]);
        free(c->items);
        free(c->checksum);
        free(c);
        return NULL;
}

/* Room for `n` items, grown by doubling: a realloc per item copies the whole list each time where
 * realloc cannot grow in place (ASan's always copies: 20 GB for 10,000 items). */
static int reserve_items(OscChanges *c, size_t n) {
        OscWork *items;
        size_t alloc;

        if (n <= c->n_alloc)
                return 0;
        alloc = MAX(n, MAX(c->n_alloc * 2, (size_t) 16));
        items = reallocarray(c->items, alloc, sizeof(OscWork));
        if (!items)
                return -ENOMEM;
        c->items = items;
        c->n_alloc = alloc;
        return 0;
}

/* Appends an empty item of `kind`; the caller fills it in. */
static OscWork *add_item(OscChanges *c, OscWorkKind kind) {
        OscWork *w;

        if (c->n_items >= OSC_CHANGES_ITEMS_MAX || reserve_items(c, c->n_items + 1) < 0)
                return NULL;
        w = &c->items[c->n_items++];
        *w = (OscWork) { .kind = kind, .command = _OSC_UNIT_COMMAND_INVALID };
        osc_unit_done(&w->unit);
        return w;
}

OscWork *osc_changes_add_item(OscChanges *c, OscWorkKind kind) {
        return add_item(c, kind);
}

bool osc_in_place_flags_kubelet(const OscInPlaceFlags *f) {
        return f->kubelet_minor_version || f->kubelet_config || f->cpu_manager_policy;
}

bool osc_in_place_flags_any(const OscInPlaceFlags *f) {
        return f->operating_system || osc_in_place_flags_kubelet(f) || f->ca_rotation_kubelet ||
                f->ca_rotation_node_agent || f->sa_key_rotation;
}

/* ---- small parsers ---- */

int osc_parse_rfc3339(const char *s, int64_t *ret) {
        struct tm tm = {};
        int n = 0, oh = 0, om = 0;
        int64_t t;
        char sign;

        if (!s ||
            sscanf(s, "%4d-%2d-%2d%*1[Tt]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec, &n) != 6 ||
            n != 19)
                return -EINVAL;
        s += n;
        if (*s == '.') {
                s++;
                if (!isdigit((unsigned char) *s))
                        return -EINVAL;
                while (isdigit((unsigned char) *s))
                        s++;
        }
        if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
            tm.tm_min > 59 || tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        t = (int64_t) timegm(&tm);
        if (streq(s, "Z") || streq(s, "z")) {
                *ret = t;
                return 0;
        }
        sign = *s;
        if ((sign != '+' && sign != '-') || sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) != 2 || n != 5 ||
            s[6] || oh > 23 || om > 59)
                return -EINVAL;
        *ret = sign == '+' ? t - (oh * 3600 + om * 60) : t + (oh * 3600 + om * 60);
        return 0;
}

bool osc_quantity_valid(const char *s) {
        static const char *const suffixes[] = { "",  "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n",
                                                "u", "m",  "k",  "M",  "G",  "T",  "P",  "E" };
        bool digits = false;

        /* resource.ParseQuantity: <signedNumber><suffix>, suffix binarySI, decimalSI or e<int>. */
        if (!s)
                return false;
        if (*s == '+' || *s == '-')
                s++;
        while (isdigit((unsigned char) *s)) {
                s++;
                digits = true;
        }
        if (*s == '.') {
                s++;
                while (isdigit((unsigned char) *s)) {
                        s++;
                        digits = true;
                }
        }
        if (!digits)
                return false;
        if ((*s == 'e' || *s == 'E') && s[1]) {
                const char *e = s + 1;

                if (*e == '+' || *e == '-')
                        e++;
                if (*e) {
                        while (isdigit((unsigned char) *e))
                                e++;
                        if (!*e)
                                return true;
                }
        }
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (streq(s, suffixes[i]))
                        return true;
        return false;
}

/* ---- in-place flags (docs/node-protocol.md §2.3 step 4) ---- */

static bool time_equal(const char *a, const char *b) {
        int64_t ta, tb;

        if (!a || !b)
                return a == b;
        if (osc_parse_rfc3339(a, &ta) < 0 || osc_parse_rfc3339(b, &tb) < 0)
                return streq(a, b);
        return ta == tb;
}

static void rotation_changes(const OscModel *old, const OscModel *new, OscInPlaceFlags *f) {
        bool ca, sa;

        if (!new->has_rotation)
                return;
        if (!old->has_rotation) {
                ca = new->has_ca_rotation &&new->ca_rotation;
                sa = new->has_sa_rotation &&new->sa_rotation;
        } else {
                ca = old->has_ca_rotation && new->has_ca_rotation &&
                        !time_equal(old->ca_rotation, new->ca_rotation);
                sa = old->has_sa_rotation && new->has_sa_rotation &&
                        !time_equal(old->sa_rotation, new->sa_rotation);
        }
        f->ca_rotation_kubelet = f->ca_rotation_node_agent = ca;
        f->sa_key_rotation = sa;
}

/* A map[string]string member of the kubelet config restricted to `keys`, compared by raw string. */
static int restricted_maps_differ(const json_t *a, const json_t *b, const char *member,
                                  const char *const *keys, bool *ret) {
        const json_t *ma = json_object_get(a, member), *mb = json_object_get(b, member);

        *ret = false;
        for (const char *const *k = keys; *k; k++) {
                const json_t *va = json_is_object(ma) ? json_object_get(ma, *k) : NULL;
                const json_t *vb = json_is_object(mb) ? json_object_get(mb, *k) : NULL;

                if ((va && !json_is_string(va)) || (vb && !json_is_string(vb)))
                        return -EINVAL;
                if (!streq_ptr(va ? json_string_value(va) : NULL, vb ? json_string_value(vb) : NULL))
                        *ret = true;
        }
        return 0;
}

static int validate_quantities(const json_t *cfg, char **ret_error) {
        const json_t *kr = json_object_get(cfg, "kubeReserved"), *v;
        const char *k;

        json_object_foreach((json_t *) kr, k, v)
                if (!json_is_string(v) || !osc_quantity_valid(json_string_value(v)))
                        return error_setf(
                                ret_error, -EINVAL,
                                "failed to check if kubelet config has changed: error validating quantities: "
                                "failed to parse quantity: kubeReserved.%s",
                                k);
        return 0;
}

static int kubelet_config_changes(const OscModel *old, const OscModel *new, OscInPlaceFlags *f,
                                  char **ret_error) {
        static const char *const eviction_keys[] = { "memory.available",   "imagefs.available",
                                                     "imagefs.inodesFree", "nodefs.available",
                                                     "nodefs.inodesFree",  NULL };
        static const char *const reserved_keys[] = { "cpu", "memory", "ephemeral-storage", "pid", NULL };
        json_t *a = NULL, *b = NULL;
        const json_t *pa, *pb;
        bool differ;
        int r;

        r = osc_model_kubelet_config(old, &a, ret_error);
        if (r >= 0)
                r = osc_model_kubelet_config(new, &b, ret_error);
        if (r < 0)
                goto finish;

        pa = json_object_get(a, "cpuManagerPolicy");
        pb = json_object_get(b, "cpuManagerPolicy");
        f->cpu_manager_policy = !streq_ptr(json_is_string(pa) ? json_string_value(pa) : NULL,
                                           json_is_string(pb) ? json_string_value(pb) : NULL);

        r = restricted_maps_differ(a, b, "evictionHard", eviction_keys, &differ);
        if (r < 0) {
                r = error_setf(
                        ret_error, r,
                        "failed to check if kubelet config has changed: evictionHard: expected strings");
                goto finish;
        }
        if (differ) {
                f->kubelet_config = true;
                goto finish;
        }
        r = validate_quantities(a, ret_error);
        if (r >= 0)
                r = validate_quantities(b, ret_error);
        if (r >= 0)
                r = restricted_maps_differ(a, b, "kubeReserved", reserved_keys, &f->kubelet_config);
finish:
        json_decref(a);
        json_decref(b);
        return r;
}

static int in_place_flags(const OscDiffInput *in, OscInPlaceFlags *f, char **ret_error) {
        const OscModel *old = in->old, *new = in->new;
        const char *why = NULL;
        int r;

        if (!in->current_os_version)
                return error_setf(ret_error, -EINVAL,
                                  "failed to compute OS version change: current OS version is nil");
        r = version_compare(in->current_os_version, VERSION_OP_EQ, strempty(new->os_version), &why);
        if (r < 0)
                return error_setf(
                        ret_error, -EINVAL,
                        "failed to compute OS version change: failed comparing current OS version \"%s\" "
                        "with OS version in the new OSC \"%s\": %s",
                        in->current_os_version, strempty(new->os_version), strempty(why));
        f->operating_system = r == 0;

        if (!streq_ptr(old->kubelet_version, new->kubelet_version)) {
                Version vo, vn;

                if (version_parse(strempty(old->kubelet_version), &vo, &why) < 0 ||
                    version_parse(strempty(new->kubelet_version), &vn, &why) < 0)
                        return error_setf(
                                ret_error, -EINVAL,
                                "failed to check if kubelet minor version was updated: failed to parse "
                                "version \"%s\" -> \"%s\": %s",
                                strempty(old->kubelet_version), strempty(new->kubelet_version),
                                strempty(why));
                f->kubelet_minor_version = vo.minor != vn.minor;
        }

        r = kubelet_config_changes(old, new, f, ret_error);
        if (r < 0)
                return r;
        rotation_changes(old, new, f);
        return 0;
}

/* ---- files, units, registries ---- */

static bool replaced(const OscDiffInput *in, const char *unit) {
        for (char *const *r = in->replaced_units; r && *r; r++)
                if (streq(*r, unit))
                        return true;
        return false;
}

static bool files_equal(const OscFile *a, const OscFile *b) {
        json_t *ja = osc_file_to_json(a), *jb = osc_file_to_json(b);
        bool eq = ja && jb && json_equal(ja, jb);

        json_decref(ja);
        json_decref(jb);
        return eq;
}

static bool units_equal(const OscUnit *a, const OscUnit *b) {
        json_t *ja = osc_unit_to_json(a), *jb = osc_unit_to_json(b);
        bool eq = ja && jb && json_equal(ja, jb);

        json_decref(ja);
        json_decref(jb);
        return eq;
}

/* `nf`, a file of the new OSC, is new or differs from the old OSC's. */
static bool new_file_changed(const OscDiffInput *in, const OscFile *nf) {
        const OscFile *of = osc_model_find_file(in->old, nf->path);

        return !of || !files_equal(of, nf);
}

static bool file_changed(const OscDiffInput *in, const char *path) {
        const OscFile *nf = osc_model_find_file(in->new, path);

        return nf && new_file_changed(in, nf);
}

static int add_file_items(const OscDiffInput *in, OscChanges *c) {
        for (size_t i = 0; i < in->new->n_files; i++) {
                const OscFile *f = &in->new->files[i];
                OscWork *w;

                if (!new_file_changed(in, f))
                        continue;
                if (f->source == OSC_FILE_IMAGE)
                        continue; /* pulled after the registries (docs/node-protocol.md §6.4 step 10) */
                w = add_item(c, f->source == OSC_FILE_NONE ? OSC_WORK_SKIP_FILE : OSC_WORK_WRITE_FILE);
                if (!w || osc_file_copy(f, &w->file) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int add_pull_items(const OscDiffInput *in, OscChanges *c) {
        _cleanup_free_ const char **replaced_only = NULL;

        if (osc_model_files_only_for_units(in->new, in->replaced_units, &replaced_only) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < in->new->n_files; i++) {
                const OscFile *f = &in->new->files[i];
                OscWork *w;

                /* An imageRef file listed only by replaced units is not pulled (docs/contract.md §9.4). */
                if (f->source != OSC_FILE_IMAGE || !new_file_changed(in, f) ||
                    strv_contains((char *const *) replaced_only, f->path))
                        continue;
                w = add_item(c, OSC_WORK_PULL_FILE);
                if (!w || osc_file_copy(f, &w->file) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static const OscRegistry *find_registry(const OscModel *m, const char *upstream) {
        for (size_t i = 0; m && m->has_containerd && i < m->n_registries; i++)
                if (streq(m->registries[i].upstream, upstream))
                        return &m->registries[i];
        return NULL;
}

/* The registries whose hosts are probed first (`probed`), or the others. */
static int add_registry_items(const OscDiffInput *in, OscChanges *c, bool probed) {
        for (size_t i = 0; in->new->has_containerd &&i < in->new->n_registries; i++) {
                const OscRegistry *g = &in->new->registries[i], *old = find_registry(in->old, g->upstream);
                bool probe = g->readiness_probe && (!old || !json_equal(old->canon, g->canon));
                OscWork *w;

                if (probe != probed)
                        continue;
                w = add_item(c, OSC_WORK_REGISTRY);
                if (!w || osc_registry_copy(g, &w->registry) < 0)
                        return -ENOMEM;
                w->probe = probe;
        }
        return 0;
}

static int add_deleted_registry_items(const OscDiffInput *in, OscChanges *c) {
        for (size_t i = 0; in->old && in->old->has_containerd && i < in->old->n_registries; i++) {
                const char *up = in->old->registries[i].upstream;
                OscWork *w;

                if (find_registry(in->new, up))
                        continue;
                w = add_item(c, OSC_WORK_DELETE_REGISTRY);
                if (!w || !(w->name = strdup(up)))
                        return -ENOMEM;
        }
        return 0;
}

static bool unit_files_changed(const OscDiffInput *in, const OscUnit *u) {
        for (size_t i = 0; i < u->n_file_paths; i++)
                if (file_changed(in, u->file_paths[i]))
                        return true;
        return false;
}

static const OscDropIn *find_drop_in(const OscUnit *u, const char *name) {
        for (size_t i = 0; i < u->n_drop_ins; i++)
                if (streq(u->drop_ins[i].name, name))
                        return &u->drop_ins[i];
        return NULL;
}

static int deleted_drop_ins(const OscUnit *old, const OscUnit *new, char ***ret) {
        _cleanup_strv_free_ char **l = calloc(old->n_drop_ins + 1, sizeof(char *));
        size_t n = 0;

        if (!l)
                return -ENOMEM;
        for (size_t i = 0; i < old->n_drop_ins; i++) {
                if (find_drop_in(new, old->drop_ins[i].name))
                        continue;
                l[n] = strdup(old->drop_ins[i].name);
                if (!l[n++])
                        return -ENOMEM;
        }
        *ret = n > 0 ? TAKE_PTR(l) : NULL;
        return 0;
}

/* Changed units: their WRITE_UNIT items now, their commands into `cmds` for later (the agent's
 * own into `self`, for the very end). */
static int add_unit_items(const OscDiffInput *in, OscChanges *c, OscChanges *cmds, OscChanges *self) {
        for (size_t i = 0; i < in->new->n_units; i++) {
                const OscUnit *u = &in->new->units[i], *old = osc_model_find_unit(in->old, u->name);
                OscWork *w;

                if (replaced(in, u->name))
                        continue;
                if (old && units_equal(old, u) && !unit_files_changed(in, u))
                        continue;
                w = add_item(c, OSC_WORK_WRITE_UNIT);
                if (!w || osc_unit_copy(u, &w->unit) < 0)
                        return -ENOMEM;
                if (old && deleted_drop_ins(old, u, &w->drop_ins_deleted) < 0)
                        return -ENOMEM;
                w->remove_cpu_manager_state =
                        streq(u->name, "kubelet.service") && c->in_place.cpu_manager_policy;

                w = add_item(streq_ptr(u->name, in->self_unit) ? self : cmds, OSC_WORK_UNIT_COMMAND);
                if (!w || !(w->name = strdup(u->name)))
                        return -ENOMEM;
                w->command = osc_unit_effective_command(u);
        }
        return 0;
}

static int add_deleted_unit_items(const OscDiffInput *in, OscChanges *c) {
        for (size_t i = 0; in->old && i < in->old->n_units; i++) {
                const OscUnit *u = &in->old->units[i];
                OscWork *w;

                if (replaced(in, u->name) || osc_model_find_unit(in->new, u->name))
                        continue;
                w = add_item(c, OSC_WORK_DELETE_UNIT);
                if (!w || osc_unit_copy(u, &w->unit) < 0)
                        return -ENOMEM;
        }
        return 0;
}

bool osc_changes_has_command_for(const OscChanges *c, const char *unit) {
        for (size_t i = 0; i < c->n_items; i++)
                if (c->items[i].kind == OSC_WORK_UNIT_COMMAND && streq(c->items[i].name, unit))
                        return true;
        return false;
}

/* containerd's command goes before every other unit command (docs/node-protocol.md §6.4 step 15, the
 * reasoning of gardener#15358): a kubelet restarted against a containerd that is still coming up lacks
 * container metrics for its whole life. The applier also waits for containerd's socket before it restarts
 * the kubelet after it (apply/osc-apply.h). */
static void containerd_first(OscChanges *cmds) {
        for (size_t i = 1; i < cmds->n_items; i++) {
                OscWork w = cmds->items[i];

                if (!streq(w.name, OSC_CONTAINERD_UNIT))
                        continue;
                memmove(cmds->items + 1, cmds->items, i * sizeof(OscWork));
                cmds->items[0] = w;
                return;
        }
}

/* Moves the command items collected in `cmds` to the end of `c`. */
static int append_items(OscChanges *c, OscChanges *cmds) {
        if (cmds->n_items == 0)
                return 0;
        if (c->n_items + cmds->n_items > OSC_CHANGES_ITEMS_MAX ||
            reserve_items(c, c->n_items + cmds->n_items) < 0)
                return -ENOMEM;
        memcpy(c->items + c->n_items, cmds->items, cmds->n_items * sizeof(OscWork));
        c->n_items += cmds->n_items;
        cmds->n_items = 0;
        return 0;
}

static int add_deleted_file_items(const OscDiffInput *in, OscChanges *c) {
        for (size_t i = 0; in->old && i < in->old->n_files; i++) {
                const OscFile *f = &in->old->files[i];
                OscWork *w;

                if (osc_model_find_file(in->new, f->path))
                        continue;
                w = add_item(c, OSC_WORK_DELETE_FILE);
                if (!w || osc_file_copy(f, &w->file) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static bool containerd_changed(const OscDiffInput *in) {
        if (!in->old)
                return true;
        if (!in->new->has_containerd)
                return false;
        if (!in->old->has_containerd)
                return true;
        return !json_equal(in->old->containerd_config, in->new->containerd_config);
}

static int build_items(const OscDiffInput *in, OscChanges *c) {
        _cleanup_(osc_changes_freep) OscChanges *cmds = calloc(1, sizeof(OscChanges)),
                                                *self = calloc(1, sizeof(OscChanges));
        size_t units_before;
        int r;

        if (!cmds || !self)
                return -ENOMEM;
        if (c->containerd_config_changed && in->new->has_containerd) {
                OscWork *w = add_item(c, OSC_WORK_CONTAINERD_CONFIG);

                if (!w || !(w->containerd = json_deep_copy(in->new->containerd_config)))
                        return -ENOMEM;
        }
        r = add_file_items(in, c);
        if (r >= 0)
                r = add_registry_items(in, c, /* probed= */ false);
        if (r >= 0)
                r = add_pull_items(in, c);
        units_before = c->n_items;
        if (r >= 0)
                r = add_unit_items(in, c, cmds, self);
        if (r >= 0)
                r = add_deleted_unit_items(in, c);
        if (r < 0)
                return r;
        if (c->n_items > units_before && !add_item(c, OSC_WORK_DAEMON_RELOAD))
                return -ENOMEM;

        /* executeUnitCommands: a containerd config change restarts containerd unless a command for it
         * is already there. */
        if (c->containerd_config_changed && in->new->has_containerd &&
            !osc_changes_has_command_for(cmds, OSC_CONTAINERD_UNIT) && !replaced(in, OSC_CONTAINERD_UNIT)) {
                OscWork *w = add_item(cmds, OSC_WORK_UNIT_COMMAND);

                if (!w || !(w->name = strdup(OSC_CONTAINERD_UNIT)))
                        return -ENOMEM;
                w->command = OSC_UNIT_COMMAND_RESTART;
        }
        containerd_first(cmds);
        r = append_items(c, cmds);
        if (r < 0)
                return r;
        if ((osc_in_place_flags_kubelet(&c->in_place) ||
             osc_changes_has_command_for(c, "kubelet.service")) &&
            !add_item(c, OSC_WORK_KUBELET_HEALTH))
                return -ENOMEM;
        /* Upstream probes these asynchronously from step 9 and waits for them at step 17: a probe
         * must not hold the units back (an in-cluster mirror may need this node's kubelet). */
        r = add_registry_items(in, c, /* probed= */ true);
        if (r >= 0)
                r = add_deleted_registry_items(in, c);
        if (r >= 0)
                r = add_deleted_file_items(in, c);
        if (r >= 0)
                r = append_items(c, self);
        return r;
}

int osc_diff(const OscDiffInput *in, OscChanges **ret, char **ret_error) {
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        int r;

        assert(in);
        assert(in->new);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (in->checksum && !(c->checksum = strdup(in->checksum)))
                return -ENOMEM;
        c->first_apply = !in->old;
        /* In-place flags only when both sides are in-place OSCs; never on the first apply. */
        if (in->old && in->old->in_place && in->new->in_place) {
                r = in_place_flags(in, &c->in_place, ret_error);
                if (r < 0)
                        return r;
        }
        c->containerd_config_changed = containerd_changed(in);
        r = build_items(in, c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

size_t osc_changes_next_from(const OscChanges *c, size_t from) {
        size_t i = from;

        while (i < c->n_items && c->items[i].done)
                i++;
        return MIN(i, c->n_items);
}

size_t osc_changes_remaining(const OscChanges *c) {
        size_t n = 0;

        for (size_t i = 0; i < c->n_items; i++)
                n += !c->items[i].done;
        return n;
}

void osc_changes_mark_done(OscChanges *c, size_t i) {
        assert(i < c->n_items);
        c->items[i].done = true;
}

size_t osc_changes_refuse_unit(OscChanges *c, const char *unit) {
        size_t n = 0;

        for (size_t i = 0; i < c->n_items; i++) {
                OscWork *w = &c->items[i];
                bool of_unit = (w->kind == OSC_WORK_WRITE_UNIT || w->kind == OSC_WORK_DELETE_UNIT ||
                                w->kind == OSC_WORK_UNIT_COMMAND) &&
                        streq_ptr(osc_work_target(w), unit);

                if (w->done || !of_unit)
                        continue;
                w->done = w->refused = true;
                n++;
        }
        return n;
}

/* ---- persistence ---- */

static json_t *flags_to_json(const OscInPlaceFlags *f) {
        return json_pack("{s:b, s:{s:b, s:b, s:b}, s:{s:b, s:b}, s:b}", "operatingSystem",
                         f->operating_system, "kubelet", "minorVersion", f->kubelet_minor_version, "config",
                         f->kubelet_config, "cpuManagerPolicy", f->cpu_manager_policy,
                         "certificateAuthoritiesRotation", "kubelet", f->ca_rotation_kubelet, "nodeAgent",
                         f->ca_rotation_node_agent, "serviceAccountKeyRotation", f->sa_key_rotation);
}

static json_t *strv_to_json(char *const *l) {
        json_t *a = json_array();

        for (size_t i = 0; a && l && l[i]; i++)
                if (json_array_append_new(a, json_string(l[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

static json_t *work_to_json(const OscWork *w) {
        json_t *j = json_pack("{s:s, s:b}", "kind", osc_work_kind_to_string(w->kind), "done", w->done);
        int r = 0;

        if (!j)
                return NULL;
        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
        case OSC_WORK_SKIP_FILE:
        case OSC_WORK_PULL_FILE:
        case OSC_WORK_DELETE_FILE:
                r |= json_object_set_new(j, "file", osc_file_to_json(&w->file));
                break;
        case OSC_WORK_WRITE_UNIT:
                r |= json_object_set_new(j, "removeCpuManagerState",
                                         json_boolean(w->remove_cpu_manager_state));
                r |= json_object_set_new(j, "dropInsDeleted", strv_to_json(w->drop_ins_deleted));
                _fallthrough_;
        case OSC_WORK_DELETE_UNIT:
                r |= json_object_set_new(j, "unit", osc_unit_to_json(&w->unit));
                break;
        case OSC_WORK_UNIT_COMMAND:
                r |= json_object_set_new(j, "command", json_string(osc_unit_command_to_string(w->command)));
                _fallthrough_;
        case OSC_WORK_DELETE_REGISTRY:
                r |= json_object_set_new(j, "name", json_string(w->name));
                break;
        case OSC_WORK_CONTAINERD_CONFIG:
                r |= json_object_set(j, "containerd", w->containerd);
                break;
        case OSC_WORK_REGISTRY:
                r |= json_object_set(j, "registry", w->registry.canon);
                r |= json_object_set_new(j, "probe", json_boolean(w->probe));
                break;
        default:
                break;
        }
        if (r != 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

json_t *osc_changes_to_json(const OscChanges *c) {
        json_t *j, *items;

        j = json_pack("{s:s?, s:b, s:b, s:o, s:[]}", "checksum", c->checksum, "firstApply", c->first_apply,
                      "containerdConfigChanged", c->containerd_config_changed, "inPlaceUpdates",
                      flags_to_json(&c->in_place), "items");
        if (!j)
                return NULL;
        items = json_object_get(j, "items");
        for (size_t i = 0; i < c->n_items; i++)
                if (json_array_append_new(items, work_to_json(&c->items[i])) < 0) {
                        json_decref(j);
                        return NULL;
                }
        return j;
}

static int flags_from_json(const json_t *j, OscInPlaceFlags *f) {
        int os = 0, minor = 0, cfg = 0, cpu = 0, cak = 0, can = 0, sa = 0;

        if (json_unpack((json_t *) j, "{s?b, s?{s?b, s?b, s?b}, s?{s?b, s?b}, s?b}", "operatingSystem", &os,
                        "kubelet", "minorVersion", &minor, "config", &cfg, "cpuManagerPolicy", &cpu,
                        "certificateAuthoritiesRotation", "kubelet", &cak, "nodeAgent", &can,
                        "serviceAccountKeyRotation", &sa) < 0)
                return -EINVAL;
        *f = (OscInPlaceFlags) { os, minor, cfg, cpu, cak, can, sa };
        return 0;
}

static int strv_from_json(const json_t *a, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        const json_t *e;
        size_t i;

        *ret = NULL;
        if (!a || json_array_size(a) == 0)
                return 0;
        if (!json_is_array(a) || json_array_size(a) > OSC_MODEL_DROPINS_MAX)
                return -EINVAL;
        l = calloc(json_array_size(a) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        json_array_foreach(a, i, e) {
                if (!json_is_string(e) || !osc_name_valid(json_string_value(e)))
                        return -EINVAL;
                l[i] = strdup(json_string_value(e));
                if (!l[i])
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

static int work_from_json(const json_t *j, const char *where, OscWork *w, char **ret_error) {
        const char *kind = NULL, *name = NULL, *command = NULL;
        int done = 0, cpu = 0, probe = 0, r;

        if (json_unpack((json_t *) j, "{s:s, s?b, s?s, s?s, s?b, s?b}", "kind", &kind, "done", &done, "name",
                        &name, "command", &command, "removeCpuManagerState", &cpu, "probe", &probe) < 0)
                return error_setf(ret_error, -EINVAL, "%s: malformed work item", where);
        w->kind = osc_work_kind_from_string(kind);
        if (w->kind < 0)
                return error_setf(ret_error, -EINVAL, "%s: unknown kind \"%s\"", where, kind);
        w->done = done;
        w->remove_cpu_manager_state = cpu;
        w->probe = probe;
        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
        case OSC_WORK_SKIP_FILE:
        case OSC_WORK_PULL_FILE:
        case OSC_WORK_DELETE_FILE:
                return osc_file_from_json(json_object_get(j, "file"), where, &w->file, ret_error);
        case OSC_WORK_WRITE_UNIT:
                r = strv_from_json(json_object_get(j, "dropInsDeleted"), &w->drop_ins_deleted);
                if (r < 0)
                        return r == -ENOMEM ? r : error_setf(ret_error, r, "%s: bad dropInsDeleted", where);
                _fallthrough_;
        case OSC_WORK_DELETE_UNIT:
                return osc_unit_from_json(json_object_get(j, "unit"), where, &w->unit, ret_error);
        case OSC_WORK_UNIT_COMMAND:
                w->command = osc_unit_command_from_string(command);
                if (w->command < 0)
                        return error_setf(ret_error, -EINVAL, "%s: bad command", where);
                _fallthrough_;
        case OSC_WORK_DELETE_REGISTRY:
                if (!osc_name_valid(name))
                        return error_setf(ret_error, -EINVAL, "%s: bad name", where);
                w->name = strdup(name);
                return w->name ? 0 : -ENOMEM;
        case OSC_WORK_REGISTRY:
                return osc_registry_from_json(json_object_get(j, "registry"), where, &w->registry,
                                              ret_error);
        case OSC_WORK_CONTAINERD_CONFIG:
                /* checked when rendered, like the OSC's own criConfig */
                if (!json_is_object(json_object_get(j, "containerd")))
                        return error_setf(ret_error, -EINVAL, "%s: no containerd config", where);
                w->containerd = json_deep_copy(json_object_get(j, "containerd"));
                return w->containerd ? 0 : -ENOMEM;
        default:
                return 0;
        }
}

int osc_changes_from_json(const json_t *j, OscChanges **ret, char **ret_error) {
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        const char *checksum = NULL;
        const json_t *items, *flags = NULL, *e;
        int first = 0, ctd = 0, r;
        size_t i;

        assert(ret);
        if (json_unpack((json_t *) j, "{s?s, s?b, s?b, s?o, s:o}", "checksum", &checksum, "firstApply",
                        &first, "containerdConfigChanged", &ctd, "inPlaceUpdates", &flags, "items",
                        &items) < 0 ||
            !json_is_array(items))
                return error_setf(ret_error, -EINVAL, "osc changes: malformed");
        if (json_array_size(items) > OSC_CHANGES_ITEMS_MAX)
                return error_setf(ret_error, -EINVAL, "osc changes: more than %d items",
                                  OSC_CHANGES_ITEMS_MAX);
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (checksum && !(c->checksum = strdup(checksum)))
                return -ENOMEM;
        c->first_apply = first;
        c->containerd_config_changed = ctd;
        if (flags && flags_from_json(flags, &c->in_place) < 0)
                return error_setf(ret_error, -EINVAL, "osc changes: malformed inPlaceUpdates");
        json_array_foreach(items, i, e) {
                _cleanup_free_ char *where = NULL;
                OscWork *w = add_item(c, OSC_WORK_DAEMON_RELOAD);

                if (!w || asprintf(&where, "osc changes: items[%zu]", i) < 0)
                        return -ENOMEM;
                r = work_from_json(e, where, w, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int osc_work_describe(const OscWork *w, char **ret) {
        const char *verb = osc_unit_command_to_string(w->command);
        int r = -EINVAL;

        switch (w->kind) {
        case OSC_WORK_CONTAINERD_CONFIG:
                r = asprintf(ret, "write containerd config");
                break;
        case OSC_WORK_WRITE_FILE:
                r = w->file.source == OSC_FILE_SECRET ?
                        asprintf(ret, "write file %s (%04o) from secret %s key %s", w->file.path,
                                 osc_file_mode(&w->file), w->file.secret_name, w->file.secret_key) :
                        asprintf(ret, "write file %s (%04o)", w->file.path, osc_file_mode(&w->file));
                break;
        case OSC_WORK_SKIP_FILE:
                r = asprintf(ret, "skip file %s: its content has neither inline, secretRef nor imageRef",
                             w->file.path);
                break;
        case OSC_WORK_REGISTRY:
                r = asprintf(ret, "write registry config for %s%s", w->registry.upstream,
                             w->probe ? " (probed)" : "");
                break;
        case OSC_WORK_PULL_FILE:
                r = asprintf(ret, "pull file %s (%04o) from %s", w->file.path, osc_file_mode(&w->file),
                             w->file.image);
                break;
        case OSC_WORK_WRITE_UNIT:
                r = asprintf(ret, "write unit %s (%s, %zu drop-ins%s)%s", w->unit.name,
                             w->unit.content ? "with unit file" : "no unit file", w->unit.n_drop_ins,
                             w->drop_ins_deleted ? ", some removed" : "",
                             w->remove_cpu_manager_state ? ", remove cpu_manager_state" : "");
                break;
        case OSC_WORK_DELETE_UNIT:
                r = asprintf(ret, "delete unit %s", w->unit.name);
                break;
        case OSC_WORK_DAEMON_RELOAD:
                r = asprintf(ret, "reload systemd");
                break;
        case OSC_WORK_UNIT_COMMAND:
                r = asprintf(ret, "%s unit %s", strempty(verb), w->name);
                break;
        case OSC_WORK_KUBELET_HEALTH:
                r = asprintf(ret, "check kubelet health");
                break;
        case OSC_WORK_DELETE_REGISTRY:
                r = asprintf(ret, "remove registry config for %s", w->name);
                break;
        case OSC_WORK_DELETE_FILE:
                r = asprintf(ret, "remove file %s", w->file.path);
                break;
        default:
                break;
        }
        return r < 0 ? -ENOMEM : 0;
}

const char *osc_work_target(const OscWork *w) {
        switch (w->kind) {
        case OSC_WORK_WRITE_FILE:
        case OSC_WORK_SKIP_FILE:
        case OSC_WORK_PULL_FILE:
        case OSC_WORK_DELETE_FILE:
                return w->file.path;
        case OSC_WORK_WRITE_UNIT:
        case OSC_WORK_DELETE_UNIT:
                return w->unit.name;
        case OSC_WORK_REGISTRY:
                return w->registry.upstream;
        case OSC_WORK_CONTAINERD_CONFIG:
                return "/etc/containerd/config.toml";
        case OSC_WORK_UNIT_COMMAND:
        case OSC_WORK_DELETE_REGISTRY:
                return w->name;
        default:
                return NULL;
        }
}

static int plan_in_place(const OscInPlaceFlags *f, json_t *in_place) {
        static const struct {
                size_t offset;
                const char *name;
        } flags[] = {
                { offsetof(OscInPlaceFlags, operating_system), "operatingSystem" },
                { offsetof(OscInPlaceFlags, kubelet_minor_version), "kubeletMinorVersion" },
                { offsetof(OscInPlaceFlags, kubelet_config), "kubeletConfig" },
                { offsetof(OscInPlaceFlags, cpu_manager_policy), "cpuManagerPolicy" },
                { offsetof(OscInPlaceFlags, ca_rotation_kubelet), "certificateAuthoritiesRotation" },
                { offsetof(OscInPlaceFlags, sa_key_rotation), "serviceAccountKeyRotation" },
        };

        for (size_t i = 0; i < ELEMENTSOF(flags); i++)
                if (*(const bool *) ((const uint8_t *) f + flags[i].offset) &&
                    json_array_append_new(in_place, json_string(flags[i].name)) < 0)
                        return -ENOMEM;
        return 0;
}

/* `s` cut to `max` bytes on a character boundary, "..." marking the cut. */
static json_t *plan_string(const char *s, size_t max) {
        _cleanup_free_ char *cut = NULL;

        if (!s || strlen(s) <= max)
                return s ? json_string(s) : NULL;
        cut = utf8_sanitize(s, strlen(s), max);
        return cut ? json_string(cut) : NULL;
}

static json_t *plan_item(const OscWork *w, size_t string_max) {
        _cleanup_free_ char *d = NULL;
        json_t *j;

        if (osc_work_describe(w, &d) < 0)
                return NULL;
        j = json_pack("{s:s, s:o*, s:o}", "action", osc_work_kind_to_string(w->kind), "target",
                      plan_string(osc_work_target(w), string_max), "description",
                      plan_string(d, string_max));
        return j;
}

static size_t json_length(const json_t *j) {
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);

        return s ? strlen(s) : SIZE_MAX;
}

/* Counts of the remaining items per action, in the order of the kinds. */
static json_t *plan_counts(const OscChanges *c, size_t *ret_remaining) {
        size_t counts[_OSC_WORK_KIND_MAX] = {}, remaining = 0;
        json_t *j = json_object();

        for (size_t i = 0; i < c->n_items; i++)
                if (!c->items[i].done) {
                        counts[c->items[i].kind]++;
                        remaining++;
                }
        for (size_t k = 0; j && k < _OSC_WORK_KIND_MAX; k++)
                if (counts[k] > 0 &&
                    json_object_set_new(j, work_kind_table[k], json_integer((json_int_t) counts[k])) < 0) {
                        json_decref(j);
                        return NULL;
                }
        *ret_remaining = remaining;
        return j;
}

json_t *osc_changes_plan_json(const OscChanges *c, size_t budget) {
        bool whole = budget == SIZE_MAX;
        size_t string_max = whole ? SIZE_MAX : OSC_PLAN_STRING_MAX, remaining = 0, listed = 0, used;
        json_t *counts = plan_counts(c, &remaining), *j, *items;

        j = json_pack("{s:[], s:I, s:o, s:[], s:I}", "inPlace", "remaining", (json_int_t) remaining,
                      "counts", counts, "items", "more", (json_int_t) remaining);
        if (!j)
                return NULL;
        items = json_object_get(j, "items");
        if (plan_in_place(&c->in_place, json_object_get(j, "inPlace")) < 0)
                goto fail;
        /* "more" is there at its widest already: the items fill what the budget leaves. */
        used = whole ? 0 : json_length(j);
        for (size_t i = 0; i < c->n_items; i++) {
                const OscWork *w = &c->items[i];
                json_t *item;
                size_t n;

                if (w->done)
                        continue;
                item = plan_item(w, string_max);
                if (!item)
                        goto fail;
                n = whole ? 0 : json_length(item) + 1;
                if (!whole && (n > budget || used + n > budget)) {
                        json_decref(item);
                        break;
                }
                if (json_array_append_new(items, item) < 0)
                        goto fail;
                used += n;
                listed++;
        }
        if (json_object_set_new(j, "more", json_integer((json_int_t) (remaining - listed))) < 0)
                goto fail;
        return j;
fail:
        json_decref(j);
        return NULL;
}
