/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <ctype.h>
#include <openssl/ssl.h>
#include <stdio.h>

#include "build-config.h"
#include "net/http.h"
#include "util/event-util.h"

struct Http {
        sd_event *event;        /* ref held */
        CURLM *multi;           /* owned */
        sd_event_source *timer; /* owned */
        unsigned n_active;
};

struct HttpRequest {
        Http *http;                 /* borrowed: outlives every request */
        CURL *easy;                 /* owned */
        struct curl_slist *headers; /* owned */
        char *url;                  /* owned */
        char *body;                 /* owned: request body */
        size_t body_size;
        char *tls_strings[4];          /* owned: ca/cert/key paths, CONNECT_TO entry */
        struct curl_slist *connect_to; /* owned */

        char *response; /* owned: buffered response body */
        size_t response_size, response_alloc, max_body;

        HttpDataCallback on_data;
        HttpDoneCallback on_done;
        void *userdata; /* borrowed */
        int abort_error;
        long status;
        bool active;

        /* Silence detection of our own (not curl's LOW_SPEED, which wakes every transfer every second):
         * one timer per silence period, re-armed from the time of the last byte. */
        sd_event_source *silence; /* owned */
        uint64_t silence_usec;    /* 0 = off */
        uint64_t last_data_usec;  /* CLOCK_MONOTONIC, loop time of the last header or body byte */
};

static int http_on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static inline void curl_urlp(CURLU **u) {
        if (*u)
                curl_url_cleanup(*u);
}

static inline void curl_freep(char **p) {
        curl_free(*p);
}

/* The transfer is over (done, failed, or silent for too long): out of the multi handle, then the
 * callback, which may free req. */
static void request_finish(HttpRequest *req, int error) {
        (void) curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &req->status);
        http_request_cancel(req);
        if (req->on_done)
                req->on_done(req, error, req->status, req->userdata);
}

static int request_on_silence(sd_event_source *s, uint64_t usec, void *userdata) {
        HttpRequest *req = userdata;

        if (usec < req->last_data_usec + req->silence_usec) {
                /* Data came in since the timer was armed: sleep until the period after the last byte. */
                (void) sd_event_source_set_time(s, req->last_data_usec + req->silence_usec);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        request_finish(req, -ETIMEDOUT);
        return 0;
}

static void request_saw_data(HttpRequest *req) {
        if (req->silence_usec > 0)
                (void) sd_event_now(req->http->event, CLOCK_MONOTONIC, &req->last_data_usec);
}

static void http_check_done(Http *h) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(h->multi, &left))) {
                HttpRequest *req = NULL;
                int error;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                if (curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &req) != CURLE_OK ||
                    !req)
                        continue;

                error = req->abort_error             ? req->abort_error :
                        msg->data.result == CURLE_OK ? 0 :
                                                       http_error_from_result(msg->data.result, 0);
                request_finish(req, error);
        }
}

static int http_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Http *h = userdata;
        int action = 0, running;

        if (revents & (EPOLLIN | EPOLLPRI))
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;

        if (curl_multi_socket_action(h->multi, fd, action, &running) != CURLM_OK)
                return -EINVAL;
        http_check_done(h);
        return 0;
}

static int http_socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        Http *h = userp;
        sd_event_source *io = socketp;
        uint32_t events = 0;

        if (what == CURL_POLL_REMOVE) {
                if (io) {
                        sd_event_source_disable_unref(io);
                        (void) curl_multi_assign(h->multi, fd, NULL);
                }
                return 0;
        }

        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                events |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                events |= EPOLLOUT;

        if (io) {
                if (sd_event_source_set_io_events(io, events) < 0 ||
                    sd_event_source_set_enabled(io, SD_EVENT_ON) < 0)
                        return -1;
                return 0;
        }
        if (sd_event_add_io(h->event, &io, fd, events, http_on_io, h) < 0)
                return -1;
        (void) sd_event_source_set_description(io, "http-io");
        if (curl_multi_assign(h->multi, fd, io) != CURLM_OK) {
                sd_event_source_disable_unref(io);
                return -1;
        }
        return 0;
}

