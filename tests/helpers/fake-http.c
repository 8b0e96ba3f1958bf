/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
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
        char **history;         /* owned: every request, in order */
        Conn *conns;            /* owned: open connections */
};

static void conn_free(Conn *c) {
        if (c->prev)
                c->prev->next = c->next;
        else
                c->f->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        sd_event_source_disable_unref(c->io);
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

/* Sends what the socket takes now; returns false when the connection is gone. */
static bool flush_out(Conn *c) {
        while (c->out_off < c->out_len) {
                ssize_t k = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);

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

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;
        FakeHttp *f = c->f;
        const FakeResponse *r = NULL;
        char *end;
        ssize_t n;
        size_t need;

        if ((revents & EPOLLOUT) && !flush_out(c))
                return 0;
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                return 0;
        n = read(fd, c->buf + c->len, sizeof(c->buf) - c->len - 1);
        if (n < 0 && errno == EAGAIN)
                return 0;
        if (n <= 0) {
                conn_free(c);
                return 0;
        }
        c->len += (size_t) n;
        c->buf[c->len] = '\0';
        end = strstr(c->buf, "\r\n\r\n");
        if (!end)
                return 0;
        need = (size_t) (end - c->buf) + 4;
        {
                const char *cl = strcasestr(c->buf, "\r\nContent-Length:");
                if (cl && cl < end)
                        need += strtoul(cl + 17, NULL, 10);
        }
        if (c->len < need)
                return 0;

        free(f->last);
        f->last = strndup(c->buf, need);
        {
                char **h = realloc(f->history, (f->served + 1) * sizeof(char *));
                assert(h && f->last);
                f->history = h;
                f->history[f->served] = strdup(f->last);
        }
        f->served++;
        if (f->head != f->tail)
                r = &f->queue[f->head++ % MAX_QUEUE];
        respond(c, r);
        memmove(c->buf, c->buf + need, c->len - need);
        c->len -= need;
        c->close_when_sent = r && r->close_early;
        (void) flush_out(c);
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
