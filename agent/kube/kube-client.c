/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "build-config.h"
#include "kube/kube-client.h"
#include "kube/kube-credentials.h"
#include "kube/kube-path.h"
#include "util/event-util.h"
#include "util/log.h"

#if defined(__x86_64__)
#define GOARCH "amd64"
#elif defined(__aarch64__)
#define GOARCH "arm64"
#elif defined(__i386__)
#define GOARCH "386"
#elif defined(__arm__)
#define GOARCH "arm"
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define GOARCH "ppc64le"
#elif defined(__s390x__)
#define GOARCH "s390x"
#else
#define GOARCH "unknown"
#endif

/* Shows up in audit logs; the part before '/' names our managedFields entries (docs/kube-api.md §1). */
#define USER_AGENT "inplace-agent/" PACKAGE_VERSION " (linux/" GOARCH ")"
#define RECONNECT_RETRY_USEC (1 * USEC_PER_SEC)
#define PLAIN_MESSAGE_MAX 256

struct KubeClient {
        sd_event *event;             /* ref held */
        Http *http;                  /* borrowed: the Manager's, outlives us */
        const KubeTuning *tuning;    /* borrowed */
        char *server;                /* owned: URL prefix without trailing '/' */
        KubeCredentials *creds;      /* owned */
        sd_event_source *cert_timer; /* owned: periodic check of certificate files */
        KubeRequest *floating;       /* owned: list of requests nobody else holds */
        KubeClientReconnectCallback on_reconnect;
        void *reconnect_userdata; /* borrowed */
        KubeClientUnauthorizedCallback on_unauthorized;
        void *unauthorized_userdata; /* borrowed */
};

struct KubeRequest {
        KubeClient *client;           /* borrowed */
        HttpRequest *http;            /* owned: the attempt in flight */
        sd_event_source *retry_timer; /* owned: pending retry */
        char *method;                 /* owned */
        char *path;                   /* owned */
        const char *content_type;     /* static */
        char *body;                   /* owned: serialized request body; NULL for none */
        uint64_t timeout_usec;
        bool repeatable; /* safe to send again after a connection reset */
        unsigned attempts;
        bool retried_401;
        char *token_used; /* owned: bearer token of the last attempt */

        long status;
        char *reason;  /* owned */
        char *message; /* owned */
        uint64_t retry_after_usec;

        KubeRequestCallback cb;
        void *userdata; /* borrowed */
        bool floating;
        KubeRequest *next, *prev; /* floating list links */
};

static const char *const patch_content_types[_KUBE_PATCH_TYPE_MAX] = {
        [KUBE_PATCH_MERGE] = "application/merge-patch+json",
        [KUBE_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
        [KUBE_PATCH_JSON] = "application/json-patch+json",
        [KUBE_PATCH_APPLY] = "application/apply-patch+yaml",
};

const char *kube_patch_type_to_content_type(KubePatchType t) {
        return t >= 0 && t < _KUBE_PATCH_TYPE_MAX ? patch_content_types[t] : NULL;
}

uint64_t kube_client_now(KubeClient *c) {
        assert(c);
        return event_now_usec(c->event);
}

static void token_free(char *t) {
        if (t)
                explicit_bzero(t, strlen(t));
        free(t);
}

int kube_client_reload_credentials(KubeClient *c) {
        assert(c);

        if (kube_credentials_check_files(c->creds) <= 0)
                return 0;
        log_debug("Client certificate, key or CA changed on disk.");
        if (c->on_reconnect)
                c->on_reconnect(c, c->reconnect_userdata);
        return 1;
}

static int kube_client_on_cert_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeClient *c = userdata;

        (void) kube_client_reload_credentials(c);
        (void) event_timer_arm(s, c->tuning->cert_check_usec);
        return 0;
}

int kube_client_new(sd_event *event, Http *http, const KubeConfig *kc, const KubeTuning *tuning,
                    KubeClient **ret) {
        _cleanup_(kube_client_freep) KubeClient *c = NULL;
        int r;

        assert(event);
        assert(http);
        assert(kc);
        assert(tuning);
        assert(ret);

        c = malloc(sizeof(*c));
        if (!c)
                return -ENOMEM;
        *c = (KubeClient) {
                .event = sd_event_ref(event), .http = http, .tuning = tuning, .server = strdup(kc->server)
        };
        if (!c->server)
                return -ENOMEM;

        r = kube_credentials_new(kc, tuning->token_refresh_usec, kube_client_now(c), &c->creds);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(event, &c->cert_timer, CLOCK_MONOTONIC, tuning->cert_check_usec,
                                       USEC_PER_SEC, kube_client_on_cert_timer, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->cert_timer, "kube-cert-check");

        *ret = TAKE_PTR(c);
        return 0;
}

