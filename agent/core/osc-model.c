/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <limits.h>
#include <stdio.h>

#include "core/kube-name.h"
#include "core/osc-model.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/json-util.h"
#include "util/strv.h"
#include "util/yaml-json.h"

#define OSC_MODEL_YAML_MAX (3 * 1024 * 1024)

static const char *const unit_command_table[_OSC_UNIT_COMMAND_MAX] = {
        [OSC_UNIT_COMMAND_START] = "start",
        [OSC_UNIT_COMMAND_RESTART] = "restart",
        [OSC_UNIT_COMMAND_STOP] = "stop",
};

DEFINE_STRING_TABLE_LOOKUP(osc_unit_command, OscUnitCommand, unit_command_table);

/* ---- freeing ---- */

void osc_file_done(OscFile *f) {
        free(f->path);
        free(f->data);
        free(f->secret_name);
        free(f->secret_key);
        free(f->image);
        free(f->file_in_image);
        free(f->host_name);
        *f = (OscFile) {};
}

static void drop_in_done(OscDropIn *d) {
        free(d->name);
        free(d->content);
}

void osc_unit_done(OscUnit *u) {
        free(u->name);
        free(u->content);
        for (size_t i = 0; i < u->n_drop_ins; i++)
                drop_in_done(&u->drop_ins[i]);
        free(u->drop_ins);
        for (size_t i = 0; u->file_paths && i < u->n_file_paths; i++)
                free(u->file_paths[i]);
        free(u->file_paths);
        *u = (OscUnit) { .command = _OSC_UNIT_COMMAND_INVALID, .enable = -1 };
}

void osc_registry_done(OscRegistry *r) {
        free(r->upstream);
        free(r->server);
        for (size_t i = 0; i < r->n_hosts; i++) {
                free(r->hosts[i].url);
                strv_freep(&r->hosts[i].capabilities);
                strv_freep(&r->hosts[i].ca_certs);
        }
        free(r->hosts);
        json_decref(r->canon);
        *r = (OscRegistry) {};
}

/* A model built by hand (calloc, n_ref 0) has its one owner too. */
OscModel *osc_model_ref(OscModel *m) {
        if (m)
                m->n_ref = MAX(m->n_ref, 1u) + 1;
        return m;
}

OscModel *osc_model_free(OscModel *m) {
        if (!m)
                return NULL;
        if (m->n_ref > 1) {
                m->n_ref--;
                return NULL;
        }
        for (size_t i = 0; i < m->n_files; i++)
                osc_file_done(&m->files[i]);
        free(m->files);
        free(m->files_by_path);
        for (size_t i = 0; i < m->n_units; i++)
                osc_unit_done(&m->units[i]);
        free(m->units);
        for (size_t i = 0; i < m->n_registries; i++)
                osc_registry_done(&m->registries[i]);
        free(m->registries);
        json_decref(m->containerd_config);
        free(m->os_version);
        free(m->kubelet_version);
        free(m->ca_rotation);
        free(m->sa_rotation);
        free(m);
        return NULL;
}

