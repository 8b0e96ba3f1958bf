/* SPDX-License-Identifier: Apache-2.0 */
/* Why a child process for the copy: a UKI is ~100 MB and the ESP is often slow flash. Copying on
 * the loop in chunks (a defer source, 4 MiB per turn) keeps each turn short while the data goes
 * into the page cache, but write() itself can stall under dirty-page throttling and the final
 * fsync() has to push all of it to the device in one blocking call, seconds on a slow ESP. No
 * library we use offers an asynchronous fsync. A forked child that does copy + fsync + rename +
 * directory fsync keeps every blocking call off the loop, is watched with sd_event_add_child like
 * the OS command, and is one process to SIGKILL on cancel. The child only makes system calls on
 * file descriptors it inherited and leaves with _exit(); it never touches the loop or the bus. */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "os/os-image.h"
#include "util/fileio.h"

#define COPY_CHUNK (16U * 1024U * 1024U)
#define FALLBACK_BUFFER (1U * 1024U * 1024U)

struct OsImage {
        sd_event *event;         /* ref held */
        char *source_path;       /* owned */
        char *install_directory; /* owned */
        char *name_prefix;       /* owned */
        char *version;           /* owned */
        char *running_version;   /* owned; NULL if unknown */
        char *efivars_directory; /* owned; "" = do not consult */
        unsigned boot_tries;
        uint64_t reserve_bytes;
        int (*statvfs_fn)(const char *path, struct statvfs *ret);
        OsImageDone done;
        void *userdata; /* borrowed */

        bool started;
        int source_fd; /* owned */
        int dir_fd;    /* owned */
        int temp_fd;   /* owned */
        uint64_t size;
        char *final_name;     /* owned */
        char *temp_name;      /* owned; set while the temporary file may exist */
        char *installed_path; /* owned; set on success */
        char **removed;       /* owned */

        pid_t pid;                     /* copy child, 0 if none */
        sd_event_source *child_source; /* owned */
};

static int dup_or_null(const char *s, char **ret) {
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static int os_image_alloc(const OsImageInstallOptions *o, OsImage **ret) {
        _cleanup_(os_image_freep) OsImage *i = NULL;

        if (isempty(o->source_path) || isempty(o->install_directory) || !o->name_prefix || !o->version)
                return -EINVAL;

        i = calloc(1, sizeof(*i));
        if (!i)
                return -ENOMEM;
        i->source_fd = i->dir_fd = i->temp_fd = -EBADF;
        i->boot_tries = o->boot_tries;
        i->reserve_bytes = o->reserve_bytes ?: OS_IMAGE_RESERVE_DEFAULT;
        i->statvfs_fn = o->statvfs ?: statvfs;

        if (dup_or_null(o->source_path, &i->source_path) < 0 ||
            dup_or_null(o->install_directory, &i->install_directory) < 0 ||
            dup_or_null(o->name_prefix, &i->name_prefix) < 0 || dup_or_null(o->version, &i->version) < 0 ||
            dup_or_null(o->running_version, &i->running_version) < 0 ||
            dup_or_null(o->efivars_directory ?: OS_IMAGE_EFIVARS_DEFAULT, &i->efivars_directory) < 0)
                return -ENOMEM;

        *ret = TAKE_PTR(i);
        return 0;
}

int os_image_install_new(sd_event *event, const OsImageInstallOptions *o, OsImageDone done, void *userdata,
                         OsImage **ret) {
        OsImage *i;
        int r;

        assert(event);
        assert(o);
        assert(ret);

        r = os_image_alloc(o, &i);
        if (r < 0)
                return r;
        i->event = sd_event_ref(event);
        i->done = done;
        i->userdata = userdata;

        *ret = i;
        return 0;
}

static void os_image_remove_temp(OsImage *i) {
        if (i->temp_name && i->dir_fd >= 0)
                (void) unlinkat(i->dir_fd, i->temp_name, 0);
        free(i->temp_name);
        i->temp_name = NULL;
}

OsImage *os_image_free(OsImage *i) {
        if (!i)
                return NULL;

        if (i->pid > 0)
                (void) kill(i->pid, SIGKILL);
        /* Process ownership is set: this also reaps a child killed just now. */
        i->child_source = sd_event_source_disable_unref(i->child_source);
        /* If the child renamed it already, the temporary name is gone and the entry complete. */
        os_image_remove_temp(i);

        closep(&i->temp_fd);
        closep(&i->dir_fd);
        closep(&i->source_fd);
        strv_freep(&i->removed);
        free(i->installed_path);
        free(i->final_name);
        free(i->efivars_directory);
        free(i->running_version);
        free(i->version);
        free(i->name_prefix);
        free(i->install_directory);
        free(i->source_path);
        sd_event_unref(i->event);
        free(i);
        return NULL;
}

int os_image_read_booted_entry(const char *efivars_directory, char **ret) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        size_t size;
        int r;

        assert(ret);

        if (asprintf(&path, "%s/LoaderEntrySelected-" OS_IMAGE_LOADER_GUID,
                     efivars_directory ?: OS_IMAGE_EFIVARS_DEFAULT) < 0)
                return -ENOMEM;
        r = read_full_file(path, 4096, &data, &size);
        if (r < 0)
                return r;
        return boot_entry_decode_efivar_string(data, size, ret);
}

