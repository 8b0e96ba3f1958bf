/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Logging to journald with structured fields, or to stderr when there is no journal.
 * Owns process-wide log settings (target, max level, current transaction/phase context).
 * The layer that decides logs, once; the layers below return -errno and a message and stay quiet (at
 * most debug): docs/architecture.md "Logging" says which. util/log-once.h tells a repeated failure
 * from a new one.
 * log_*_errno() return -abs(error) so callers can `return log_error_errno(r, "...: %m");`. */

#include <stdarg.h>
#include <syslog.h>

#include "util/macro.h"

typedef enum LogTarget {
        LOG_TARGET_AUTO,
        LOG_TARGET_JOURNAL,
        LOG_TARGET_STDERR,
        _LOG_TARGET_MAX,
        _LOG_TARGET_INVALID = -EINVAL,
} LogTarget;

void log_set_target(LogTarget t);
LogTarget log_get_target(void);
void log_set_max_level(int level);
int log_get_max_level(void);
int log_level_from_string(const char *s); /* "debug".."emerg" or 0..7; -EINVAL otherwise */
const char *log_level_to_string(int level);

/* Transaction context attached to every line while set (INPLACE_TRANSACTION=, INPLACE_PHASE=).
 * Strings are copied; NULL clears. */
void log_set_transaction(const char *transaction, const char *phase);

/* message_id may be NULL (no MESSAGE_ID= field). Returns -abs(error), or 0 if error == 0. */
int log_internal(int level, int error, const char *message_id, const char *file, int line, const char *func,
                 const char *format, ...) _printf_(7, 8);

#define log_full_errno(level, error, ...) \
        log_internal((level), (error), NULL, __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_full(level, ...) (void) log_full_errno((level), 0, __VA_ARGS__)

/* Key lines: the MESSAGE_ID must have an entry in the shipped journal catalog (catalog-ids.h). */
#define log_struct_id(level, error, message_id, ...) \
        log_internal((level), (error), (message_id), __FILE__, __LINE__, __func__, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, (error), __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, (error), __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, (error), __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, (error), __VA_ARGS__)

/* For the "-ENOMEM" path in main/manager. */
#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