bool osc_path_valid(const char *p) {
        /* Absolute, no "." or ".." component: the appliers join it below osc.rootDirectory. A trailing
         * slash names a directory: the file would be its own parent (upstream creates the directory,
         * then fails to write it). */
        if (!p || p[0] != '/' || p[strlen(p) - 1] == '/')
                return false;
        for (const char *c = p; *c;) {
                const char *next = strchrnul(c + 1, '/');
                size_t len = (size_t) (next - c - 1);

                if ((len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
                        return false;
                c = next;
        }
        return true;
}

bool osc_name_valid(const char *n) {
        /* A unit or drop-in file name: one path component. */
        return n && *n && !strchr(n, '/') && !streq(n, ".") && !streq(n, "..");
}

/* ---- files ---- */

int osc_file_inline_content(const OscFile *f, char **ret, size_t *ret_size) {
        assert(f);
        assert(ret);

        if (f->source != OSC_FILE_INLINE)
                return -EINVAL;
        if (f->b64) {
                size_t size;
                int r = base64_decode(strempty(f->data), SIZE_MAX, ret, &size);

                if (r >= 0 && ret_size)
                        *ret_size = size;
                return r;
        }
        *ret = strdup(strempty(f->data));
        if (!*ret)
                return -ENOMEM;
        if (ret_size)
                *ret_size = strlen(*ret);
        return 0;
}

static int decode_file_content(const json_t *content, const char *where, OscFile *f, char **ret_error) {
        const json_t *inl, *sec, *img;
        _cleanup_free_ char *enc = NULL;
        int r;

        r = json_field_object(content, where, "inline", &inl, ret_error);
        if (r >= 0)
                r = json_field_object(content, where, "secretRef", &sec, ret_error);
        if (r >= 0)
                r = json_field_object(content, where, "imageRef", &img, ret_error);
        if (r >= 0)
                r = json_field_bool(content, where, "transmitUnencoded", &f->transmit_unencoded, ret_error);
        if (r < 0)
                return r;
        if (!!inl + !!sec + !!img > 1)
                /* the extension API's validation of an OSC says the same */
                return error_setf(ret_error, -EINVAL,
                                  "file \"%s\": content has more than one of inline, secretRef "
                                  "and imageRef",
                                  f->path);

        if (inl) {
                f->source = OSC_FILE_INLINE;
                r = json_field_string(inl, where, "encoding", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &enc, ret_error);
                if (r < 0)
                        return r;
                if (enc && !streq(enc, "b64"))
                        /* filecodec.go's message, naming the file */
                        return error_setf(ret_error, -EINVAL, "file \"%s\": invalid file codec id \"%s\"",
                                          f->path, enc);
                f->b64 = enc != NULL;
                r = json_field_string(inl, where, "data", OSC_MODEL_YAML_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &f->data, ret_error);
                if (r < 0)
                        return r;
                if (f->b64) {
                        _cleanup_free_ char *plain = NULL;
                        size_t size;

                        r = base64_decode(strempty(f->data), SIZE_MAX, &plain, &size);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return error_setf(ret_error, -EINVAL,
                                                  "file \"%s\": content is not valid base64", f->path);
                }
                return 0;
        }
        if (sec) {
                _cleanup_free_ char *field = NULL;

                f->source = OSC_FILE_SECRET;
                r = json_field_string(sec, where, "name", OSC_MODEL_NAME_MAX, JSON_FIELD_REQUIRED,
                                      &f->secret_name, ret_error);
                if (r >= 0)
                        r = json_field_string(sec, where, "dataKey", OSC_MODEL_NAME_MAX, JSON_FIELD_REQUIRED,
                                              &f->secret_key, ret_error);
                if (r < 0)
                        return r;
                /* It names the Secret the agent GETs: "../../default/secrets/other" must not pick
                 * another one. */
                if (asprintf(&field, "%s.secretRef.name", where) < 0)
                        return -ENOMEM;
                return kube_name_check(f->secret_name, KUBE_NAME_SUBDOMAIN, field, ret_error);
        }
        if (img) {
                f->source = OSC_FILE_IMAGE;
                r = json_field_string(img, where, "image", OSC_MODEL_PATH_MAX, JSON_FIELD_REQUIRED,
                                      &f->image, ret_error);
                if (r >= 0)
                        r = json_field_string(img, where, "filePathInImage", OSC_MODEL_PATH_MAX,
                                              JSON_FIELD_REQUIRED, &f->file_in_image, ret_error);
                return r;
        }
        /* Upstream's getFileContentData() returns ok=false and the file is skipped: not a reason to
         * refuse the OSC (docs/node-protocol.md §6.2). */
        f->source = OSC_FILE_NONE;
        return 0;
}

int osc_file_from_json(const json_t *j, const char *where, OscFile *ret, char **ret_error) {
        _cleanup_(osc_file_done) OscFile f = { .transmit_unencoded = -1 };
        _cleanup_free_ char *cw = NULL;
        const json_t *content;
        json_int_t perm;
        int r;

        if (!json_is_object(j))
                return error_setf(ret_error, -EINVAL, "%s: expected an object", where);
        r = json_field_string(j, where, "path", OSC_MODEL_PATH_MAX, JSON_FIELD_REQUIRED, &f.path, ret_error);
        if (r < 0)
                return r;
        if (!osc_path_valid(f.path))
                return error_setf(ret_error, -EINVAL,
                                  "file \"%s\": path must be absolute without . or .. or a trailing slash",
                                  f.path);
        r = json_field_integer(j, where, "permissions", &perm, ret_error);
        if (r < 0)
                return r;
        if (r > 0) {
                if (perm < 0 || perm > 07777)
                        return error_setf(ret_error, -EINVAL, "file \"%s\": permissions out of range",
                                          f.path);
                f.has_permissions = true;
                f.permissions = (uint32_t) perm;
        }
        r = json_field_string(j, where, "hostName", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                              &f.host_name, ret_error);
        if (r >= 0)
                r = json_field_object(j, where, "content", &content, ret_error);
        if (r < 0)
                return r;
        if (asprintf(&cw, "%s.content", where) < 0)
                return -ENOMEM;
        r = decode_file_content(content, cw, &f, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_STRUCT(f);
        return 0;
}

json_t *osc_file_to_json(const OscFile *f) {
        _cleanup_(json_decrefp) json_t *j = NULL, *c = NULL;
        int r = 0;

        j = json_pack("{s:s}", "path", f->path);
        c = json_object();
        if (!j || !c)
                return NULL;
        if (f->has_permissions)
                r |= json_object_set_new(j, "permissions", json_integer(f->permissions));
        if (f->host_name)
                r |= json_object_set_new(j, "hostName", json_string(f->host_name));
        switch (f->source) {
        case OSC_FILE_INLINE:
                r |= json_object_set_new(
                        c, "inline",
                        json_pack("{s:s, s:s}", "encoding", f->b64 ? "b64" : "", "data", strempty(f->data)));
                break;
        case OSC_FILE_SECRET:
                r |= json_object_set_new(
                        c, "secretRef",
                        json_pack("{s:s, s:s}", "name", f->secret_name, "dataKey", f->secret_key));
                break;
        case OSC_FILE_IMAGE:
                r |= json_object_set_new(
                        c, "imageRef",
                        json_pack("{s:s, s:s}", "image", f->image, "filePathInImage", f->file_in_image));
                break;
        case OSC_FILE_NONE:
                break;
        }
        if (f->transmit_unencoded >= 0)
                r |= json_object_set_new(c, "transmitUnencoded", json_boolean(f->transmit_unencoded));
        r |= json_object_set_new(j, "content", TAKE_PTR(c));
        return r == 0 ? TAKE_PTR(j) : NULL;
}

int osc_file_copy(const OscFile *f, OscFile *ret) {
        json_t *j = osc_file_to_json(f);
        int r;

        if (!j)
                return -ENOMEM;
        r = osc_file_from_json(j, "file", ret, NULL);
        json_decref(j);
        if (r >= 0)
                ret->in_status = f->in_status;
        return r;
}

/* ---- units ---- */

static int decode_drop_ins(const json_t *list, const char *where, OscUnit *u, char **ret_error) {
        const json_t *d;
        size_t i;

        if (json_array_size(list) > OSC_MODEL_DROPINS_MAX)
                return error_setf(ret_error, -EINVAL, "unit \"%s\": more than %d drop-ins", u->name,
                                  OSC_MODEL_DROPINS_MAX);
        u->drop_ins = calloc(json_array_size(list) + 1, sizeof(OscDropIn));
        if (!u->drop_ins)
                return -ENOMEM;
        json_array_foreach(list, i, d) {
                _cleanup_free_ char *dw = NULL;
                OscDropIn *di = &u->drop_ins[u->n_drop_ins];
                int r;

                if (asprintf(&dw, "%s.dropIns[%zu]", where, i) < 0)
                        return -ENOMEM;
                if (!json_is_object(d))
                        return error_setf(ret_error, -EINVAL, "%s: expected an object", dw);
                r = json_field_string(d, dw, "name", OSC_MODEL_NAME_MAX, JSON_FIELD_REQUIRED, &di->name,
                                      ret_error);
                if (r >= 0)
                        r = json_field_string(d, dw, "content", OSC_MODEL_YAML_MAX,
                                              JSON_FIELD_EMPTY_IS_UNSET, &di->content, ret_error);
                u->n_drop_ins++;
                if (r < 0)
                        return r;
                if (!osc_name_valid(di->name))
                        return error_setf(ret_error, -EINVAL, "unit \"%s\": invalid drop-in name \"%s\"",
                                          u->name, di->name);
        }
        return 0;
}

int osc_unit_from_json(const json_t *j, const char *where, OscUnit *ret, char **ret_error) {
        _cleanup_(osc_unit_done) OscUnit u = { .command = _OSC_UNIT_COMMAND_INVALID, .enable = -1 };
        _cleanup_free_ char *cmd = NULL;
        _cleanup_strv_free_ char **paths = NULL;
        const json_t *drop_ins;
        const char *content;
        int r;

        if (!json_is_object(j))
                return error_setf(ret_error, -EINVAL, "%s: expected an object", where);
        r = json_field_string(j, where, "name", OSC_MODEL_NAME_MAX, JSON_FIELD_REQUIRED, &u.name, ret_error);
        if (r < 0)
                return r;
        if (!osc_name_valid(u.name))
                return error_setf(ret_error, -EINVAL, "%s: invalid unit name \"%s\"", where, u.name);
        r = json_field_string(j, where, "command", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET, &cmd,
                              ret_error);
        if (r < 0)
                return r;
        if (cmd) {
                u.command = osc_unit_command_from_string(cmd);
                if (u.command < 0)
                        return error_setf(ret_error, -EINVAL, "unit \"%s\": unknown command \"%s\"", u.name,
                                          cmd);
        }
        r = json_field_bool(j, where, "enable", &u.enable, ret_error);
        if (r >= 0)
                r = json_field_string_ref(j, where, "content", &content, ret_error);
        if (r < 0)
                return r;
        /* "content: ''" is content, unlike other empty strings */
        if (content && !(u.content = strdup(content)))
                return -ENOMEM;
        r = json_field_array(j, where, "dropIns", &drop_ins, ret_error);
        if (r >= 0 && drop_ins)
                r = decode_drop_ins(drop_ins, where, &u, ret_error);
        if (r >= 0)
                r = json_field_strv(j, where, "filePaths", OSC_MODEL_FILE_PATHS_MAX, OSC_MODEL_PATH_MAX,
                                    JSON_FIELD_EMPTY_IS_UNSET, &paths, ret_error);
        if (r < 0)
                return r;
        u.n_file_paths = strv_length(paths);
        u.file_paths = TAKE_PTR(paths);
        *ret = TAKE_STRUCT(u);
        return 0;
}

json_t *osc_unit_to_json(const OscUnit *u) {
        json_t *j = json_pack("{s:s}", "name", u->name);
        int r = 0;

        if (!j)
                return NULL;
        if (u->command >= 0)
                r |= json_object_set_new(j, "command", json_string(osc_unit_command_to_string(u->command)));
        if (u->enable >= 0)
                r |= json_object_set_new(j, "enable", json_boolean(u->enable));
        if (u->content)
                r |= json_object_set_new(j, "content", json_string(u->content));
        if (u->n_drop_ins > 0) {
                json_t *l = json_array();

                for (size_t i = 0; l && i < u->n_drop_ins; i++)
                        r |= json_array_append_new(l,
                                                   json_pack("{s:s, s:s}", "name", u->drop_ins[i].name,
                                                             "content", strempty(u->drop_ins[i].content)));
                r |= json_object_set_new(j, "dropIns", l);
        }
        if (u->n_file_paths > 0) {
                json_t *l = json_array();

                for (size_t i = 0; l && i < u->n_file_paths; i++)
                        r |= json_array_append_new(l, json_string(u->file_paths[i]));
                r |= json_object_set_new(j, "filePaths", l);
        }
        if (r != 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int osc_unit_copy(const OscUnit *u, OscUnit *ret) {
        json_t *j = osc_unit_to_json(u);
        int r;

        if (!j)
                return -ENOMEM;
        r = osc_unit_from_json(j, "unit", ret, NULL);
        json_decref(j);
        return r;
}

OscUnitCommand osc_unit_effective_command(const OscUnit *u) {
        return u->enable == 0 || u->command == OSC_UNIT_COMMAND_STOP ? OSC_UNIT_COMMAND_STOP :
                                                                       OSC_UNIT_COMMAND_RESTART;
}

bool osc_unit_lists_file(const OscUnit *u, const char *path) {
        for (size_t i = 0; i < u->n_file_paths; i++)
                if (streq(u->file_paths[i], path))
                        return true;
        return false;
}

static bool listed_by_other_unit(const OscModel *m, const char *path, char *const *units) {
        for (size_t i = 0; i < m->n_units; i++)
                if (!strv_contains(units, m->units[i].name) && osc_unit_lists_file(&m->units[i], path))
                        return true;
        return false;
}

int osc_model_files_only_for_units(const OscModel *m, char *const *units, const char ***ret) {
        _cleanup_free_ const char **l = NULL;
        size_t n = 0;

        /* The few paths the replaced units list, each looked for once among the other units: a large
         * OSC's thousands of files cost nothing here. */
        for (char *const *name = units; name && *name; name++) {
                const OscUnit *u = osc_model_find_unit(m, *name);

                for (size_t i = 0; u && i < u->n_file_paths; i++) {
                        const char **grown;

                        if (strv_contains((char *const *) l, u->file_paths[i]) ||
                            listed_by_other_unit(m, u->file_paths[i], units))
                                continue;
                        grown = reallocarray(l, n + 2, sizeof(char *));
                        if (!grown)
                                return -ENOMEM;
                        l = grown;
                        l[n++] = u->file_paths[i];
                        l[n] = NULL;
                }
        }
        *ret = TAKE_PTR(l);
        return 0;
}

/* mergeUnits: `src` is folded into `dst` (same name). Takes ownership of src's contents. */
static int merge_unit(OscUnit *dst, OscUnit *src) {
        OscDropIn *d;
        char **p;

        if (dst->n_drop_ins + src->n_drop_ins > OSC_MODEL_DROPINS_MAX ||
            dst->n_file_paths + src->n_file_paths > OSC_MODEL_FILE_PATHS_MAX)
                return -E2BIG;
        d = reallocarray(dst->drop_ins, dst->n_drop_ins + src->n_drop_ins + 1, sizeof(OscDropIn));
        if (!d)
                return -ENOMEM;
        dst->drop_ins = d;
        p = reallocarray(dst->file_paths, dst->n_file_paths + src->n_file_paths + 1, sizeof(char *));
        if (!p)
                return -ENOMEM;
        dst->file_paths = p;

        if (src->enable >= 0)
                dst->enable = src->enable;
        if (src->command >= 0)
                dst->command = src->command;
        if (src->content) {
                free(dst->content);
                dst->content = TAKE_PTR(src->content);
        }
        if (src->n_drop_ins > 0 && src->drop_ins) /* memcpy() from NULL is undefined even for 0 bytes */
                memcpy(dst->drop_ins + dst->n_drop_ins, src->drop_ins, src->n_drop_ins * sizeof(OscDropIn));
        dst->n_drop_ins += src->n_drop_ins;
        src->n_drop_ins = 0;
        if (src->n_file_paths > 0 && src->file_paths)
                memcpy(dst->file_paths + dst->n_file_paths, src->file_paths,
                       src->n_file_paths * sizeof(char *));
        dst->n_file_paths += src->n_file_paths;
        src->n_file_paths = 0;
        dst->file_paths[dst->n_file_paths] = NULL;
        osc_unit_done(src);
        return 0;
}

const OscUnit *osc_model_find_unit(const OscModel *m, const char *name) {
        for (size_t i = 0; m && i < m->n_units; i++)
                if (streq_ptr(m->units[i].name, name))
                        return &m->units[i];
        return NULL;
}

const OscFile *osc_model_find_file(const OscModel *m, const char *path) {
        size_t lo = 0, hi = m && path ? m->n_files : 0;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const OscFile *f = &m->files[m->files_by_path[mid]];
                int c = strcmp(f->path, path);

                if (c == 0)
                        return f;
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

/* By path, then by position: the first of equal paths sorts first. */
static int compare_files(const void *a, const void *b, void *userdata) {
        const OscFile *files = userdata;
        size_t x = *(const size_t *) a, y = *(const size_t *) b;
        int c = strcmp(files[x].path, files[y].path);

        return c != 0 ? c : (x > y) - (x < y);
}

/* CollectAllFiles keeps one entry per path, the first (spec before status): the later ones are
 * dropped here, in one sort rather than a lookup per entry, and the sorted order is kept for
 * osc_model_find_file(). */
static int index_files(OscModel *m) {
        _cleanup_free_ size_t *order = calloc(m->n_files + 1, sizeof(size_t)), *position = NULL;
        _cleanup_free_ bool *dropped = calloc(m->n_files + 1, sizeof(bool));
        size_t kept = 0, j = 0;

        position = calloc(m->n_files + 1, sizeof(size_t));
        if (!order || !dropped || !position)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_files; i++)
                order[i] = i;
        qsort_r(order, m->n_files, sizeof(size_t), compare_files, m->files);
        for (size_t k = 1; k < m->n_files; k++)
                dropped[order[k]] = streq(m->files[order[k]].path, m->files[order[k - 1]].path);
        for (size_t i = 0; i < m->n_files; i++) {
                if (dropped[i]) {
                        osc_file_done(&m->files[i]);
                        continue;
                }
                position[i] = kept;
                m->files[kept++] = m->files[i];
        }
        for (size_t k = 0; k < m->n_files; k++)
                if (!dropped[order[k]])
                        order[j++] = position[order[k]];
        m->n_files = kept;
        m->files_by_path = TAKE_PTR(order);
        return 0;
}

static int decode_units(const json_t *list, const char *where, OscModel *m, char **ret_error) {
        const json_t *e;
        size_t i;

        json_array_foreach(list, i, e) {
                _cleanup_(osc_unit_done) OscUnit u = {};
                _cleanup_free_ char *uw = NULL;
                OscUnit *existing;
                int r;

                if (asprintf(&uw, "%s[%zu]", where, i) < 0)
                        return -ENOMEM;
                r = osc_unit_from_json(e, uw, &u, ret_error);
                if (r < 0)
                        return r;
                existing = (OscUnit *) osc_model_find_unit(m, u.name);
                if (existing) {
                        r = merge_unit(existing, &u);
                        if (r == -E2BIG)
                                return error_setf(ret_error, -EINVAL,
                                                  "unit \"%s\": too many drop-ins or filePaths",
                                                  existing->name);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (m->n_units >= OSC_MODEL_UNITS_MAX)
                        return error_setf(ret_error, -EINVAL, "%s: more than %d units", where,
                                          OSC_MODEL_UNITS_MAX);
                m->units[m->n_units++] = TAKE_STRUCT(u);
        }
        return 0;
}

static int decode_files(const json_t *list, const char *where, bool in_status, const OscModelOptions *opts,
                        OscModel *m, char **ret_error) {
        const json_t *e;
        size_t i;

        json_array_foreach(list, i, e) {
                _cleanup_(osc_file_done) OscFile f = {};
                _cleanup_free_ char *fw = NULL;
                int r;

                if (asprintf(&fw, "%s[%zu]", where, i) < 0)
                        return -ENOMEM;
                r = osc_file_from_json(e, fw, &f, ret_error);
                if (r < 0)
                        return r;
                f.in_status = in_status;
                /* CollectAllFiles' host filter; a second entry for the same path is dropped by
                 * index_files() (the first, spec before status, is the one the diff would see). */
                if (f.host_name && !streq_ptr(f.host_name, opts->host_name))
                        continue;
                m->files[m->n_files++] = TAKE_STRUCT(f); /* room for all: decode_lists() checked the count */
        }
        return 0;
}

/* ---- containerd ---- */

/* One entry of a registry's hosts list. */
static int decode_registry_host(const json_t *h, const char *where, size_t i, OscRegistryHost *x,
                                char **ret_error) {
        _cleanup_free_ char *hw = NULL;
        int r;

        if (asprintf(&hw, "%s.hosts[%zu]", where, i) < 0)
                return -ENOMEM;
        if (!json_is_object(h))
                return error_setf(ret_error, -EINVAL, "%s: expected an object", hw);
        r = json_field_string(h, hw, "url", OSC_MODEL_PATH_MAX, JSON_FIELD_REQUIRED, &x->url, ret_error);
        if (r >= 0)
                r = json_field_strv(h, hw, "capabilities", 8, OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                    &x->capabilities, ret_error);
        if (r >= 0)
                r = json_field_strv(h, hw, "caCerts", 64, OSC_MODEL_PATH_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                    &x->ca_certs, ret_error);
        if (r >= 0)
                r = json_field_bool(h, hw, "overridePath", &x->override_path, ret_error);
        return r;
}

int osc_registry_from_json(const json_t *j, const char *where, OscRegistry *ret, char **ret_error) {
        _cleanup_(osc_registry_done) OscRegistry g = {};
        const json_t *hosts, *h;
        int probe, r;
        size_t i;

        if (!json_is_object(j))
                return error_setf(ret_error, -EINVAL, "%s: expected an object", where);
        r = json_field_string(j, where, "upstream", OSC_MODEL_NAME_MAX, JSON_FIELD_REQUIRED, &g.upstream,
                              ret_error);
        if (r >= 0 && !osc_name_valid(g.upstream))
                r = error_setf(ret_error, -EINVAL, "%s: invalid upstream \"%s\"", where, g.upstream);
        if (r >= 0)
                r = json_field_string(j, where, "server", OSC_MODEL_PATH_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &g.server, ret_error);
        if (r >= 0)
                r = json_field_bool(j, where, "readinessProbe", &probe, ret_error);
        if (r >= 0)
                r = json_field_array(j, where, "hosts", &hosts, ret_error);
        if (r >= 0 && json_array_size(hosts) > OSC_MODEL_HOSTS_MAX)
                r = error_setf(ret_error, -EINVAL, "%s.hosts: more than %d entries", where,
                               OSC_MODEL_HOSTS_MAX);
        if (r < 0)
                return r;
        g.readiness_probe = probe == 1;
        g.hosts = calloc(json_array_size(hosts) + 1, sizeof(OscRegistryHost));
        g.canon = json_pack("{s:s}", "upstream", g.upstream);
        if (!g.hosts || !g.canon)
                return -ENOMEM;
        json_array_foreach(hosts, i, h) {
                r = decode_registry_host(h, where, i, &g.hosts[g.n_hosts++], ret_error);
                if (r < 0)
                        return r;
        }
        /* Equality and persistence use the decoded top-level fields; hosts are kept as given. */
        if ((g.server && json_object_set_new(g.canon, "server", json_string(g.server)) < 0) ||
            (probe >= 0 && json_object_set_new(g.canon, "readinessProbe", json_boolean(probe)) < 0) ||
            (hosts && json_array_size(hosts) > 0 && json_object_set(g.canon, "hosts", (json_t *) hosts) < 0))
                return -ENOMEM;
        *ret = TAKE_STRUCT(g);
        return 0;
}

int osc_registry_copy(const OscRegistry *g, OscRegistry *ret) {
        return osc_registry_from_json(g->canon, "registry", ret, NULL);
}

static int decode_cri(const json_t *cri, OscModel *m, char **ret_error) {
        const json_t *ctd, *regs, *e, *v;
        size_t i;
        int r;

        m->has_cri = true;
        r = json_field_object(cri, "spec.criConfig", "containerd", &ctd, ret_error);
        if (r < 0 || !ctd)
                return r;
        m->has_containerd = true;
        m->containerd_config = json_object();
        if (!m->containerd_config)
                return -ENOMEM;
        /* What decides "configFileChanged": sandboxImage, plugins, cgroupDriver (docs/node-protocol.md §2.3
         * step 5). */
        v = json_object_get(ctd, "sandboxImage");
        if (v && json_object_set(m->containerd_config, "sandboxImage", (json_t *) v) < 0)
                return -ENOMEM;
        v = json_object_get(ctd, "plugins");
        if (v && !json_is_null(v) && json_array_size(v) > 0 &&
            json_object_set(m->containerd_config, "plugins", (json_t *) v) < 0)
                return -ENOMEM;
        v = json_object_get(cri, "cgroupDriver");
        if (v && !json_is_null(v) && json_object_set(m->containerd_config, "cgroupDriver", (json_t *) v) < 0)
                return -ENOMEM;

        r = json_field_array(ctd, "spec.criConfig.containerd", "registries", &regs, ret_error);
        if (r < 0 || !regs)
                return r;
        if (json_array_size(regs) > OSC_MODEL_REGISTRIES_MAX)
                return error_setf(ret_error, -EINVAL,
                                  "spec.criConfig.containerd.registries: more than %d entries",
                                  OSC_MODEL_REGISTRIES_MAX);
        m->registries = calloc(json_array_size(regs) + 1, sizeof(OscRegistry));
        if (!m->registries)
                return -ENOMEM;
        json_array_foreach(regs, i, e) {
                _cleanup_free_ char *w = NULL;

                if (asprintf(&w, "spec.criConfig.containerd.registries[%zu]", i) < 0)
                        return -ENOMEM;
                r = osc_registry_from_json(e, w, &m->registries[m->n_registries], ret_error);
                if (r < 0)
                        return r;
                m->n_registries++;
        }
        return 0;
}

/* upstream's addContainerdEnvironmentDropIn, byte for byte (docs/node-protocol.md Appendix B). */
static int inject_containerd_drop_in(OscModel *m, const char *path) {
        _cleanup_(osc_unit_done) OscUnit u = { .command = _OSC_UNIT_COMMAND_INVALID, .enable = -1 };
        OscUnit *existing;
        OscDropIn *d;
        int r;

        u.name = strdup(OSC_CONTAINERD_UNIT);
        u.drop_ins = calloc(2, sizeof(OscDropIn));
        if (!u.name || !u.drop_ins)
                return -ENOMEM;
        d = &u.drop_ins[u.n_drop_ins++];
        d->name = strdup(OSC_CONTAINERD_DROPIN);
        if (!d->name ||
            asprintf(&d->content, "[Service]\nEnvironment=\"PATH=" OSC_CONTAINERD_BIN_DIR ":%s\"\n", path) <
                    0)
                return -ENOMEM;

        existing = (OscUnit *) osc_model_find_unit(m, OSC_CONTAINERD_UNIT);
        if (existing) {
                r = merge_unit(existing, &u);
                return r == -E2BIG ? -EINVAL : r;
        }
        if (m->n_units >= OSC_MODEL_UNITS_MAX)
                return -EINVAL;
        m->units[m->n_units++] = TAKE_STRUCT(u);
        return 0;
}

/* ---- in-place ---- */

static int decode_in_place(const json_t *ipu, OscModel *m, char **ret_error) {
        static const char w[] = "spec.inPlaceUpdates";
        const json_t *rot, *ca, *sa;
        int r;

        m->in_place = true;
        r = json_field_string(ipu, w, "operatingSystemVersion", OSC_MODEL_NAME_MAX,
                              JSON_FIELD_EMPTY_IS_UNSET, &m->os_version, ret_error);
        if (r >= 0)
                r = json_field_string(ipu, w, "kubelet", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &m->kubelet_version, ret_error);
        if (r >= 0)
                r = json_field_object(ipu, w, "credentialsRotation", &rot, ret_error);
        if (r < 0 || !rot)
                return r;
        m->has_rotation = true;
        r = json_field_object(rot, "spec.inPlaceUpdates.credentialsRotation", "certificateAuthorities", &ca,
                              ret_error);
        if (r >= 0)
                r = json_field_object(rot, "spec.inPlaceUpdates.credentialsRotation", "serviceAccountKey",
                                      &sa, ret_error);
        if (r < 0)
                return r;
        m->has_ca_rotation = ca;
        m->has_sa_rotation = sa;
        if (ca)
                r = json_field_string(ca, "spec.inPlaceUpdates.credentialsRotation.certificateAuthorities",
                                      "lastInitiationTime", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &m->ca_rotation, ret_error);
        if (r >= 0 && sa)
                r = json_field_string(sa, "spec.inPlaceUpdates.credentialsRotation.serviceAccountKey",
                                      "lastInitiationTime", OSC_MODEL_NAME_MAX, JSON_FIELD_EMPTY_IS_UNSET,
                                      &m->sa_rotation, ret_error);
        return r;
}

/* ---- the document ---- */

static int decode_lists(const json_t *spec, const json_t *status, const OscModelOptions *opts, OscModel *m,
                        char **ret_error) {
        const json_t *su, *xu, *sf, *xf;
        int r;

        r = json_field_array(spec, "spec", "units", &su, ret_error);
        if (r >= 0)
                r = json_field_array(status, "status", "extensionUnits", &xu, ret_error);
        if (r >= 0)
                r = json_field_array(spec, "spec", "files", &sf, ret_error);
        if (r >= 0)
                r = json_field_array(status, "status", "extensionFiles", &xf, ret_error);
        if (r < 0)
                return r;
        if (json_array_size(su) + json_array_size(xu) > OSC_MODEL_UNITS_MAX)
                return error_setf(ret_error, -EINVAL, "spec.units: more than %d units", OSC_MODEL_UNITS_MAX);
        if (json_array_size(sf) + json_array_size(xf) > OSC_MODEL_FILES_MAX)
                return error_setf(ret_error, -EINVAL, "spec.files: more than %d files", OSC_MODEL_FILES_MAX);

        m->units = calloc(json_array_size(su) + json_array_size(xu) + 2, sizeof(OscUnit));
        m->files = calloc(json_array_size(sf) + json_array_size(xf) + 1, sizeof(OscFile));
        if (!m->units || !m->files)
                return -ENOMEM;
        r = decode_units(su, "spec.units", m, ret_error);
        if (r >= 0)
                r = decode_units(xu, "status.extensionUnits", m, ret_error);
        if (r >= 0)
                r = decode_files(sf, "spec.files", /* in_status= */ false, opts, m, ret_error);
        if (r >= 0)
                r = decode_files(xf, "status.extensionFiles", /* in_status= */ true, opts, m, ret_error);
        if (r >= 0)
                r = index_files(m);
        return r;
}

int osc_model_decode(const json_t *doc, const OscModelOptions *opts, OscModel **ret, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *m = NULL;
        static const OscModelOptions no_opts = {};
        const json_t *spec, *status, *ipu, *cri, *kind;
        int r;

        assert(ret);
        opts = opts ?: &no_opts;
        if (!json_is_object(doc))
                return error_setf(ret_error, -EINVAL, "osc.yaml: expected an OperatingSystemConfig object");
        kind = json_object_get(doc, "kind");
        if (kind && !(json_is_string(kind) && streq(json_string_value(kind), "OperatingSystemConfig")))
                return error_setf(ret_error, -EINVAL, "kind: expected OperatingSystemConfig");

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->n_ref = 1;
        r = json_field_object(doc, "osc", "spec", &spec, ret_error);
        if (r >= 0)
                r = json_field_object(doc, "osc", "status", &status, ret_error);
        if (r >= 0)
                r = decode_lists(spec, status, opts, m, ret_error);
        if (r >= 0)
                r = json_field_object(spec, "spec", "inPlaceUpdates", &ipu, ret_error);
        if (r >= 0 && ipu)
                r = decode_in_place(ipu, m, ret_error);
        if (r >= 0)
                r = json_field_object(spec, "spec", "criConfig", &cri, ret_error);
        if (r >= 0 && cri)
                r = decode_cri(cri, m, ret_error);
        if (r >= 0 && cri && opts->containerd_path) {
                r = inject_containerd_drop_in(m, opts->containerd_path);
                if (r == -EINVAL)
                        r = error_setf(ret_error, r, "unit \"%s\": too many drop-ins", OSC_CONTAINERD_UNIT);
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

int osc_model_decode_yaml(const char *data, size_t size, const OscModelOptions *opts, OscModel **ret,
                          char **ret_error) {
        _cleanup_free_ char *yerr = NULL;
        json_t *doc = NULL;
        int r;

        assert(data || size == 0);
        if (size > OSC_MODEL_YAML_MAX)
                return error_setf(ret_error, -EFBIG, "osc.yaml is larger than %d bytes", OSC_MODEL_YAML_MAX);
        r = yaml_to_json(data, size, &doc, &yerr);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return error_setf(ret_error, -EBADMSG, "unable to decode OSC: %s",
                                  yerr ? yerr : strerror(-r));
        r = osc_model_decode(doc, opts, ret, ret_error);
        json_decref(doc);
        return r;
}

int osc_model_kubelet_config(const OscModel *m, json_t **ret, char **ret_error) {
        _cleanup_free_ char *content = NULL, *yerr = NULL;
        const OscFile *f = NULL;
        size_t size;
        json_t *doc;
        int r;

        /* getKubeletConfig reads spec.files only, inline only. */
        for (size_t i = 0; i < m->n_files; i++)
                if (!m->files[i].in_status && streq(m->files[i].path, OSC_KUBELET_CONFIG_PATH))
                        f = &m->files[i];
        if (!f)
                return error_setf(ret_error, -ENODATA,
                                  "kubelet config file with path: \"%s\" not found in OSC",
                                  OSC_KUBELET_CONFIG_PATH);
        if (f->source != OSC_FILE_INLINE)
                return error_setf(ret_error, -EBADMSG, "kubelet config file \"%s\" is not inline", f->path);
        r = osc_file_inline_content(f, &content, &size);
        if (r == -ENOMEM)
                return r;
        if (r >= 0)
                r = yaml_to_json(content, size, &doc, &yerr);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !json_is_object(doc)) {
                if (r >= 0)
                        json_decref(doc);
                return error_setf(ret_error, -EBADMSG,
                                  "kubelet config file \"%s\": not a KubeletConfiguration%s%s", f->path,
                                  yerr ? ": " : "", strempty(yerr));
        }
        *ret = doc;
        return 0;
}

/* ---- hosts.toml ---- */

/* TOML basic string, like Go's strconv.Quote / json for the ASCII we expect. */
static int toml_quote(FILE *f, const char *s) {
        json_t *j = json_string(s);
        char *q;

        if (!j)
                return -ENOMEM;
        q = json_dumps(j, JSON_ENCODE_ANY);
        json_decref(j);
        if (!q)
                return -ENOMEM;
        fputs(q, f);
        free(q);
        return 0;
}

static int toml_list(FILE *f, char *const *l) {
        fputc('[', f);
        for (size_t i = 0; l[i]; i++) {
                if (i > 0)
                        fputc(',', f);
                if (toml_quote(f, l[i]) < 0)
                        return -ENOMEM;
        }
        fputc(']', f);
        return 0;
}

int osc_registry_hosts_toml(const OscRegistry *g, char **ret) {
        static char *const default_caps[] = { (char *) "pull", (char *) "resolve", NULL };
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        FILE *f;
        int r = 0;

        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        fputs("# managed by gardener-node-agent\n", f);
        if (g->server) {
                fputs("server = ", f);
                r |= toml_quote(f, g->server);
                fputs("\n\n", f);
        }
        for (size_t i = 0; i < g->n_hosts; i++) {
                const OscRegistryHost *h = &g->hosts[i];

                fputs("[host.", f);
                r |= toml_quote(f, h->url);
                fputs("]\n  capabilities = ", f);
                r |= toml_list(f, h->capabilities ?: default_caps);
                if (h->ca_certs) {
                        fputs("\n  ca = ", f);
                        r |= toml_list(f, h->ca_certs);
                }
                if (h->override_path >= 0)
                        fprintf(f, "\n  override_path = %s", h->override_path ? "true" : "false");
                fputs("\n\n", f);
        }
        if (fclose(f) != 0 || r < 0)
                return -ENOMEM;
        *ret = TAKE_PTR(buf);
        return 0;
}
