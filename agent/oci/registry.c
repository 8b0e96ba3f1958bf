/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>

#include "oci/registry-auth.h"
#include "oci/registry.h"
#include "util/backoff.h"
#include "util/event-util.h"
#include "util/fileio.h"

#define RETRY_MAX_USEC (30 * USEC_PER_SEC)
#define MANIFEST_TIMEOUT_USEC (60 * USEC_PER_SEC)
#define TOKEN_TIMEOUT_USEC (30 * USEC_PER_SEC)
#define REHASH_SLICE (4U * 1024U * 1024U)
#define MESSAGE_BODY_MAX (64U * 1024U)

typedef struct Token {
        char *endpoint;                 /* owned */
        char *scope;                    /* owned */
        char *authorization;            /* owned: the whole header value */
        uint64_t expires_usec;          /* CLOCK_MONOTONIC */
        struct Token *next;             /* owned */
} Token;

struct RegistryClient {
        sd_event *event;                /* ref held */
        Http *http;                     /* borrowed: outlives the client */
        char *ca_file;                  /* owned; NULL = system store */
        char *auth_file;                /* owned; NULL = no credentials */
        RegistryMirror *mirrors;        /* owned array */
        size_t n_mirrors;
        char *blob_directory;           /* owned */
        unsigned max_attempts;
        uint64_t retry_base_usec;
        uint64_t min_free_bytes;
        uint64_t stall_bytes, stall_usec;
        Token *tokens;                  /* owned list */
        unsigned n_ops;
};

typedef enum OpKind {
        OP_MANIFEST,
        OP_BLOB,
} OpKind;

struct RegistryOp {
        RegistryClient *client;         /* borrowed */
        OpKind kind;
        OciRef *ref;                    /* owned copy */
        char *scope;                    /* owned: repository:<repo>:pull */
        char **endpoints;               /* owned strv: base URLs, mirror first */
        size_t n_endpoints, endpoint;
        unsigned attempt;
        bool auth_answered;             /* a 401 was already answered at this endpoint */
        char *authorization;            /* owned: header value for this endpoint, NULL = none */
        char *path;                     /* owned: /v2/<repo>/manifests/<ref> or /blobs/<digest> */

        HttpRequest *req;               /* owned: the registry request in flight */
        HttpRequest *token_req;         /* owned: the token request in flight */
        sd_event_source *timer;         /* owned: retry backoff */
        sd_event_source *defer;         /* owned: deferred start/finish and re-hashing */

        /* the failure that ends this endpoint, and the one reported when all endpoints failed */
        int error;
        ArtifactFailure failure;
        char *message;                  /* owned */
        char *first_message;            /* owned: the first endpoint's failure, once we failed over */

        /* manifests */
        bool have_expected;
        bool platform_stage;            /* the index was read; now its platform manifest */
        Digest expected;                /* what the document must hash to */
        char *top_digest;               /* owned */
        char *manifest_digest;          /* owned */
        OciManifest *manifest;          /* owned: result */
        char *os, *architecture, *variant;      /* owned; variant may be NULL */

        /* blobs */
        OciDescriptor blob;             /* media_type borrowed-by-copy: owned string */
        char *partial_path;             /* owned */
        char *final_path;               /* owned */
        int fd;                         /* owned: the .partial file */
        DigestContext *hash;            /* owned */
        uint64_t offset;                /* bytes on disk and hashed */
        uint64_t resumed_from, downloaded;
        bool restarted_from_zero;       /* the one retry from 0 after a bad resumed blob was used */
        ArtifactFailure stream_failure; /* set by the data callback when it aborts */

        RegistryProgress on_progress;
        RegistryDone on_done;
        void *userdata;                 /* borrowed */
};

static void op_send(RegistryOp *op);
static void op_endpoint_failed(RegistryOp *op);

static void token_free_all(Token *t) {
        while (t) {
                Token *next = t->next;
                free(t->endpoint);
                free(t->scope);
                free(t->authorization);
                free(t);
                t = next;
        }
}

