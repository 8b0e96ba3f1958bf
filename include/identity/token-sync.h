/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* GNA's token controller (docs/contract.md §9.8, docs/node-protocol.md §8 item 4; upstream
 * pkg/nodeagent/controller/token): for each `controllers.token.syncConfigs[]` entry {secretName, path} of
 * GNA's component config, the Secret kube-system/<secretName>'s `token` is written to <root><path> (0640,
 * atomically, only when it differs) on start, whenever the Secret changes (one field-selected watch per
 * Secret, no polling), every `controllers.token.syncPeriod` (default 12 h), on token_sync_resync()
 * (service-account-key rotation) and, for one config, on token_sync_resync_path() (the OSC removed its
 * file).
 *
 * The configuration part is pure (token_sync_configs_from_json()). TokenSync runs on the client's sd_event
 * loop; writes are small local files. Logs (a long-running owner, like the identity): each token written, a
 * Secret it cannot read or write (warning), a LIST no retry fixes (403, too large) once. Never logs or
 * reports a token: messages name the Secret and the path only. Ownership: the caller owns the TokenSync; it
 * owns its watches and timer and borrows the KubeClient, which must outlive it. */

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/osc-component-config.h"
#include "kube/kube-client.h"
#include "util/macro.h"

#define TOKEN_SYNC_PERIOD_DEFAULT_USEC (12 * 3600 * USEC_PER_SEC)
#define TOKEN_SYNC_MAX (64U * 1024U)
#define TOKEN_SYNC_NAMESPACE "kube-system" /* upstream: metav1.NamespaceSystem */

typedef struct TokenSyncConfig {
        char *secret_name; /* owned */
        char *path;        /* owned: absolute, below the root */
} TokenSyncConfig;

typedef struct TokenSyncConfigs {
        TokenSyncConfig *items; /* owned array */
        size_t n;
        uint64_t sync_period_usec;
} TokenSyncConfigs;

/* From a decoded NodeAgentConfiguration document, with the one parser the OSC's component config goes
 * through too (osc_component_config_decode_token(): its checks). No `controllers.token` → zero
 * entries, the default period. -EINVAL with a message naming the field. */
int token_sync_configs_from_json(const json_t *doc, TokenSyncConfigs *ret,
                                 char **ret_error) _warn_unused_result_;
void token_sync_configs_clear(TokenSyncConfigs *c);

/* The token syncs of a component config (the one the OSC carries), its syncPeriod or the default. */
int token_sync_configs_from_component(const OscComponentConfig *cc,
                                      TokenSyncConfigs *ret) _warn_unused_result_;

/* Reads and decodes the component config file (YAML or JSON). */
int token_sync_configs_load(const char *path, TokenSyncConfigs *ret, char **ret_error) _warn_unused_result_;

typedef struct TokenSync TokenSync;

/* `root` is prefixed to every path ("" or "/" for none); `cfg` is copied. */
int token_sync_new(KubeClient *client, const char *root, const char *namespace, const TokenSyncConfigs *cfg,
                   TokenSync **ret) _warn_unused_result_;
/* A resync waiter still registered is called with -ECANCELED first. */
TokenSync *token_sync_free(TokenSync *t);
DEFINE_CLEANUP_FUNC(TokenSync, token_sync_free);

int token_sync_start(TokenSync *t) _warn_unused_result_;

/* Called once every read of a resync is over: 0 when every file now holds its Secret's token, else
 * -EIO (a Secret could not be read, had no token, or its file could not be written: logged). */
typedef void (*TokenSyncDoneCallback)(TokenSync *t, int error, void *userdata);

/* Re-reads every Secret now and rewrites the files that differ (service-account-key rotation). `cb`
 * (may be NULL) is called from the event loop, never from inside this call; there is one waiter: a
 * second call replaces the first one's callback. -errno (no callback will come) if it cannot be armed. */
int token_sync_resync(TokenSync *t, TokenSyncDoneCallback cb, void *userdata) _warn_unused_result_;
/* Upstream's triggerTokenResyncForDeletedFile: the OSC apply (or a drift repair) removed or restored the
 * file at `path` (as the OSC names it, without the root): the Secrets of the configs with exactly that
 * path are read again now and their tokens written (never the others; a read already on its way
 * counts). How many configs name it (0: nothing happens). t NULL: no token sync, 0. */
unsigned token_sync_resync_path(TokenSync *t, const char *path);

/* Drops the waiter (its owner goes away); the reads go on. */
void token_sync_forget_waiter(TokenSync *t);

/* How many token files were written (not counting unchanged ones) and how many syncs failed. */
unsigned token_sync_writes(const TokenSync *t);
unsigned token_sync_failures(const TokenSync *t);
