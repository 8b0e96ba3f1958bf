/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fake-http.h"
#include "util/macro.h"

#define MAX_QUEUE 64

typedef struct Conn Conn;
struct Conn {
        FakeHttp *f;
        Conn *next, *prev;
        int fd;
        SSL *ssl;            /* owned; NULL: plain HTTP */
        bool pending;        /* the request at the start of buf is the handler's, not answered yet */
        const char *request; /* that request, borrowed from the history */
        sd_event_source *io;
        char buf[65536];
        size_t len;
        /* What is still to be sent: the loop also runs the client, so the server never blocks on a
         * full socket (a response of megabytes) but sends the rest when the socket takes it. */
        char *out;
        size_t out_len, out_off;
        bool close_when_sent;
};

struct FakeHttp {
        sd_event *event;
        int listen_fd;
        unsigned port;
        sd_event_source *accept_io;
        FakeResponse queue[MAX_QUEUE];
        char *bodies[MAX_QUEUE], *headers[MAX_QUEUE];
        size_t head, tail;
        unsigned served;
        char *last;
        char **history; /* owned: every request, in order */
        Conn *conns;    /* owned: open connections */
        SSL_CTX *tls;   /* owned; NULL: plain HTTP */
        char *ca_pem;   /* owned: the server's self-signed certificate */
        FakeHttpHandler handler;
        void *handler_data;
};

static void conn_free(Conn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                c->f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        sd_event_source_disable_unref(c->io);
        SSL_free(c->ssl);
        close(c->fd);
        free(c->out);
        free(c);
}

static void write_all(Conn *c, const char *p, size_t n) {
        char *o = realloc(c->out, c->out_len + n);

        assert(o);
        memcpy(o + c->out_len, p, n);
        c->out = o;
        c->out_len += n;
}

/* read()/write() through TLS when the server speaks it: -1 with EAGAIN while TLS waits for the peer. */
static ssize_t conn_io(Conn *c, void *p, size_t n, bool out) {
        int k, m = (int) MIN(n, (size_t) INT_MAX);

        if (!c->ssl)
                return out ? write(c->fd, p, n) : read(c->fd, p, n);
        k = out ? SSL_write(c->ssl, p, m) : SSL_read(c->ssl, p, m);
        if (k > 0)
                return k;
        switch (SSL_get_error(c->ssl, k)) {
        case SSL_ERROR_WANT_READ:
        case SSL_ERROR_WANT_WRITE:
                errno = EAGAIN;
                return -1;
        case SSL_ERROR_ZERO_RETURN:
                return 0;
        default:
                ERR_clear_error();
                errno = EIO;
                return -1;
        }
}

/* Sends what the socket takes now; returns false when the connection is gone. */
static bool flush_out(Conn *c) {
        while (c->out_off < c->out_len) {
                ssize_t k = conn_io(c, c->out + c->out_off, c->out_len - c->out_off, /* out= */ true);

                if (k < 0 && errno == EAGAIN)
                        break;
                if (k <= 0) {
                        conn_free(c);
                        return false;
                }
                c->out_off += (size_t) k;
        }
        if (c->out_off < c->out_len)
                return sd_event_source_set_io_events(c->io, EPOLLIN | EPOLLOUT) >= 0;
        c->out_off = c->out_len = 0;
        if (c->close_when_sent) {
                conn_free(c);
                return false;
        }
        return sd_event_source_set_io_events(c->io, EPOLLIN) >= 0;
}

static void respond(Conn *c, const FakeResponse *r) {
        const char *body = r ? strempty(r->body) : "not found";
        size_t blen = r && r->body_size > 0 ? r->body_size : strlen(body);
        char head[4096];

        if (!r || !r->chunked) {
                snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nContent-Length: %zu\r\n%s\r\n",
                         r ? r->status : 404, blen, r ? strempty(r->headers) : "");
                write_all(c, head, strlen(head));
                write_all(c, body, r && r->stall ? MIN(r->stall_after, blen) : blen);
                return;
        }
        snprintf(head, sizeof(head), "HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n%s\r\n", r->status,
                 strempty(r->headers));
        write_all(c, head, strlen(head));
        for (size_t off = 0; off < blen;) {
                size_t n = r->chunk_size ? MIN(r->chunk_size, blen - off) : blen - off;
                char sz[32];
                snprintf(sz, sizeof(sz), "%zx\r\n", n);
                write_all(c, sz, strlen(sz));
                write_all(c, body + off, n);
                write_all(c, "\r\n", 2);
                off += n;
        }
        if (!r->close_early && !r->hold)
                write_all(c, "0\r\n\r\n", 5);
}

