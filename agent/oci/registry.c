/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "oci/registry-auth.h"
#include "oci/registry-mirror.h"
#include "registry-internal.h"
#include "util/backoff.h"
#include "util/event-util.h"
#include "util/fileio.h"
#include "util/string-util.h"

#define RETRY_MAX_USEC (30 * USEC_PER_SEC)
#define TOKEN_TIMEOUT_USEC (30 * USEC_PER_SEC)

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
        registry_token_cache_clear(&c->tokens);
        free(c->ca_file);
        free(c->auth_file);
        free(c->blob_directory);
        sd_event_unref(c->event);
        free(c);
        return NULL;
}

static int load_credentials(RegistryOp *op, RegistryCredentials **ret) {
        RegistryClient *c = op->client;
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        if (!c->auth_file)
                return -ENOENT;
        r = read_full_file(c->auth_file, REGISTRY_AUTH_FILE_MAX, &data, &size);
        if (r < 0)
                return r == -ENOENT ? -ENOENT : r;
        /* Every endpoint but the last is a mirror. */
        return registry_mirror_credentials(data, size, op->endpoints[op->endpoint],
                                           op->endpoint + 1 < op->n_endpoints, op->ref, ret);
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

int registry_op_new(RegistryClient *c, OpKind kind, const OciRef *ref, RegistryDone done, void *userdata,
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
        r = registry_mirror_endpoints(c->mirrors, c->n_mirrors, op->ref, &op->endpoints, &op->n_endpoints);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(op);
        return 0;
}

void registry_op_set_failure(RegistryOp *op, int error, ArtifactFailure failure, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        free(op->message);
        op->message = strdup_vprintf(fmt, ap);
        va_end(ap);
        op->error = error < 0 ? error : -EIO;
        op->failure = failure;
}

void registry_op_finish(RegistryOp *op, bool success) {
        /* The result's strings move out of the op first: the callback may free the op and still read
         * them. */
        _cleanup_(oci_manifest_freep) OciManifest *manifest = TAKE_PTR(op->manifest);
        _cleanup_free_ char *manifest_digest = TAKE_PTR(op->manifest_digest),
                            *top_digest = TAKE_PTR(op->top_digest), *blob_path = TAKE_PTR(op->final_path),
                            *message = TAKE_PTR(op->message);

        if (!success)
                registry_mirror_join_failure(&message, op->first_message);
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
        op->on_done(op, &res, op->userdata); /* may free op */
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

                if (code &&
                    asprintf(&m, "GET %s: HTTP %ld %s%s%s", http_request_get_url(req), status, code,
                             msg ? ": " : "", strempty(msg)) >= 0)
                        return m;
        }
        if (asprintf(&m, "GET %s: HTTP %ld", http_request_get_url(req), status) < 0)
                return NULL;
        return m;
}

bool registry_is_transient(int error, long status) {
        if (error < 0)
                return error != -EFBIG && error != -ENOSPC && error != -ENOMEM && error != -ERANGE &&
                        error != -EKEYREJECTED && error != -ENOKEY;
        return status == 408 || status == 429 || status >= 500;
}

static int op_on_retry_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        RegistryOp *op = userdata;

        op->timer = sd_event_source_disable_unref(op->timer);
        registry_op_send(op);
        return 0;
}

void registry_op_retry_or_next(RegistryOp *op, bool transient, uint64_t retry_after_usec) {
        RegistryClient *c = op->client;
        uint64_t delay;
        int r;

        op->req = http_request_free(op->req);
        if (!transient || ++op->attempt >= c->max_attempts) {
                registry_op_endpoint_failed(op);
                return;
        }
        delay = backoff_exponential(c->retry_base_usec, RETRY_MAX_USEC, op->attempt - 1);
        delay = MAX(delay, MIN(retry_after_usec, RETRY_MAX_USEC));
        r = sd_event_add_time_relative(c->event, &op->timer, CLOCK_MONOTONIC, delay, 0, op_on_retry_timer,
                                       op);
        if (r < 0) {
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot schedule retry: %s",
                                        strerror(-r));
                registry_op_finish(op, /* success= */ false);
                return;
        }
        (void) sd_event_source_set_description(op->timer, "registry-retry");
}

void registry_op_reset_endpoint_state(RegistryOp *op) {
        op->attempt = 0;
        op->auth_answered = false;
        free(op->authorization);
        op->authorization = NULL;
}