KubeClient *kube_client_free(KubeClient *c) {
        if (!c)
                return NULL;
        while (c->floating)
                kube_request_free(c->floating);
        sd_event_source_disable_unref(c->cert_timer);
        kube_credentials_free(c->creds);
        free(c->server);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}

void kube_client_set_reconnect_callback(KubeClient *c, KubeClientReconnectCallback cb, void *userdata) {
        assert(c);
        c->on_reconnect = cb;
        c->reconnect_userdata = userdata;
}

const KubeTuning *kube_client_get_tuning(KubeClient *c) {
        assert(c);
        return c->tuning;
}

sd_event *kube_client_get_event(KubeClient *c) {
        assert(c);
        return c->event;
}

static int add_header(HttpRequest *h, const char *name, const char *value) {
        _cleanup_free_ char *line = NULL;
        int r;

        if (asprintf(&line, "%s: %s", name, value) < 0)
                return -ENOMEM;
        r = http_request_add_header(h, line);
        explicit_bzero(line, strlen(line));
        return r;
}

static int prepare(KubeClient *c, const char *method, const char *path, char **ret_token,
                   HttpRequest **ret) {
        _cleanup_(http_request_freep) HttpRequest *h = NULL;
        _cleanup_free_ char *url = NULL;
        const char *token;
        HttpTls tls;
        int r;

        /* kube-path.h makes every path the agent sends; anything else (a dot segment, a raw name with
         * '/' or '?') is refused here rather than resolved by libcurl or the server. */
        if (!kube_path_is_safe(path))
                return -EINVAL;

        r = kube_credentials_refresh(c->creds, kube_client_now(c));
        if (r < 0)
                return r;

        if (asprintf(&url, "%s%s", c->server, path) < 0)
                return -ENOMEM;
        r = http_request_new(c->http, method, url, &h);
        if (r < 0)
                return r;

        kube_credentials_tls(c->creds, &tls);
        r = http_request_set_tls(h, &tls);
        if (r < 0)
                return r;

        if ((r = add_header(h, "Accept", "application/json")) < 0 ||
            (r = add_header(h, "User-Agent", USER_AGENT)) < 0 ||
            /* No "Expect: 100-continue" round trip for bodies. */
            (r = http_request_add_header(h, "Expect:")) < 0)
                return r;

        token = kube_credentials_token(c->creds);
        if (token) {
                _cleanup_free_ char *value = NULL;

                if (asprintf(&value, "Bearer %s", token) < 0)
                        return -ENOMEM;
                r = add_header(h, "Authorization", value);
                explicit_bzero(value, strlen(value));
                if (r < 0)
                        return r;
        }
        if (ret_token) {
                *ret_token = token ? strdup(token) : NULL;
                if (token && !*ret_token)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(h);
        return 0;
}

int kube_client_prepare(KubeClient *c, const char *method, const char *path, HttpRequest **ret) {
        assert(c);
        assert(method);
        assert(path);
        assert(ret);

        return prepare(c, method, path, NULL, ret);
}

static void unauthorized(KubeClient *c) {
        (void) kube_credentials_invalidate_token(c->creds);
        if (c->on_unauthorized)
                c->on_unauthorized(c, c->unauthorized_userdata);
}

void kube_client_observe_status(KubeClient *c, long status) {
        assert(c);

        if (status == 401)
                unauthorized(c);
}

void kube_client_set_unauthorized_callback(KubeClient *c, KubeClientUnauthorizedCallback cb,
                                           void *userdata) {
        assert(c);
        c->on_unauthorized = cb;
        c->unauthorized_userdata = userdata;
}

static void floating_unlink(KubeRequest *r) {
        KubeClient *c = r->client;

        if (!r->floating)
                return;
        if (r->prev)
                r->prev->next = r->next;
        else
                c->floating = r->next;
        if (r->next)
                r->next->prev = r->prev;
        r->next = r->prev = NULL;
        r->floating = false;
}

KubeRequest *kube_request_free(KubeRequest *r) {
        if (!r)
                return NULL;
        floating_unlink(r);
        http_request_free(r->http);
        sd_event_source_disable_unref(r->retry_timer);
        free(r->method);
        free(r->path);
        free(r->body);
        token_free(r->token_used);
        free(r->reason);
        free(r->message);
        free(r);
        return NULL;
}

static int kube_request_send(KubeRequest *r);

static void kube_request_finish(KubeRequest *r, int error, json_t *object) {
        bool floating = r->floating;

        r->http = http_request_free(r->http);
        log_debug("%s %s: %li%s%s%s%s (%u attempt%s)", r->method, r->path, r->status, r->reason ? " " : "",
                  strempty(r->reason), error < 0 ? ", " : "", error < 0 ? strerror(-error) : "", r->attempts,
                  r->attempts == 1 ? "" : "s");

        /* Floating requests are ours: free them after the callback. Others may be freed by it. */
        if (r->cb)
                r->cb(r, error, object, r->userdata);
        if (floating)
                kube_request_free(r);
}

static int kube_request_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeRequest *r = userdata;
        int err;

        r->retry_timer = sd_event_source_disable_unref(r->retry_timer);
        err = kube_request_send(r);
        if (err < 0)
                kube_request_finish(r, err, NULL);
        return 0;
}

