/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The Kubernetes API server, as far as the daemon's Manager needs one: a small stateful server on the
 * canned-response server's HTTPS (fake-http.h with TLS: kubeconfig.h takes https:// servers only), run by
 * the caller's sd_event loop, which its server and its wake-up source keep referenced. It serves the Node
 * node-1, the OSC Secret osc-1 in kube-system and the Lease under one resourceVersion counter, and
 * answers LIST, WATCH, GET, PATCH of the Node (merge; strategic as a merge with conditions by type; JSON
 * patch with "test", 422 when one fails), GET, POST and PUT of the Lease (kept as sent), POST and PATCH
 * of Events (answered as sent, not kept); anything else 404. A WATCH waits, unanswered, until its
 * object changed past the watch's resourceVersion, then gets that one event and a clean end: the
 * client re-watches at once from there (kube-watch.h). It owns its server and the three objects; the
 * accessors lend them until the next request that changes them. Test-only: any failure inside fails
 * the cmocka test. */

#include <jansson.h>
#include <stdbool.h>
#include <systemd/sd-event.h>

#define FAKE_API_NODE_PATH "/api/v1/nodes"
#define FAKE_API_SECRET_PATH "/api/v1/namespaces/kube-system/secrets"

typedef struct FakeApi FakeApi;

/* `node`: the Node node-1 as a JSON text (NULL: none yet). */
FakeApi *fake_api_new(sd_event *e, const char *node);
FakeApi *fake_api_free(FakeApi *a);

/* For the client's kubeconfig: https://127.0.0.1:<port>, with this certificate as its CA. */
const char *fake_api_ca_pem(FakeApi *a);
unsigned fake_api_port(FakeApi *a);

/* The OSC Secret appears: `osc` (YAML) as osc.yaml, `checksum` as checksum/data-script. */
void fake_api_add_secret(FakeApi *a, const char *osc, const char *checksum);
/* Someone else sets an annotation on the Node (a new resourceVersion: the watches hear it). */
void fake_api_annotate_node(FakeApi *a, const char *key, const char *value);

/* Request i (from 0) served so far: request line, headers and body; NULL past the last. */
const char *fake_api_request(FakeApi *a, unsigned i);
/* Whether some request so far starts with `prefix` (its method and path) and contains `needle`
 * (NULL: anything). */
bool fake_api_saw(FakeApi *a, const char *prefix, const char *needle);

/* The objects as they are now; NULL: none. */
json_t *fake_api_node(FakeApi *a);
json_t *fake_api_lease(FakeApi *a);
const char *fake_api_node_label(FakeApi *a, const char *key);
const char *fake_api_node_annotation(FakeApi *a, const char *key);
/* The Node's status condition of `type`. */
json_t *fake_api_node_condition(FakeApi *a, const char *type);
