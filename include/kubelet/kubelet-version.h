/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Asks a kubelet binary for its version ("<binary> --version" → "Kubernetes v1.31.2") without blocking
 * the loop: posix_spawn, an sd_event child source for the exit, a timer that SIGKILLs a binary that
 * hangs. Used once at startup to adopt an existing regular file at kubelet.binaryPath into the store
 * (docs/contract.md §8.2, kubelet_store_adopt()). Requires SIGCHLD to be blocked in every thread (sd-event's
 * rule for child sources; main.c does so). Does not log. */

#include <stdint.h>
#include <systemd/sd-event.h>

#include "util/macro.h"

#define KUBELET_VERSION_TIMEOUT_DEFAULT_USEC (10 * USEC_PER_SEC)

/* "Kubernetes v1.31.2\n" (kubelet --version) → "1.31.2" (a valid store version, starting with a digit).
 * -EBADMSG if the output is not like that. */
int kubelet_version_from_output(const char *output, char **ret);

typedef struct KubeletVersionProbe KubeletVersionProbe;

/* Exactly once unless freed before; never inside the start call. version is NULL on error (the binary
 * could not run, exited non-zero, timed out, or printed something else: -EBADMSG). May free the probe. */
typedef void (*KubeletVersionDone)(KubeletVersionProbe *p, int error, const char *version, void *userdata);

int kubelet_version_probe_start(sd_event *event, const char *binary, uint64_t timeout_usec,
                                KubeletVersionDone done, void *userdata, KubeletVersionProbe **ret);
/* Kills a still running child. */
KubeletVersionProbe *kubelet_version_probe_free(KubeletVersionProbe *p);
DEFINE_CLEANUP_FUNC(KubeletVersionProbe, kubelet_version_probe_free);
