/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "core/restart-request.h"
#include "tests.h"

#define SELF "inplace-agent.service"
#define MAXN 16

static int parse(const char *value, const char *self, RestartRequest **ret) {
        return restart_request_parse(value, self, restart_request_replaced_units_default, ret);
}

typedef struct Case {
        const char *value;
        const char *units[MAXN];    /* expected, in order, NULL-terminated */
        const char *rejected[MAXN]; /* expected displayed entries, in order */
        bool has_self;
} Case;

static const Case cases[] = {
        /* Issue 4 acceptance strings. */
        { "kubelet,containerd", { "kubelet.service", "containerd.service" }, {}, false },
        { "../../etc/passwd,foo;rm -rf /,,kubelet, kubelet ",
          { "kubelet.service" },
          { "../../etc/passwd", "foo;rm -rf /", "" },
          false },
        { "inplace-agent,kubelet", { "kubelet.service", SELF }, {}, true },
        /* docs/node-protocol.md §5 test string, with our unit as the self unit. */
        { "inplace-agent.service,foo.service,bar", { "foo.service", "bar.service", SELF }, {}, true },

        /* Nothing to do. */
        { "", {}, {}, false },
        { "   \t ", {}, {}, false },

        /* Trimming, duplicates, suffixes. */
        { " kubelet ,\tcontainerd\n", { "kubelet.service", "containerd.service" }, {}, false },
        { "kubelet,kubelet.service,KUBELET", { "kubelet.service", "KUBELET.service" }, {}, false },
        { "foo.timer,foo", { "foo.timer", "foo.service" }, {}, false },
        { "getty@tty1,getty@tty1.service", { "getty@tty1.service" }, {}, false },
        { SELF "," SELF ",inplace-agent", { SELF }, {}, true },

        /* Empty entries are rejected individually, also a trailing one. */
        { "a,", { "a.service" }, { "" }, false },
        { ",a", { "a.service" }, { "" }, false },
        { "a, ,b", { "a.service", "b.service" }, { "" }, false },

        /* Names systemd would refuse, or that are dangerous to hand on. */
        { "../x,a;b,a b,foo/bar,x$y,.hidden,foo@.service,a@b@c",
          {},
          { "../x", "a;b", "a b", "foo/bar", "x$y", ".hidden", "foo@.service", "a@b@c" },
          false },
        /* docs/contract.md §9.12: services, sockets and timers only; a slice would take the agent down. */
        { "system.slice,kubelet", { "kubelet.service" }, { "system.slice" }, false },
        { "a.scope,b.target,c.mount,d.device,e.swap,f.path,g.automount,-.slice",
          {},
          { "a.scope", "b.target", "c.mount", "d.device", "e.swap", "f.path", "g.automount", "-.slice" },
          false },
        { "foo.socket,foo.timer,foo.slice.service",
          { "foo.socket", "foo.timer", "foo.slice.service" },
          {},
          false },
        /* A replaced unit (docs/contract.md §9.4) means the agent itself: once, last. */
        { "gardener-node-agent,kubelet", { "kubelet.service", SELF }, {}, true },
        { "gardener-node-agent.service,inplace-agent,a", { "a.service", SELF }, {}, true },
        /* Control characters and quotes are escaped in what we quote back. */
        { "a\001b,c\"d,e\\f", {}, { "a\\x01b", "c\\\"d", "e\\\\f" }, false },
};

static void check_case(const Case *c) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        size_t n;

        assert_int_equal(parse(c->value, SELF, &r), 0);
        assert_non_null(r);

        for (n = 0; n < MAXN && c->units[n]; n++) {
                if (n >= r->n_units)
                        fail_msg("value \"%s\": missing unit %s", c->value, c->units[n]);
                if (!streq(r->units[n], c->units[n]))
                        fail_msg("value \"%s\": unit %zu is %s, expected %s", c->value, n, r->units[n],
                                 c->units[n]);
        }
        if (n != r->n_units)
                fail_msg("value \"%s\": %zu units, expected %zu", c->value, r->n_units, n);
        assert_null(r->units ? r->units[r->n_units] : NULL);

        for (n = 0; n < MAXN && c->rejected[n]; n++) {
                if (n >= r->n_rejected)
                        fail_msg("value \"%s\": missing rejection of \"%s\"", c->value, c->rejected[n]);
                assert_string_equal(r->rejected[n].entry, c->rejected[n]);
                assert_true(strlen(r->rejected[n].why) > 0);
        }
        if (n != r->n_rejected)
                fail_msg("value \"%s\": %zu rejections, expected %zu (first extra: \"%s\")", c->value,
                         r->n_rejected, n, r->rejected[n].entry);
        assert_int_equal(r->has_self, c->has_self);
}