/* Regular files in the directory. */
static int list_directory(int dir_fd, char ***ret, size_t *ret_n) {
        _cleanup_strv_free_ char **names = NULL;
        size_t n = 0, allocated = 0;
        struct dirent *de;
        DIR *d;
        int fd;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                closep(&fd);
                return -errno;
        }

        for (;;) {
                struct stat st;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        int r = -errno;

                        closedir(d);
                        if (r < 0)
                                return r;
                        break;
                }

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n >= BOOT_ENTRY_LISTING_MAX) {
                        closedir(d);
                        return -E2BIG;
                }
                if (n + 2 > allocated) {
                        size_t na = MAX(allocated * 2, (size_t) 16);
                        char **nl = realloc(names, na * sizeof(char *));

                        if (!nl) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        names = nl;
                        allocated = na;
                }
                names[n] = strdup(de->d_name);
                if (!names[n]) {
                        closedir(d);
                        return -ENOMEM;
                }
                names[++n] = NULL;
        }

        if (!names) {
                names = calloc(1, sizeof(char *));
                if (!names)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(names);
        *ret_n = n;
        return 0;
}

int os_image_entry_state(const char *directory, const char *name_prefix, const char *version,
                         BootEntryState *ret) {
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t n;
        int r;

        assert(directory);
        assert(name_prefix);
        assert(version);
        assert(ret);

        fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = list_directory(fd, &names, &n);
        if (r < 0)
                return r;
        *ret = boot_entry_state_of(name_prefix, names, n, version);
        return 0;
}