static int http_on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Http *h = userdata;
        int running;

        if (curl_multi_socket_action(h->multi, CURL_SOCKET_TIMEOUT, 0, &running) != CURLM_OK)
                return -EINVAL;
        http_check_done(h);
        return 0;
}

static int http_timer_cb(CURLM *multi, long timeout_ms, void *userp) {
        Http *h = userp;
        uint64_t delay = (uint64_t) timeout_ms * USEC_PER_MSEC + 1;

        if (timeout_ms < 0)
                return h->timer ? (sd_event_source_set_enabled(h->timer, SD_EVENT_OFF) < 0 ? -1 : 0) : 0;

        if (h->timer)
                return event_timer_arm(h->timer, delay) < 0 ? -1 : 0;
        /* Accuracy 1 µs: libcurl's timeouts drive connection setup and retries; sd-event's default
         * slack of 250 ms would add that much latency to every request. */
        if (sd_event_add_time_relative(h->event, &h->timer, CLOCK_MONOTONIC, delay, 1, http_on_timer, h) < 0)
                return -1;
        (void) sd_event_source_set_description(h->timer, "http-timer");
        return 0;
}

int http_new(sd_event *event, Http **ret) {
        _cleanup_(http_freep) Http *h = NULL;
        static bool initialized = false;

        assert(event);
        assert(ret);

        if (!initialized) {
                if (curl_global_init(CURL_GLOBAL_ALL) != CURLE_OK)
                        return -EIO;
                initialized = true;
        }

        h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        h->event = sd_event_ref(event);
        h->multi = curl_multi_init();
        if (!h->multi)
                return -ENOMEM;

        if (curl_multi_setopt(h->multi, CURLMOPT_SOCKETFUNCTION, http_socket_cb) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_SOCKETDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERFUNCTION, http_timer_cb) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_TIMERDATA, h) != CURLM_OK ||
            curl_multi_setopt(h->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX) != CURLM_OK)
                return -EIO;

        *ret = TAKE_PTR(h);
        return 0;
}

unsigned http_active(Http *h) {
        return h ? h->n_active : 0;
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        assert(h->n_active == 0); /* every request must be freed before the Http */
        if (h->multi)
                curl_multi_cleanup(h->multi);
        sd_event_source_disable_unref(h->timer);
        sd_event_unref(h->event);
        free(h);
        return NULL;
}

static int buffer_append(HttpRequest *req, const char *data, size_t len) {
        if (req->response_size + len > req->max_body)
                return -EFBIG;
        if (req->response_size + len + 1 > req->response_alloc) {
                size_t na = MAX(req->response_alloc * 2, req->response_size + len + 1);
                char *nb;

                na = MIN(na, req->max_body + 1);
                nb = realloc(req->response, na);
                if (!nb)
                        return -ENOMEM;
                req->response = nb;
                req->response_alloc = na;
        }
        memcpy(req->response + req->response_size, data, len);
        req->response_size += len;
        req->response[req->response_size] = '\0';
        return 0;
}

static size_t http_on_write(char *buf, size_t size, size_t n, void *userdata) {
        HttpRequest *req = userdata;
        size_t len = size * n;
        long status = 0;
        int r;

        request_saw_data(req);
        (void) curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
        /* Only successful bodies are streamed; error bodies (Status JSON) are kept for decoding. */
        if (req->on_data && status >= 200 && status < 300)
                r = req->on_data(req, buf, len, req->userdata);
        else
                r = buffer_append(req, buf, len);
        if (r < 0) {
                req->abort_error = r;
                return CURL_WRITEFUNC_ERROR;
        }
        return len;
}

