/* SPDX-License-Identifier: Apache-2.0 */
/* Driver of the OSC appliers for the integration suite (never installed). It does what the executor
 * is to do with an OSC, minus the API server:
 *
 *   oscapply --root DIR --unit-dir DIR --state DIR [--checksum S] [--hostname H] [--kill-after N]
 *            [--job-timeout 10s] [--external ok|fail] [--containerd-path PATH] [--self-unit UNIT]
 *            [--kubelet-unit UNIT] NEW-OSC.yaml
 *
 *   1. osc_state_prepare(): the saved work for this checksum, else the diff against
 *      <state>/last-applied-osc.yaml, else against <root>/var/lib/gardener-node-agent/ (handover),
 *      else a first apply; prints {"event":"warning","message"} when a corrupt file was moved aside,
 *      then {"event":"baseline",...};
 *   2. prints {"event":"plan","items":[...]} (osc_work_describe of the items not done);
 *   3. runs the applier on the "system" bus (DBUS_SYSTEM_BUS_ADDRESS: the test's user manager),
 *      persisting the items it hands over and printing {"event":"item",...} for each (and
 *      {"event":"masked",...} for a masked unit file or drop-in left alone); --kill-after N raises
 *      SIGKILL right after the persisted items of this run reached N;
 *      --external ok|fail stands for the owner at the items the applier stops at (secretRef,
 *      imageRef, kubelet health, a probed registry; {"event":"external","kind"}): done (persisted
 *      like any item, and a new applier for the rest), or failed with -EIO "simulated failure";
 *      without it they fail as UnsupportedChange; --containerd-path is the
 *      PATH of the injected containerd drop-in (the model option; without it none is injected);
 *      --self-unit stands for restart.selfUnit (its restart last, saved as done before its job);
 *      --kubelet-unit for kubelet.unit (restarted after containerd only once <root>/run/containerd/
 *      containerd.sock accepts);
 *   4. on success osc_state_commit(); prints
 *      {"event":"finished","ok":...,"code","subject","errno","detail"}; exit 0 / 1. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "apply/osc-apply.h"
#include "apply/osc-state.h"
#include "core/osc-diff.h"
#include "util/fileio.h"
#include "util/time-util.h"

typedef struct Ctx {
        const char *state, *new_path;
        char *new_yaml;
        size_t new_size;
        OscChanges *changes;
        sd_event *event;
        unsigned kill_after, n_done;
        int exit_code;
        const char *external; /* NULL, "ok" or "fail" */
        UnitControl *uc;
        OscApplierParams params;
        OscApplier *applier; /* owned: the stretch running */
} Ctx;

/* Every exit, an early one for a refused OSC included, frees the same (the sanitizer run counts leaks). */
static void ctx_done(Ctx *c) {
        osc_applier_free(c->applier);
        unit_control_free(c->uc);
        osc_changes_free(c->changes);
        sd_event_unref(c->event);
        free(c->new_yaml);
}

static void emit(json_t *j) {
        char *s = json_dumps(j, JSON_COMPACT);

        if (s)
                printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(j);
}

static int items_done(OscApplier *a, const size_t *indices, size_t n, void *userdata) {
        Ctx *c = userdata;
        int r = osc_state_save_done(c->state, c->changes, indices, n);

        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *d = NULL;

                (void) osc_work_describe(&c->changes->items[indices[i]], &d);
                emit(json_pack("{s:s, s:I, s:s}", "event", "item", "index", (json_int_t) indices[i],
                               "describe", d ?: ""));
        }
        c->n_done += (unsigned) n;
        if (c->kill_after > 0 && c->n_done >= c->kill_after)
                raise(SIGKILL);
        return 0;
}

static void finish(Ctx *c, const OscApplyFailure *f) {
        if (f) {
                emit(json_pack("{s:s, s:b, s:s, s:s, s:i, s:s}", "event", "finished", "ok", 0, "code",
                               update_failure_code_to_string(f->code), "subject", strempty(f->subject),
                               "errno", -f->error, "detail", strempty(f->detail)));
                c->exit_code = 1;
        } else {
                int r = osc_state_commit(c->state, c->new_yaml, c->new_size);

                emit(json_pack("{s:s, s:b}", "event", "finished", "ok", r >= 0));
                c->exit_code = r < 0;
        }
        (void) sd_event_exit(c->event, 0);
}

static void masked(OscApplier *a, const char *path, const char *left_out, void *userdata) {
        emit(json_pack("{s:s, s:s, s:s}", "event", "masked", "path", path, "left_out", left_out));
}

static int start_applier(Ctx *c);

/* The owner's item `at`: done or failed as --external says. */
static void run_external(Ctx *c, size_t at) {
        const OscWork *w = &c->changes->items[at];
        _cleanup_free_ char *d = NULL;
        OscApplyFailure f = { .subject = osc_work_target(w) ?: osc_work_kind_to_string(w->kind) };
        int r;

        if (!c->external) {
                (void) osc_work_describe(w, &d);
                f = (OscApplyFailure) { UPDATE_FAILURE_UNSUPPORTED_CHANGE, f.subject, -EOPNOTSUPP,
                                        strempty(d) };
                return finish(c, &f);
        }
        emit(json_pack("{s:s, s:s}", "event", "external", "kind", osc_work_kind_to_string(w->kind)));
        if (!streq(c->external, "ok")) {
                f.code = w->kind == OSC_WORK_KUBELET_HEALTH ? UPDATE_FAILURE_KUBELET_UNHEALTHY :
                                                              UPDATE_FAILURE_FILE_APPLY_FAILED;
                f.error = -EIO;
                f.detail = "simulated failure";
                return finish(c, &f);
        }
        osc_changes_mark_done(c->changes, at);
        r = items_done(NULL, &at, 1, c);
        if (r >= 0)
                r = start_applier(c);
        if (r < 0) {
                fprintf(stderr, "oscapply: %s\n", strerror(-r));
                c->exit_code = 2;
                (void) sd_event_exit(c->event, 0);
        }
}

