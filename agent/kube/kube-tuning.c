/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stddef.h>
#include <stdio.h>

#include "kube/kube-tuning.h"
#include "util/time-util.h"

#define SEC USEC_PER_SEC

void kube_tuning_init(KubeTuning *t) {
        assert(t);

        *t = (KubeTuning) {
                .watch_timeout_min_usec = 300 * SEC,
                .watch_timeout_max_usec = 600 * SEC,
                .watch_silence_usec = 90 * SEC,
                .watch_cap_margin_usec = 30 * SEC,
                .startup_delay_usec = 2 * SEC,
                .backoff_base_usec = 800 * USEC_PER_MSEC,
                .backoff_cap_usec = 30 * SEC,
                .backoff_reset_usec = 120 * SEC,
                .reconnect_spread_usec = 10 * SEC,
                .token_refresh_usec = 50 * SEC,
                .cert_check_usec = 300 * SEC,
                .request_timeout_usec = 70 * SEC,
                .patch_timeout_usec = 40 * SEC,
                .csr_poll_usec = 2 * SEC,
                .csr_timeout_usec = 15 * 60 * SEC,
                .identity_retry_base_usec = 10 * SEC,
                .identity_retry_cap_usec = 5 * 60 * SEC,
                .forbidden_backoff_usec = 2 * 60 * SEC,
                .units_check_usec = 60 * SEC,
                .units_stuck_usec = 300 * SEC,
                .health_check_usec = 30 * SEC,
                .health_grace_usec = 60 * SEC,
                .contact_event_min_usec = 10 * SEC,
                .node_registration_usec = 300 * SEC,
        };
}

static const struct {
        const char *key;
        size_t offset;
        bool zero_ok;
} keys[] = {
        { "watch-silence", offsetof(KubeTuning, watch_silence_usec), false },
        { "startup-delay", offsetof(KubeTuning, startup_delay_usec), true },
        { "backoff-base", offsetof(KubeTuning, backoff_base_usec), false },
        { "backoff-cap", offsetof(KubeTuning, backoff_cap_usec), false },
        { "backoff-reset", offsetof(KubeTuning, backoff_reset_usec), false },
        { "reconnect-spread", offsetof(KubeTuning, reconnect_spread_usec), true },
        { "token-refresh", offsetof(KubeTuning, token_refresh_usec), false },
        { "cert-check", offsetof(KubeTuning, cert_check_usec), false },
        { "request-timeout", offsetof(KubeTuning, request_timeout_usec), false },
        { "patch-timeout", offsetof(KubeTuning, patch_timeout_usec), false },
        { "csr-poll", offsetof(KubeTuning, csr_poll_usec), false },
        { "csr-timeout", offsetof(KubeTuning, csr_timeout_usec), false },
        { "identity-retry-base", offsetof(KubeTuning, identity_retry_base_usec), false },
        { "identity-retry-cap", offsetof(KubeTuning, identity_retry_cap_usec), false },
        { "forbidden-backoff", offsetof(KubeTuning, forbidden_backoff_usec), false },
        { "units-check", offsetof(KubeTuning, units_check_usec), false },
        { "units-stuck", offsetof(KubeTuning, units_stuck_usec), false },
        { "health-check", offsetof(KubeTuning, health_check_usec), false },
        { "health-grace", offsetof(KubeTuning, health_grace_usec), false },
        { "contact-event-min", offsetof(KubeTuning, contact_event_min_usec), true },
        { "node-registration", offsetof(KubeTuning, node_registration_usec), false },
};

static int bad(char **ret_error, const char *item, const char *why) {
        if (ret_error && asprintf(ret_error, "%s: \"%s\": %s", KUBE_TUNING_ENV, item, why) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

static int parse_range(KubeTuning *t, const char *item, const char *value, char **ret_error) {
        _cleanup_free_ char *lo = NULL;
        const char *dash = strchr(value, '-');
        uint64_t min, max;

        if (!dash)
                return bad(ret_error, item, "expected MIN-MAX");
        lo = strndup(value, (size_t) (dash - value));
        if (!lo)
                return -ENOMEM;
        if (parse_duration(lo, &min) < 0 || parse_duration(dash + 1, &max) < 0)
                return bad(ret_error, item, "invalid duration");
        if (min < SEC || min % SEC != 0 || max % SEC != 0 || max <= min)
                return bad(ret_error, item, "need whole seconds, 1s <= MIN < MAX");
        t->watch_timeout_min_usec = min;
        t->watch_timeout_max_usec = max;
        return 0;
}

static int parse_item(KubeTuning *t, const char *item, char **ret_error) {
        const char *eq = strchr(item, '=');
        uint64_t v;
        size_t klen;

        if (!eq)
                return bad(ret_error, item, "expected key=value");
        klen = (size_t) (eq - item);
        if (klen == strlen("watch-timeout") && strncmp(item, "watch-timeout", klen) == 0)
                return parse_range(t, item, eq + 1, ret_error);

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                if (strlen(keys[i].key) != klen || strncmp(item, keys[i].key, klen) != 0)
                        continue;
                if (parse_duration(eq + 1, &v) < 0)
                        return bad(ret_error, item, "invalid duration");
                if (v == 0 && !keys[i].zero_ok)
                        return bad(ret_error, item, "must be positive");
                *(uint64_t *) ((char *) t + keys[i].offset) = v;
                return 0;
        }
        return bad(ret_error, item, "unknown key");
}

int kube_tuning_parse(KubeTuning *t, const char *spec, char **ret_error) {
        _cleanup_free_ char *copy = NULL;
        KubeTuning n;
        char *save = NULL;

        assert(t);

        if (isempty(spec))
                return 0;
        copy = strdup(spec);
        if (!copy)
                return -ENOMEM;

        n = *t;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                int r;

                while (*item == ' ')
                        item++;
                if (!*item)
                        continue;
                r = parse_item(&n, item, ret_error);
                if (r < 0)
                        return r;
        }
        *t = n;
        return 0;
}
