/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry-fixture.h"
#include "tests.h"

const char registry_fixture_manifest[] =
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"" CONFIG_DIGEST
        "\",\"size\":2},"
        "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"" HELLO_DIGEST
        "\",\"size\":5}]}";

int registry_fixture_setup(void **state) {
        RegistryFixture *c = calloc(1, sizeof(RegistryFixture));
        RegistryMirror mirror = { .host = (char *) "reg.test", .url = c->mirror_url };
        char blobs[128];

        assert_non_null(c);
        assert_int_equal(sd_event_new(&c->event), 0);
        assert_int_equal(fake_http_new(c->event, &c->fake), 0);
        assert_int_equal(http_new(c->event, &c->http), 0);
        strcpy(c->dir, "/tmp/test-registry-XXXXXX");
        assert_non_null(mkdtemp(c->dir));
        snprintf(blobs, sizeof(blobs), "%s/blobs", c->dir);
        snprintf(c->mirror_url, sizeof(c->mirror_url), "http://127.0.0.1:%u/", fake_http_port(c->fake));
        assert_int_equal(registry_client_new(c->event, c->http,
                                             &(RegistryOptions) { .mirrors = &mirror,
                                                                  .n_mirrors = 1,
                                                                  .blob_directory = blobs,
                                                                  .max_attempts = 3,
                                                                  .retry_base_usec = 10 * USEC_PER_MSEC,
                                                                  .min_free_bytes = 1,
                                                                  .stall_usec = USEC_PER_SEC },
                                             &c->client),
                         0);
        /* The upstream of reg.test is https://reg.test: never reached while the mirror answers. */
        assert_int_equal(oci_ref_parse("reg.test/kube/kubelet:v1.31.2", &c->ref), 0);
        *state = c;
        return 0;
}

int registry_fixture_teardown(void **state) {
        RegistryFixture *c = *state;
        char cmd[128];

        registry_client_free(c->client);
        http_free(c->http);
        fake_http_free(c->fake);
        oci_ref_free(c->ref);
        sd_event_unref(c->event);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", c->dir);
        assert_int_equal(system(cmd), 0);
        free(c);
        return 0;
}

void registry_fixture_on_done(RegistryOp *op, const RegistryResult *res, void *userdata) {
        RegistryFixture *c = userdata;

        registry_op_free(op); /* allowed, and res stays readable */
        c->done = true;
        c->error = res->error;
        c->failure = res->failure;
        snprintf(c->message, sizeof(c->message), "%s", strempty(res->message));
        c->n_layers = res->manifest ? (unsigned) res->manifest->n_layers : 0;
        snprintf(c->blob_path, sizeof(c->blob_path), "%s", strempty(res->blob_path));
}

void registry_fixture_run(RegistryFixture *c) {
        for (unsigned i = 0; i < 3000 && !c->done; i++)
                assert_true(sd_event_run(c->event, 100 * USEC_PER_MSEC) >= 0);
        assert_true(c->done);
}

void registry_fixture_push(RegistryFixture *c, int status, const char *headers, const char *body) {
        assert_int_equal(
                fake_http_push(c->fake,
                               &(FakeResponse) { .status = status, .headers = headers, .body = body }),
                0);
}
