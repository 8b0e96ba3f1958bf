/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Downloading one blob into the client's blob directory with resume, through the registry client
 * (oci/registry.h: endpoints with mirror fallback, retries, authentication):
 *  - the blob streams to <blob_directory>/<hex>.partial, hashed as it arrives, and is renamed to
 *    <hex> once verified (a verified <hex> of the right size is reused without a request);
 *  - an interrupted download (also across restarts) resumes with Range from what is on disk,
 *    re-hashing that prefix in slices on the loop; a server without Range support restarts from 0;
 *    a transfer that fails after the descriptor's last byte arrived is verified as it is, a body
 *    shorter than the descriptor is resumed;
 *  - a resumed blob that fails verification is downloaded once more from 0 before DigestMismatch is
 *    reported, and bytes that failed verification are deleted;
 *  - free space (the blob's rest plus RegistryOptions.min_free_bytes) is checked before each request
 *    (DiskSpace); a stall keeps the .partial.
 * The op owns the .partial's descriptor; the files belong to the blob directory. Does not log. */

#include "oci/registry.h"

/* Downloads and verifies one blob of `ref`'s repository; the result's blob_path, bytes_downloaded and
 * resumed_from are set on success. */
int registry_fetch_blob(RegistryClient *c, const OciRef *ref, const OciDescriptor *blob,
                        RegistryProgress progress, RegistryDone done, void *userdata,
                        RegistryOp **ret) _warn_unused_result_;

/* <blob_directory>/<hex> for a digest (the file may not exist). */
int registry_blob_path(RegistryClient *c, const Digest *d, char **ret) _warn_unused_result_;
/* <blob_directory>/<hex>.partial: where registry_fetch_blob() writes the blob while it downloads (it
 * exists once that call returned, unless the verified blob was already there). The bytes up to the
 * count its progress callback last reported are final; a count of 0 after a larger one means the
 * download started over. */
int registry_blob_partial_path(RegistryClient *c, const Digest *d, char **ret) _warn_unused_result_;