/* A watch connection is idle almost all of its life: let OpenSSL free its 16 KiB read and write
 * record buffers between records instead of holding them per connection for the daemon's lifetime. */
static CURLcode http_ssl_ctx_setup(CURL *easy, void *ssl_ctx, void *userdata) {
        (void) easy;
        (void) userdata;
        SSL_CTX_set_mode((SSL_CTX *) ssl_ctx, SSL_MODE_RELEASE_BUFFERS);
        return CURLE_OK;
}

int http_request_new(Http *h, const char *method, const char *url, HttpRequest **ret) {
        _cleanup_(http_request_freep) HttpRequest *req = NULL;

        assert(h);
        assert(method);
        assert(url);
        assert(ret);

        req = calloc(1, sizeof(*req));
        if (!req)
                return -ENOMEM;
        req->http = h;
        req->max_body = HTTP_BODY_MAX_DEFAULT;
        req->url = strdup(url);
        req->easy = curl_easy_init();
        if (!req->url || !req->easy)
                return -ENOMEM;

        if (curl_easy_setopt(req->easy, CURLOPT_URL, req->url) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_PRIVATE, req) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_WRITEFUNCTION, http_on_write) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_WRITEDATA, req) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            /* Sent as built: libcurl's resolving of "/../" would turn a name with dot segments into
             * another object's path (a Secret name from the Node or the OSC could reach another
             * Secret); the callers build paths that have none. */
            curl_easy_setopt(req->easy, CURLOPT_PATH_AS_IS, 1L) != CURLE_OK ||
            /* TLS verification is always on; there is no switch to turn it off. */
            curl_easy_setopt(req->easy, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_SSLVERSION, (long) CURL_SSLVERSION_TLSv1_2) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2TLS) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_PIPEWAIT, 1L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_TCP_KEEPALIVE, 1L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_TCP_KEEPIDLE, 30L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_TCP_KEEPINTVL, 30L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_CONNECTTIMEOUT_MS, 30000L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_USERAGENT, "inplace-agent/" PACKAGE_VERSION " (linux)") !=
                    CURLE_OK)
                return -EIO;
        /* Only libcurl's OpenSSL backend calls this; another backend returns CURLE_NOT_BUILT_IN and
         * the buffers simply stay. */
        (void) curl_easy_setopt(req->easy, CURLOPT_SSL_CTX_FUNCTION, http_ssl_ctx_setup);
        /* libcurl's default upload buffer is 64 KiB, allocated for every request (also a GET: the
         * request head goes through it) and held as long as the handle lives, i.e. for the whole life
         * of a watch. Our request bodies are JSON patches and Lease updates: the minimum, 16 KiB. */
        (void) curl_easy_setopt(req->easy, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);

        if (!streq(method, "GET")) {
                if (streq(method, "HEAD")) {
                        if (curl_easy_setopt(req->easy, CURLOPT_NOBODY, 1L) != CURLE_OK)
                                return -EIO;
                } else if (curl_easy_setopt(req->easy, CURLOPT_CUSTOMREQUEST, method) != CURLE_OK)
                        return -EIO;
        }

        *ret = TAKE_PTR(req);
        return 0;
}

HttpRequest *http_request_free(HttpRequest *req) {
        if (!req)
                return NULL;
        http_request_cancel(req);
        if (req->easy)
                curl_easy_cleanup(req->easy);
        sd_event_source_disable_unref(req->silence);
        curl_slist_free_all(req->headers);
        curl_slist_free_all(req->connect_to);
        for (size_t i = 0; i < ELEMENTSOF(req->tls_strings); i++)
                free(req->tls_strings[i]);
        free(req->response);
        free(req->body);
        free(req->url);
        free(req);
        return NULL;
}

int http_request_add_header(HttpRequest *req, const char *header) {
        struct curl_slist *l;

        assert(req);
        l = curl_slist_append(req->headers, header);
        if (!l)
                return -ENOMEM;
        req->headers = l;
        return 0;
}

