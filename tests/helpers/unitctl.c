/* SPDX-License-Identifier: Apache-2.0 */
/* Test driver for unit-control and restart-handler against a real systemd (the user manager of
 * tests/integration/lib/usermgr.py), reached through DBUS_SYSTEM_BUS_ADDRESS like the agent.
 * Prints one JSON object per line on stdout, flushed, so a test can read what happened even when
 * the process is stopped by its own restart.
 *
 *   unitctl [OPTIONS] start|stop|restart|reload UNIT...   one job at a time, in order
 *   unitctl [OPTIONS] daemon-reload
 *   unitctl [OPTIONS] handle VALUE                         RestartHandler on an annotation value
 *   unitctl [OPTIONS] handle-file PATH                     the same, the "annotation" being the
 *                                                          content of PATH (absent = no annotation);
 *                                                          removing it deletes PATH
 * Options:
 *   --job-timeout DURATION   systemd.jobTimeout (default 90s)
 *   --self-unit UNIT         restart.selfUnit (default none)
 *   --state PATH             the RestartHandler record file (default: memory only)
 *   --fail-removal N         the first N annotation removals fail (-EIO)
 *   --retry DURATION         first delay before retrying a failed removal (default 1s)
 * Exit status: 0 when every job/handler step ran (the JSON tells whether units succeeded), 1 on
 * setup errors, 2 on usage errors. */
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "core/restart-request.h"
#include "duties/restart-handler.h"
#include "systemd/unit-control.h"
#include "util/fileio.h"
#include "util/time-util.h"

typedef struct Ctx {
        sd_event *event;         /* ref held */
        UnitControl *uc;         /* owned */
        RestartHandler *handler; /* owned */
        UnitAction action;
        char **units; /* borrowed: argv */
        size_t n_units, next;
        const char *annotation_file; /* borrowed */
        unsigned fail_removal;
        int exit_code;
} Ctx;

static void emit(json_t *j) {
        char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

        if (s) {
                printf("%s\n", s);
                fflush(stdout);
        }
        free(s);
        json_decref(j);
}

static json_t *id128_json(sd_id128_t id) {
        char s[SD_ID128_STRING_MAX];

        if (sd_id128_is_null(id))
                return json_null();
        return json_string(sd_id128_to_string(id, s));
}

static json_t *str_or_null(const char *s) {
        return s ? json_string(s) : json_null();
}

/* ---- direct jobs */

static void next_job(Ctx *c);

static void on_job_done(const UnitJobResult *res, void *userdata) {
        Ctx *c = userdata;

        emit(json_pack("{s:s, s:s, s:o, s:b, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I}", "event",
                       "result", "action", unit_action_to_string(res->action), "unit",
                       str_or_null(res->unit), "ok", res->error >= 0, "errno", -res->error, "error",
                       res->error < 0 ? strerror(-res->error) : "", "detail", str_or_null(res->detail),
                       "jobResult", str_or_null(res->job_result), "activeState",
                       str_or_null(res->active_state), "subState", str_or_null(res->sub_state),
                       "serviceResult", str_or_null(res->service_result), "invocationBefore",
                       id128_json(res->invocation_before), "invocationAfter",
                       id128_json(res->invocation_after), "durationUsec", (json_int_t) res->duration_usec));
        next_job(c);
}

static void next_job(Ctx *c) {
        int r;

        if (c->action == UNIT_ACTION_DAEMON_RELOAD) {
                if (c->next++ == 0) {
                        r = unit_control_daemon_reload(c->uc, on_job_done, c, NULL);
                        if (r >= 0)
                                return;
                        fprintf(stderr, "unitctl: daemon-reload: %s\n", strerror(-r));
                        c->exit_code = 1;
                }
                (void) sd_event_exit(c->event, 0);
                return;
        }
        while (c->next < c->n_units) {
                const char *unit = c->units[c->next++];

                r = unit_control_run(c->uc, c->action, unit, NULL, on_job_done, c, NULL);
                if (r >= 0)
                        return;
                emit(json_pack("{s:s, s:s, s:b, s:s}", "event", "result", "unit", unit, "ok", 0, "detail",
                               strerror(-r)));
        }
        (void) sd_event_exit(c->event, 0);
}

/* ---- handler */

static void on_unit_result(const char *unit, bool ok, const char *detail, void *userdata) {
        emit(json_pack("{s:s, s:s, s:b, s:o}", "event", "unit", "unit", unit, "ok", ok, "detail",
                       str_or_null(detail)));
}

static void on_rejected(const char *entry, const char *why, void *userdata) {
        RestartRejected rj = { .entry = (char *) entry, .why = (char *) why };
        char *m = restart_rejected_message(&rj);

        emit(json_pack("{s:s, s:o, s:s, s:o}", "event", "rejected", "entry", str_or_null(entry), "why", why,
                       "message", str_or_null(m)));
        free(m);
}

static int on_defer_removed(sd_event_source *s, void *userdata) {
        Ctx *c = userdata;
        int r = 0;

        if (c->fail_removal > 0) {
                c->fail_removal--;
                r = -EIO;
        }
        emit(json_pack("{s:s, s:b}", "event", "remove", "ok", r >= 0));
        restart_handler_annotation_removed(c->handler, r);
        return 0;
}

