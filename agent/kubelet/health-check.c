/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "kubelet/health-check.h"
#include "util/event-util.h"
#include "util/time-util.h"

struct HealthCheck {
        sd_event *event;                /* ref held */
        Http *http;                     /* borrowed: outlives us */
        char *url;                      /* owned */
        uint64_t interval_usec, request_timeout_usec, timeout_usec, deadline_usec;
        HttpRequest *req;               /* owned: the probe in flight */
        sd_event_source *next_probe;    /* owned */
        sd_event_source *deadline;      /* owned */
        char *last_error;               /* owned */
        bool any_status;
        void *ca_pem;                   /* owned; NULL: the system's CAs */
        size_t ca_pem_size;
        unsigned n_probes;
        HealthCheckDone done;
        void *userdata;                 /* borrowed */
};

static void health_check_probe(HealthCheck *hc);

HealthCheck *health_check_free(HealthCheck *hc) {
        if (!hc)
                return NULL;
        http_request_free(hc->req);
        sd_event_source_disable_unref(hc->next_probe);
        sd_event_source_disable_unref(hc->deadline);
        sd_event_unref(hc->event);
        free(hc->url);
        free(hc->last_error);
        free(hc->ca_pem);
        free(hc);
        return NULL;
}

static void health_check_finish(HealthCheck *hc, int error) {
        char d[DURATION_MAX_STR];
        _cleanup_free_ char *msg = NULL;

        hc->req = http_request_free(hc->req);
        hc->next_probe = sd_event_source_disable_unref(hc->next_probe);
        hc->deadline = sd_event_source_disable_unref(hc->deadline);
        if (error < 0 && asprintf(&msg, "%s did not answer%s within %s: %s", hc->url, hc->any_status ? "" : " 200",
                                  format_duration(d, sizeof(d), hc->timeout_usec),
                                  hc->last_error ? hc->last_error : "no probe completed") < 0)
                msg = NULL;
        hc->done(hc, error, error < 0 ? (msg ? msg : "unhealthy") : NULL, hc->n_probes, hc->userdata);
}

static int health_check_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        HealthCheck *hc = userdata;

        hc->next_probe = sd_event_source_disable_unref(hc->next_probe);
        health_check_probe(hc);
        return 0;
}

static int health_check_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        health_check_finish(userdata, -ETIMEDOUT);
        return 0;
}

static void health_check_on_response(HttpRequest *req, int error, long status, void *userdata) {
        HealthCheck *hc = userdata;
        char *m = NULL;
        int r;

        hc->n_probes++;
        /* A reachability probe is answered by any status, and by a body over the cap (it came). */
        if ((error == 0 && (status == 200 || hc->any_status)) || (hc->any_status && error == -EFBIG)) {
                health_check_finish(hc, 0);
                return;
        }
        if (error < 0)
                r = asprintf(&m, "Get \"%s\": %s", hc->url, strerror(-error));
        else
                r = asprintf(&m, "Get \"%s\": HTTP %ld", hc->url, status);
        free(hc->last_error);
        hc->last_error = r < 0 ? NULL : m;
        hc->req = http_request_free(hc->req);

        r = sd_event_add_time_relative(hc->event, &hc->next_probe, CLOCK_MONOTONIC, hc->interval_usec, 0,
                                       health_check_on_timer, hc);
        if (r < 0)
                health_check_finish(hc, r);
}

static void health_check_probe(HealthCheck *hc) {
        uint64_t now = event_now_usec(hc->event), timeout = hc->request_timeout_usec;
        int r;

        if (hc->deadline_usec > now)
                timeout = MIN(timeout, hc->deadline_usec - now);
        timeout = MAX(timeout, 100 * USEC_PER_MSEC);

        r = http_request_new(hc->http, "GET", hc->url, &hc->req);
        if (r >= 0) {
                http_request_set_timeout(hc->req, timeout, timeout);
                http_request_set_max_body(hc->req, 64 * 1024);
                if (hc->ca_pem)
                        r = http_request_set_tls(hc->req, &(HttpTls) { .ca_pem = hc->ca_pem,
                                                                       .ca_pem_size = hc->ca_pem_size });
        }
        if (r >= 0)
                r = http_request_start(hc->req, health_check_on_response, hc);
        if (r < 0)
                health_check_finish(hc, r);
}

int health_check_start(sd_event *event, Http *http, const HealthCheckOptions *o, HealthCheckDone done,
                       void *userdata, HealthCheck **ret) {
        _cleanup_(health_check_freep) HealthCheck *hc = NULL;
        int r;

        assert(event);
        assert(http);
        assert(o);
        assert(done);
        assert(ret);

        if (isempty(o->url) || o->timeout_usec == 0)
                return -EINVAL;
        hc = calloc(1, sizeof(*hc));
        if (!hc)
                return -ENOMEM;
        hc->event = sd_event_ref(event);
        hc->http = http;
        hc->done = done;
        hc->userdata = userdata;
        hc->interval_usec = o->interval_usec ? o->interval_usec : HEALTH_CHECK_INTERVAL_DEFAULT_USEC;
        hc->request_timeout_usec = o->request_timeout_usec ? o->request_timeout_usec
                                                           : HEALTH_CHECK_REQUEST_TIMEOUT_DEFAULT_USEC;
        hc->timeout_usec = o->timeout_usec;
        hc->any_status = o->any_status;
        hc->url = strdup(o->url);
        if (!hc->url)
                return -ENOMEM;
        if (o->ca_pem) {
                hc->ca_pem = malloc(MAX(o->ca_pem_size, 1u));
                if (!hc->ca_pem)
                        return -ENOMEM;
                memcpy(hc->ca_pem, o->ca_pem, o->ca_pem_size);
                hc->ca_pem_size = o->ca_pem_size;
        }

        hc->deadline_usec = event_now_usec(event) + o->timeout_usec;
        r = sd_event_add_time(event, &hc->deadline, CLOCK_MONOTONIC, hc->deadline_usec, 0,
                              health_check_on_deadline, hc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(hc->deadline, "health-check-deadline");
        /* First probe from the loop, so the callback never runs inside this call. */
        r = sd_event_add_time_relative(event, &hc->next_probe, CLOCK_MONOTONIC, 0, 0, health_check_on_timer, hc);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(hc->next_probe, "health-check-probe");

        *ret = TAKE_PTR(hc);
        return 0;
}

int health_check_failure_reason(const char *message, char **ret) {
        assert(ret);
        return asprintf(ret, "kubelet is not healthy after in-place update: %s", strempty(message)) < 0 ? -ENOMEM : 0;
}
