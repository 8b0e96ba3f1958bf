/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The current OS version, derived from os-release text exactly the way gardener-node-agent does it
 * (docs/node-protocol.md §4.3, reconciler.go GetOSVersion): the first match of `(PRETTY_NAME)=(.*)` anywhere
 * in the text, '"' trimmed from both ends, then the first match of `\b\d+(?:\.\d+)*\b` (ASCII word
 * boundaries). Pure: the caller reads the file (docs/contract.md §3 `osRelease`) and passes its text.
 * Does not log. */

#include <stddef.h>

/* os-release files are tiny; anything bigger is not one. */
#define OS_RELEASE_MAX (64 * 1024)

/* The regex upstream names in its error message. */
#define OS_RELEASE_VERSION_REGEX "\\b\\d+(?:\\.\\d+)*\\b"

/* The PRETTY_NAME value as upstream extracts it; "" when there is none. -EFBIG above
 * OS_RELEASE_MAX. */
int os_release_pretty_name(const char *text, size_t size, char **ret);

/* The version, e.g. "1592.6" for PRETTY_NAME="Garden Linux 1592.6". When there is none:
 * -ENODATA and *ret_error = `unable to find version in "<pretty>" with regex: <regex>`.
 * -EFBIG above OS_RELEASE_MAX (with a message too). *ret_error may be NULL. */
int os_release_version(const char *text, size_t size, char **ret_version, char **ret_error);

/* Upstream's message for an os-release file that could not be read (error = -errno), e.g.
 * `unable to get operating system name: error opening file "/etc/os-release": open
 * /etc/os-release: file does not exist`. NULL only on allocation failure. */
char *os_release_read_error(const char *path, int error);
