/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Mirror fallback (registry.mirrors): which endpoints a registry operation tries and in which order,
 * whose credentials apply at each, and what is reported when all of them failed. Pure: no I/O, does
 * not log; the caller owns what it gets. The registry client (oci/registry.h) walks the list: any
 * failure at a mirror, a digest mismatch included, moves on to the next endpoint. */

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "oci/oci-ref.h"
#include "oci/registry-auth.h"

/* The base URLs for `ref`, as a NULL-terminated strv: the mirror that registry.mirrors names for its
 * registry first ("https://" added to a URL without a scheme, trailing slashes dropped), then
 * https://<the registry's API host>. -ENOMEM. */
int registry_mirror_endpoints(const RegistryMirror *mirrors, size_t n_mirrors, const OciRef *ref,
                              char ***ret, size_t *ret_n) _warn_unused_result_;

/* "host[:port]" of a base URL, or NULL on OOM. */
char *registry_mirror_endpoint_host(const char *base);

/* Credentials for `endpoint` from an auth.json's content: a mirror (`is_mirror`) has its own when the
 * file names its host; otherwise the upstream registry's apply. -ENOENT when there are none. */
int registry_mirror_credentials(const char *data, size_t size, const char *endpoint, bool is_mirror,
                                const OciRef *ref, RegistryCredentials **ret) _warn_unused_result_;

/* The last endpoint failed with *message: a mirror's earlier failure `first` (a stall, a digest
 * mismatch) says more than the upstream's after it, so both go into *message when they differ. Best
 * effort: on OOM *message stays as it was. */
void registry_mirror_join_failure(char **message, const char *first);
