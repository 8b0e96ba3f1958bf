/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/in-root.h"

#define OSC_STATE_FILE_MAX (16 * 1024 * 1024)

static int state_file(const char *dir, const char *name, char **ret) {
        return asprintf(ret, "%s/%s", dir, name) < 0 ? -ENOMEM : 0;
}

int osc_state_save_changes(const char *state_directory, const OscChanges *c) {
        _cleanup_free_ char *path = NULL, *s = NULL;
        json_t *j;
        int r;

        r = state_file(state_directory, OSC_STATE_CHANGES, &path);
        if (r < 0)
                return r;
        j = osc_changes_to_json(c);
        s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!s)
                return -ENOMEM;
        return write_file_atomic(path, s, strlen(s), 0600);
}

/* The saved work if it is for `checksum`; NULL (and 0) if there is none or it is for another one. A
 * corrupt file is an error: silently recomputing could apply a half-done item's predecessors twice. */
static int load_saved(const char *dir, const char *checksum, OscChanges **ret, char **ret_error) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        OscChanges *c = NULL;
        json_error_t jerr;
        size_t size;
        json_t *j;
        int r;

        *ret = NULL;
        r = state_file(dir, OSC_STATE_CHANGES, &path);
        if (r >= 0)
                r = read_full_file(path, OSC_STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strerror(-r));
        j = json_loadb(data, size, 0, &jerr);
        if (!j)
                return error_setf(ret_error, -EBADMSG, "%s: %s", path, jerr.text);
        r = osc_changes_from_json(j, &c, ret_error);
        json_decref(j);
        if (r < 0)
                return r;
        if (!streq_ptr(c->checksum, checksum)) {
                osc_changes_free(c);
                return 0;
        }
        *ret = c;
        return 0;
}

/* Decodes the file at `path` as a baseline OSC; -ENOENT if there is none. */
static int load_model(const char *path, const OscModelOptions *opts, OscModel **ret, char **ret_error) {
        _cleanup_free_ char *data = NULL, *err = NULL;
        size_t size;
        int r;

        r = read_full_file(path, OSC_STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return r;
        if (r >= 0)
                r = osc_model_decode_yaml(data, size, opts, ret, &err);
        if (r < 0)
                return error_setf(ret_error, r, "unable to decode the old OSC read from file path %s: %s", path,
                                  err ?: strerror(-r));
        return 0;
}

static int load_baseline(const OscPrepareInput *in, OscModel **ret, OscBaseline *ret_baseline, char **ret_error) {
        _cleanup_free_ char *ours = NULL, *gna = NULL;
        int r;

        r = state_file(in->state_directory, OSC_STATE_LAST_APPLIED, &ours);
        if (r < 0)
                return r;
        r = load_model(ours, &in->model_options, ret, ret_error);
        if (r != -ENOENT) {
                *ret_baseline = OSC_BASELINE_LAST_APPLIED;
                return r;
        }
        r = path_below_root(in->root_directory, OSC_STATE_GNA_LAST_APPLIED, &gna);
        if (r < 0)
                return r;
        r = load_model(gna, &in->model_options, ret, ret_error);
        if (r != -ENOENT) {
                *ret_baseline = OSC_BASELINE_HANDOVER;
                return r;
        }
        *ret = NULL;
        *ret_baseline = OSC_BASELINE_NONE;
        return 0;
}

static int canonical_below_root(const char *path, char **ret, void *userdata) {
        return path_in_root_canonical(*(int *) userdata, path, ret);
}

/* Issue 23: the refusal is decided before anything of the OSC is written. */
static int check_protected(const OscPrepareInput *in, const OscChanges *c, char **ret_error) {
        _cleanup_close_ int root_fd = -EBADF;

        if (!in->protected || in->protected->n_items == 0)
                return 0;
        root_fd = open(in->root_directory ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return error_setf(ret_error, -errno, "osc.rootDirectory %s: %s", in->root_directory, strerror(errno));
        return osc_changes_check_protected(c, in->protected, canonical_below_root, &root_fd, ret_error);
}

int osc_state_prepare(const OscPrepareInput *in, OscChanges **ret, OscBaseline *ret_baseline, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *old = NULL, *new = NULL;
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        OscBaseline baseline;
        int r;

        assert(in && ret);

        r = load_saved(in->state_directory, in->checksum, &c, ret_error);
        if (r < 0)
                return r;
        if (c) {
                baseline = OSC_BASELINE_RESUMED;
                r = check_protected(in, c, ret_error);
                if (r < 0)
                        return r;
                goto done;
        }
        r = osc_model_decode_yaml(in->yaml, in->size, &in->model_options, &new, ret_error);
        if (r < 0)
                return r;
        r = load_baseline(in, &old, &baseline, ret_error);
        if (r < 0)
                return r;
        r = osc_diff(&(OscDiffInput) { .old = old, .new = new, .checksum = in->checksum,
                                       .current_os_version = in->current_os_version,
                                       .replaced_units = in->replaced_units, .self_unit = in->self_unit },
                     &c, ret_error);
        if (r >= 0)
                r = check_protected(in, c, ret_error);
        if (r < 0)
                return r;
        /* Saved before anything is applied (GNP §2.3 step 6): the work list, not the diff, survives. */
        r = osc_state_save_changes(in->state_directory, c);
        if (r < 0)
                return error_setf(ret_error, r, "cannot save %s: %s", OSC_STATE_CHANGES, strerror(-r));
done:
        if (ret_baseline)
                *ret_baseline = baseline;
        *ret = TAKE_PTR(c);
        return 0;
}

static bool exists(const char *path) {
        return !path || access(path, F_OK) >= 0 || errno != ENOENT;
}

bool osc_state_any_applied(const char *state_directory, const char *root_directory) {
        _cleanup_free_ char *ours = NULL, *gna = NULL;

        if (state_file(state_directory, OSC_STATE_LAST_APPLIED, &ours) < 0)
                ours = NULL;
        if (path_below_root(root_directory, OSC_STATE_GNA_LAST_APPLIED, &gna) < 0)
                gna = NULL;
        return exists(ours) || exists(gna);
}

int osc_state_commit(const char *state_directory, const char *yaml, size_t size) {
        _cleanup_free_ char *last = NULL, *changes = NULL;
        int r;

        r = state_file(state_directory, OSC_STATE_LAST_APPLIED, &last);
        if (r >= 0)
                r = state_file(state_directory, OSC_STATE_CHANGES, &changes);
        if (r >= 0)
                r = write_file_atomic(last, yaml, size, 0600);
        if (r < 0)
                return r;
        if (unlink(changes) < 0 && errno != ENOENT)
                return -errno;
        return fsync_parent_dir(changes);
}