static void test_table(void **state) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_case(&cases[i]);
}

static void test_null_value_and_no_self_unit(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *a = NULL, *b = NULL;

        assert_int_equal(parse(NULL, SELF, &a), 0);
        assert_int_equal(a->n_units, 0);
        assert_int_equal(a->n_rejected, 0);

        /* Without a self unit, the agent's unit is an ordinary entry in request order. */
        assert_int_equal(parse("inplace-agent,kubelet,gardener-node-agent", NULL, &b), 0);
        assert_int_equal(b->n_units, 2);
        assert_string_equal(b->units[0], SELF);
        assert_false(b->has_self);
        /* A replaced unit is never restarted: without a self unit the entry is rejected. */
        assert_int_equal(b->n_rejected, 1);
        assert_string_equal(b->rejected[0].entry, "gardener-node-agent");
}

static void test_rejected_message_format(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        _cleanup_free_ char *m = NULL;

        assert_int_equal(parse("foo;rm -rf /", SELF, &r), 0);
        assert_int_equal(r->n_rejected, 1);
        m = restart_rejected_message(&r->rejected[0]);
        assert_non_null(m);
        /* docs/contract.md §8.7 */
        assert_true(strncmp(m, "rejected unit name \"foo;rm -rf /\": ", 35) == 0);
}

static void test_result_message(void **state) {
        _cleanup_free_ char *ok = restart_result_message("kubelet.service", /* ok= */ true, NULL);
        _cleanup_free_ char *bad =
                restart_result_message("x.service", /* ok= */ false, "job result: failed");

        assert_string_equal(ok, "processed restart of unit kubelet.service");
        assert_string_equal(bad, "processed restart of unit x.service failed with error job result: failed");
}

static void test_overlong_entry_is_rejected_and_capped(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        char v[400];

        memset(v, 'a', sizeof(v) - 1);
        v[sizeof(v) - 1] = '\0';
        assert_int_equal(parse(v, SELF, &r), 0);
        assert_int_equal(r->n_units, 0);
        assert_int_equal(r->n_rejected, 1);
        assert_int_equal(strlen(r->rejected[0].entry), RESTART_REQUEST_ENTRY_DISPLAY_MAX + strlen("…"));
        assert_string_equal(r->rejected[0].entry + RESTART_REQUEST_ENTRY_DISPLAY_MAX, "…");
}

static void test_overlong_value(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL;
        _cleanup_free_ char *v = NULL, *m = NULL;
        size_t n = RESTART_REQUEST_VALUE_MAX + 1;

        v = malloc(n + 1);
        assert_non_null(v);
        for (size_t i = 0; i < n; i++)
                v[i] = i % 2 ? ',' : 'a';
        v[n] = '\0';
        assert_int_equal(parse(v, SELF, &r), 0);
        assert_int_equal(r->n_units, 0);
        assert_int_equal(r->n_rejected, 1);
        /* Not called a unit name; names the limit; quotes only the beginning. */
        assert_null(r->rejected[0].entry);
        m = restart_rejected_message(&r->rejected[0]);
        assert_non_null(m);
        assert_string_equal(m,
                            "rejected restart annotation of 16385 bytes, more than the limit of 16384: "
                            "\"a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,a,…\"");
}

