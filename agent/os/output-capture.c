/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>

#include "os/output-capture.h"

struct OutputCapture {
        size_t head_max, tail_max, line_max;

        char *head; /* owned: head_max bytes */
        size_t head_size;

        char *tail;        /* owned: ring of tail_max bytes */
        size_t tail_start; /* index of the oldest byte */
        size_t tail_size;

        char *line; /* owned: line_max + 1 bytes */
        size_t line_size;
        bool line_split; /* the last piece handed out was cut at line_max */

        uint64_t total;
};

int output_capture_new(size_t head_max, size_t tail_max, size_t line_max, OutputCapture **ret) {
        _cleanup_(output_capture_freep) OutputCapture *c = NULL;

        assert(ret);

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->head_max = head_max ?: OUTPUT_CAPTURE_HEAD_DEFAULT;
        c->tail_max = tail_max ?: OUTPUT_CAPTURE_TAIL_DEFAULT;
        c->line_max = line_max ?: OUTPUT_CAPTURE_LINE_DEFAULT;

        c->head = malloc(c->head_max);
        c->tail = malloc(c->tail_max);
        c->line = malloc(c->line_max + 1);
        if (!c->head || !c->tail || !c->line)
                return -ENOMEM;

        *ret = TAKE_PTR(c);
        return 0;
}

OutputCapture *output_capture_free(OutputCapture *c) {
        if (!c)
                return NULL;
        free(c->head);
        free(c->tail);
        free(c->line);
        free(c);
        return NULL;
}

void output_capture_reset(OutputCapture *c) {
        assert(c);

        c->head_size = c->tail_start = c->tail_size = c->line_size = 0;
        c->line_split = false;
        c->total = 0;
}

static void emit_line(OutputCapture *c, OutputCaptureLine on_line, void *userdata) {
        size_t n = c->line_size;

        c->line_size = 0;
        if (!on_line)
                return;
        if (n > 0 && c->line[n - 1] == '\r')
                n--;
        c->line[n] = '\0';
        on_line(c->line, n, userdata);
}

static void split_lines(OutputCapture *c, const char *p, size_t size, OutputCaptureLine on_line,
                        void *userdata) {
        for (size_t i = 0; i < size; i++) {
                if (p[i] == '\n') {
                        /* A line of exactly k * line_max bytes was fully handed out already. */
                        if (!(c->line_size == 0 && c->line_split))
                                emit_line(c, on_line, userdata);
                        c->line_split = false;
                        continue;
                }
                c->line[c->line_size++] = p[i] == '\0' ? '?' : p[i];
                c->line_split = false;
                if (c->line_size == c->line_max) {
                        emit_line(c, on_line, userdata);
                        c->line_split = true;
                }
        }
}

static void tail_append(OutputCapture *c, const char *p, size_t size) {
        /* Only the last tail_max bytes of this chunk can survive. */
        if (size >= c->tail_max) {
                memcpy(c->tail, p + size - c->tail_max, c->tail_max);
                c->tail_start = 0;
                c->tail_size = c->tail_max;
                return;
        }
        for (size_t i = 0; i < size; i++) {
                size_t end = (c->tail_start + c->tail_size) % c->tail_max;

                c->tail[end] = p[i];
                if (c->tail_size < c->tail_max)
                        c->tail_size++;
                else
                        c->tail_start = (c->tail_start + 1) % c->tail_max;
        }
}

void output_capture_feed(OutputCapture *c, const void *data, size_t size, OutputCaptureLine on_line,
                         void *userdata) {
        const char *p = data;
        size_t to_head;

        assert(c);
        assert(data || size == 0);

        split_lines(c, p, size, on_line, userdata);
        c->total += size;

        to_head = MIN(size, c->head_max - c->head_size);
        memcpy(c->head + c->head_size, p, to_head);
        c->head_size += to_head;
        tail_append(c, p + to_head, size - to_head);
}

void output_capture_flush(OutputCapture *c, OutputCaptureLine on_line, void *userdata) {
        assert(c);

        if (c->line_size > 0)
                emit_line(c, on_line, userdata);
}

uint64_t output_capture_total(const OutputCapture *c) {
        assert(c);
        return c->total;
}

uint64_t output_capture_dropped(const OutputCapture *c) {
        assert(c);
        return c->total - c->head_size - c->tail_size;
}

static void copy_replacing_nul(char *dst, const char *src, size_t n) {
        for (size_t i = 0; i < n; i++)
                dst[i] = src[i] == '\0' ? '?' : src[i];
}

int output_capture_summary(const OutputCapture *c, char **ret) {
        char marker[64] = "";
        uint64_t dropped;
        size_t n, m, first;
        char *s;

        assert(c);
        assert(ret);

        dropped = output_capture_dropped(c);
        if (dropped > 0)
                (void) snprintf(marker, sizeof(marker), "\n[... %" PRIu64 " bytes omitted ...]\n", dropped);
        m = strlen(marker);
        n = c->head_size + m + c->tail_size;

        s = malloc(n + 1);
        if (!s)
                return -ENOMEM;
        copy_replacing_nul(s, c->head, c->head_size);
        memcpy(s + c->head_size, marker, m);

        first = MIN(c->tail_size, c->tail_max - c->tail_start);
        copy_replacing_nul(s + c->head_size + m, c->tail + c->tail_start, first);
        copy_replacing_nul(s + c->head_size + m + first, c->tail, c->tail_size - first);
        s[n] = '\0';

        *ret = s;
        return 0;
}