static void stopped(OscApplier *a, size_t at, const OscApplyFailure *f, void *userdata) {
        Ctx *c = userdata;

        if (f || at >= c->changes->n_items)
                finish(c, f); /* `f` is the applier's: before it goes */
        c->applier = osc_applier_free(c->applier);
        if (!f && at < c->changes->n_items)
                run_external(c, at);
}

static int start_applier(Ctx *c) {
        static const OscApplierCallbacks cb = { .items_done = items_done,
                                                .stopped = stopped,
                                                .masked = masked };
        int r;

        r = osc_applier_new(c->event, c->uc, c->changes, &c->params, &cb, c, &c->applier);
        if (r >= 0)
                r = osc_applier_start(c->applier);
        return r;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = { { "root", required_argument, NULL, 'r' },
                                                 { "unit-dir", required_argument, NULL, 'u' },
                                                 { "state", required_argument, NULL, 's' },
                                                 { "checksum", required_argument, NULL, 'c' },
                                                 { "hostname", required_argument, NULL, 'h' },
                                                 { "kill-after", required_argument, NULL, 'k' },
                                                 { "job-timeout", required_argument, NULL, 't' },
                                                 { "external", required_argument, NULL, 'e' },
                                                 { "containerd-path", required_argument, NULL, 'p' },
                                                 { "self-unit", required_argument, NULL, 'S' },
                                                 { "kubelet-unit", required_argument, NULL, 'K' },
                                                 {} };
        const char *root = "/", *unit_dir = NULL, *checksum = "checksum", *hostname = "node",
                   *ctd_path = NULL, *self_unit = NULL, *kubelet_unit = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        uint64_t job_timeout_usec = 30 * USEC_PER_SEC;
        _cleanup_(ctx_done) Ctx c = {};
        json_t *plan;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (opt) {
                case 'r':
                        root = optarg;
                        break;
                case 'u':
                        unit_dir = optarg;
                        break;
                case 's':
                        c.state = optarg;
                        break;
                case 'c':
                        checksum = optarg;
                        break;
                case 'h':
                        hostname = optarg;
                        break;
                case 'e':
                        c.external = optarg;
                        break;
                case 'p':
                        ctd_path = optarg;
                        break;
                case 'S':
                        self_unit = optarg;
                        break;
                case 'K':
                        kubelet_unit = optarg;
                        break;
                case 'k':
                        c.kill_after = (unsigned) strtoul(optarg, NULL, 10);
                        break;
                case 't':
                        if (parse_duration(optarg, &job_timeout_usec) < 0)
                                return 2;
                        break;
                default:
                        return 2;
                }
        if (optind + 1 != argc || !unit_dir || !c.state) {
                fprintf(stderr,
                        "usage: oscapply --root DIR --unit-dir DIR --state DIR [...] NEW-OSC.yaml\n");
                return 2;
        }
        c.new_path = argv[optind];
        r = read_full_file(c.new_path, 4 << 20, &c.new_yaml, &c.new_size);
        if (r < 0)
                return 2;

        {
                static const char *const replaced[] = { "gardener-node-agent.service", NULL };
                static const char *const baselines[] = { "resumed", "last-applied", "handover", "none" };
                _cleanup_free_ char *err = NULL, *warning = NULL;
                OscBaseline baseline;

                r = osc_state_prepare(&(OscPrepareInput) { .state_directory = c.state,
                                                           .root_directory = root,
                                                           .yaml = c.new_yaml,
                                                           .size = c.new_size,
                                                           .checksum = checksum,
                                                           .model_options = { .host_name = hostname,
                                                                              .containerd_path = ctd_path },
                                                           .current_os_version = "1.0",
                                                           .replaced_units = (char *const *) replaced,
                                                           .self_unit = self_unit },
                                      &c.changes, &baseline, &warning, &err);
                if (r < 0) {
                        fprintf(stderr, "oscapply: %s\n", err ?: strerror(-r));
                        return 2;
                }
                if (warning)
                        emit(json_pack("{s:s, s:s}", "event", "warning", "message", warning));
                emit(json_pack("{s:s, s:s}", "event", "baseline", "baseline", baselines[baseline]));
        }

        plan = json_array();
        for (size_t i = osc_changes_next(c.changes); i < c.changes->n_items; i++) {
                _cleanup_free_ char *d = NULL;

                if (!c.changes->items[i].done && osc_work_describe(&c.changes->items[i], &d) >= 0)
                        json_array_append_new(plan, json_string(d));
        }
        emit(json_pack("{s:s, s:o}", "event", "plan", "items", plan));

        r = sd_event_default(&c.event);
        if (r >= 0)
                r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_attach_event(bus, c.event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = unit_control_new(bus, job_timeout_usec, &c.uc);
        c.params = (OscApplierParams) { .root_directory = root,
                                        .unit_directory = unit_dir,
                                        .self_unit = self_unit,
                                        .kubelet_unit = kubelet_unit };
        if (r >= 0)
                r = start_applier(&c);
        if (r >= 0)
                r = sd_event_loop(c.event);
        if (r < 0) {
                fprintf(stderr, "oscapply: %s\n", strerror(-r));
                c.exit_code = 2;
        }
        return c.exit_code;
}