/* The size of the complete request at the start of buf; 0 while it is incomplete. */
static size_t request_size(const Conn *c) {
        const char *end = strstr(c->buf, "\r\n\r\n"), *cl;
        size_t need;

        if (!end)
                return 0;
        need = (size_t) (end - c->buf) + 4;
        cl = strcasestr(c->buf, "\r\nContent-Length:");
        if (cl && cl < end)
                need += strtoul(cl + 17, NULL, 10);
        return c->len < need ? 0 : need;
}

static void record(FakeHttp *f, const char *request, size_t size) {
        char **h = realloc(f->history, (f->served + 1) * sizeof(char *));

        assert(h);
        f->history = h;
        f->history[f->served] = strndup(request, size);
        free(f->last);
        f->last = strndup(request, size);
        assert(f->history[f->served] && f->last);
        f->served++;
}

/* Answers the complete requests in buf, in order: the handler's answer, else the next queued one. A
 * request the handler leaves unanswered stays at the start of buf until fake_http_wake(). Returns
 * false when the connection is gone. */
static bool serve(Conn *c) {
        FakeHttp *f = c->f;
        size_t need;

        while ((need = request_size(c)) > 0) {
                FakeResponse answer = {};
                const FakeResponse *r = NULL;

                if (!c->pending) {
                        record(f, c->buf, need);
                        c->pending = true;
                        c->request = f->history[f->served - 1];
                }
                if (f->handler) {
                        if (!f->handler(c->request, &answer, f->handler_data))
                                return true;
                        r = &answer;
                } else if (f->head != f->tail)
                        r = &f->queue[f->head++ % MAX_QUEUE];
                c->pending = false;
                respond(c, r);
                memmove(c->buf, c->buf + need, c->len - need);
                c->len -= need;
                c->buf[c->len] = '\0';
                c->close_when_sent = r && r->close_early;
                if (!flush_out(c))
                        return false;
        }
        return true;
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;

        if ((revents & EPOLLOUT) && !flush_out(c))
                return 0;
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return 0;
        /* Until EAGAIN: TLS may hold decrypted bytes that epoll cannot see. */
        while (c->len < sizeof(c->buf) - 1) {
                ssize_t n = conn_io(c, c->buf + c->len, sizeof(c->buf) - c->len - 1, /* out= */ false);

                if (n < 0 && errno == EAGAIN)
                        break;
                if (n <= 0) {
                        conn_free(c);
                        return 0;
                }
                c->len += (size_t) n;
                c->buf[c->len] = '\0';
        }
        (void) serve(c);
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        FakeHttp *f = userdata;
        Conn *c;
        int cfd;

        cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (cfd < 0)
                return 0;
        c = calloc(1, sizeof(*c));
        assert(c);
        c->f = f;
        c->fd = cfd;
        c->next = f->conns;
        if (f->conns)
                f->conns->prev = c;
        f->conns = c;
        if (f->tls) {
                c->ssl = SSL_new(f->tls);
                assert(c->ssl && SSL_set_fd(c->ssl, cfd) == 1);
                SSL_set_accept_state(c->ssl);
        }
        assert(sd_event_add_io(f->event, &c->io, cfd, EPOLLIN, on_conn_io, c) >= 0);
        return 0;
}

int fake_http_new(sd_event *e, FakeHttp **ret) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t sl = sizeof(sa);
        FakeHttp *f = calloc(1, sizeof(*f));

        if (!f)
                return -ENOMEM;
        f->event = sd_event_ref(e);
        f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (f->listen_fd < 0 || bind(f->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            listen(f->listen_fd, 16) < 0 || getsockname(f->listen_fd, (struct sockaddr *) &sa, &sl) < 0)
                return -errno;
        f->port = ntohs(sa.sin_port);
        if (sd_event_add_io(e, &f->accept_io, f->listen_fd, EPOLLIN, on_accept, f) < 0)
                return -EIO;
        *ret = f;
        return 0;
}

FakeHttp *fake_http_free(FakeHttp *f) {
        if (!f)
                return NULL;
        while (f->conns)
                conn_free(f->conns);
        sd_event_source_disable_unref(f->accept_io);
        close(f->listen_fd);
        SSL_CTX_free(f->tls);
        free(f->ca_pem);
        for (size_t i = 0; i < MAX_QUEUE; i++) {
                free(f->bodies[i]);
                free(f->headers[i]);
        }
        free(f->last);
        for (unsigned i = 0; i < f->served; i++)
                free(f->history[i]);
        free(f->history);
        sd_event_unref(f->event);
        free(f);
        return NULL;
}