int registry_client_new(sd_event *event, Http *http, const RegistryOptions *o, RegistryClient **ret) {
        _cleanup_(registry_client_freep) RegistryClient *c = NULL;
        int r;

        assert(event);
        assert(http);
        assert(o);
        assert(o->blob_directory);
        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(event);
        c->http = http;
        c->max_attempts = o->max_attempts ? o->max_attempts : 4;
        c->retry_base_usec = o->retry_base_usec ? o->retry_base_usec : 500 * USEC_PER_MSEC;
        c->min_free_bytes = o->min_free_bytes ? o->min_free_bytes : 64ULL * 1024 * 1024;
        c->stall_bytes = o->stall_bytes ? o->stall_bytes : REGISTRY_STALL_BYTES;
        c->stall_usec = o->stall_usec ? o->stall_usec : REGISTRY_STALL_USEC;
        if (free_and_strdup(&c->ca_file, isempty(o->ca_file) ? NULL : o->ca_file) < 0 ||
            free_and_strdup(&c->auth_file, isempty(o->auth_file) ? NULL : o->auth_file) < 0 ||
            free_and_strdup(&c->blob_directory, o->blob_directory) < 0)
                return -ENOMEM;
        if (o->n_mirrors > 0) {
                c->mirrors = calloc(o->n_mirrors, sizeof(RegistryMirror));
                if (!c->mirrors)
                        return -ENOMEM;
                for (; c->n_mirrors < o->n_mirrors; c->n_mirrors++) {
                        RegistryMirror *m = &c->mirrors[c->n_mirrors];

                        m->host = strdup(o->mirrors[c->n_mirrors].host);
                        m->url = strdup(o->mirrors[c->n_mirrors].url);
                        if (!m->host || !m->url) {
                                c->n_mirrors++;
                                return -ENOMEM;
                        }
                }
        }
        r = mkdir_parents(c->blob_directory, 0700);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

RegistryClient *registry_client_free(RegistryClient *c) {
        if (!c)
                return NULL;
        assert(c->n_ops == 0);
        for (size_t i = 0; i < c->n_mirrors; i++) {
                free(c->mirrors[i].host);
                free(c->mirrors[i].url);
        }
        free(c->mirrors);
        token_free_all(c->tokens);
        free(c->ca_file);
        free(c->auth_file);
        free(c->blob_directory);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}

int registry_blob_path(RegistryClient *c, const Digest *d, char **ret) {
        char hex[2 * DIGEST_SHA256_SIZE + 1];

        return asprintf(ret, "%s/%s", c->blob_directory, digest_format_hex(d, hex)) < 0 ? -ENOMEM : 0;
}

int registry_blob_partial_path(RegistryClient *c, const Digest *d, char **ret) {
        char hex[2 * DIGEST_SHA256_SIZE + 1];

        return asprintf(ret, "%s/%s.partial", c->blob_directory, digest_format_hex(d, hex)) < 0 ? -ENOMEM : 0;
}

static const char *token_lookup(RegistryClient *c, const char *endpoint, const char *scope) {
        for (Token *t = c->tokens; t; t = t->next)
                if (streq(t->endpoint, endpoint) && streq(t->scope, scope))
                        return t->expires_usec > event_now_usec(c->event) ? t->authorization : NULL;
        return NULL;
}

static int token_store(RegistryClient *c, const char *endpoint, const char *scope, const char *authorization,
                       uint64_t lifetime_usec) {
        Token *t;

        for (t = c->tokens; t; t = t->next)
                if (streq(t->endpoint, endpoint) && streq(t->scope, scope))
                        break;
        if (!t) {
                t = calloc(1, sizeof(*t));
                if (!t)
                        return -ENOMEM;
                t->endpoint = strdup(endpoint);
                t->scope = strdup(scope);
                if (!t->endpoint || !t->scope) {
                        token_free_all(t);
                        return -ENOMEM;
                }
                t->next = c->tokens;
                c->tokens = t;
        }
        if (free_and_strdup(&t->authorization, authorization) < 0)
                return -ENOMEM;
        /* Renew a little early so a token never expires in the middle of a request. */
        t->expires_usec = event_now_usec(c->event) + (lifetime_usec > 20 * USEC_PER_SEC ? lifetime_usec - 10 * USEC_PER_SEC
                                                                           : lifetime_usec / 2);
        return 0;
}

/* "host[:port]" of a base URL, for the auth.json lookup. */
static char *endpoint_host(const char *base) {
        const char *s = strstr(base, "://");

        s = s ? s + 3 : base;
        return strndup(s, strcspn(s, "/"));
}

static int load_credentials(RegistryOp *op, RegistryCredentials **ret) {
        RegistryClient *c = op->client;
        _cleanup_free_ char *data = NULL, *host = NULL;
        size_t size;
        int r;

        if (!c->auth_file)
                return -ENOENT;
        r = read_full_file(c->auth_file, REGISTRY_AUTH_FILE_MAX, &data, &size);
        if (r < 0)
                return r == -ENOENT ? -ENOENT : r;
        /* A mirror has its own credentials if the file names it; otherwise the upstream's apply. */
        host = endpoint_host(op->endpoints[op->endpoint]);
        if (!host)
                return -ENOMEM;
        if (op->endpoint + 1 < op->n_endpoints) {
                r = registry_auth_file_lookup(data, size, host, op->ref->repository, ret);
                if (r != -ENOENT)
                        return r;
        }
        return registry_auth_file_lookup(data, size, op->ref->registry, op->ref->repository, ret);
}

static int build_endpoints(RegistryOp *op) {
        RegistryClient *c = op->client;
        const char *mirror = NULL;

        for (size_t i = 0; i < c->n_mirrors; i++)
                if (streq(c->mirrors[i].host, op->ref->registry))
                        mirror = c->mirrors[i].url;

        op->endpoints = calloc(3, sizeof(char *));
        if (!op->endpoints)
                return -ENOMEM;
        if (mirror) {
                size_t n = strlen(mirror);
                bool has_scheme = strstr(mirror, "://") != NULL;

                while (n > 0 && mirror[n - 1] == '/')
                        n--;
                if (asprintf(&op->endpoints[op->n_endpoints], "%s%.*s", has_scheme ? "" : "https://",
                             (int) n, mirror) < 0)
                        return -ENOMEM;
                op->n_endpoints++;
        }
        if (asprintf(&op->endpoints[op->n_endpoints], "https://%s", oci_ref_api_host(op->ref)) < 0)
                return -ENOMEM;
        op->n_endpoints++;
        return 0;
}

static void op_free_requests(RegistryOp *op) {
        op->req = http_request_free(op->req);
        op->token_req = http_request_free(op->token_req);
        op->timer = sd_event_source_disable_unref(op->timer);
}

RegistryOp *registry_op_free(RegistryOp *op) {
        if (!op)
                return NULL;
        op_free_requests(op);
        op->defer = sd_event_source_disable_unref(op->defer);
        if (op->fd >= 0)
                (void) close(op->fd);
        digest_context_free(op->hash);
        oci_ref_free(op->ref);
        free(op->scope);
        for (size_t i = 0; i < op->n_endpoints; i++)
                free(op->endpoints[i]);
        free(op->endpoints);
        free(op->authorization);
        free(op->path);
        free(op->message);
        free(op->first_message);
        free(op->top_digest);
        free(op->manifest_digest);
        oci_manifest_free(op->manifest);
        free(op->os);
        free(op->architecture);
        free(op->variant);
        free(op->blob.media_type);
        free(op->partial_path);
        free(op->final_path);
        op->client->n_ops--;
        free(op);
        return NULL;
}

static int op_new(RegistryClient *c, OpKind kind, const OciRef *ref, RegistryDone done, void *userdata,
                  RegistryOp **ret) {
        _cleanup_(registry_op_freep) RegistryOp *op = NULL;
        _cleanup_free_ char *s = NULL;
        int r;

        op = calloc(1, sizeof(*op));
        if (!op)
                return -ENOMEM;
        op->client = c;
        c->n_ops++;
        op->kind = kind;
        op->fd = -EBADF;
        op->on_done = done;
        op->userdata = userdata;

        /* A private copy: the caller's reference may go away while we work. */
        r = oci_ref_to_string(ref, &s);
        if (r < 0)
                return r;
        r = oci_ref_parse(s, &op->ref);
        if (r < 0)
                return r;
        if (asprintf(&op->scope, "repository:%s:pull", ref->repository) < 0) {
                op->scope = NULL;
                return -ENOMEM;
        }
        r = build_endpoints(op);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(op);
        return 0;
}

static void op_set_failure(RegistryOp *op, int error, ArtifactFailure failure, const char *fmt, ...)
        _printf_(4, 5);

static void op_set_failure(RegistryOp *op, int error, ArtifactFailure failure, const char *fmt, ...) {
        va_list ap;
        char *m = NULL;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);
        free(op->message);
        op->message = m;
        op->error = error < 0 ? error : -EIO;
        op->failure = failure;
}

