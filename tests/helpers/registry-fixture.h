/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The registry client against the canned-response server (plain HTTP, reached as a mirror of
 * reg.test; the upstream https://reg.test is never reached while the mirror answers), for the
 * registry unit tests. The real registry, TLS, auth and resume are covered by the kubelet-pull
 * integration test. */

#include <stdbool.h>

#include "fake-http.h"
#include "oci/registry.h"

#define CONFIG_DIGEST "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
/* sha256("hello") */
#define HELLO_DIGEST "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

/* An image manifest with one layer, the blob "hello". */
extern const char registry_fixture_manifest[];

typedef struct RegistryFixture {
        sd_event *event;
        FakeHttp *fake;
        Http *http;
        RegistryClient *client;
        OciRef *ref; /* reg.test/kube/kubelet:v1.31.2 */
        char dir[64];
        char mirror_url[64];
        bool done;
        int error;
        ArtifactFailure failure;
        char message[1024];
        unsigned n_layers;
        char blob_path[256];
} RegistryFixture;

/* cmocka setup and teardown: *state is the RegistryFixture. */
int registry_fixture_setup(void **state);
int registry_fixture_teardown(void **state);
/* The done callback (userdata: the fixture): frees the op and records the result. */
void registry_fixture_on_done(RegistryOp *op, const RegistryResult *res, void *userdata);
/* Runs the loop until the op is done (or fails the test after 300 s). */
void registry_fixture_run(RegistryFixture *c);
/* Queues the server's next answer. */
void registry_fixture_push(RegistryFixture *c, int status, const char *headers, const char *body);
