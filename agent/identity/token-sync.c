/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "identity/client-csr.h"
#include "identity/token-sync.h"
#include "kube/kube-path.h"
#include "kube/kube-watch.h"
#include "util/base64.h"
#include "util/error-message.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/log-once.h"
#include "util/log.h"
#include "util/time-util.h"
#include "util/yaml-json.h"

#define COMPONENT_CONFIG_MAX (1024U * 1024U)

typedef struct TokenTarget {
        TokenSync *owner;        /* borrowed */
        char *secret_name;       /* owned */
        char *path;              /* owned: root + configured path */
        const char *config_path; /* the configured path: the tail of `path` */
        KubeWatch *watch;        /* owned */
        KubeRequest *request;    /* owned: a resync GET in flight */
        LogOnce list_error;      /* a LIST no retry fixes (403, too large), said once */
} TokenTarget;

struct TokenSync {
        KubeClient *client;   /* borrowed */
        char *namespace;      /* owned: of the Secrets */
        TokenTarget *targets; /* owned array */
        size_t n_targets;
        uint64_t period_usec;
        sd_event_source *timer; /* owned: periodic resync */
        unsigned writes, failures;

        /* The resync someone waits for (token_sync_resync() with a callback). */
        TokenSyncDoneCallback done_cb;
        void *done_userdata;
        unsigned done_failures;      /* `failures` when it began */
        sd_event_source *done_defer; /* owned: reports when nothing was left to read */
};

void token_sync_configs_clear(TokenSyncConfigs *c) {
        for (size_t i = 0; i < c->n; i++) {
                free(c->items[i].secret_name);
                free(c->items[i].path);
        }
        free(c->items);
        *c = (TokenSyncConfigs) {};
}

int token_sync_configs_from_json(const json_t *doc, TokenSyncConfigs *ret, char **ret_error) {
        _cleanup_(osc_component_config_freep) OscComponentConfig *cc = calloc(1, sizeof(*cc));
        int r;

        if (!cc)
                return -ENOMEM;
        r = osc_component_config_decode_token(doc, cc, ret_error);
        if (r < 0)
                return r;
        return token_sync_configs_from_component(cc, ret);
}

int token_sync_configs_from_component(const OscComponentConfig *cc, TokenSyncConfigs *ret) {
        _cleanup_(token_sync_configs_clear) TokenSyncConfigs c = {
                .sync_period_usec = cc && cc->token_sync_period_usec ? cc->token_sync_period_usec :
                                                                       TOKEN_SYNC_PERIOD_DEFAULT_USEC,
        };

        assert(ret);

        c.items = calloc(cc && cc->n_token_syncs ? cc->n_token_syncs : 1, sizeof(*c.items));
        if (!c.items)
                return -ENOMEM;
        for (size_t i = 0; cc && i < cc->n_token_syncs; i++, c.n++) {
                c.items[i].secret_name = strdup(cc->token_syncs[i].secret_name);
                c.items[i].path = strdup(cc->token_syncs[i].path);
                if (!c.items[i].secret_name || !c.items[i].path)
                        return -ENOMEM;
        }
        *ret = c;
        c = (TokenSyncConfigs) {};
        return 0;
}

int token_sync_configs_load(const char *path, TokenSyncConfigs *ret, char **ret_error) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        _cleanup_(json_decrefp) json_t *doc = NULL;
        size_t size;
        int r;

        r = read_full_file(path, COMPONENT_CONFIG_MAX, &text, &size);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strerror(-r));
        r = yaml_to_json(text, size, &doc, &error);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strempty(error));
        r = token_sync_configs_from_json(doc, ret, &error);
        if (r < 0)
                return error_setf(ret_error, r, "%s: %s", path, strempty(error));
        return 0;
}

unsigned token_sync_writes(const TokenSync *t) {
        return t->writes;
}

unsigned token_sync_failures(const TokenSync *t) {
        return t->failures;
}

/* The directories above a token file, 0700 where we create them (never readable by others). */
static int mkdir_parent_of(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        char *slash = dir ? strrchr(dir, '/') : NULL;

        if (!dir)
                return -ENOMEM;
        if (!slash || slash == dir)
                return 0;
        *slash = '\0';
        return mkdir_parents(dir, 0700);
}