static void op_finish(RegistryOp *op, bool success) {
        /* The result's strings move out of the op first: the callback may free the op and still read
         * them. */
        _cleanup_(oci_manifest_freep) OciManifest *manifest = TAKE_PTR(op->manifest);
        _cleanup_free_ char *manifest_digest = TAKE_PTR(op->manifest_digest), *top_digest = TAKE_PTR(op->top_digest),
                            *blob_path = TAKE_PTR(op->final_path), *message = TAKE_PTR(op->message);
        char *joined;

        /* A mirror's failure (a stall, a digest mismatch) says more than the upstream's after it. */
        if (!success && message && op->first_message && !streq(message, op->first_message) &&
            asprintf(&joined, "%s; before that: %s", message, op->first_message) >= 0) {
                free(message);
                message = joined;
        }
        RegistryResult res = {
                .error = success ? 0 : op->error,
                .failure = success ? ARTIFACT_FAILURE_NONE : op->failure,
                .message = success ? NULL : (message ? message : "registry operation failed"),
                .manifest = success ? manifest : NULL,
                .manifest_digest = success ? manifest_digest : NULL,
                .top_digest = success ? top_digest : NULL,
                .blob_path = success && op->kind == OP_BLOB ? blob_path : NULL,
                .bytes_downloaded = op->downloaded,
                .resumed_from = op->resumed_from,
        };

        op_free_requests(op);
        op->defer = sd_event_source_disable_unref(op->defer);
        /* Bytes that failed verification are worth nothing, not even for a resume. */
        if (!success && op->kind == OP_BLOB && op->failure == ARTIFACT_FAILURE_DIGEST_MISMATCH)
                (void) unlink(op->partial_path);
        op->on_done(op, &res, op->userdata);    /* may free op */
}

/* Human text for a failed registry answer: status plus the first error of the distribution error
 * body ({"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}) when there is one. */
static char *describe_http_failure(HttpRequest *req, int error, long status) {
        json_auto_t *root = NULL;
        const char *body;
        size_t size;
        char *m = NULL;

        if (error < 0) {
                if (asprintf(&m, "GET %s: %s", http_request_get_url(req), strerror(-error)) < 0)
                        return NULL;
                return m;
        }
        body = http_request_get_body(req, &size);
        root = size > 0 && size < MESSAGE_BODY_MAX ? json_loadb(body, size, 0, NULL) : NULL;
        if (root) {
                json_t *e = json_array_get(json_object_get(root, "errors"), 0);
                const char *code = json_string_value(json_object_get(e, "code"));
                const char *msg = json_string_value(json_object_get(e, "message"));

                if (code && asprintf(&m, "GET %s: HTTP %ld %s%s%s", http_request_get_url(req), status, code,
                                     msg ? ": " : "", strempty(msg)) >= 0)
                        return m;
        }
        if (asprintf(&m, "GET %s: HTTP %ld", http_request_get_url(req), status) < 0)
                return NULL;
        return m;
}