int http_request_set_body(HttpRequest *req, const void *data, size_t size) {
        char *copy;

        assert(req);
        copy = malloc(size + 1);
        if (!copy)
                return -ENOMEM;
        if (size > 0)
                memcpy(copy, data, size);
        copy[size] = '\0';
        free(req->body);
        req->body = copy;
        req->body_size = size;
        if (curl_easy_setopt(req->easy, CURLOPT_POSTFIELDS, req->body) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) size) != CURLE_OK)
                return -EIO;
        return 0;
}

void http_request_set_timeout(HttpRequest *req, uint64_t total_usec, uint64_t connect_usec) {
        (void) curl_easy_setopt(req->easy, CURLOPT_TIMEOUT_MS, (long) (total_usec / USEC_PER_MSEC));
        if (connect_usec > 0)
                (void) curl_easy_setopt(req->easy, CURLOPT_CONNECTTIMEOUT_MS,
                                        (long) (connect_usec / USEC_PER_MSEC));
}

void http_request_set_low_speed(HttpRequest *req, unsigned long bytes, uint64_t usec) {
        (void) curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_LIMIT, (long) bytes);
        (void) curl_easy_setopt(req->easy, CURLOPT_LOW_SPEED_TIME, (long) MAX(usec / USEC_PER_SEC, 1));
}

void http_request_set_silence(HttpRequest *req, uint64_t usec) {
        req->silence_usec = usec;
}

void http_request_set_max_body(HttpRequest *req, size_t max) {
        req->max_body = max;
}

void http_request_set_stream(HttpRequest *req, HttpDataCallback cb) {
        req->on_data = cb;
}

static int set_blob(CURL *easy, CURLoption opt, const void *data, size_t size) {
        struct curl_blob blob = { .data = (void *) data, .len = size, .flags = CURL_BLOB_COPY };
        return curl_easy_setopt(easy, opt, &blob) == CURLE_OK ? 0 : -EIO;
}

static int set_file(HttpRequest *req, size_t slot, CURLoption opt, const char *path) {
        int r = free_and_strdup(&req->tls_strings[slot], path);
        if (r < 0)
                return r;
        return curl_easy_setopt(req->easy, opt, req->tls_strings[slot]) == CURLE_OK ? 0 : -EIO;
}

static int set_server_name(HttpRequest *req, const char *name) {
        _cleanup_(curl_urlp) CURLU *u = NULL;
        _cleanup_(curl_freep) char *host = NULL, *port = NULL, *newurl = NULL;
        _cleanup_free_ char *entry = NULL;
        struct curl_slist *l;

        /* Verify the certificate against `name` while connecting to the URL's real host:
         * put `name` into the URL and map it back with CONNECT_TO (docs/kube-api.md §2.4). */
        u = curl_url();
        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, req->url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
                return -EINVAL;
        if (asprintf(&entry, "%s:%s:%s:%s", name, port, host, port) < 0)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_HOST, name, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_URL, &newurl, 0) != CURLUE_OK)
                return -EINVAL;
        l = curl_slist_append(req->connect_to, entry);
        if (!l)
                return -ENOMEM;
        req->connect_to = l;
        if (free_and_strdup(&req->url, newurl) < 0)
                return -ENOMEM;
        if (curl_easy_setopt(req->easy, CURLOPT_URL, req->url) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_CONNECT_TO, req->connect_to) != CURLE_OK)
                return -EIO;
        return 0;
}