static void pkey_freep(EVP_PKEY **p) {
        EVP_PKEY_free(*p);
}

static void x509_freep(X509 **x) {
        X509_free(*x);
}

static bool add_ext(X509 *x, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;
        bool ok;

        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, x, x, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        ok = ext && X509_add_ext(x, ext, -1) == 1;
        X509_EXTENSION_free(ext);
        return ok;
}

/* A fresh P-256 key and a self-signed certificate for 127.0.0.1, valid for a day, as the context's. */
static int tls_setup(FakeHttp *f) {
        _cleanup_(pkey_freep) EVP_PKEY *key = EVP_EC_gen("P-256");
        _cleanup_(x509_freep) X509 *x = X509_new();
        BIO *b;
        char *data;
        long n;

        if (!key || !x || X509_set_version(x, 2) != 1 ||
            ASN1_INTEGER_set(X509_get_serialNumber(x), 1) != 1 ||
            !X509_gmtime_adj(X509_getm_notBefore(x), -60) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), 86400) || X509_set_pubkey(x, key) != 1 ||
            X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                       (const unsigned char *) "fake-http", -1, -1, 0) != 1 ||
            X509_set_issuer_name(x, X509_get_subject_name(x)) != 1 ||
            !add_ext(x, NID_basic_constraints, "critical,CA:TRUE") ||
            !add_ext(x, NID_subject_alt_name, "IP:127.0.0.1") || X509_sign(x, key, EVP_sha256()) <= 0)
                return -EIO;
        f->tls = SSL_CTX_new(TLS_server_method());
        if (!f->tls || SSL_CTX_use_certificate(f->tls, x) != 1 || SSL_CTX_use_PrivateKey(f->tls, key) != 1)
                return -EIO;
        /* flush_out() may grow the buffer between a partial write and its retry. */
        SSL_CTX_set_mode(f->tls, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        b = BIO_new(BIO_s_mem());
        if (!b || PEM_write_bio_X509(b, x) != 1) {
                BIO_free(b);
                return -EIO;
        }
        n = BIO_get_mem_data(b, &data);
        f->ca_pem = strndup(data, (size_t) n);
        BIO_free(b);
        return f->ca_pem ? 0 : -ENOMEM;
}

int fake_http_new_tls(sd_event *e, FakeHttp **ret) {
        FakeHttp *f;
        int r;

        r = fake_http_new(e, &f);
        if (r < 0)
                return r;
        r = tls_setup(f);
        if (r < 0) {
                fake_http_free(f);
                return r;
        }
        *ret = f;
        return 0;
}

const char *fake_http_ca_pem(FakeHttp *f) {
        return f->ca_pem;
}

void fake_http_set_handler(FakeHttp *f, FakeHttpHandler handler, void *userdata) {
        f->handler = handler;
        f->handler_data = userdata;
}

void fake_http_wake(FakeHttp *f) {
        for (Conn *c = f->conns, *next; c; c = next) {
                next = c->next;
                if (c->pending)
                        (void) serve(c);
        }
}

unsigned fake_http_port(FakeHttp *f) {
        return f->port;
}

int fake_http_push(FakeHttp *f, const FakeResponse *r) {
        size_t i = f->tail % MAX_QUEUE;

        if (f->tail - f->head >= MAX_QUEUE)
                return -ENOBUFS;
        f->queue[i] = *r;
        free(f->bodies[i]);
        free(f->headers[i]);
        if (r->body && r->body_size > 0) {
                f->bodies[i] = malloc(r->body_size);
                if (f->bodies[i])
                        memcpy(f->bodies[i], r->body, r->body_size);
        } else
                f->bodies[i] = r->body ? strdup(r->body) : NULL;
        f->headers[i] = r->headers ? strdup(r->headers) : NULL;
        f->queue[i].body = f->bodies[i];
        f->queue[i].headers = f->headers[i];
        f->tail++;
        return 0;
}

unsigned fake_http_requests(FakeHttp *f) {
        return f->served;
}

const char *fake_http_last_request(FakeHttp *f) {
        return f->last;
}

const char *fake_http_request(FakeHttp *f, unsigned i) {
        return i < f->served ? f->history[i] : NULL;
}