/* Like a Node patch: asynchronous, conditional on the value still being there. */
static int remove_annotation(const char *value, void *userdata) {
        Ctx *c = userdata;
        _cleanup_free_ char *cur = NULL;

        if (c->annotation_file && c->fail_removal == 0 &&
            read_full_file(c->annotation_file, 1 << 20, &cur, NULL) >= 0 && streq(cur, value))
                (void) unlink(c->annotation_file);
        return sd_event_add_defer(c->event, NULL, on_defer_removed, c); /* floating, one-shot */
}

static void on_finished(const char *value, void *userdata) {
        Ctx *c = userdata;

        emit(json_pack("{s:s, s:s}", "event", "finished", "value", value));
        (void) sd_event_exit(c->event, 0);
}

/* ---- main */

static int usage(void) {
        fprintf(stderr,
                "usage: unitctl [--job-timeout D] [--self-unit U] [--state P] [--fail-removal N] [--retry D]\n"
                "               start|stop|restart|reload UNIT... | daemon-reload |\n"
                "               handle VALUE | handle-file PATH\n");
        return 2;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = { { "job-timeout", required_argument, NULL, 't' },
                                                 { "self-unit", required_argument, NULL, 's' },
                                                 { "state", required_argument, NULL, 'p' },
                                                 { "fail-removal", required_argument, NULL, 'f' },
                                                 { "retry", required_argument, NULL, 'r' },
                                                 {} };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *value = NULL;
        const char *self_unit = NULL, *state = NULL, *verb;
        uint64_t job_timeout_usec = 90 * USEC_PER_SEC, retry_usec = 0;
        Ctx c = { .exit_code = 0 };
        sigset_t ss;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (opt) {
                case 't':
                        if (parse_duration(optarg, &job_timeout_usec) < 0 || job_timeout_usec == 0)
                                return usage();
                        break;
                case 's':
                        self_unit = optarg;
                        break;
                case 'p':
                        state = optarg;
                        break;
                case 'r':
                        if (parse_duration(optarg, &retry_usec) < 0 || retry_usec == 0)
                                return usage();
                        break;
                case 'f':
                        c.fail_removal = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                default:
                        return usage();
                }
        if (optind >= argc)
                return usage();
        verb = argv[optind++];

        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        (void) sigprocmask(SIG_BLOCK, &ss, NULL);

        r = sd_event_default(&c.event);
        if (r >= 0)
                r = sd_event_set_signal_exit(c.event, true);
        if (r >= 0)
                r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_attach_event(bus, c.event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = unit_control_new(bus, job_timeout_usec, &c.uc);
        if (r < 0) {
                fprintf(stderr, "unitctl: setup: %s\n", strerror(-r));
                return 1;
        }

        if (streq(verb, "handle") || streq(verb, "handle-file")) {
                const RestartHandlerCallbacks cb = {
                        .on_unit_result = on_unit_result,
                        .on_rejected = on_rejected,
                        .remove_annotation = remove_annotation,
                        .on_finished = on_finished,
                };

                if (optind + 1 != argc)
                        return usage();
                if (streq(verb, "handle"))
                        value = strdup(argv[optind]);
                else {
                        c.annotation_file = argv[optind];
                        r = read_full_file(c.annotation_file, 1 << 20, &value, NULL);
                        if (r < 0 && r != -ENOENT) {
                                fprintf(stderr, "unitctl: %s: %s\n", c.annotation_file, strerror(-r));
                                return 1;
                        }
                }
                r = restart_handler_new(c.event, c.uc, self_unit, state, &cb, &c, &c.handler);
                if (r >= 0 && retry_usec > 0)
                        restart_handler_set_retry_interval(c.handler, retry_usec,
                                                           MAX(retry_usec, RESTART_HANDLER_RETRY_MAX_USEC));
                if (r >= 0)
                        r = restart_handler_submit(c.handler, value);
                if (r < 0) {
                        fprintf(stderr, "unitctl: handler: %s\n", strerror(-r));
                        return 1;
                }
                if (!restart_handler_is_busy(c.handler)) {
                        emit(json_pack("{s:s}", "event", "idle"));
                        goto done;
                }
        } else if (streq(verb, "daemon-reload")) {
                c.action = UNIT_ACTION_DAEMON_RELOAD;
                next_job(&c);
        } else {
                c.action = unit_action_from_string(verb);
                if (c.action < 0 || c.action == UNIT_ACTION_DAEMON_RELOAD || optind >= argc)
                        return usage();
                c.units = argv + optind;
                c.n_units = (size_t) (argc - optind);
                next_job(&c);
        }

        r = sd_event_loop(c.event);
        if (r < 0) {
                fprintf(stderr, "unitctl: event loop: %s\n", strerror(-r));
                c.exit_code = 1;
        }
done:
        restart_handler_free(c.handler);
        unit_control_free(c.uc);
        sd_event_unref(c.event);
        return c.exit_code;
}