int http_request_set_tls(HttpRequest *req, const HttpTls *tls) {
        int r = 0;

        assert(req);
        if (!tls)
                return 0;

        if (tls->ca_pem)
                r = set_blob(req->easy, CURLOPT_CAINFO_BLOB, tls->ca_pem, tls->ca_pem_size);
        else if (!isempty(tls->ca_file))
                r = set_file(req, 0, CURLOPT_CAINFO, tls->ca_file);
        if (r < 0)
                return r;
        /* A configured CA is the only trust anchor (like client-go's RootCAs): without this,
         * libcurl would also accept anything signed by the system store in its default CA path. */
        if ((tls->ca_pem || !isempty(tls->ca_file)) &&
            curl_easy_setopt(req->easy, CURLOPT_CAPATH, NULL) != CURLE_OK)
                return -EIO;
        if (tls->cert_pem)
                r = set_blob(req->easy, CURLOPT_SSLCERT_BLOB, tls->cert_pem, tls->cert_pem_size);
        else if (!isempty(tls->cert_file))
                r = set_file(req, 1, CURLOPT_SSLCERT, tls->cert_file);
        if (r < 0)
                return r;
        if (tls->key_pem)
                r = set_blob(req->easy, CURLOPT_SSLKEY_BLOB, tls->key_pem, tls->key_pem_size);
        else if (!isempty(tls->key_file))
                r = set_file(req, 2, CURLOPT_SSLKEY, tls->key_file);
        if (r < 0)
                return r;
        if (!isempty(tls->server_name))
                r = set_server_name(req, tls->server_name);
        return r;
}

void http_request_set_follow(HttpRequest *req, bool follow) {
        (void) curl_easy_setopt(req->easy, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
        (void) curl_easy_setopt(req->easy, CURLOPT_MAXREDIRS, 5L);
}

void http_request_set_resume_from(HttpRequest *req, uint64_t offset) {
        (void) curl_easy_setopt(req->easy, CURLOPT_RESUME_FROM_LARGE, (curl_off_t) offset);
}

void http_request_set_fresh_connect(HttpRequest *req, bool fresh) {
        (void) curl_easy_setopt(req->easy, CURLOPT_FRESH_CONNECT, fresh ? 1L : 0L);
}

static int silence_arm(HttpRequest *req) {
        sd_event *event = req->http->event;
        int r;

        r = sd_event_now(event, CLOCK_MONOTONIC, &req->last_data_usec);
        if (r < 0)
                return r;
        if (!req->silence) {
                /* A second of slack: the period is tens of seconds, and wake-ups may coalesce. */
                r = sd_event_add_time(event, &req->silence, CLOCK_MONOTONIC,
                                      req->last_data_usec + req->silence_usec, USEC_PER_SEC,
                                      request_on_silence, req);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(req->silence, "http-silence");
        } else {
                r = sd_event_source_set_time(req->silence, req->last_data_usec + req->silence_usec);
                if (r < 0)
                        return r;
        }
        return sd_event_source_set_enabled(req->silence, SD_EVENT_ONESHOT);
}

int http_request_set_unix_socket(HttpRequest *req, const char *path) {
        assert(req);
        assert(path);

        /* libcurl copies the path. A local socket is cheap to connect to: each request gets its own
         * connection, closed after it, so no request waits on one to a daemon that went away. */
        if (curl_easy_setopt(req->easy, CURLOPT_UNIX_SOCKET_PATH, path) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE) !=
                    CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_FRESH_CONNECT, 1L) != CURLE_OK ||
            curl_easy_setopt(req->easy, CURLOPT_FORBID_REUSE, 1L) != CURLE_OK)
                return -EINVAL;
        return 0;
}

int http_request_start(HttpRequest *req, HttpDoneCallback done, void *userdata) {
        assert(req);
        assert(!req->active);

        req->on_done = done;
        req->userdata = userdata;
        req->abort_error = 0;
        req->status = 0;
        req->response_size = 0;
        if (req->response)
                req->response[0] = '\0';

        if (curl_easy_setopt(req->easy, CURLOPT_HTTPHEADER, req->headers) != CURLE_OK)
                return -EIO;
        if (req->silence_usec > 0) {
                int r = silence_arm(req);
                if (r < 0)
                        return r;
        }
        if (curl_multi_add_handle(req->http->multi, req->easy) != CURLM_OK)
                return -EIO;
        req->active = true;
        req->http->n_active++;
        return 0;
}