static int os_image_open_source(OsImage *i) {
        struct stat st;

        i->source_fd = open(i->source_path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (i->source_fd < 0)
                return -errno;
        if (fstat(i->source_fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size <= 0)
                return -EINVAL;
        if ((uint64_t) st.st_size > OS_IMAGE_SIZE_MAX)
                return -EFBIG;
        i->size = (uint64_t) st.st_size;
        return 0;
}

static int os_image_open_directory(OsImage *i, bool create) {
        int r;

        if (create) {
                r = mkdir_parents(i->install_directory, 0755);
                if (r < 0)
                        return r;
        }
        i->dir_fd = open(i->install_directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        return i->dir_fd < 0 ? -errno : 0;
}

/* Steps 2 and 3: what goes, and is there room once it is gone? Touches nothing. */
static int os_image_plan(OsImage *i, char ***ret_remove) {
        _cleanup_strv_free_ char **names = NULL, **remove = NULL;
        _cleanup_free_ char *booted = NULL;
        uint64_t freed = 0, avail;
        struct statvfs sv;
        size_t n = 0;
        int r;

        if (!isempty(i->efivars_directory))
                (void) os_image_read_booted_entry(i->efivars_directory, &booted);

        r = list_directory(i->dir_fd, &names, &n);
        if (r < 0)
                return r;
        r = boot_entry_select_removals(i->name_prefix, names, n, i->version, i->running_version, booted,
                                       &remove);
        if (r < 0)
                return r;

        for (char **f = remove; f && *f; f++) {
                struct stat st;

                if (fstatat(i->dir_fd, *f, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                        freed += (uint64_t) st.st_blocks * 512;
        }

        if (i->statvfs_fn(i->install_directory, &sv) < 0)
                return -errno;
        avail = (uint64_t) sv.f_bavail * (uint64_t) sv.f_frsize;
        if (avail + freed < i->size + i->reserve_bytes)
                return -ENOSPC;

        *ret_remove = TAKE_PTR(remove);
        return 0;
}

static int os_image_remove_old(OsImage *i, char **remove) {
        bool any = false;

        for (char **f = remove; f && *f; f++) {
                if (unlinkat(i->dir_fd, *f, 0) < 0 && errno != ENOENT)
                        return -errno;
                any = true;
        }
        if (any && fsync(i->dir_fd) < 0)
                return -errno;
        return 0;
}

static int os_image_create_temp(OsImage *i) {
        _cleanup_free_ char *template = NULL, *path = NULL;
        int r;

        r = boot_entry_temp_template(i->final_name, &template);
        if (r < 0)
                return r;
        if (asprintf(&path, "%s/%s", i->install_directory, template) < 0)
                return -ENOMEM;

        i->temp_fd = mkostemp(path, O_CLOEXEC);
        if (i->temp_fd < 0)
                return -errno;
        i->temp_name = strdup(strrchr(path, '/') + 1);
        if (!i->temp_name) {
                (void) unlink(path);
                return -ENOMEM;
        }
        /* The firmware reads the ESP regardless; 0644 only matters for ordinary file systems.
         * FAT refuses most mode changes, which is fine. */
        (void) fchmod(i->temp_fd, 0644);
        return 0;
}

/* --- the child: nothing but system calls on inherited descriptors --- */

static int copy_data(int in, int out, uint64_t size) {
        _cleanup_free_ char *buf = NULL;
        uint64_t done = 0;

        while (done < size) {
                size_t chunk = (size_t) MIN(size - done, (uint64_t) COPY_CHUNK);
                ssize_t n;

                if (!buf) {
                        n = copy_file_range(in, NULL, out, NULL, chunk, 0);
                        if (n < 0 &&
                            (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)) {
                                /* Different file systems (the ESP is FAT): plain read/write. */
                                buf = malloc(FALLBACK_BUFFER);
                                if (!buf)
                                        return -ENOMEM;
                                continue;
                        }
                } else {
                        n = read(in, buf, MIN(chunk, (size_t) FALLBACK_BUFFER));
                        for (ssize_t w = 0; n > 0 && w < n;) {
                                ssize_t k = write(out, buf + w, (size_t) (n - w));
                                if (k < 0 && errno == EINTR)
                                        continue;
                                if (k <= 0)
                                        return k < 0 ? -errno : -EIO;
                                w += k;
                        }
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -EIO; /* the source shrank under us */
                done += (uint64_t) n;
        }
        return 0;
}

static int copy_and_commit(const OsImage *i) {
        int r;

        r = copy_data(i->source_fd, i->temp_fd, i->size);
        if (r < 0)
                return r;
        if (fsync(i->temp_fd) < 0)
                return -errno;
        if (renameat(i->dir_fd, i->temp_name, i->dir_fd, i->final_name) < 0)
                return -errno;
        if (fsync(i->dir_fd) < 0)
                return -errno;
        return 0;
}

_Noreturn static void os_image_child(const OsImage *i, pid_t parent) {
        int r;

        /* Do not outlive the agent; the parent may have died before prctl() took effect. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(ECHILD);

        r = copy_and_commit(i);
        /* errno values fit an exit status; 0 is success. */
        _exit(r == 0 ? 0 : (-r > 0 && -r < 256) ? -r : EIO);
}

/* --- the parent --- */

static int os_image_on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        OsImage *i = ASSERT_PTR(userdata);
        int error;

        if (si->si_code == CLD_EXITED)
                error = -si->si_status;
        else
                error = -EIO; /* killed: not by us, we free before killing */

        i->pid = 0;
        i->child_source = sd_event_source_disable_unref(i->child_source);

        if (error == 0) {
                free(i->temp_name);
                i->temp_name = NULL;
                if (asprintf(&i->installed_path, "%s/%s", i->install_directory, i->final_name) < 0) {
                        i->installed_path = NULL;
                        error = -ENOMEM;
                }
        } else
                os_image_remove_temp(i);
        closep(&i->source_fd);
        i->source_fd = -EBADF;
        closep(&i->temp_fd);
        i->temp_fd = -EBADF;

        if (i->done)
                i->done(i, error, i->userdata); /* may free i */
        return 0;
}

static int os_image_fork_copy(OsImage *i) {
        pid_t parent = getpid(), pid;
        int r;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                os_image_child(i, parent);

        r = sd_event_add_child(i->event, &i->child_source, pid, WEXITED, os_image_on_child, i);
        if (r < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return r;
        }
        (void) sd_event_source_set_description(i->child_source, "os-image-copy");
        (void) sd_event_source_set_child_process_own(i->child_source, true);
        i->pid = pid;
        return 0;
}

static bool sigchld_blocked(void) {
        sigset_t ss;

        return sigprocmask(SIG_SETMASK, NULL, &ss) >= 0 && sigismember(&ss, SIGCHLD) == 1;
}

/* Steps 1-3: names, source, directory, what to remove and whether it all fits. Writes nothing
 * (except creating installDirectory when `create`). */
static int os_image_prepare(OsImage *i, bool create, char ***ret_remove) {
        int r;

        r = boot_entry_name_format(i->name_prefix, i->version, i->boot_tries, &i->final_name);
        if (r < 0)
                return r;
        if (boot_entry_version_equivalent(i->version, i->running_version))
                return -EEXIST;

        r = os_image_open_source(i);
        if (r < 0)
                return r;
        r = os_image_open_directory(i, create);
        if (r < 0)
                return r;
        return os_image_plan(i, ret_remove);
}

int os_image_check(const OsImageInstallOptions *o) {
        _cleanup_(os_image_freep) OsImage *i = NULL;
        _cleanup_strv_free_ char **remove = NULL;
        int r;

        assert(o);

        r = os_image_alloc(o, &i);
        if (r < 0)
                return r;
        return os_image_prepare(i, /* create= */ false, &remove);
}

int os_image_install_start(OsImage *i) {
        _cleanup_strv_free_ char **remove = NULL;
        int r;

        assert(i);

        if (i->started)
                return -EALREADY;
        if (!sigchld_blocked())
                return -EBUSY;
        /* One attempt per object, whatever happens below: a failed start may have opened files
         * or removed old entries, and a second run on the same object would build on that. */
        i->started = true;

        r = os_image_prepare(i, /* create= */ true, &remove);
        if (r < 0)
                return r;

        r = os_image_remove_old(i, remove);
        i->removed = TAKE_PTR(remove);
        if (r < 0)
                return r;

        r = os_image_create_temp(i);
        if (r < 0)
                return r;
        r = os_image_fork_copy(i);
        if (r < 0) {
                os_image_remove_temp(i);
                return r;
        }
        return 0;
}

int os_image_get_progress(OsImage *i, uint64_t *ret_done, uint64_t *ret_total) {
        struct stat st;

        assert(i);
        assert(ret_done);
        assert(ret_total);

        if (i->installed_path)
                *ret_done = i->size;
        else if (i->temp_fd >= 0 && fstat(i->temp_fd, &st) >= 0)
                *ret_done = MIN((uint64_t) st.st_size, i->size);
        else
                *ret_done = 0;
        *ret_total = i->size;
        return 0;
}

const char *os_image_get_installed_path(const OsImage *i) {
        return i ? i->installed_path : NULL;
}

char *const *os_image_get_removed(const OsImage *i) {
        static char *const empty[] = { NULL };

        return i && i->removed ? i->removed : empty;
}

bool os_image_error_is_disk_space(int error) {
        return error == -ENOSPC || error == -EDQUOT;
}
