/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Resolving a reference to the image manifest of a platform, through the registry client
 * (oci/registry.h: endpoints with mirror fallback, retries, authentication). A tag is resolved to
 * whatever the registry answers (checked against Docker-Content-Digest when it sends one), a digest
 * reference to exactly that document; an index is followed to the platform's manifest, which must
 * hash to the index's descriptor. Every document is verified before it is parsed (docs/contract.md §7).
 * Does not log: the outcome comes back through the done callback. */

#include "oci/registry.h"

/* Resolves `ref` to the image manifest for os/architecture/variant. NULL os means "linux"; NULL
 * architecture means this machine's (uname, oci_platform_from_machine()), and then a NULL variant means
 * this machine's too; otherwise a NULL variant matches any. The result's manifest, manifest_digest and
 * top_digest are set on success. */
int registry_resolve(RegistryClient *c, const OciRef *ref, const char *os, const char *architecture,
                     const char *variant, RegistryDone done, void *userdata,
                     RegistryOp **ret) _warn_unused_result_;
