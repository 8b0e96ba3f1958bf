/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Image references as the OSC writes them ("registry.example.com:5000/ns/hyperkube:v1.31.2",
 * "hyperkube@sha256:...", "busybox"): split into registry host, repository, tag and digest with the
 * Docker defaults (no host → docker.io, single-component name on docker.io → library/<name>, no tag
 * and no digest → latest). Pure: no I/O, does not log. Every part is length- and grammar-checked
 * (the distribution reference grammar), so the result can be put into a URL path as is. */

#include <stdbool.h>

#include "oci/digest.h"
#include "util/macro.h"

#define OCI_REF_MAX 1024       /* whole reference */
#define OCI_REPOSITORY_MAX 255 /* distribution: repository name */
#define OCI_NAME_MAX 255       /* distribution: NameTotalLengthMax, registry "/" repository */
#define OCI_TAG_MAX 128

#define OCI_DOCKER_HUB "docker.io"
#define OCI_DOCKER_HUB_API "registry-1.docker.io"

typedef struct OciRef {
        char *registry;   /* owned: host[:port] as written, "docker.io" by default */
        char *repository; /* owned: "library/busybox", "ns/hyperkube" */
        char *tag;        /* owned; NULL when only a digest was given */
        char *digest;     /* owned: "sha256:..." or NULL */
} OciRef;

int oci_ref_parse(const char *s, OciRef **ret) _warn_unused_result_;
/* Whether `s` parses: 0, or -EINVAL with *ret_why (if not NULL) pointing at a static reason naming
 * the part that does not match the distribution grammar ("the tag does not match ..."); -ENOMEM. */
int oci_ref_check(const char *s, const char **ret_why) _warn_unused_result_;
OciRef *oci_ref_free(OciRef *r);
DEFINE_CLEANUP_FUNC(OciRef, oci_ref_free);

/* The host the registry API is served on: docker.io → registry-1.docker.io, else `registry`. */
const char *oci_ref_api_host(const OciRef *r);
/* What to ask /v2/<repo>/manifests/ for: the digest when present (it pins the content), else the
 * tag. */
const char *oci_ref_manifest_reference(const OciRef *r);
/* "registry/repository[:tag][@digest]". */
int oci_ref_to_string(const OciRef *r, char **ret) _warn_unused_result_;

/* Replaces every "{version}" in `template` with `version`. -EINVAL if `version` has characters
 * that cannot appear in a tag. */
int oci_ref_substitute_version(const char *template, const char *version, char **ret) _warn_unused_result_;

/* The version a tag names, without a leading "v" ("v1.31.2" → "1.31.2"). -ENODATA without tag. */
int oci_ref_tag_version(const OciRef *r, char **ret) _warn_unused_result_;

bool oci_tag_is_valid(const char *s);
bool oci_repository_is_valid(const char *s);
bool oci_registry_host_is_valid(const char *s);