static int schedule_retry(KubeRequest *r, uint64_t delay_usec) {
        int err;

        r->http = http_request_free(r->http);
        err = sd_event_add_time_relative(r->client->event, &r->retry_timer, CLOCK_MONOTONIC, delay_usec,
                                         USEC_PER_MSEC, kube_request_on_retry_timer, r);
        if (err < 0)
                return err;
        (void) sd_event_source_set_description(r->retry_timer, "kube-request-retry");
        return 0;
}

static void record_answer(KubeRequest *r, json_t *object) {
        const char *body;
        size_t size;

        r->retry_after_usec = http_request_get_retry_after_usec(r->http);
        free(r->reason);
        free(r->message);
        r->reason = r->message = NULL;
        if (r->status >= 200 && r->status < 300)
                return;

        if (json_is_object(object) &&
            streq_ptr(json_string_value(json_object_get(object, "kind")), "Status")) {
                const char *reason = json_string_value(json_object_get(object, "reason"));
                const char *message = json_string_value(json_object_get(object, "message"));

                r->reason = reason ? strdup(reason) : NULL;
                r->message = message ? strndup(message, 1024) : NULL;
                return;
        }
        /* Plain text, e.g. APF's "Too many requests, please try again later." */
        body = http_request_get_body(r->http, &size);
        if (size > 0)
                r->message = strndup(body, MIN(strcspn(body, "\r\n"), (size_t) PLAIN_MESSAGE_MAX));
}

/* Returns the delay before the next attempt, or USEC_INFINITY when the answer is final. */
static uint64_t retry_delay(KubeRequest *r, int error) {
        if (r->attempts > KUBE_CLIENT_RETRIES)
                return USEC_INFINITY;

        /* The server said when to come back. 429 means the request was not processed (rejected
         * before any handler), so even a POST may be sent again; a 503 might have been processed.
         * Other 5xx are left to the caller: a 504 "too large resource version" carries Retry-After: 1
         * too, but repeating the same LIST cannot succeed — the reflector has to change the RV. */
        if (r->retry_after_usec > 0 && (r->status == 429 || (r->status == 503 && r->repeatable)))
                return r->retry_after_usec;

        /* Connection lost (reset, GOAWAY, EOF): like client-go for GETs, after 1 s; never for POST,
         * which may have been executed. */
        if (error == -ECONNRESET && r->status == 0 && r->repeatable)
                return RECONNECT_RETRY_USEC;

        return USEC_INFINITY;
}

static void kube_request_on_done(HttpRequest *h, int error, long status, void *userdata) {
        KubeRequest *r = userdata;
        KubeClient *c = r->client;
        json_auto_t *object = NULL;
        const char *body;
        uint64_t delay;
        size_t size;

        r->status = error < 0 ? 0 : status;
        if (error == 0) {
                body = http_request_get_body(h, &size);
                if (size > 0)
                        /* A NUL (\u0000) in any string of the object must not make it unreadable: the
                         * decoders reject it where they use the value (docs/kube-api.md §2). */
                        object = json_loadb(body, size, JSON_ALLOW_NUL, NULL);
                error = http_error_from_result(CURLE_OK, status);
                if (error == 0 && !json_is_object(object))
                        error = -EBADMSG;
        }
        record_answer(r, object);

        if (r->status == 401) {
                (void) kube_credentials_invalidate_token(c->creds);
                if (!r->retried_401 && kube_credentials_refresh(c->creds, kube_client_now(c)) >= 0 &&
                    !streq_ptr(kube_credentials_token(c->creds), r->token_used)) {
                        int err;

                        /* The token file was rotated since our last read: one immediate retry. */
                        r->retried_401 = true;
                        r->http = http_request_free(r->http);
                        err = kube_request_send(r);
                        if (err >= 0)
                                return;
                        error = err;
                }
                if (c->on_unauthorized)
                        c->on_unauthorized(c, c->unauthorized_userdata);
        }

        delay = retry_delay(r, error);
        if (delay != USEC_INFINITY) {
                log_debug("%s %s: %li %s, retrying in %" PRIu64 " ms.", r->method, r->path, r->status,
                          error < 0 ? strerror(-error) : "", delay / USEC_PER_MSEC);
                if (schedule_retry(r, delay) >= 0)
                        return;
        }

        kube_request_finish(r, error, object);
}

