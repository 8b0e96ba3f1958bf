/* SPDX-License-Identifier: Apache-2.0 */
/* Which Pods an in-place update deletes and which it leaves alone, and the Event that says so. */
#include "core/pod-selection.h"
#include "tests.h"

static bool startswith(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool endswith(const char *s, const char *suffix) {
        return strlen(s) >= strlen(suffix) && streq(s + strlen(s) - strlen(suffix), suffix);
}

/* Occurrences of `needle` in s[0, n). */
static size_t count_in(const char *s, size_t n, const char *needle) {
        size_t c = 0;

        for (const char *p = s; (p = strstr(p, needle)) && (size_t) (p - s) < n; p++)
                c++;
        return c;
}

static json_t *pod(const char *ns, const char *name, const char *extra) {
        char text[1024];
        json_t *j;

        snprintf(text, sizeof(text), "{\"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\"%s%s}}", ns, name,
                 extra ? "," : "", extra ? extra : "");
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        return j;
}

static PodVerdict verdict_of(const char *extra) {
        _cleanup_(json_decrefp) json_t *p = pod("ns", "p", extra);

        return pod_verdict(p);
}

/* gardener PR #15030: gardener-resource-manager stays; the kubelet's own Pods are never deleted
 * through the API (a mirror Pod by its annotation, a static one by its Node owner), whatever their
 * labels; everything else goes, DaemonSet Pods included. */
static void test_verdicts(void **state) {
        assert_int_equal(verdict_of(NULL), POD_DELETE);
        assert_int_equal(verdict_of("\"labels\":{\"app\":\"gardener-resource-manager\"}"),
                         POD_SKIP_RESOURCE_MANAGER);
        assert_int_equal(verdict_of("\"labels\":{\"app\":\"gardener-resource-manager-x\"}"), POD_DELETE);
        assert_int_equal(verdict_of("\"labels\":{\"role\":\"gardener-resource-manager\"}"), POD_DELETE);
        assert_int_equal(verdict_of("\"annotations\":{\"kubernetes.io/config.mirror\":\"0f1e\"}"),
                         POD_SKIP_MIRROR);
        assert_int_equal(verdict_of("\"annotations\":{\"kubernetes.io/config.mirror\":\"\"},"
                                    "\"labels\":{\"app\":\"gardener-resource-manager\"}"),
                         POD_SKIP_MIRROR);
        assert_int_equal(
                verdict_of("\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n\"}]"),
                POD_SKIP_STATIC);
        assert_int_equal(
                verdict_of("\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"DaemonSet\","
                           "\"name\":\"kube-proxy\"}]"),
                POD_DELETE);
        assert_int_equal(verdict_of("\"ownerReferences\":\"Node\""), POD_DELETE);
        assert_string_equal(pod_verdict_to_string(POD_SKIP_MIRROR), "mirror pod");
        assert_null(pod_verdict_to_string(_POD_VERDICT_MAX));
}

static json_t *list_of(size_t n, json_t *pods[]) {
        json_t *items = json_array(), *list;

        for (size_t i = 0; i < n; i++)
                assert_int_equal(json_array_append_new(items, pods[i]), 0);
        list = json_pack("{s:s, s:o}", "kind", "PodList", "items", items);
        assert_non_null(list);
        return list;
}

static void test_selection(void **state) {
        _cleanup_(pod_selection_done) PodSelection s = {};
        _cleanup_free_ char *m = NULL;
        json_t *pods[] = {
                pod("default", "web-1", NULL),
                pod("garden", "gardener-resource-manager-7d9",
                    "\"labels\":{\"app\":\"gardener-resource-manager\"}"),
                pod("kube-system", "kube-proxy-abc", NULL),
                pod("kube-system", "etcd-node-1", "\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}"),
        };
        _cleanup_(json_decrefp) json_t *list = list_of(ELEMENTSOF(pods), pods);
        char *error = NULL;

        assert_int_equal(pod_selection_from_list(list, &s, &error), 0);
        assert_null(error);
        assert_int_equal(s.n_pods, 4);
        assert_int_equal(s.n_delete, 2);
        assert_string_equal(s.pods[2].namespace, "kube-system");
        assert_string_equal(s.pods[2].name, "kube-proxy-abc");
        assert_int_equal(s.pods[3].verdict, POD_SKIP_MIRROR);

        m = pod_selection_message(&s, 1024);
        assert_string_equal(
                m,
                "Deleted 2 Pod(s) still bound to the node after the in-place update: default/web-1, "
                "kube-system/kube-proxy-abc. Left alone 2: garden/gardener-resource-manager-7d9 "
                "(gardener-resource-manager), kube-system/etcd-node-1 (mirror pod).");
}

static void test_empty_and_bad_lists(void **state) {
        _cleanup_(pod_selection_done) PodSelection s = {};
        _cleanup_free_ char *m = NULL, *e1 = NULL, *e2 = NULL;
        _cleanup_(json_decrefp) json_t *empty = json_pack("{s:s}", "kind", "PodList");
        json_t *pods[] = { pod("default", "a", NULL), json_pack("{s:{s:s}}", "metadata", "name", "b") };
        _cleanup_(json_decrefp) json_t *nameless = list_of(ELEMENTSOF(pods), pods);
        _cleanup_(json_decrefp) json_t *not_list = json_pack("{s:s}", "items", "x");

        /* "items" is omitted when empty */
        assert_int_equal(pod_selection_from_list(empty, &s, NULL), 0);
        assert_int_equal(s.n_pods, 0);
        m = pod_selection_message(&s, 1024);
        assert_string_equal(m, "Deleted 0 Pod(s) still bound to the node after the in-place update.");

        /* A Pod that cannot be named cannot be deleted: the list is refused, naming the item. */
        assert_int_equal(pod_selection_from_list(nameless, &s, &e1), -EBADMSG);
        assert_string_equal(e1, "item 1 of the Pod list has no metadata.namespace and metadata.name");
        assert_int_equal(pod_selection_from_list(not_list, &s, &e2), -EBADMSG);
        assert_string_equal(e2, "the Pod list is not a PodList");
        assert_int_equal(pod_selection_from_list(NULL, &s, NULL), -EBADMSG);
}

/* 150 Pods with long names: the message stays within the Event's bound, keeps both counts, names what
 * fits of each kind and says how many more there are. */
static void test_message_bounded(void **state) {
        _cleanup_(pod_selection_done) PodSelection s = {};
        _cleanup_free_ char *m = NULL;
        json_t *pods[150];
        _cleanup_(json_decrefp) json_t *list = NULL;
        char name[128], tail[64];
        const char *p;

        for (size_t i = 0; i < ELEMENTSOF(pods); i++) {
                snprintf(name, sizeof(name), "workload-with-a-rather-long-generated-name-%03zu", i);
                pods[i] = pod("team-namespace", name,
                              i % 3 == 0 ? "\"labels\":{\"app\":\"gardener-resource-manager\"}" : NULL);
        }
        list = list_of(ELEMENTSOF(pods), pods);
        assert_int_equal(pod_selection_from_list(list, &s, NULL), 0);
        assert_int_equal(s.n_delete, 100);

        m = pod_selection_message(&s, 1024);
        assert_true(strlen(m) < 1024);
        assert_true(strlen(m) > 800); /* the room is used */
        assert_true(startswith(m,
                               "Deleted 100 Pod(s) still bound to the node after the in-place update: "
                               "team-namespace/workload-with-a-rather-long-generated-name-001, "));
        p = strstr(m,
                   ". Left alone 50: team-namespace/workload-with-a-rather-long-generated-name-000 "
                   "(gardener-resource-manager), ");
        assert_non_null(p);
        /* "... and N more" closes each list, and the named plus the rest add up */
        snprintf(tail, sizeof(tail),
                 " and %zu more. Left alone 50: ", 100 - count_in(m, p - m, "team-namespace/"));
        assert_non_null(strstr(m, tail));
        snprintf(tail, sizeof(tail), " and %zu more.",
                 50 - count_in(p, strlen(p), "(gardener-resource-manager)"));
        assert_true(endswith(m, tail));

        /* Too small for any name: the counts alone. */
        free(m);
        m = pod_selection_message(&s, 160);
        assert_true(strlen(m) < 160);
        assert_string_equal(m,
                            "Deleted 100 Pod(s) still bound to the node after the in-place update: 100 not "
                            "named here. Left alone 50: 50 not named here.");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_verdicts),
                cmocka_unit_test(test_selection),
                cmocka_unit_test(test_empty_and_bad_lists),
                cmocka_unit_test(test_message_bounded),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