static void test_unit_and_rejection_limits(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *r = NULL, *s = NULL;
        char v[RESTART_REQUEST_VALUE_MAX];
        size_t o = 0;

        /* 100 distinct valid units plus the self unit: 64 kept, self last, the rest rejected. */
        for (int i = 0; i < 100; i++)
                o += (size_t) snprintf(v + o, sizeof(v) - o, "u%d,", i);
        snprintf(v + o, sizeof(v) - o, "inplace-agent");
        assert_int_equal(parse(v, SELF, &r), 0);
        assert_int_equal(r->n_units, RESTART_REQUEST_UNITS_MAX + 1);
        assert_string_equal(r->units[0], "u0.service");
        assert_string_equal(r->units[RESTART_REQUEST_UNITS_MAX - 1], "u63.service");
        assert_string_equal(r->units[RESTART_REQUEST_UNITS_MAX], SELF);
        assert_true(r->has_self);
        /* 36 over the limit: 32 kept, all 36 counted. */
        assert_int_equal(r->n_rejected, RESTART_REQUEST_REJECTED_MAX);
        assert_int_equal(r->n_rejected_total, 36);
        assert_string_equal(r->rejected[0].entry, "u64");

        /* 1000 empty entries: bounded number of rejections. */
        memset(v, ',', 1000);
        v[1000] = '\0';
        assert_int_equal(parse(v, SELF, &s), 0);
        assert_int_equal(s->n_units, 0);
        assert_int_equal(s->n_rejected, RESTART_REQUEST_REJECTED_MAX);
        assert_int_equal(s->n_rejected_total, 1001);
}

static void test_rejected_summary(void **state) {
        _cleanup_(restart_request_freep) RestartRequest *few = NULL, *some = NULL, *many = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;
        char v[RESTART_REQUEST_VALUE_MAX];
        size_t o = 0;

        /* Few: reported one by one, in the docs/contract.md §8.7 form. */
        assert_int_equal(parse("x.slice,y;z,kubelet,.q", SELF, &few), 0);
        assert_int_equal(restart_request_rejected_summary(few, &a), 0);
        assert_null(a);

        /* More: one message naming all of them, so the Event spam filter drops none. */
        assert_int_equal(parse("x.slice,y;z,kubelet,.q,a.scope", SELF, &some), 0);
        assert_int_equal(restart_request_rejected_summary(some, &b), 0);
        assert_non_null(b);
        assert_true(strncmp(b, "rejected 4 unit names: \"x.slice\" (is a slice: ", 45) == 0);
        assert_non_null(strstr(b, ", \"y;z\" (contains "));
        assert_non_null(strstr(b, ", \".q\" (must start"));
        assert_non_null(strstr(b, ", \"a.scope\" (only services, sockets and timers may be restarted)"));
        assert_null(strstr(b, "more)"));

        /* Very many, and long: bounded, with the count of those not listed. */
        for (int i = 0; i < 70; i++)
                o += (size_t) snprintf(v + o, sizeof(v) - o, "%0200d.slice,", i);
        assert_true(o < sizeof(v));
        assert_int_equal(parse(v, SELF, &many), 0);
        assert_int_equal(many->n_rejected_total, 71); /* and the trailing empty entry */
        assert_int_equal(restart_request_rejected_summary(many, &c), 0);
        assert_non_null(c);
        assert_true(strlen(c) <= RESTART_REQUEST_MESSAGE_MAX);
        assert_true(strncmp(c, "rejected 71 unit names: \"0000", 29) == 0);
        assert_non_null(strstr(c, " more)"));
        assert_non_null(strstr(c, ", … (+"));
}

static void test_display(void **state) {
        _cleanup_free_ char *a = restart_request_display("ok\n\"x\"\\\xff");
        _cleanup_free_ char *b = restart_request_display(NULL);

        assert_string_equal(a, "ok\\x0a\\\"x\\\"\\\\\\xff");
        assert_string_equal(b, "");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_null_value_and_no_self_unit),
                cmocka_unit_test(test_rejected_message_format),
                cmocka_unit_test(test_result_message),
                cmocka_unit_test(test_overlong_entry_is_rejected_and_capped),
                cmocka_unit_test(test_overlong_value),
                cmocka_unit_test(test_unit_and_rejection_limits),
                cmocka_unit_test(test_rejected_summary),
                cmocka_unit_test(test_display),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