/* A blob transfer that failed after its 2xx headers: a stall (the low-speed limit; blob GETs have
 * no overall timeout), or a connection that ended early. Either way the bytes so far are kept. */
static char *describe_blob_cut(const RegistryOp *op, HttpRequest *req, int error) {
        char ds[DIGEST_STRING_MAX];
        int n;
        char *m;

        if (error == -ETIMEDOUT)
                n = asprintf(&m, "blob %s from %s stalled: less than %" PRIu64 " bytes/s for %" PRIu64 " s, %" PRIu64
                             " of %" PRIu64 " bytes on disk, kept to resume", digest_format(&op->blob.digest, ds),
                             http_request_get_url(req), op->client->stall_bytes,
                             op->client->stall_usec / USEC_PER_SEC, op->offset, op->blob.size);
        else
                n = asprintf(&m, "blob %s from %s: transfer cut off (%s), %" PRIu64 " of %" PRIu64
                             " bytes on disk, kept to resume", digest_format(&op->blob.digest, ds),
                             http_request_get_url(req), strerror(-error), op->offset, op->blob.size);
        return n < 0 ? NULL : m;
}

static bool is_transient(int error, long status) {
        if (error < 0)
                return error != -EFBIG && error != -ENOSPC && error != -ENOMEM && error != -ERANGE &&
                       error != -EKEYREJECTED && error != -ENOKEY;
        return status == 408 || status == 429 || status >= 500;
}

static int op_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        RegistryOp *op = userdata;

        op->timer = sd_event_source_disable_unref(op->timer);
        op_send(op);
        return 0;
}

/* Retry at the same endpoint after a backoff, or give up on it. */
static void op_retry_or_next(RegistryOp *op, bool transient, uint64_t retry_after_usec) {
        RegistryClient *c = op->client;
        uint64_t delay;
        int r;

        op->req = http_request_free(op->req);
        if (!transient || ++op->attempt >= c->max_attempts) {
                op_endpoint_failed(op);
                return;
        }
        delay = backoff_exponential(c->retry_base_usec, RETRY_MAX_USEC, op->attempt - 1);
        delay = MAX(delay, MIN(retry_after_usec, RETRY_MAX_USEC));
        r = sd_event_add_time_relative(c->event, &op->timer, CLOCK_MONOTONIC, delay, 0, op_on_retry_timer, op);
        if (r < 0) {
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot schedule retry: %s", strerror(-r));
                op_finish(op, false);
                return;
        }
        (void) sd_event_source_set_description(op->timer, "registry-retry");
}

static void op_reset_endpoint_state(RegistryOp *op) {
        op->attempt = 0;
        op->auth_answered = false;
        free(op->authorization);
        op->authorization = NULL;
}

static void blob_restart_from_zero(RegistryOp *op);

/* The current endpoint is done for: try the next one, or report the last failure. */
static void op_endpoint_failed(RegistryOp *op) {
        op->req = http_request_free(op->req);
        if (op->endpoint + 1 >= op->n_endpoints) {
                op_finish(op, false);
                return;
        }
        if (!op->first_message && op->message)
                op->first_message = strdup(op->message);        /* best effort: only for the message */
        op->endpoint++;
        op_reset_endpoint_state(op);
        if (op->kind == OP_BLOB && op->failure == ARTIFACT_FAILURE_DIGEST_MISMATCH)
                blob_restart_from_zero(op);
        op_send(op);
}

/* ---- authentication ---- */

static void op_on_token(HttpRequest *req, int error, long status, void *userdata) {
        RegistryOp *op = userdata;
        _cleanup_free_ char *token = NULL, *header = NULL;
        uint64_t lifetime = 0;
        const char *body;
        size_t size;
        int r;

        if (error < 0 || status < 200 || status >= 300) {
                _cleanup_free_ char *m = describe_http_failure(req, error, status);

                op->token_req = http_request_free(op->token_req);
                op_set_failure(op, error < 0 ? error : http_error_from_result(CURLE_OK, status),
                               ARTIFACT_FAILURE_UNAVAILABLE, "token request failed: %s", strempty(m));
                /* A retry must answer the challenge again rather than call it rejected. */
                op->auth_answered = false;
                op_retry_or_next(op, is_transient(error, status), 0);
                return;
        }
        body = http_request_get_body(req, &size);
        r = registry_token_parse(body, size, &token, &lifetime);
        op->token_req = http_request_free(op->token_req);
        if (r < 0) {
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "token service answered without a usable token");
                op_endpoint_failed(op);
                return;
        }
        if (asprintf(&header, "Bearer %s", token) < 0 ||
            token_store(op->client, op->endpoints[op->endpoint], op->scope, header, lifetime) < 0) {
                op_set_failure(op, -ENOMEM, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                op_finish(op, false);
                return;
        }
        free(op->authorization);
        op->authorization = TAKE_PTR(header);
        op_send(op);
}

