/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apply/osc-files.h"
#include "apply/osc-state.h"
#include "core/osc.h"
#include "util/error-message.h"
#include "util/fileio.h"
#include "util/in-root.h"

#define OSC_STATE_FILE_MAX (16 * 1024 * 1024)
/* The done-log's first line binds it to its work list. */
#define DONE_LOG_HEADER "inplace-agent done-log v1 "

static int state_file(const char *dir, const char *name, char **ret) {
        return asprintf(ret, "%s/%s", dir, name) < 0 ? -ENOMEM : 0;
}

/* Appends "; "-separated to *w (NULL: not wanted). */
_printf_(2, 3) static int warn(char **w, const char *format, ...) {
        _cleanup_free_ char *s = NULL, *joined = NULL;
        va_list ap;
        int k;

        if (!w)
                return 0;
        va_start(ap, format);
        k = vasprintf(&s, format, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        if (!*w) {
                *w = TAKE_PTR(s);
                return 0;
        }
        if (asprintf(&joined, "%s; %s", *w, s) < 0)
                return -ENOMEM;
        free(*w);
        *w = TAKE_PTR(joined);
        return 0;
}

/* Renames `path` to <path>.corrupt (replacing an older one), durably; a missing file is fine. */
static int move_aside(const char *path) {
        _cleanup_free_ char *aside = NULL;

        if (asprintf(&aside, "%s" OSC_STATE_CORRUPT_SUFFIX, path) < 0)
                return -ENOMEM;
        if (rename(path, aside) < 0)
                return errno == ENOENT ? 0 : -errno;
        return fsync_parent_dir(path);
}

static int unlink_if_exists(const char *path) {
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* ---- the work list and its done-log ---------------------------------------------------------- */

int osc_state_save_changes(const char *state_directory, const OscChanges *c) {
        _cleanup_free_ char *path = NULL, *done = NULL, *s = NULL;
        json_t *j;
        int r;

        r = state_file(state_directory, OSC_STATE_CHANGES, &path);
        if (r >= 0)
                r = state_file(state_directory, OSC_STATE_DONE, &done);
        if (r < 0)
                return r;
        j = osc_changes_to_json(c);
        s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!s)
                return -ENOMEM;
        /* The old log first: it must never be read against the new list. The atomic write's
         * directory fsync makes the unlink durable too (same directory). */
        r = unlink_if_exists(done);
        if (r < 0)
                return r;
        return write_file_atomic(path, s, strlen(s), 0600);
}

int osc_state_save_done(const char *state_directory, const OscChanges *c, const size_t *indices, size_t n) {
        _cleanup_free_ char *path = NULL, *lines = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t size = 0;
        struct stat st;
        FILE *f;
        int r;

        r = state_file(state_directory, OSC_STATE_DONE, &path);
        if (r < 0)
                return r;
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        f = open_memstream(&lines, &size);
        if (!f)
                return -ENOMEM;
        if (st.st_size == 0)
                fprintf(f, DONE_LOG_HEADER "%s\n", strempty(c->checksum));
        for (size_t i = 0; i < n; i++) {
                assert(indices[i] < c->n_items);
                fprintf(f, "%zu\n", indices[i]);
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        /* One write(): a kill cannot split it; a power loss can leave a torn last line, which the
         * reader ignores (the item counts as not done and runs again). */
        r = write_full(fd, lines, size);
        if (r >= 0 && fdatasync(fd) < 0)
                r = -errno;
        if (r >= 0 && st.st_size == 0)
                r = fsync_parent_dir(path);
        return r;
}

/* Marks the items the done-log names; -EBADMSG with *ret_reason when it is not a log of `c`. */
static int apply_done_log(const char *data, size_t size, OscChanges *c, char **ret_reason) {
        const char *p = data, *end = data + size, *nl;
        _cleanup_free_ char *header = NULL;

        if (asprintf(&header, DONE_LOG_HEADER "%s", strempty(c->checksum)) < 0)
                return -ENOMEM;
        nl = memchr(p, '\n', size);
        if (!nl)
                return 0; /* empty, or the first append torn: nothing done */
        if ((size_t) (nl - p) != strlen(header) || memcmp(p, header, strlen(header)) != 0)
                return error_setf(ret_reason, -EBADMSG, "its first line does not name work list %s",
                                  strempty(c->checksum));
        for (p = nl + 1; (nl = memchr(p, '\n', (size_t) (end - p))); p = nl + 1) {
                size_t index = 0, n = (size_t) (nl - p);

                if (n == 0 || n > 9)
                        return error_setf(ret_reason, -EBADMSG, "line \"%.*s\" is not an item index",
                                          (int) MIN(n, 32u), p);
                for (size_t i = 0; i < n; i++) {
                        if (p[i] < '0' || p[i] > '9')
                                return error_setf(ret_reason, -EBADMSG, "line \"%.*s\" is not an item index",
                                                  (int) n, p);
                        index = index * 10 + (size_t) (p[i] - '0');
                }
                if (index >= c->n_items)
                        return error_setf(ret_reason, -EBADMSG, "item %zu of %zu does not exist", index,
                                          c->n_items);
                osc_changes_mark_done(c, index);
        }
        return 0; /* anything after the last newline is a torn append: not done */
}

static int decode_changes(const char *data, size_t size, OscChanges **ret, char **ret_reason) {
        json_error_t jerr;
        json_t *j;
        int r;

        j = json_loadb(data, size, 0, &jerr);
        if (!j)
                return error_setf(ret_reason, -EBADMSG, "%s", jerr.text);
        r = osc_changes_from_json(j, ret, ret_reason);
        json_decref(j);
        return r;
}

/* Moves the work list and its log aside, saying which one is bad (`in_log`) and why in *warning. */
static int saved_corrupt(const char *changes, const char *done, bool in_log, const char *reason,
                         char **warning) {
        int r;

        r = move_aside(changes);
        if (r >= 0)
                r = move_aside(done);
        if (r < 0)
                return r;
        return warn(warning,
                    "%s: %s; moved it and %s aside (" OSC_STATE_CORRUPT_SUFFIX "), applying again from the "
                    "last good state",
                    in_log ? done : changes, strempty(reason), in_log ? OSC_STATE_CHANGES : OSC_STATE_DONE);
}

/* The saved work with its done items if it is for `checksum`; NULL (and 0) if there is none or it is
 * for another one. A corrupt list or log is moved aside (*warning): the diff starts over. */
static int load_saved(const char *dir, const char *checksum, OscChanges **ret, char **warning,
                      char **ret_error) {
        _cleanup_free_ char *changes = NULL, *done = NULL, *data = NULL, *reason = NULL;
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        size_t size;
        int r;

        *ret = NULL;
        r = state_file(dir, OSC_STATE_CHANGES, &changes);
        if (r >= 0)
                r = state_file(dir, OSC_STATE_DONE, &done);
        if (r < 0)
                return r;
        r = read_full_file(changes, OSC_STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return 0;
        if (r == -EFBIG)
                return saved_corrupt(changes, done, /* in_log= */ false, "larger than 16 MiB", warning);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", changes, strerror(-r));
        r = decode_changes(data, size, &c, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || !c)
                return saved_corrupt(changes, done, /* in_log= */ false, reason, warning);
        if (!streq_ptr(c->checksum, checksum))
                return 0;

        data = mfree(data);
        r = read_full_file(done, OSC_STATE_FILE_MAX, &data, &size);
        if (r == -EFBIG)
                return saved_corrupt(changes, done, /* in_log= */ true, "larger than 16 MiB", warning);
        if (r < 0 && r != -ENOENT)
                return error_setf(ret_error, r, "%s: %s", done, strerror(-r));
        if (r >= 0) {
                r = apply_done_log(data, size, c, &reason);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return saved_corrupt(changes, done, /* in_log= */ true, reason, warning);
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- the baseline ------------------------------------------------------------------------------ */

/* Decodes the file at `path` as a baseline OSC: -ENOENT if there is none; one that cannot be decoded
 * is moved aside (*warning) and counts as none. */
static int load_model(const char *path, const OscModelOptions *opts, OscModel **ret, char **warning,
                      char **ret_error) {
        _cleanup_free_ char *data = NULL, *err = NULL;
        size_t size;
        int r;

        r = read_full_file(path, OSC_STATE_FILE_MAX, &data, &size);
        if (r == -ENOENT)
                return r;
        if (r < 0 && r != -EFBIG)
                return error_setf(ret_error, r, "unable to read the old OSC from file path %s: %s", path,
                                  strerror(-r));
        if (r >= 0)
                r = osc_model_decode_yaml(data, size, opts, ret, &err);
        if (r == -ENOMEM || r >= 0)
                return r;
        r = move_aside(path);
        if (r < 0)
                return error_setf(ret_error, r, "cannot move the undecodable old OSC %s aside: %s", path,
                                  strerror(-r));
        r = warn(
                warning,
                "unable to decode the old OSC read from file path %s: %s; moved it aside (" OSC_STATE_CORRUPT_SUFFIX
                "), applying the whole new OSC",
                path, err ?: "larger than 16 MiB");
        return r < 0 ? r : -ENOENT;
}

static int load_baseline(const OscPrepareInput *in, OscModel **ret, OscBaseline *ret_baseline,
                         char **warning, char **ret_error) {
        _cleanup_free_ char *ours = NULL, *gna = NULL;
        int r;

        r = state_file(in->state_directory, OSC_STATE_LAST_APPLIED, &ours);
        if (r < 0)
                return r;
        r = load_model(ours, &in->model_options, ret, warning, ret_error);
        if (r != -ENOENT) {
                *ret_baseline = OSC_BASELINE_LAST_APPLIED;
                return r;
        }
        r = path_below_root(in->root_directory, OSC_STATE_GNA_LAST_APPLIED, &gna);
        if (r < 0)
                return r;
        r = load_model(gna, &in->model_options, ret, warning, ret_error);
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

/* The OSC is refused whole (core/osc-protected.h): decided before anything of it is written. */
static int check_protected(const OscPrepareInput *in, const OscChanges *c, char **ret_error) {
        _cleanup_close_ int root_fd = -EBADF;

        if (!in->protected)
                return 0;
        root_fd = open(in->root_directory ?: "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return error_setf(ret_error, -errno, "osc.rootDirectory %s: %s", in->root_directory,
                                  strerror(errno));
        return osc_changes_check_protected(c, in->protected, canonical_below_root, &root_fd, ret_error);
}

/* The whole plan of a new work list, for the operator (the Node gets a summary). */
static int save_plan(const char *dir, const OscChanges *c) {
        _cleanup_free_ char *path = NULL, *s = NULL;
        json_t *j;
        int r;

        r = state_file(dir, OSC_STATE_PLAN, &path);
        if (r < 0)
                return r;
        j = osc_changes_plan_json(c, SIZE_MAX);
        s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!s)
                return -ENOMEM;
        return write_file_atomic(path, s, strlen(s), 0600);
}

int osc_state_prepare(const OscPrepareInput *in, OscChanges **ret, OscBaseline *ret_baseline,
                      char **ret_warning, char **ret_error) {
        _cleanup_(osc_model_freep) OscModel *old = NULL, *new = NULL;
        _cleanup_(osc_changes_freep) OscChanges *c = NULL;
        _cleanup_free_ char *warning = NULL;
        OscBaseline baseline;
        int r;

        assert(in && ret);

        r = load_saved(in->state_directory, in->checksum, &c, &warning, ret_error);
        if (r < 0)
                return r;
        if (c) {
                baseline = OSC_BASELINE_RESUMED;
                r = check_protected(in, c, ret_error);
                if (r < 0)
                        return r;
                goto done;
        }
        if (!in->model) {
                r = osc_model_decode_yaml(in->yaml, in->size, &in->model_options, &new, ret_error);
                if (r < 0)
                        return r;
        }
        r = load_baseline(in, &old, &baseline, &warning, ret_error);
        if (r < 0)
                return r;
        r = osc_diff(&(OscDiffInput) { .old = old,
                                       .new = in->model ?: new,
                                       .checksum = in->checksum,
                                       .current_os_version = in->current_os_version,
                                       .replaced_units = in->replaced_units,
                                       .self_unit = in->self_unit },
                     &c, ret_error);
        if (r >= 0)
                r = check_protected(in, c, ret_error);
        if (r < 0)
                return r;
        /* Saved before anything is applied (docs/node-protocol.md §2.3 step 6): the work list, not the diff,
         * survives. */
        r = save_plan(in->state_directory, c);
        if (r >= 0)
                r = osc_state_save_changes(in->state_directory, c);
        if (r < 0)
                return error_setf(ret_error, r, "cannot save the work list in %s: %s", in->state_directory,
                                  strerror(-r));
done:
        if (ret_baseline)
                *ret_baseline = baseline;
        if (ret_warning)
                *ret_warning = TAKE_PTR(warning);
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

int osc_state_read_applied(const char *state_directory, const char *root_directory,
                           const OscModelOptions *opts, OscModel **ret, char **ret_path, char **ret_error) {
        _cleanup_free_ char *ours = NULL, *gna = NULL, *data = NULL;
        char **path = &ours;
        size_t size;
        int r;

        assert(state_directory && ret && ret_path);
        r = state_file(state_directory, OSC_STATE_LAST_APPLIED, &ours);
        if (r >= 0)
                r = path_below_root(root_directory ?: "/", OSC_STATE_GNA_LAST_APPLIED, &gna);
        if (r < 0)
                return r;
        r = read_full_file(ours, OSC_YAML_MAX, &data, &size);
        if (r == -ENOENT) {
                path = &gna;
                r = read_full_file(gna, OSC_YAML_MAX, &data, &size);
        }
        if (r == -ENOENT)
                return r;
        if (r < 0)
                return error_setf(ret_error, r, "cannot read %s: %s", *path, strerror(-r));
        r = osc_model_decode_yaml(data, size, opts, ret, ret_error);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(*path);
        return 0;
}

int osc_state_commit(const char *state_directory, const char *yaml, size_t size) {
        _cleanup_free_ char *last = NULL, *changes = NULL, *done = NULL;
        int r;

        r = state_file(state_directory, OSC_STATE_LAST_APPLIED, &last);
        if (r >= 0)
                r = state_file(state_directory, OSC_STATE_CHANGES, &changes);
        if (r >= 0)
                r = state_file(state_directory, OSC_STATE_DONE, &done);
        if (r >= 0)
                r = write_file_atomic(last, yaml, size, 0600);
        /* The list before its log: a log without a list is never read (the next list replaces it). */
        if (r >= 0)
                r = unlink_if_exists(changes);
        if (r >= 0)
                r = unlink_if_exists(done);
        if (r < 0)
                return r;
        return fsync_parent_dir(changes);
}
