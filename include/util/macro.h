/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The handful of helpers every module uses: scope-bound cleanup, ownership transfer, array size.
 * Pure header: no I/O, no logging. */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _warn_unused_result_ __attribute__((warn_unused_result))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _sentinel_ __attribute__((sentinel))
#define _fallthrough_ __attribute__((fallthrough))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Drops the result of a _warn_unused_result_ function on purpose; a comment at the call says why that
 * is right. (GCC, unlike clang, still warns about a plain (void) cast of such a result.) */
#define IGNORE_RESULT(expr) ((void) !(expr))

/* Take ownership out of a variable that has a cleanup attached. */
#define TAKE_PTR(p)                        \
        ({                                 \
                __typeof__(p) _ptr_ = (p); \
                (p) = NULL;                \
                _ptr_;                     \
        })
/* The same for a struct whose cleanup frees its members (an OscFile under _cleanup_(osc_file_done)):
 * the variable is left zeroed, so the cleanup frees nothing. */
#define TAKE_STRUCT(s)                    \
        ({                                \
                __typeof__(s) _s_ = (s);  \
                (s) = (__typeof__(s)) {}; \
                _s_;                      \
        })
#define TAKE_FD(fd)              \
        ({                       \
                int _fd_ = (fd); \
                (fd) = -EBADF;   \
                _fd_;            \
        })

#define ASSERT_PTR(p)                    \
        ({                               \
                __typeof__(p) _p_ = (p); \
                assert(_p_);             \
                _p_;                     \
        })

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define USEC_PER_SEC ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define USEC_INFINITY ((uint64_t) UINT64_MAX)

/* Generates <name>p() for use with _cleanup_(): calls func(*p) when *p is set. */
#define DEFINE_CLEANUP_FUNC(type, func)        \
        static inline void func##p(type **p) { \
                if (*p)                        \
                        (void) func(*p);       \
        }

/* free() that returns NULL, for "p = mfree(p);". */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                (void) close(*fd);
                errno = saved;
        }
}
#define _cleanup_close_ _cleanup_(closep)

static inline void strv_freep(char ***p) {
        if (!*p)
                return;
        for (char **s = *p; *s; s++)
                free(*s);
        free(*p);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

static inline const char *strempty(const char *s) {
        return s ? s : "";
}

static inline bool isempty(const char *s) {
        return !s || !*s;
}

/* Index of `s` in a table of names (NULL gaps allowed), for the x_from_string() of an enum;
 * -EINVAL if `s` is NULL or not in the table. */
static inline int string_table_lookup(const char *const *table, size_t n, const char *s) {
        for (size_t i = 0; s && i < n; i++)
                if (table[i] && strcmp(table[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

/* The x_to_string()/x_from_string() pair of an enum, from one table of names indexed by it (NULL
 * gaps allowed), in the spirit of systemd's DEFINE_STRING_TABLE_LOOKUP: a value outside the table
 * has no name (NULL), an unknown name is -EINVAL (every enum's _X_INVALID). */
#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type, table)                          \
        const char *name##_to_string(type i) {                                           \
                return (int) i >= 0 && (size_t) i < ELEMENTSOF(table) ? table[i] : NULL; \
        }
#define DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type, table)               \
        type name##_from_string(const char *s) {                                \
                return (type) string_table_lookup(table, ELEMENTSOF(table), s); \
        }
#define DEFINE_STRING_TABLE_LOOKUP(name, type, table)           \
        DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type, table) \
        DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type, table)

/* Replace *dst with a copy of src (NULL allowed). -ENOMEM on failure, *dst untouched then. */
static inline int free_and_strdup(char **dst, const char *src) {
        char *t = NULL;

        if (src) {
                t = strdup(src);
                if (!t)
                        return -ENOMEM;
        }
        free(*dst);
        *dst = t;
        return 0;
}