static int kube_request_send(KubeRequest *r) {
        int err;

        assert(!r->http);

        token_free(r->token_used);
        r->token_used = NULL;
        err = prepare(r->client, r->method, r->path, &r->token_used, &r->http);
        if (err < 0)
                return err;
        http_request_set_timeout(r->http, r->timeout_usec, 0);
        http_request_set_max_body(r->http, KUBE_RESPONSE_MAX);
        /* A POST that may have been executed is never sent twice: not by us (repeatable is false) and
         * not by libcurl, which replays requests on reused connections that die without an answer. */
        if (!r->repeatable)
                http_request_set_fresh_connect(r->http, true);
        if (r->body) {
                _cleanup_free_ char *ct = NULL;

                if (asprintf(&ct, "Content-Type: %s", r->content_type) < 0)
                        return -ENOMEM;
                if ((err = http_request_add_header(r->http, ct)) < 0 ||
                    (err = http_request_set_body(r->http, r->body, strlen(r->body))) < 0)
                        return err;
        }
        r->attempts++;
        return http_request_start(r->http, kube_request_on_done, r);
}

static int kube_client_request(KubeClient *c, const char *method, const char *path, const char *content_type,
                               const json_t *body, uint64_t timeout_usec, KubeRequestCallback cb,
                               void *userdata, KubeRequest **ret) {
        _cleanup_(kube_request_freep) KubeRequest *r = NULL;
        int err;

        assert(c);
        assert(path);

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        *r = (KubeRequest) {
                .client = c,
                .content_type = content_type,
                .timeout_usec = timeout_usec,
                .repeatable = !streq(method, "POST"),
                .cb = cb,
                .userdata = userdata,
        };
        r->method = strdup(method);
        r->path = strdup(path);
        if (!r->method || !r->path)
                return -ENOMEM;
        if (body) {
                r->body = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!r->body)
                        return -ENOMEM;
        }

        err = kube_request_send(r);
        if (err < 0)
                return err;

        if (ret)
                *ret = TAKE_PTR(r);
        else {
                KubeRequest *f = TAKE_PTR(r);

                f->floating = true;
                f->next = c->floating;
                if (c->floating)
                        c->floating->prev = f;
                c->floating = f;
        }
        return 0;
}

int kube_client_send(KubeClient *c, const char *method, const char *path, const json_t *body,
                     uint64_t timeout_usec, KubeRequestCallback cb, void *userdata, KubeRequest **ret) {
        uint64_t limit = c->tuning->request_timeout_usec;

        assert(method);
        return kube_client_request(c, method, path, body ? "application/json" : NULL, body,
                                   timeout_usec > 0 ? MIN(timeout_usec, limit) : limit, cb, userdata, ret);
}

int kube_client_get(KubeClient *c, const char *path, KubeRequestCallback cb, void *userdata,
                    KubeRequest **ret) {
        return kube_client_send(c, "GET", path, NULL, 0, cb, userdata, ret);
}

int kube_client_delete(KubeClient *c, const char *path, KubeRequestCallback cb, void *userdata,
                       KubeRequest **ret) {
        return kube_client_send(c, "DELETE", path, NULL, 0, cb, userdata, ret);
}

int kube_client_post(KubeClient *c, const char *path, const json_t *body, KubeRequestCallback cb,
                     void *userdata, KubeRequest **ret) {
        assert(body);
        return kube_client_send(c, "POST", path, body, 0, cb, userdata, ret);
}

int kube_client_put(KubeClient *c, const char *path, const json_t *body, KubeRequestCallback cb,
                    void *userdata, KubeRequest **ret) {
        assert(body);
        return kube_client_send(c, "PUT", path, body, 0, cb, userdata, ret);
}

int kube_client_patch(KubeClient *c, const char *path, KubePatchType type, const json_t *body,
                      KubeRequestCallback cb, void *userdata, KubeRequest **ret) {
        const char *ct = kube_patch_type_to_content_type(type);

        assert(body);
        assert(ct);
        return kube_client_request(c, "PATCH", path, ct, body, c->tuning->patch_timeout_usec, cb, userdata,
                                   ret);
}

long kube_request_get_status(const KubeRequest *r) {
        return r->status;
}

const char *kube_request_get_reason(const KubeRequest *r) {
        return r->reason;
}

const char *kube_request_get_message(const KubeRequest *r) {
        return r->message;
}

uint64_t kube_request_get_retry_after_usec(const KubeRequest *r) {
        return r->retry_after_usec;
}

unsigned kube_request_get_attempts(const KubeRequest *r) {
        return r->attempts;
}

const char *kube_request_get_method(const KubeRequest *r) {
        return r->method;
}

const char *kube_request_get_path(const KubeRequest *r) {
        return r->path;
}
