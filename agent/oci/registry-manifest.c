/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>
#include <sys/utsname.h>

#include "oci/registry-manifest.h"
#include "registry-internal.h"

#define MANIFEST_TIMEOUT_USEC (60 * USEC_PER_SEC)

int registry_manifest_prepare(RegistryOp *op, HttpRequest *req) {
        int r;

        r = http_request_add_header(req, "Accept: " OCI_MANIFEST_ACCEPT);
        if (r < 0)
                return r;
        http_request_set_timeout(req, MANIFEST_TIMEOUT_USEC, 0);
        http_request_set_max_body(req, OCI_MANIFEST_MAX);
        return 0;
}

static void manifest_next_stage(RegistryOp *op, const OciDescriptor *d) {
        char buf[DIGEST_STRING_MAX];

        free(op->path);
        op->path = NULL;
        if (asprintf(&op->path, "/v2/%s/manifests/%s", op->ref->repository, digest_format(&d->digest, buf)) <
            0) {
                registry_op_set_failure(op, -ENOMEM, ARTIFACT_FAILURE_UNAVAILABLE, "out of memory");
                registry_op_finish(op, /* success= */ false);
                return;
        }
        op->have_expected = true;
        op->expected = d->digest;
        op->endpoint = 0;
        registry_op_reset_endpoint_state(op);
        registry_op_send(op);
}

bool registry_manifest_handle(RegistryOp *op, HttpRequest *req) {
        _cleanup_(oci_manifest_freep) OciManifest *m = NULL;
        _cleanup_free_ char *mismatch = NULL;
        char actual_s[DIGEST_STRING_MAX];
        const char *body, *header;
        const OciDescriptor *d;
        Digest actual, claimed;
        size_t size;
        int r;

        body = http_request_get_body(req, &size);
        r = digest_buffer(body, size, &actual);
        if (r < 0) {
                /* Unhashed is unverified: never used (it read an uninitialised digest before). */
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE,
                                        "manifest %s: cannot compute its digest: %s",
                                        http_request_get_url(req), strerror(-r));
                return false;
        }
        digest_format(&actual, actual_s);

        header = http_request_get_header(req, "Docker-Content-Digest");
        if (op->have_expected)
                r = digest_verify(&op->expected, &actual, &mismatch);
        else if (header && digest_parse(header, &claimed) >= 0)
                r = digest_verify(&claimed, &actual, &mismatch);
        else
                r = 0; /* a tag, and a registry that does not say: nothing to compare against */
        if (r < 0) {
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_DIGEST_MISMATCH, "manifest %s: %s",
                                        http_request_get_url(req), strempty(mismatch));
                return false;
        }

        r = oci_manifest_parse(body, size, http_request_get_header(req, "Content-Type"), &m);
        if (r < 0) {
                registry_op_set_failure(op, r, ARTIFACT_FAILURE_UNAVAILABLE, "manifest %s: %s",
                                        http_request_get_url(req),
                                        r == -EPROTONOSUPPORT ? "unsupported manifest kind or layer type" :
                                                                "malformed manifest");
                return false;
        }
        if (!op->top_digest) {
                op->top_digest = strdup(actual_s);
                if (!op->top_digest)
                        return false;
        }

        if (m->kind == OCI_MANIFEST_INDEX) {
                if (op->platform_stage ||
                    oci_manifest_select_platform(m, op->os, op->architecture, op->variant, &d) < 0) {
                        registry_op_set_failure(op, -ENOENT, ARTIFACT_FAILURE_UNAVAILABLE,
                                                "%s has no manifest for %s/%s%s%s",
                                                http_request_get_url(req), op->os, op->architecture,
                                                op->variant ? "/" : "", strempty(op->variant));
                        registry_op_finish(op, /* success= */ false);
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
        registry_op_finish(op, /* success= */ true);
        return true;
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
        r = registry_op_new(c, OP_MANIFEST, ref, done, userdata, &op);
        if (r < 0)
                return r;
        op->os = strdup(os ? os : "linux");
        op->architecture = strdup(architecture);
        if (!op->os || !op->architecture || free_and_strdup(&op->variant, variant) < 0)
                return -ENOMEM;
        if (asprintf(&op->path, "/v2/%s/manifests/%s", op->ref->repository,
                     oci_ref_manifest_reference(op->ref)) < 0) {
                op->path = NULL;
                return -ENOMEM;
        }
        if (op->ref->digest) {
                r = digest_parse(op->ref->digest, &op->expected);
                if (r < 0)
                        return r;
                op->have_expected = true;
        }
        r = registry_op_defer(op, registry_op_on_start);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(op);
        return 0;
}
