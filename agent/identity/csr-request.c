/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "identity/client-csr.h"
#include "identity/csr-request.h"
#include "kube/kube-path.h"
#include "util/base64.h"
#include "util/macro.h"
#include "util/string-util.h"

struct CsrRequest {
        KubeClient *client; /* borrowed */
        json_t *object;     /* ref held: what we created */
        char *name;         /* owned */
        char *path;         /* owned: the object's path */
        char *uid;          /* owned: the created object's uid; NULL until known */
        uint64_t poll_usec;
        uint64_t timeout_usec;
        uint64_t deadline_usec; /* CLOCK_MONOTONIC */
        KubeRequest *request;   /* owned: in flight */
        sd_event_source *timer; /* owned: next poll */
        CsrRequestCallback cb;
        void *userdata;
};

static const char *const outcome_table[] = {
        [CSR_ISSUED] = "issued",   [CSR_DENIED] = "denied", [CSR_FAILED] = "failed",
        [CSR_TIMEOUT] = "timeout", [CSR_ERROR] = "error",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(csr_outcome, CsrOutcome, outcome_table);

const char *csr_request_name(const CsrRequest *r) {
        return r->name;
}

CsrRequest *csr_request_free(CsrRequest *r) {
        if (!r)
                return NULL;
        kube_request_free(r->request);
        sd_event_source_disable_unref(r->timer);
        json_decref(r->object);
        free(r->name);
        free(r->path);
        free(r->uid);
        free(r);
        return NULL;
}

static const char *jstr(const json_t *o, const char *a, const char *b) {
        const json_t *v = json_object_get(json_object_get(o, a), b);

        return json_is_string(v) ? json_string_value(v) : NULL;
}

static void finish(CsrRequest *r, CsrOutcome outcome, int error, const char *cert, size_t cert_size,
                   const char *fmt, ...) _printf_(6, 7);

static void finish(CsrRequest *r, CsrOutcome outcome, int error, const char *cert, size_t cert_size,
                   const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        r->request = kube_request_free(r->request);
        r->timer = sd_event_source_disable_unref(r->timer);
        va_start(ap, fmt);
        msg = strdup_vprintf(fmt, ap);
        va_end(ap);
        r->cb(r, outcome, error, cert, cert_size, msg ?: "out of memory", r->userdata);
}

/* "<code> <reason>: <message>" of a failed API answer, for messages. */
static void api_failure(CsrRequest *r, KubeRequest *req, int error, const char *what) {
        _cleanup_free_ char *detail = NULL;

        /* Formatted first: finish() frees the request that owns reason and message. */
        if (asprintf(&detail, "HTTP %ld %s: %s", kube_request_get_status(req),
                     strempty(kube_request_get_reason(req)),
                     kube_request_get_message(req) ?: strerror(-error)) < 0)
                detail = NULL;
        finish(r, CSR_ERROR, error, NULL, 0, "%s CertificateSigningRequest %s: %s", what, r->name,
               detail ?: "out of memory");
}

static int schedule_poll(CsrRequest *r);

/* Looks at one version of the object: done (callback made) or not yet. */
static bool examine(CsrRequest *r, json_t *obj) {
        const json_t *conds = json_object_get(json_object_get(obj, "status"), "conditions");
        const char *uid = jstr(obj, "metadata", "uid"), *cert = jstr(obj, "status", "certificate");
        const json_t *c;
        size_t i;

        if (!r->uid) {
                /* First sight (after our create, or after a 409 for our own earlier one): it must hold our
                 * request, as upstream's ensureCompatible checks; from now on it must keep its uid. */
                if (!streq_ptr(jstr(obj, "spec", "request"), jstr(r->object, "spec", "request")) || !uid) {
                        finish(r, CSR_ERROR, -EEXIST, NULL, 0,
                               "CertificateSigningRequest %s holds another request", r->name);
                        return true;
                }
                r->uid = strdup(uid);
                if (!r->uid) {
                        finish(r, CSR_ERROR, -ENOMEM, NULL, 0, "CertificateSigningRequest %s: out of memory",
                               r->name);
                        return true;
                }
        } else if (!streq_ptr(uid, r->uid)) {
                finish(r, CSR_ERROR, -ESTALE, NULL, 0, "CertificateSigningRequest %s changed uid", r->name);
                return true;
        }
        json_array_foreach(conds, i, c) {
                const char *type = json_string_value(json_object_get(c, "type"));
                const char *reason = json_string_value(json_object_get(c, "reason"));
                const char *message = json_string_value(json_object_get(c, "message"));

                if (!streq_ptr(type, "Denied") && !streq_ptr(type, "Failed"))
                        continue;
                finish(r, streq(type, "Denied") ? CSR_DENIED : CSR_FAILED,
                       streq(type, "Denied") ? -EPERM : -EIO, NULL, 0,
                       "CertificateSigningRequest %s %s, reason: %s, message: %s", r->name,
                       streq(type, "Denied") ? "is denied" : "failed", strempty(reason), strempty(message));
                return true;
        }
        if (cert && *cert) {
                _cleanup_free_ char *pem = NULL;
                size_t size = 0;
                int k = base64_decode(cert, CLIENT_PEM_MAX, &pem, &size);

                if (k < 0)
                        finish(r, CSR_ERROR, k, NULL, 0,
                               "CertificateSigningRequest %s: undecodable certificate", r->name);
                else
                        finish(r, CSR_ISSUED, 0, pem, size, "CertificateSigningRequest %s issued", r->name);
                return true;
        }
        return false;
}

static void on_get(KubeRequest *req, int error, json_t *obj, void *userdata) {
        CsrRequest *r = userdata;

        r->request = kube_request_free(r->request);
        if (error < 0)
                return api_failure(r, req, error, "reading");
        if (!examine(r, obj)) {
                int k = schedule_poll(r);

                if (k < 0)
                        finish(r, CSR_ERROR, k, NULL, 0, "CertificateSigningRequest %s: %s", r->name,
                               strerror(-k));
        }
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        CsrRequest *r = userdata;
        int k;

        r->timer = sd_event_source_disable_unref(r->timer);
        if (kube_client_now(r->client) >= r->deadline_usec) {
                finish(r, CSR_TIMEOUT, -ETIMEDOUT, NULL, 0,
                       "CertificateSigningRequest %s was not issued within %llu s", r->name,
                       (unsigned long long) (r->timeout_usec / USEC_PER_SEC));
                return 0;
        }
        k = kube_client_get(r->client, r->path, on_get, r, &r->request);
        if (k < 0)
                finish(r, CSR_ERROR, k, NULL, 0, "reading CertificateSigningRequest %s: %s", r->name,
                       strerror(-k));
        return 0;
}

static int schedule_poll(CsrRequest *r) {
        uint64_t now = kube_client_now(r->client), at = MIN(now + r->poll_usec, r->deadline_usec);

        return sd_event_add_time(kube_client_get_event(r->client), &r->timer, CLOCK_MONOTONIC, at, 0,
                                 on_timer, r);
}

static void on_create(KubeRequest *req, int error, json_t *obj, void *userdata) {
        CsrRequest *r = userdata;
        int k;

        if (error < 0 && streq_ptr(kube_request_get_reason(req), "AlreadyExists")) {
                /* Our own earlier create (same key, same name): carry on with that object. */
                r->request = kube_request_free(r->request);
                k = kube_client_get(r->client, r->path, on_get, r, &r->request);
                if (k < 0)
                        finish(r, CSR_ERROR, k, NULL, 0, "reading CertificateSigningRequest %s: %s", r->name,
                               strerror(-k));
                return;
        }
        if (error < 0)
                return api_failure(r, req, error, "creating");
        on_get(req, 0, obj, r);
}

int csr_request_start(KubeClient *client, json_t *object, uint64_t poll_usec, uint64_t timeout_usec,
                      CsrRequestCallback cb, void *userdata, CsrRequest **ret) {
        _cleanup_(csr_request_freep) CsrRequest *r = NULL;
        _cleanup_free_ char *collection = NULL;
        const char *name = jstr(object, "metadata", "name");
        int k;

        assert(client);
        assert(object);
        assert(cb);
        assert(ret);

        if (!name)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->client = client;
        r->object = json_incref(object);
        r->poll_usec = poll_usec;
        r->timeout_usec = timeout_usec;
        r->deadline_usec = kube_client_now(client) + timeout_usec;
        r->cb = cb;
        r->userdata = userdata;
        r->name = strdup(name);
        if (!r->name)
                return -ENOMEM;
        k = kube_path(KUBE_RESOURCE_CSRS, NULL, NULL, NULL, &collection);
        if (k >= 0)
                k = kube_path(KUBE_RESOURCE_CSRS, NULL, name, NULL, &r->path);
        if (k < 0)
                return k;
        k = kube_client_post(client, collection, object, on_create, r, &r->request);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}