/* Upstream's reconcile: the Secret's `token` to the file, written only when it differs. */
static void sync_secret(TokenTarget *tt, const json_t *secret) {
        TokenSync *t = tt->owner;
        const char *b64 = json_string_value(json_object_get(json_object_get(secret, "data"), "token"));
        char *token = NULL, *current = NULL;
        size_t size = 0, current_size = 0;
        int r;

        if (!b64 || base64_decode(b64, TOKEN_SYNC_MAX, &token, &size) < 0 || size == 0) {
                t->failures++;
                log_warning("Secret %s has no usable \"token\" key; %s not updated.", tt->secret_name,
                            tt->path);
                return;
        }
        r = read_full_file(tt->path, TOKEN_SYNC_MAX, &current, &current_size);
        if (r >= 0 && current_size == size && memcmp(current, token, size) == 0)
                log_debug("Token of Secret %s unchanged in %s.", tt->secret_name, tt->path);
        else {
                r = mkdir_parent_of(tt->path);
                if (r >= 0)
                        r = write_file_atomic(tt->path, token, size, 0640);
                if (r < 0) {
                        t->failures++;
                        log_warning_errno(r, "Cannot write the token of Secret %s to %s: %m",
                                          tt->secret_name, tt->path);
                } else {
                        t->writes++;
                        log_info("Token of Secret %s written to %s.", tt->secret_name, tt->path);
                }
        }
        if (current)
                erase_and_free(current, current_size);
        erase_and_free(token, size);
}

static void on_secret(KubeWatch *w, json_t *object, void *userdata) {
        sync_secret(userdata, object);
}

/* The watch tells us, not the journal, why its LIST fails: a 403 (RBAC) or a Secret over the size
 * limit is configuration, said once until a LIST works; anything else is transient (debug there). */
static void on_synced(KubeWatch *w, int error, void *userdata) {
        TokenTarget *tt = userdata;
        const char *detail = kube_watch_get_list_message(w);

        if (error >= 0)
                log_once_clear(&tt->list_error);
        else if ((error == -EPERM || error == -EFBIG) && log_once_check(&tt->list_error, error, detail))
                log_warning_errno(error, "Cannot list Secret %s for %s: %m%s%.300s; retrying with back-off.",
                                  tt->secret_name, tt->path, detail ? ": " : "", strempty(detail));
}

/* The waited-for resync is over once no read is in flight. */
static void resync_check_done(TokenSync *t) {
        TokenSyncDoneCallback cb = t->done_cb;

        if (!cb)
                return;
        for (size_t i = 0; i < t->n_targets; i++)
                if (t->targets[i].request)
                        return;
        t->done_cb = NULL;
        cb(t, t->failures > t->done_failures ? -EIO : 0, t->done_userdata);
}

static void on_get(KubeRequest *req, int error, json_t *object, void *userdata) {
        TokenTarget *tt = userdata;

        if (error < 0) {
                tt->owner->failures++;
                log_warning_errno(error, "Cannot read Secret %s for %s: HTTP %ld %s", tt->secret_name,
                                  tt->path, kube_request_get_status(req),
                                  strempty(kube_request_get_reason(req)));
        } else
                sync_secret(tt, object);
        tt->request = kube_request_free(tt->request);
        resync_check_done(tt->owner);
}

static int on_done_defer(sd_event_source *s, void *userdata) {
        TokenSync *t = userdata;

        t->done_defer = sd_event_source_disable_unref(t->done_defer);
        resync_check_done(t);
        return 0;
}

/* A GET of the target's Secret, unless one is already on its way. */
static void target_resync(TokenTarget *tt) {
        TokenSync *t = tt->owner;
        _cleanup_free_ char *path = NULL;

        if (tt->request)
                return;
        if (kube_path(KUBE_RESOURCE_SECRETS, t->namespace, tt->secret_name, NULL, &path) < 0 ||
            kube_client_get(t->client, path, on_get, tt, &tt->request) < 0)
                t->failures++;
}