static int op_request_token(RegistryOp *op, const RegistryChallenge *ch, const RegistryCredentials *creds) {
        RegistryClient *c = op->client;
        _cleanup_free_ char *url = NULL, *basic = NULL, *header = NULL;
        HttpTls tls = { .ca_file = c->ca_file };
        int r;

        r = registry_challenge_token_url(ch, op->scope, &url);
        if (r < 0)
                return r;
        /* Never send a password over plain HTTP, whatever the registry's challenge asks for. */
        if (creds && strncmp(url, "https://", 8) != 0)
                return -EPERM;

        r = http_request_new(c->http, "GET", url, &op->token_req);
        if (r < 0)
                return r;
        if (creds) {
                r = registry_credentials_basic_header(creds, &basic);
                if (r < 0)
                        return r;
                if (asprintf(&header, "Authorization: %s", basic) < 0)
                        return -ENOMEM;
                r = http_request_add_header(op->token_req, header);
                explicit_bzero(header, strlen(header));
                if (r < 0)
                        return r;
        }
        r = http_request_set_tls(op->token_req, &tls);
        if (r < 0)
                return r;
        http_request_set_timeout(op->token_req, TOKEN_TIMEOUT_USEC, 0);
        http_request_set_max_body(op->token_req, 2 * REGISTRY_TOKEN_MAX);
        http_request_set_follow(op->token_req, true);
        return http_request_start(op->token_req, op_on_token, op);
}

/* A 401: answer the challenge once per endpoint. Returns true if a new attempt is under way. */
static bool op_answer_challenge(RegistryOp *op, HttpRequest *req) {
        _cleanup_(registry_challenge_freep) RegistryChallenge *ch = NULL;
        _cleanup_(registry_credentials_freep) RegistryCredentials *creds = NULL;
        const char *header = http_request_get_header(req, "WWW-Authenticate");
        int r;

        if (op->auth_answered) {
                op_set_failure(op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                               "GET %s: HTTP 401: credentials rejected", http_request_get_url(req));
                return false;
        }
        op->auth_answered = true;

        r = registry_challenge_parse(header, &ch);
        if (r < 0) {
                op_set_failure(op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                               "GET %s: HTTP 401 without a usable WWW-Authenticate challenge", http_request_get_url(req));
                return false;
        }
        r = load_credentials(op, &creds);
        if (r < 0 && r != -ENOENT) {
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot read registry.authFile %s: %s",
                               op->client->auth_file, strerror(-r));
                return false;
        }

        if (ch->scheme == REGISTRY_AUTH_BASIC) {
                _cleanup_free_ char *basic = NULL;

                if (!creds) {
                        op_set_failure(op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                                       "GET %s: HTTP 401: authentication required and registry.authFile has no "
                                       "credentials for %s", http_request_get_url(req), op->ref->registry);
                        return false;
                }
                r = registry_credentials_basic_header(creds, &basic);
                if (r < 0)
                        return false;
                free(op->authorization);
                op->authorization = TAKE_PTR(basic);
                op->req = http_request_free(op->req);
                op_send(op);
                return true;
        }

        op->req = http_request_free(op->req);
        r = op_request_token(op, ch, creds);
        if (r < 0) {
                op->token_req = http_request_free(op->token_req);
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot request a token from %s: %s",
                               ch->realm, strerror(-r));
                op_endpoint_failed(op);
        }
        return true;
}

/* ---- manifests ---- */

static void manifest_next_stage(RegistryOp *op, const OciDescriptor *d) {
        char buf[DIGEST_STRING_MAX];

        free(op->path);
        op->path = NULL;
        if (asprintf(&op->path, "/v2/%s/manifests/%s", op->ref->repository, digest_format(&d->digest, buf)) < 0) {
                op_set_failure(op, -ENOMEM, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                op_finish(op, false);
                return;
        }
        op->have_expected = true;
        op->expected = d->digest;
        op->endpoint = 0;
        op_reset_endpoint_state(op);
        op_send(op);
}

/* Returns true when the op went on (next stage) or finished; false to fail this endpoint. */
static bool manifest_handle(RegistryOp *op, HttpRequest *req) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        _cleanup_free_ char *mismatch = NULL;
        char actual_s[DIGEST_STRING_MAX];
        const char *body, *header;
        const OciDescriptor *d;
        Digest actual, claimed;
        size_t size;
        int r;

        body = http_request_get_body(req, &size);
        (void) digest_buffer(body, size, &actual);
        digest_format(&actual, actual_s);

        header = http_request_get_header(req, "Docker-Content-Digest");
        if (op->have_expected)
                r = digest_verify(&op->expected, &actual, &mismatch);
        else if (header && digest_parse(header, &claimed) >= 0)
                r = digest_verify(&claimed, &actual, &mismatch);
        else
                r = 0;  /* a tag, and a registry that does not say: nothing to compare against */
        if (r < 0) {
                op_set_failure(op, r, ARTIFACT_FAILURE_DIGEST_MISMATCH, "manifest %s: %s", http_request_get_url(req),
                               strempty(mismatch));
                return false;
        }

        r = oci_manifest_parse(body, size, http_request_get_header(req, "Content-Type"), &m);
        if (r < 0) {
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "manifest %s: %s", http_request_get_url(req),
                               r == -EPROTONOSUPPORT ? "unsupported manifest kind or layer type" : "malformed manifest");
                return false;
        }
        if (!op->top_digest) {
                op->top_digest = strdup(actual_s);
                if (!op->top_digest)
                        return false;
        }

        if (m->kind == OCI_MANIFEST_INDEX) {
                if (op->platform_stage || oci_manifest_select_platform(m, op->os, op->architecture, op->variant, &d) < 0) {
                        op_set_failure(op, -ENOENT, ARTIFACT_FAILURE_UNAVAILABLE, "%s has no manifest for %s/%s%s%s",
                                       http_request_get_url(req), op->os, op->architecture,
                                       op->variant ? "/" : "", strempty(op->variant));
                        op_finish(op, false);
                        return true;
                }
                op->platform_stage = true;
                op->req = http_request_free(op->req);
                manifest_next_stage(op, d);
                return true;
        }

        free(op->manifest_digest);
        op->manifest_digest = strdup(actual_s);
        op->manifest = TAKE_PTR(m);
        if (!op->manifest_digest)
                return false;
        op_finish(op, true);
        return true;
}

