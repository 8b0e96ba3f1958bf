/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>

#include "kube/watch-stream.h"

struct WatchStream {
        char *buf; /* owned: bytes of the incomplete last line */
        size_t size, alloc;
        size_t max_line;
        WatchStreamCallback cb;
        void *userdata; /* borrowed */
};

static const char *const event_type_names[_WATCH_EVENT_TYPE_MAX] = {
        [WATCH_EVENT_ADDED] = "ADDED",     [WATCH_EVENT_MODIFIED] = "MODIFIED",
        [WATCH_EVENT_DELETED] = "DELETED", [WATCH_EVENT_BOOKMARK] = "BOOKMARK",
        [WATCH_EVENT_ERROR] = "ERROR",
};

static const char *const end_kind_names[_WATCH_END_KIND_MAX] = {
        [WATCH_END_CLEAN] = "clean",
        [WATCH_END_DROPPED] = "dropped",
        [WATCH_END_ERROR_EVENT] = "error-event",
        [WATCH_END_DECODE] = "decode-error",
        [WATCH_END_HTTP] = "http-error",
        [WATCH_END_CONNECT] = "connect-error",
};

static const char *const next_names[_WATCH_NEXT_MAX] = {
        [WATCH_NEXT_REWATCH] = "rewatch",
        [WATCH_NEXT_REWATCH_BACKOFF] = "rewatch-after-backoff",
        [WATCH_NEXT_RELIST_BACKOFF] = "relist-after-backoff",
};

DEFINE_STRING_TABLE_LOOKUP(watch_event_type, WatchEventType, event_type_names);
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(watch_end_kind, WatchEndKind, end_kind_names);
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(watch_next, WatchNext, next_names);

int watch_stream_new(size_t max_line, WatchStreamCallback cb, void *userdata, WatchStream **ret) {
        WatchStream *s;

        assert(cb);
        assert(ret);

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->max_line = max_line > 0 ? max_line : WATCH_STREAM_LINE_MAX;
        s->cb = cb;
        s->userdata = userdata;
        *ret = s;
        return 0;
}

WatchStream *watch_stream_free(WatchStream *s) {
        if (!s)
                return NULL;
        free(s->buf);
        free(s);
        return NULL;
}

void watch_stream_reset(WatchStream *s) {
        assert(s);
        s->size = 0;
}

size_t watch_stream_pending(const WatchStream *s) {
        assert(s);
        return s->size;
}

static int dispatch_line(WatchStream *s, const char *line, size_t len) {
        json_auto_t *j = NULL;
        json_t *type, *object;
        WatchEventType t;

        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                len--;
        if (len == 0)
                return 0;

        /* JSON_ALLOW_NUL: one \u0000 in a condition message must not blind the watch. (A NUL in
         * an object key is still refused by jansson; the API server validates the keys of labels
         * and annotations, so none can reach us there.) */
        j = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
        if (!j || !json_is_object(j))
                return -EBADMSG;
        type = json_object_get(j, "type");
        object = json_object_get(j, "object");
        if (!json_is_string(type) || !json_is_object(object))
                return -EBADMSG;
        t = watch_event_type_from_string(json_string_value(type));
        if (t < 0)
                return -EBADMSG; /* unknown type: like a decode error (§11) */

        return s->cb(t, object, s->userdata);
}

static int buffer_append(WatchStream *s, const char *data, size_t size) {
        if (size == 0)
                return 0;
        if (s->size + size > s->max_line)
                return -EMSGSIZE;
        if (s->size + size > s->alloc) {
                size_t na = MIN(MAX(s->alloc * 2, s->size + size), s->max_line);
                char *nb = realloc(s->buf, na);

                if (!nb)
                        return -ENOMEM;
                s->buf = nb;
                s->alloc = na;
        }
        memcpy(s->buf + s->size, data, size);
        s->size += size;
        return 0;
}

int watch_stream_feed(WatchStream *s, const void *data, size_t size) {
        const char *p = data, *end = p + size;
        int r;

        assert(s);
        assert(data || size == 0);

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));

                if (!nl)
                        return buffer_append(s, p, (size_t) (end - p));

                if (s->size == 0)
                        /* The common case: a whole line inside this read, no copy. */
                        r = (size_t) (nl - p) > s->max_line ? -EMSGSIZE :
                                                              dispatch_line(s, p, (size_t) (nl - p));
                else {
                        r = buffer_append(s, p, (size_t) (nl - p));
                        if (r >= 0)
                                r = dispatch_line(s, s->buf, s->size);
                        s->size = 0;
                }
                if (r < 0)
                        return r;
                p = nl + 1;
        }
        return 0;
}

int kube_status_code(const json_t *status) {
        json_t *c = json_object_get(status, "code");
        json_int_t v;

        if (!json_is_integer(c))
                return 0;
        v = json_integer_value(c);
        return v > 0 && v < 1000 ? (int) v : 0;
}

const char *kube_status_reason(const json_t *status) {
        return json_string_value(json_object_get(status, "reason"));
}

bool kube_status_is_too_large_rv(const json_t *status) {
        json_t *causes = json_object_get(json_object_get(status, "details"), "causes"), *c;
        size_t i;

        json_array_foreach(causes, i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "reason")), "ResourceVersionTooLarge") ||
                    streq_ptr(json_string_value(json_object_get(c, "type")), "ResourceVersionTooLarge"))
                        return true;
        return false;
}

WatchNext watch_end_decide(WatchEndKind kind, int code, unsigned n_events, uint64_t duration_usec) {
        switch (kind) {
        case WATCH_END_CLEAN:
                /* A server that closes every watch at once would otherwise make us spin. */
                if (n_events == 0 && duration_usec < WATCH_SHORT_USEC)
                        return WATCH_NEXT_RELIST_BACKOFF;
                return WATCH_NEXT_REWATCH;
        case WATCH_END_DROPPED:
        case WATCH_END_CONNECT:
                return WATCH_NEXT_REWATCH_BACKOFF;
        case WATCH_END_ERROR_EVENT:
        case WATCH_END_HTTP:
                /* Throttled: the watch position is fine, only the server is busy. */
                if (code == 429)
                        return WATCH_NEXT_REWATCH_BACKOFF;
                return WATCH_NEXT_RELIST_BACKOFF;
        case WATCH_END_DECODE:
        default:
                return WATCH_NEXT_RELIST_BACKOFF;
        }
}