int token_sync_resync(TokenSync *t, TokenSyncDoneCallback cb, void *userdata) {
        int r;

        assert(t);

        if (cb) {
                t->done_cb = cb;
                t->done_userdata = userdata;
                t->done_failures = t->failures;
        }
        for (size_t i = 0; i < t->n_targets; i++)
                target_resync(&t->targets[i]);
        /* Never from inside this call: nothing may be left to read (no syncs, every GET refused). */
        if (cb && !t->done_defer) {
                r = sd_event_add_defer(kube_client_get_event(t->client), &t->done_defer, on_done_defer, t);
                if (r < 0) {
                        t->done_cb = NULL;
                        return r;
                }
        }
        return 0;
}

unsigned token_sync_resync_path(TokenSync *t, const char *path) {
        unsigned n = 0;

        for (size_t i = 0; t && path && i < t->n_targets; i++) {
                TokenTarget *tt = &t->targets[i];

                if (!streq(tt->config_path, path))
                        continue;
                log_info("%s was removed or rewritten by the OSC: re-reading Secret %s for its token.",
                         tt->path, tt->secret_name);
                target_resync(tt);
                n++;
        }
        return n;
}

void token_sync_forget_waiter(TokenSync *t) {
        if (t)
                t->done_cb = NULL;
}

static int on_period(sd_event_source *s, uint64_t usec, void *userdata) {
        TokenSync *t = userdata;
        int r;

        r = token_sync_resync(t, NULL, NULL);
        if (r < 0)
                log_warning_errno(r,
                                  "Cannot resync the tokens now; the watches keep them current, the next "
                                  "period tries again: %m");
        return event_timer_arm(s, t->period_usec);
}

int token_sync_new(KubeClient *client, const char *root, const char *namespace, const TokenSyncConfigs *cfg,
                   TokenSync **ret) {
        _cleanup_(token_sync_freep) TokenSync *t = NULL;
        size_t rl;

        assert(client);
        assert(root);
        assert(namespace);
        assert(cfg);
        assert(ret);

        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->client = client;
        t->period_usec = cfg->sync_period_usec ?: TOKEN_SYNC_PERIOD_DEFAULT_USEC;
        t->namespace = strdup(namespace);
        if (!t->namespace)
                return -ENOMEM;
        t->targets = calloc(cfg->n ?: 1, sizeof(*t->targets));
        if (!t->targets)
                return -ENOMEM;
        rl = strlen(root);
        while (rl > 0 && root[rl - 1] == '/')
                rl--;
        for (size_t i = 0; i < cfg->n; i++) {
                TokenTarget *tt = &t->targets[t->n_targets++];

                tt->owner = t;
                tt->secret_name = strdup(cfg->items[i].secret_name);
                if (!tt->secret_name ||
                    asprintf(&tt->path, "%.*s%s", (int) rl, root, cfg->items[i].path) < 0)
                        return -ENOMEM;
                tt->config_path = tt->path + rl;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

TokenSync *token_sync_free(TokenSync *t) {
        if (!t)
                return NULL;
        /* A waiter belongs to someone else: it learns that its resync will never end. */
        if (t->done_cb)
                t->done_cb(t, -ECANCELED, t->done_userdata);
        for (size_t i = 0; i < t->n_targets; i++) {
                kube_watch_free(t->targets[i].watch);
                kube_request_free(t->targets[i].request);
                log_once_done(&t->targets[i].list_error);
                free(t->targets[i].secret_name);
                free(t->targets[i].path);
        }
        free(t->targets);
        sd_event_source_disable_unref(t->timer);
        sd_event_source_disable_unref(t->done_defer);
        free(t->namespace);
        free(t);
        return NULL;
}

int token_sync_start(TokenSync *t) {
        static const KubeWatchCallbacks callbacks = { .on_object = on_secret, .on_synced = on_synced };
        int r;

        assert(t);

        for (size_t i = 0; i < t->n_targets; i++) {
                TokenTarget *tt = &t->targets[i];

                r = kube_watch_new(t->client, KUBE_RESOURCE_SECRETS, t->namespace, tt->secret_name,
                                   &callbacks, tt, &tt->watch);
                if (r < 0)
                        return r;
                r = kube_watch_start(tt->watch);
                if (r < 0)
                        return r;
        }
        return sd_event_add_time_relative(kube_client_get_event(t->client), &t->timer, CLOCK_MONOTONIC,
                                          t->period_usec, USEC_PER_SEC, on_period, t);
}