/* ---- blobs ---- */

static int blob_write(RegistryOp *op, const void *data, size_t size) {
        const char *p = data;

        for (size_t left = size; left > 0;) {
                ssize_t n = pwrite(op->fd, p, left, (off_t) op->offset + (off_t) (size - left));

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                left -= (size_t) n;
        }
        return digest_context_update(op->hash, data, size);
}

static int blob_on_data(HttpRequest *req, const void *data, size_t size, void *userdata) {
        RegistryOp *op = userdata;
        int r;

        if (op->offset + size > op->blob.size) {
                op->stream_failure = ARTIFACT_FAILURE_DIGEST_MISMATCH;
                return -EFBIG;
        }
        r = blob_write(op, data, size);
        if (r < 0) {
                op->stream_failure = r == -ENOSPC || r == -EDQUOT ? ARTIFACT_FAILURE_DISK_SPACE
                                                                 : ARTIFACT_FAILURE_UNAVAILABLE;
                return r;
        }
        op->offset += size;
        op->downloaded += size;
        if (op->on_progress)
                op->on_progress(op, op->offset, op->blob.size, op->userdata);
        return 0;
}

static void blob_restart_from_zero(RegistryOp *op) {
        op->offset = 0;
        op->resumed_from = 0;
        (void) digest_context_reset(op->hash);
        /* Whoever reads the file while it grows must know that its bytes are no longer final. */
        if (op->on_progress)
                op->on_progress(op, 0, op->blob.size, op->userdata);
        /* Stale bytes past what is written again would end up in the verified file: if the file
         * cannot be cut, drop it; the next write fails and the attempt starts over on a new file. */
        if (op->fd >= 0 && ftruncate(op->fd, 0) < 0) {
                (void) unlink(op->partial_path);
                (void) close(op->fd);
                op->fd = -EBADF;
        }
}

/* The whole blob is on disk and hashed: verify, then make it visible under its final name. */
static bool blob_complete(RegistryOp *op) {
        _cleanup_free_ char *mismatch = NULL;
        Digest actual;
        int r;

        r = digest_context_final(op->hash, &actual);
        if (r >= 0)
                r = digest_verify(&op->blob.digest, &actual, &mismatch);
        if (r < 0) {
                bool was_resumed = op->resumed_from > 0 && !op->restarted_from_zero;

                op_set_failure(op, r, ARTIFACT_FAILURE_DIGEST_MISMATCH, "blob from %s%s: %s",
                               op->endpoints[op->endpoint], op->path, strempty(mismatch));
                blob_restart_from_zero(op);
                if (was_resumed) {
                        /* The prefix from an earlier run may be what is wrong (lost writes after a
                         * crash): one fresh download decides. */
                        op->restarted_from_zero = true;
                        op->req = http_request_free(op->req);
                        op_send(op);
                        return true;
                }
                return false;
        }

        if (fsync(op->fd) < 0 || rename(op->partial_path, op->final_path) < 0) {
                r = -errno;
                op_set_failure(op, r, r == -ENOSPC ? ARTIFACT_FAILURE_DISK_SPACE : ARTIFACT_FAILURE_UNAVAILABLE,
                               "cannot store blob %s: %s", op->final_path, strerror(-r));
                op_finish(op, false);
                return true;
        }
        (void) fsync_parent_dir(op->final_path);
        (void) close(op->fd);
        op->fd = -EBADF;
        op_finish(op, true);
        return true;
}

static bool blob_handle(RegistryOp *op, HttpRequest *req) {
        if (op->offset < op->blob.size) {
                /* The server said "done" early: resume from here like after a reset. */
                op_set_failure(op, -ECONNRESET, ARTIFACT_FAILURE_UNAVAILABLE, "blob from %s: short body (%llu of %llu bytes)",
                               http_request_get_url(req), (unsigned long long) op->offset,
                               (unsigned long long) op->blob.size);
                op_retry_or_next(op, true, 0);
                return true;
        }
        return blob_complete(op);
}

static int blob_check_space(RegistryOp *op) {
        struct statvfs sv;
        uint64_t need = op->blob.size - op->offset + op->client->min_free_bytes;

        if (fstatvfs(op->fd, &sv) < 0) {
                op_set_failure(op, -errno, ARTIFACT_FAILURE_UNAVAILABLE, "cannot check free space in %s: %m",
                               op->client->blob_directory);
                return -EIO;
        }
        if ((uint64_t) sv.f_bavail * sv.f_frsize < need) {
                op_set_failure(op, -ENOSPC, ARTIFACT_FAILURE_DISK_SPACE,
                               "not enough free space in %s for blob %s: need %llu bytes, have %llu",
                               op->client->blob_directory, op->path, (unsigned long long) need,
                               (unsigned long long) sv.f_bavail * sv.f_frsize);
                return -ENOSPC;
        }
        return 0;
}

