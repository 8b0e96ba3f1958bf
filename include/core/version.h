/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Version strings the way Gardener compares them (docs/node-protocol.md §3.2), plus the kubelet-specific
 * rules the update engine needs. Pure: no I/O, no logging, no allocation except where a function says so.
 *
 * Gardener's CompareVersions(a, op, b):
 *   1. normalises both strings: every 'v' is deleted, then the string is cut at the first '-', '+'
 *      or '~' (pre-release and build suffixes disappear);
 *   2. parses `a` as a Masterminds semver v3 version in coerce mode: 1 to 3 dot-separated decimal
 *      parts, missing parts are 0, leading zeros are fine, each part must fit in uint64, a fourth
 *      part or an empty string is an error;
 *   3. parses `b` as the version of a constraint "<op> <b>": parts may also be the wildcards x, X
 *      or *; a missing or wildcard part makes the constraint "dirty", and dirty constraints
 *      compare loosely (`=` becomes a tilde match: "= 1592.6" accepts 1592.6.x; "<=" ignores the
 *      missing parts; ">" needs a strictly higher part that is present).
 * So the two sides are not symmetric: compare the current version as `a` and the reference as `b`,
 * exactly as upstream does (IsOsVersionUpToDate: a = os-release version, b = desired version). */

#include <stdbool.h>
#include <stdint.h>

#include "util/macro.h"

/* Longest version string accepted anywhere (OSC, os-release, kubelet --version). */
#define VERSION_STRING_MAX 128

typedef struct Version {
        uint64_t major, minor, patch;
} Version;

typedef enum VersionOp {
        VERSION_OP_EQ, /* "="  (tilde match when the reference is dirty) */
        VERSION_OP_NE, /* "!=" */
        VERSION_OP_LT, /* "<"  */
        VERSION_OP_LE, /* "<=" */
        VERSION_OP_GT, /* ">"  */
        VERSION_OP_GE, /* ">=" */
        _VERSION_OP_MAX,
        _VERSION_OP_INVALID = -EINVAL,
} VersionOp;

const char *version_op_to_string(VersionOp op);
VersionOp version_op_from_string(const char *s);

/* Gardener's normalisation into a newly allocated string: deletes every 'v', cuts at -, + or ~.
 * -EINVAL if s is longer than VERSION_STRING_MAX. */
int version_normalize(const char *s, char **ret);

/* Normalises `s`, then parses it as the version side of a comparison (coerce mode).
 * -EINVAL with *ret_why (static text) set when it is not a version. */
int version_parse(const char *s, Version *ret, const char **ret_why);

/* -1, 0, 1 like strcmp. */
int version_cmp(const Version *a, const Version *b);

/* Gardener's CompareVersions(a, op, b). Returns 1 (true), 0 (false), or -EINVAL when either side
 * cannot be parsed; then *ret_why (if not NULL) says which and why, as static text such as
 * "invalid semantic version" or "improper constraint". */
int version_compare(const char *a, VersionOp op, const char *b, const char **ret_why);

/* docs/contract.md §8.1: the kubelet version as stored on disk, without a leading 'v' or 'V'
 * ("v1.31.2" -> "1.31.2"). Because the result names a directory in the kubelet store it must be a
 * safe path component: only [0-9A-Za-z.+_-], not "." or "..", at most VERSION_STRING_MAX bytes,
 * starting with a digit. Returns a new string, or -EINVAL. */
int version_normalize_kubelet(const char *s, char **ret);

/* The longest desired kubelet version: it becomes the value of the Node label
 * worker.gardener.cloud/kubernetes-version, and label values are at most 63 bytes. */
#define KUBELET_VERSION_MAX 63

/* Whether a normalised kubelet version (version_normalize_kubelet()) can be a desired version: it
 * parses as a version (every part fits in 64 bits), is at most KUBELET_VERSION_MAX bytes and is a
 * valid label value (no '+', ends in a letter or digit). -EINVAL with *ret_why (static text). */
int version_check_kubelet_desired(const char *v, const char **ret_why);

/* The same safety rule without the 'v' handling: a version string that may name a directory or a
 * boot entry (only [0-9A-Za-z.+_-], starting with a digit, at most VERSION_STRING_MAX bytes). */
bool version_is_safe_name(const char *s);

/* How a kubelet version change is classified (docs/node-protocol.md §2.3: only a minor-version change is an
 * in-place trigger; a patch change is applied at once, without drain). */
typedef enum KubeletChange {
        KUBELET_CHANGE_NONE,      /* same version */
        KUBELET_CHANGE_PATCH,     /* same major.minor, higher patch: ungated */
        KUBELET_CHANGE_MINOR,     /* same major, minor + 1: gated */
        KUBELET_CHANGE_DOWNGRADE, /* anything lower than the running version */
        KUBELET_CHANGE_SKIP,      /* minor + 2 or more, or a different major: not allowed */
        _KUBELET_CHANGE_MAX,
        _KUBELET_CHANGE_INVALID = -EINVAL,
} KubeletChange;

const char *kubelet_change_to_string(KubeletChange c);
KubeletChange kubelet_change_from_string(const char *s);

/* Classifies the move from the running kubelet `from` to the desired `to` (both normalised the
 * Gardener way first). -EINVAL with *ret_why when either cannot be parsed. */
int version_classify_kubelet(const char *from, const char *to, KubeletChange *ret, const char **ret_why);