void registry_op_endpoint_failed(RegistryOp *op) {
        op->req = http_request_free(op->req);
        if (op->endpoint + 1 >= op->n_endpoints) {
                registry_op_finish(op, /* success= */ false);
                return;
        }
        if (!op->first_message && op->message)
                op->first_message = strdup(op->message); /* best effort: only for the message */
        op->endpoint++;
        registry_op_reset_endpoint_state(op);
        if (op->kind == OP_BLOB && op->failure == ARTIFACT_FAILURE_DIGEST_MISMATCH)
                registry_blob_restart_from_zero(op);
        registry_op_send(op);
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
                registry_op_set_failure(op, error < 0 ? error : http_error_from_result(CURLE_OK, status),
                                        ARTIFACT_FAILURE_UNAVAILABLE, "token request failed: %s",
                                        strempty(m));
                /* A retry must answer the challenge again rather than call it rejected. */
                op->auth_answered = false;
                registry_op_retry_or_next(op, registry_is_transient(error, status), 0);
                return;
        }
        body = http_request_get_body(req, &size);
        r = registry_token_parse(body, size, &token, &lifetime);
        op->token_req = http_request_free(op->token_req);
        if (r < 0) {
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "token service answered without a usable token");
                registry_op_endpoint_failed(op);
                return;
        }
        if (asprintf(&header, "Bearer %s", token) < 0 ||
            registry_token_cache_store(&op->client->tokens, op->endpoints[op->endpoint], op->scope, header,
                                       lifetime, event_now_usec(op->client->event)) < 0) {
                registry_op_set_failure(op, -ENOMEM, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                registry_op_finish(op, /* success= */ false);
                return;
        }
        free(op->authorization);
        op->authorization = TAKE_PTR(header);
        registry_op_send(op);
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
                registry_op_set_failure(op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "GET %s: HTTP 401: credentials rejected", http_request_get_url(req));
                return false;
        }
        op->auth_answered = true;

        r = registry_challenge_parse(header, &ch);
        if (r < 0) {
                registry_op_set_failure(op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "GET %s: HTTP 401 without a usable WWW-Authenticate challenge",
                                        http_request_get_url(req));
                return false;
        }
        r = load_credentials(op, &creds);
        if (r < 0 && r != -ENOENT) {
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "cannot read registry.authFile %s: %s", op->client->auth_file,
                                        strerror(-r));
                return false;
        }

        if (ch->scheme == REGISTRY_AUTH_BASIC) {
                _cleanup_free_ char *basic = NULL;

                if (!creds) {
                        registry_op_set_failure(
                                op, -EACCES, ARTIFACT_FAILURE_UNAVAILABLE,
                                "GET %s: HTTP 401: authentication required and registry.authFile has no "
                                "credentials for %s",
                                http_request_get_url(req), op->ref->registry);
                        return false;
                }
                r = registry_credentials_basic_header(creds, &basic);
                if (r < 0)
                        return false;
                free(op->authorization);
                op->authorization = TAKE_PTR(basic);
                op->req = http_request_free(op->req);
                registry_op_send(op);
                return true;
        }

        op->req = http_request_free(op->req);
        r = op_request_token(op, ch, creds);
        if (r < 0) {
                op->token_req = http_request_free(op->token_req);
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "cannot request a token from %s: %s", ch->realm, strerror(-r));
                registry_op_endpoint_failed(op);
        }
        return true;
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

        cached = op->authorization ?:
                registry_token_cache_lookup(&c->tokens, op->endpoints[op->endpoint], op->scope,
                                            event_now_usec(c->event));
        if (cached) {
                if (asprintf(&auth_header, "Authorization: %s", cached) < 0)
                        return -ENOMEM;
                r = http_request_add_header(req, auth_header);
                if (r < 0)
                        return r;
        }

        r = op->kind == OP_MANIFEST ? registry_manifest_prepare(op, req) : registry_blob_prepare(op, req);
        if (r < 0)
                return r;
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
                        registry_op_endpoint_failed(op);
                return;
        }

        if (error == 0 && status >= 200 && status < 300) {
                handled = op->kind == OP_MANIFEST ? registry_manifest_handle(op, req) :
                                                    registry_blob_handle(op, req);
                if (!handled)
                        registry_op_endpoint_failed(op);
                return;
        }

        if (op->kind == OP_BLOB && registry_blob_handle_failure(op, req, error, status))
                return;
        m = describe_http_failure(req, error, status);
        registry_op_set_failure(op, error < 0 ? error : http_error_from_result(CURLE_OK, status),
                                ARTIFACT_FAILURE_UNAVAILABLE, "%s", strempty(m));
        registry_op_retry_or_next(op, registry_is_transient(error, status),
                                  http_request_get_retry_after_usec(req));
}

void registry_op_send(RegistryOp *op) {
        int r;

        assert(!op->req);

        if (op->kind == OP_BLOB && registry_blob_before_send(op) < 0)
                return;
        r = op_prepare_request(op, &op->req);
        if (r >= 0)
                r = http_request_start(op->req, op_on_response, op);
        if (r < 0) {
                op->req = http_request_free(op->req);
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "cannot send request to %s: %s",
                                        op->endpoints[op->endpoint], strerror(-r));
                registry_op_finish(op, /* success= */ false);
        }
}

int registry_op_on_start(sd_event_source *s, void *userdata) {
        RegistryOp *op = userdata;

        op->defer = sd_event_source_disable_unref(op->defer);
        registry_op_send(op);
        return 0;
}

int registry_op_defer(RegistryOp *op, sd_event_handler_t handler) {
        int r;

        r = sd_event_add_defer(op->client->event, &op->defer, handler, op);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(op->defer, "registry-op");
        return 0;
}
