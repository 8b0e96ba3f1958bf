/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <stdio.h>

#include "net/http-probe.h"
#include "util/event-util.h"
#include "util/time-util.h"

struct HttpProbe {
        sd_event *event; /* ref held */
        Http *http;      /* borrowed: outlives us */
        char *url;       /* owned */
        uint64_t interval_usec, request_timeout_usec, timeout_usec, deadline_usec;
        HttpRequest *req;            /* owned: the probe in flight */
        sd_event_source *next_probe; /* owned */
        sd_event_source *deadline;   /* owned */
        char *last_error;            /* owned */
        bool any_status, once;
        void *ca_pem; /* owned; NULL: the system's CAs */
        size_t ca_pem_size;
        unsigned n_probes;
        HttpProbeDone done;
        void *userdata; /* borrowed */
};

static void http_probe_send(HttpProbe *p);

HttpProbe *http_probe_free(HttpProbe *p) {
        if (!p)
                return NULL;
        http_request_free(p->req);
        sd_event_source_disable_unref(p->next_probe);
        sd_event_source_disable_unref(p->deadline);
        sd_event_unref(p->event);
        free(p->url);
        free(p->last_error);
        free(p->ca_pem);
        free(p);
        return NULL;
}

/* What the caller is told: with `once`, what the one probe saw (like Go's error of one GET); else what
 * the last one saw, and the window. */
static char *http_probe_message(const HttpProbe *p) {
        char d[DURATION_MAX_STR];
        char *msg;
        int r;

        format_duration(d, sizeof(d), p->timeout_usec);
        if (p->once && p->last_error)
                return strdup(p->last_error);
        if (p->once)
                r = asprintf(&msg, "Get \"%s\": no answer within %s", p->url, d);
        else
                r = asprintf(&msg, "%s did not answer%s within %s: %s", p->url, p->any_status ? "" : " 200",
                             d, p->last_error ? p->last_error : "no probe completed");
        return r < 0 ? NULL : msg;
}

static void http_probe_finish(HttpProbe *p, int error) {
        _cleanup_free_ char *msg = NULL;

        p->req = http_request_free(p->req);
        p->next_probe = sd_event_source_disable_unref(p->next_probe);
        p->deadline = sd_event_source_disable_unref(p->deadline);
        if (error < 0)
                msg = http_probe_message(p);
        p->done(p, error, error < 0 ? (msg ? msg : "no answer") : NULL, p->n_probes, p->userdata);
}

static int http_probe_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        HttpProbe *p = userdata;

        p->next_probe = sd_event_source_disable_unref(p->next_probe);
        http_probe_send(p);
        return 0;
}

static int http_probe_on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        http_probe_finish(userdata, -ETIMEDOUT);
        return 0;
}

static void http_probe_on_response(HttpRequest *req, int error, long status, void *userdata) {
        HttpProbe *p = userdata;
        char *m = NULL;
        int r;

        p->n_probes++;
        /* A reachability probe is answered by any status, and by a body over the cap (it came). */
        if ((error == 0 && (status == 200 || p->any_status)) || (p->any_status && error == -EFBIG)) {
                http_probe_finish(p, 0);
                return;
        }
        if (error < 0)
                r = asprintf(&m, "Get \"%s\": %s", p->url, strerror(-error));
        else
                r = asprintf(&m, "Get \"%s\": HTTP %ld", p->url, status);
        free(p->last_error);
        p->last_error = r < 0 ? NULL : m;
        p->req = http_request_free(p->req);
        if (p->once) {
                http_probe_finish(p, error < 0 ? error : -EIO);
                return;
        }

        r = sd_event_add_time_relative(p->event, &p->next_probe, CLOCK_MONOTONIC, p->interval_usec, 0,
                                       http_probe_on_timer, p);
        if (r < 0)
                http_probe_finish(p, r);
}

static void http_probe_send(HttpProbe *p) {
        uint64_t now = event_now_usec(p->event), timeout = p->request_timeout_usec;
        int r;

        if (p->deadline_usec > now)
                timeout = MIN(timeout, p->deadline_usec - now);
        timeout = MAX(timeout, 100 * USEC_PER_MSEC);

        r = http_request_new(p->http, "GET", p->url, &p->req);
        if (r >= 0) {
                http_request_set_timeout(p->req, timeout, timeout);
                http_request_set_max_body(p->req, 64 * 1024);
                if (p->ca_pem)
                        r = http_request_set_tls(
                                p->req, &(HttpTls) { .ca_pem = p->ca_pem, .ca_pem_size = p->ca_pem_size });
        }
        if (r >= 0)
                r = http_request_start(p->req, http_probe_on_response, p);
        if (r < 0)
                http_probe_finish(p, r);
}

int http_probe_start(sd_event *event, Http *http, const HttpProbeOptions *o, HttpProbeDone done,
                     void *userdata, HttpProbe **ret) {
        _cleanup_(http_probe_freep) HttpProbe *p = NULL;
        int r;

        assert(event);
        assert(http);
        assert(o);
        assert(done);
        assert(ret);

        if (isempty(o->url) || o->timeout_usec == 0)
                return -EINVAL;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->http = http;
        p->done = done;
        p->userdata = userdata;
        p->interval_usec = o->interval_usec ? o->interval_usec : HTTP_PROBE_INTERVAL_DEFAULT_USEC;
        p->request_timeout_usec =
                o->request_timeout_usec ? o->request_timeout_usec : HTTP_PROBE_REQUEST_TIMEOUT_DEFAULT_USEC;
        p->timeout_usec = o->timeout_usec;
        p->any_status = o->any_status;
        p->once = o->once;
        p->url = strdup(o->url);
        if (!p->url)
                return -ENOMEM;
        if (o->ca_pem) {
                p->ca_pem = malloc(MAX(o->ca_pem_size, 1u));
                if (!p->ca_pem)
                        return -ENOMEM;
                memcpy(p->ca_pem, o->ca_pem, o->ca_pem_size);
                p->ca_pem_size = o->ca_pem_size;
        }

        p->deadline_usec = event_now_usec(event) + o->timeout_usec;
        r = sd_event_add_time(event, &p->deadline, CLOCK_MONOTONIC, p->deadline_usec, 0,
                              http_probe_on_deadline, p);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(p->deadline, "http-probe-deadline");
        /* First probe from the loop, so the callback never runs inside this call. */
        r = sd_event_add_time_relative(event, &p->next_probe, CLOCK_MONOTONIC, 0, 0, http_probe_on_timer, p);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(p->next_probe, "http-probe-probe");

        *ret = TAKE_PTR(p);
        return 0;
}
