/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "daemon/status.h"
#include "util/fileio.h"
#include "util/macro.h"
#include "util/time-util.h"

#define STATE_FILE_MAX (1024 * 1024)
#define SIDE_FILE_MAX (16 * 1024)

static char *state_path(const char *state_dir, const char *name) {
        char *p;

        return asprintf(&p, "%s/%s", state_dir, name) < 0 ? NULL : p;
}

/* A side file of `inplace-agent status`: {"<k1>","<k2>","since"} (since: RFC 3339 of a CLOCK_REALTIME
 * µs value), atomically, 0600. */
static int save_side_file(const char *state_dir, const char *name, const char *k1, const char *v1,
                          const char *k2, const char *v2, uint64_t since_usec) {
        _cleanup_free_ char *path = state_path(state_dir, name), *data = NULL;
        _cleanup_(json_decrefp) json_t *o = NULL;
        char since[RFC3339_MAX];

        o = json_pack("{s:s, s:s, s:s}", k1, strempty(v1), k2, strempty(v2), "since",
                      strempty(format_rfc3339(since, since_usec, /* micro= */ false)));
        data = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (!path || !data)
                return -ENOMEM;
        return write_file_atomic(path, data, strlen(data), 0600);
}

int status_blocker_save(const char *state_dir, const char *reason, const char *first_reason,
                        uint64_t since_usec) {
        return save_side_file(state_dir, STATUS_BLOCKER_FILE, "reason", reason, "firstReason", first_reason,
                              since_usec);
}

int status_containerd_save(const char *state_dir, const char *version, const char *revision,
                           uint64_t since_usec) {
        return save_side_file(state_dir, STATUS_CONTAINERD_FILE, "version", version, "revision", revision,
                              since_usec);
}

int status_blocker_remove(const char *state_dir) {
        _cleanup_free_ char *path = state_path(state_dir, STATUS_BLOCKER_FILE);

        if (!path)
                return -ENOMEM;
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* A small JSON object the daemon wrote, holding the string `key`; NULL when there is none (or it cannot
 * be read: the transaction is still worth printing). */
static json_t *side_file_load(const char *state_dir, const char *name, const char *key) {
        _cleanup_free_ char *path = state_path(state_dir, name), *data = NULL;
        json_t *o;

        if (!path || read_full_file(path, SIDE_FILE_MAX, &data, NULL) < 0)
                return NULL;
        o = json_loads(data, 0, NULL);
        if (!json_is_object(o) || !json_is_string(json_object_get(o, key))) {
                json_decref(o);
                return NULL;
        }
        return o;
}

/* state.json has a key "blocked" (the transaction's): this one is named after the Event it becomes. */
#define BLOCKER_KEY "noAPIServerAccess"

static void print_blocker(const json_t *b) {
        printf("%-14s %s (since %s)\n", BLOCKER_KEY, json_string_value(json_object_get(b, "reason")),
               strempty(json_string_value(json_object_get(b, "since"))));
}

/* The key of containerd's version, as the health check last heard it. */
#define CONTAINERD_KEY "containerd"

static void print_containerd(const json_t *c) {
        printf("%-14s %s (revision %s, told %s)\n", CONTAINERD_KEY,
               json_string_value(json_object_get(c, "version")),
               strempty(json_string_value(json_object_get(c, "revision"))),
               strempty(json_string_value(json_object_get(c, "since"))));
}

int status_print(const char *state_dir, bool json) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        _cleanup_(json_decrefp) json_t *blocker = side_file_load(state_dir, STATUS_BLOCKER_FILE, "reason"),
                                       *containerd =
                                               side_file_load(state_dir, STATUS_CONTAINERD_FILE, "version"),
                                       *state = NULL;
        json_error_t err;
        int r;

        path = state_path(state_dir, "state.json");
        if (!path)
                return EXIT_FAILURE;

        r = read_full_file(path, STATE_FILE_MAX, &data, NULL);
        if (r == -ENOENT) {
                state = json_pack("{s:n, s:s}", "transaction", "phase", "Idle");
                if (!state)
                        return EXIT_FAILURE;
        } else if (r < 0) {
                fprintf(stderr, "inplace-agent: cannot read %s: %s\n", path, strerror(-r));
                return EXIT_FAILURE;
        } else {
                state = json_loads(data, 0, &err);
                if (!json_is_object(state)) {
                        fprintf(stderr, "inplace-agent: %s is corrupt: line %d: %s\n", path, err.line,
                                err.text);
                        return EXIT_FAILURE;
                }
        }
        if ((blocker && json_object_set(state, BLOCKER_KEY, blocker) < 0) ||
            (containerd && json_object_set(state, CONTAINERD_KEY, containerd) < 0))
                return EXIT_FAILURE;

        if (json) {
                json_dumpf(state, stdout, JSON_COMPACT);
                putchar('\n');
        } else {
                const char *key;
                json_t *v;

                if (blocker)
                        print_blocker(blocker);
                if (containerd)
                        print_containerd(containerd);
                if (r == -ENOENT) {
                        printf("No transaction recorded in %s.\n", state_dir);
                        return EXIT_SUCCESS;
                }
                json_object_foreach(state, key, v) {
                        char *s;

                        if (streq(key, BLOCKER_KEY) || streq(key, CONTAINERD_KEY))
                                continue;
                        s = json_is_string(v) ? strdup(json_string_value(v)) :
                                                json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
                        printf("%-14s %s\n", key, s ? s : "?");
                        free(s);
                }
        }
        return EXIT_SUCCESS;
}