/* ---- sending ---- */

static int op_prepare_request(RegistryOp *op, HttpRequest **ret) {
        RegistryClient *c = op->client;
        _cleanup_(http_request_freep) HttpRequest *req = NULL;
        _cleanup_free_ char *url = NULL, *auth_header = NULL;
        HttpTls tls = { .ca_file = c->ca_file };
        const char *cached;
        int r;

        if (asprintf(&url, "%s%s", op->endpoints[op->endpoint], op->path) < 0)
                return -ENOMEM;
        r = http_request_new(c->http, "GET", url, &req);
        if (r < 0)
                return r;
        r = http_request_set_tls(req, &tls);
        if (r < 0)
                return r;

        cached = op->authorization ? op->authorization : token_lookup(c, op->endpoints[op->endpoint], op->scope);
        if (cached) {
                if (asprintf(&auth_header, "Authorization: %s", cached) < 0)
                        return -ENOMEM;
                r = http_request_add_header(req, auth_header);
                if (r < 0)
                        return r;
        }

        if (op->kind == OP_MANIFEST) {
                r = http_request_add_header(req, "Accept: " OCI_MANIFEST_ACCEPT);
                if (r < 0)
                        return r;
                http_request_set_timeout(req, MANIFEST_TIMEOUT_USEC, 0);
                http_request_set_max_body(req, OCI_MANIFEST_MAX);
        } else {
                http_request_set_stream(req, blob_on_data);
                http_request_set_low_speed(req, op->client->stall_bytes, op->client->stall_usec);
                if (op->offset > 0)
                        http_request_set_resume_from(req, op->offset);
                http_request_set_max_body(req, MESSAGE_BODY_MAX);
        }
        /* Blob redirects go to storage on another host; curl drops our Authorization there. */
        http_request_set_follow(req, true);

        *ret = TAKE_PTR(req);
        return 0;
}

static void op_on_response(HttpRequest *req, int error, long status, void *userdata) {
        RegistryOp *op = userdata;
        _cleanup_free_ char *m = NULL;
        bool handled;

        if (error == 0 && status == 401) {
                if (!op_answer_challenge(op, req))
                        op_endpoint_failed(op);
                return;
        }

        if (error == 0 && status >= 200 && status < 300) {
                handled = op->kind == OP_MANIFEST ? manifest_handle(op, req) : blob_handle(op, req);
                if (!handled)
                        op_endpoint_failed(op);
                return;
        }

        if (op->kind == OP_BLOB && (error == -ERANGE || status == 416)) {
                /* The server cannot resume: start over, without counting it as a failed attempt. */
                blob_restart_from_zero(op);
                op->req = http_request_free(op->req);
                op_send(op);
                return;
        }
        if (op->kind == OP_BLOB && op->stream_failure != ARTIFACT_FAILURE_NONE) {
                ArtifactFailure f = op->stream_failure;

                op->stream_failure = ARTIFACT_FAILURE_NONE;
                if (f == ARTIFACT_FAILURE_DIGEST_MISMATCH)
                        op_set_failure(op, -EBADMSG, f, "blob from %s: larger than its descriptor size %llu",
                                       http_request_get_url(req), (unsigned long long) op->blob.size);
                else
                        op_set_failure(op, error, f, "cannot write blob %s: %s", op->partial_path, strerror(-error));
                if (f == ARTIFACT_FAILURE_DISK_SPACE)
                        op_finish(op, false);
                else
                        op_endpoint_failed(op);
                return;
        }

        if (op->kind == OP_BLOB && error < 0 && status >= 200 && status < 300 && op->offset == op->blob.size) {
                /* Every byte the descriptor promised arrived before the transfer failed (a
                 * Content-Length longer than the body, a reset after the last byte): the digest
                 * decides, not the framing. Asking again for bytes from the end could only fail. */
                if (!blob_complete(op))
                        op_endpoint_failed(op);
                return;
        }
        if (op->kind == OP_BLOB && error < 0 && status >= 200 && status < 300)
                m = describe_blob_cut(op, req, error);
        else
                m = describe_http_failure(req, error, status);
        op_set_failure(op, error < 0 ? error : http_error_from_result(CURLE_OK, status), ARTIFACT_FAILURE_UNAVAILABLE,
                       "%s", strempty(m));
        op_retry_or_next(op, is_transient(error, status), http_request_get_retry_after_usec(req));
}

static void op_send(RegistryOp *op) {
        int r;

        assert(!op->req);

        if (op->kind == OP_BLOB) {
                /* A failed attempt may have written bytes it never hashed: cut back to what is. */
                if (ftruncate(op->fd, (off_t) op->offset) < 0) {
                        op_set_failure(op, -errno, ARTIFACT_FAILURE_UNAVAILABLE, "cannot prepare %s: %m",
                                       op->partial_path);
                        op_finish(op, false);
                        return;
                }
                if (blob_check_space(op) < 0) {
                        op_finish(op, false);
                        return;
                }
        }
        r = op_prepare_request(op, &op->req);
        if (r >= 0)
                r = http_request_start(op->req, op_on_response, op);
        if (r < 0) {
                op->req = http_request_free(op->req);
                op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot send request to %s: %s",
                               op->endpoints[op->endpoint], strerror(-r));
                op_finish(op, false);
        }
}