void http_request_cancel(HttpRequest *req) {
        if (!req || !req->active)
                return;
        (void) sd_event_source_set_enabled(req->silence, SD_EVENT_OFF);
        (void) curl_multi_remove_handle(req->http->multi, req->easy);
        req->active = false;
        req->http->n_active--;
}

bool http_request_is_active(HttpRequest *req) {
        return req && req->active;
}

const char *http_request_get_body(HttpRequest *req, size_t *ret_size) {
        if (ret_size)
                *ret_size = req->response_size;
        return req->response ? req->response : "";
}

long http_request_get_status(HttpRequest *req) {
        return req->status;
}

static const char *get_header(HttpRequest *req, const char *name, unsigned origin) {
        struct curl_header *h;
        size_t n;

        /* libcurl keeps the headers: request -1 is the final response (after redirects), CURLH_HEADER
         * leaves out 1xx, trailers and CONNECT; of a repeated header, the last one wins. */
        if (curl_easy_header(req->easy, name, 0, origin, -1, &h) != CURLHE_OK)
                return NULL;
        n = h->amount;
        if (n > 1 && curl_easy_header(req->easy, name, n - 1, origin, -1, &h) != CURLHE_OK)
                return NULL;
        return h->value;
}

const char *http_request_get_header(HttpRequest *req, const char *name) {
        return get_header(req, name, CURLH_HEADER);
}

const char *http_request_get_trailer(HttpRequest *req, const char *name) {
        return get_header(req, name, CURLH_TRAILER);
}

uint64_t http_request_get_retry_after_usec(HttpRequest *req) {
        const char *v = http_request_get_header(req, "Retry-After");
        uint64_t secs = 0;

        /* Only integer seconds, like client-go; HTTP dates are ignored. Capped at 10 min. */
        if (isempty(v))
                return 0;
        for (const char *p = v; *p; p++) {
                if (!isdigit((unsigned char) *p))
                        return 0;
                secs = secs * 10 + (uint64_t) (*p - '0');
                if (secs > 600)
                        return 600 * USEC_PER_SEC;
        }
        return secs * USEC_PER_SEC;
}

const char *http_request_get_url(HttpRequest *req) {
        return req->url;
}

void *http_request_get_userdata(HttpRequest *req) {
        return req->userdata;
}

int http_error_from_result(CURLcode code, long status) {
        switch (code) {
        case CURLE_OK:
                break;
        case CURLE_OPERATION_TIMEDOUT:
                return -ETIMEDOUT;
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_RESOLVE_PROXY:
                return -EHOSTUNREACH;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_PEER_FAILED_VERIFICATION:
                return -EKEYREJECTED;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_SSL_CACERT_BADFILE:
                return -ENOKEY;
        case CURLE_PARTIAL_FILE:
        case CURLE_RECV_ERROR:
        case CURLE_SEND_ERROR:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_GOT_NOTHING:
                return -ECONNRESET;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_RANGE_ERROR:
                return -ERANGE;
        case CURLE_TOO_MANY_REDIRECTS:
                return -ELOOP;
        case CURLE_FILESIZE_EXCEEDED:
                return -EFBIG;
        default:
                return -EIO;
        }

        if (status >= 200 && status < 300)
                return 0;
        switch (status) {
        case 400:
        case 415:
        case 422:
                return -EINVAL;
        case 401:
                return -EACCES;
        case 403:
                return -EPERM;
        case 404:
                return -ENOENT;
        case 409:
                return -EBUSY;
        case 410:
                return -ESTALE;
        case 413:
                return -EFBIG;
        case 416:
                return -ERANGE;
        case 429:
                return -EAGAIN;
        case 503:
                return -EAGAIN;
        case 504:
                return -ETIMEDOUT;
        default:
                return status >= 500 ? -EIO : -EPROTO;
        }
}