static int op_on_start(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;

        op->defer = sd_event_source_disable_unref(op->defer);
        op_send(op);
        return 0;
}

/* Starting from a deferred event keeps the promise that no callback runs inside the start call. */
static int op_defer(RegistryOp *op, sd_event_handler_t handler) {
        int r;

        r = sd_event_add_defer(op->client->event, &op->defer, handler, op);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(op->defer, "registry-op");
        return 0;
}

int registry_resolve(RegistryClient *c, const OciRef *ref, const char *os, const char *architecture,
                     const char *variant, RegistryDone done, void *userdata, RegistryOp **ret) {
        _cleanup_(registry_op_freep) RegistryOp *op = NULL;
        int r;

        assert(c);
        assert(ref);
        assert(done);
        assert(ret);

        if (!architecture) {
                struct utsname u;

                if (uname(&u) < 0)
                        return -errno;
                r = oci_platform_from_machine(u.machine, &architecture, &variant);
                if (r < 0)
                        return r;
        }
        r = op_new(c, OP_MANIFEST, ref, done, userdata, &op);
        if (r < 0)
                return r;
        op->os = strdup(os ? os : "linux");
        op->architecture = strdup(architecture);
        if (!op->os || !op->architecture || free_and_strdup(&op->variant, variant) < 0)
                return -ENOMEM;
        if (asprintf(&op->path, "/v2/%s/manifests/%s", op->ref->repository, oci_ref_manifest_reference(op->ref)) < 0) {
                op->path = NULL;
                return -ENOMEM;
        }
        if (op->ref->digest) {
                r = digest_parse(op->ref->digest, &op->expected);
                if (r < 0)
                        return r;
                op->have_expected = true;
        }
        r = op_defer(op, op_on_start);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(op);
        return 0;
}

/* ---- blob start: reuse, resume (re-hash what is on disk in slices), or start afresh ---- */

static int blob_on_rehash(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;
        _cleanup_free_ char *buf = NULL;
        uint64_t want = op->resumed_from - op->offset;
        ssize_t n;

        buf = malloc(REHASH_SLICE);
        if (!buf)
                n = -1, errno = ENOMEM;
        else
                n = pread(op->fd, buf, (size_t) MIN(want, (uint64_t) REHASH_SLICE), (off_t) op->offset);
        if (n <= 0 || digest_context_update(op->hash, buf, (size_t) n) < 0) {
                /* Unreadable prefix: throw it away and download everything. */
                blob_restart_from_zero(op);
        } else {
                op->offset += (uint64_t) n;
                if (op->offset < op->resumed_from)
                        return 0;       /* more slices on the next iterations */
        }

        op->defer = sd_event_source_disable_unref(op->defer);
        if (op->on_progress && op->offset > 0)
                op->on_progress(op, op->offset, op->blob.size, op->userdata);
        if (op->offset == op->blob.size) {
                if (!blob_complete(op))
                        op_endpoint_failed(op);
                return 0;
        }
        op_send(op);
        return 0;
}

static int blob_on_already_there(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;

        op->defer = sd_event_source_disable_unref(op->defer);
        op_finish(op, true);
        return 0;
}

static int blob_open(RegistryOp *op) {
        struct stat st;

        if (stat(op->final_path, &st) >= 0 && S_ISREG(st.st_mode) && (uint64_t) st.st_size == op->blob.size)
                return 1;       /* verified before it got this name */

        op->fd = open(op->partial_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (op->fd < 0)
                return -errno;
        if (fstat(op->fd, &st) < 0)
                return -errno;
        if ((uint64_t) st.st_size > op->blob.size) {
                if (ftruncate(op->fd, 0) < 0)
                        return -errno;
                st.st_size = 0;
        }
        op->resumed_from = (uint64_t) st.st_size;
        return 0;
}

int registry_fetch_blob(RegistryClient *c, const OciRef *ref, const OciDescriptor *blob,
                        RegistryProgress progress, RegistryDone done, void *userdata, RegistryOp **ret) {
        _cleanup_(registry_op_freep) RegistryOp *op = NULL;
        char ds[DIGEST_STRING_MAX];
        int r;

        assert(c);
        assert(ref);
        assert(blob);
        assert(done);
        assert(ret);

        r = op_new(c, OP_BLOB, ref, done, userdata, &op);
        if (r < 0)
                return r;
        op->on_progress = progress;
        op->blob.digest = blob->digest;
        op->blob.size = blob->size;
        op->blob.compression = blob->compression;
        if (free_and_strdup(&op->blob.media_type, blob->media_type) < 0)
                return -ENOMEM;
        if (asprintf(&op->path, "/v2/%s/blobs/%s", op->ref->repository, digest_format(&blob->digest, ds)) < 0 ||
            registry_blob_partial_path(c, &blob->digest, &op->partial_path) < 0 ||
            registry_blob_path(c, &blob->digest, &op->final_path) < 0)
                return -ENOMEM;
        r = digest_context_new(&op->hash);
        if (r < 0)
                return r;

        r = blob_open(op);
        if (r < 0)
                return r;
        if (r > 0)
                r = op_defer(op, blob_on_already_there);
        else if (op->resumed_from > 0) {
                r = op_defer(op, blob_on_rehash);
                if (r >= 0)
                        r = sd_event_source_set_enabled(op->defer, SD_EVENT_ON);
        } else
                r = op_defer(op, op_on_start);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(op);
        return 0;
}
