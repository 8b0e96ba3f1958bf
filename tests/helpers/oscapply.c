/* SPDX-License-Identifier: Apache-2.0 */
/* Driver of the OSC appliers for the integration suite (never installed). It does what the executor
 * is to do with an OSC, minus the API server:
 *
 *   oscapply --root DIR --unit-dir DIR --state DIR [--checksum S] [--hostname H] [--kill-after N]
 *            [--job-timeout 10s] NEW-OSC.yaml
 *
 *   1. <state>/osc-changes.json with the same checksum: resume it (GNP §2.3 step 1);
 *      else diff NEW against <state>/last-applied-osc.yaml (absent: first apply), or, when that is
 *      absent too, against --handover FILE (GNA's last-applied-osc.yaml), and persist the changes;
 *   2. prints {"event":"plan","items":[...]} (osc_work_describe of the items not done);
 *   3. runs the applier on the "system" bus (DBUS_SYSTEM_BUS_ADDRESS: the test's user manager),
 *      persisting after every item and printing {"event":"item",...}; --kill-after N raises SIGKILL
 *      right after the N-th item of this run was persisted;
 *      --external ok|fail answers the items the owner does itself (secretRef, imageRef, kubelet
 *      health, containerd config) from a deferred event: success, or -EIO "simulated failure";
 *   4. on success writes <state>/last-applied-osc.yaml and removes the changes file; prints
 *      {"event":"finished","ok":...,"code","subject","errno","detail"}; exit 0 / 1. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "apply/osc-apply.h"
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
        const char *external;           /* NULL, "ok" or "fail" */
        OscApplier *applier;
        sd_event_source *answer;
} Ctx;

static void emit(json_t *j) {
        char *s = json_dumps(j, JSON_COMPACT);

        if (s)
                printf("%s\n", s);
        fflush(stdout);
        free(s);
        json_decref(j);
}

static char *state_path(const Ctx *c, const char *name) {
        char *p = NULL;

        if (asprintf(&p, "%s/%s", c->state, name) < 0)
                abort();
        return p;
}

static int persist(Ctx *c) {
        _cleanup_free_ char *p = state_path(c, "osc-changes.json"), *s = NULL;
        json_t *j = osc_changes_to_json(c->changes);

        s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(j);
        if (!s)
                return -ENOMEM;
        return write_file_atomic(p, s, strlen(s), 0600);
}

static int item_done(OscApplier *a, size_t index, void *userdata) {
        Ctx *c = userdata;
        _cleanup_free_ char *d = NULL;
        int r = persist(c);

        if (r < 0)
                return r;
        (void) osc_work_describe(&c->changes->items[index], &d);
        emit(json_pack("{s:s, s:I, s:s}", "event", "item", "index", (json_int_t) index, "describe", d ?: ""));
        if (c->kill_after > 0 && ++c->n_done == c->kill_after)
                raise(SIGKILL);
        return 0;
}

static void finished(OscApplier *a, const OscApplyFailure *f, void *userdata) {
        Ctx *c = userdata;

        if (f) {
                emit(json_pack("{s:s, s:b, s:s, s:s, s:i, s:s}", "event", "finished", "ok", 0, "code", f->code,
                               "subject", strempty(f->subject), "errno", -f->error, "detail", strempty(f->detail)));
                c->exit_code = 1;
        } else {
                _cleanup_free_ char *last = state_path(c, "last-applied-osc.yaml"), *ch = state_path(c, "osc-changes.json");
                int r = write_file_atomic(last, c->new_yaml, c->new_size, 0600);

                if (r >= 0 && unlink(ch) < 0)
                        r = -errno;
                emit(json_pack("{s:s, s:b}", "event", "finished", "ok", r >= 0));
                c->exit_code = r < 0;
        }
        (void) sd_event_exit(c->event, 0);
}

static int on_answer(sd_event_source *s, void *userdata) {
        Ctx *c = userdata;

        c->answer = sd_event_source_disable_unref(c->answer);
        if (streq(c->external, "ok"))
                osc_applier_external_done(c->applier, 0, NULL);
        else
                osc_applier_external_done(c->applier, -EIO, "simulated failure");
        return 0;
}

static int external(OscApplier *a, const OscWork *w, void *userdata) {
        Ctx *c = userdata;

        emit(json_pack("{s:s, s:s}", "event", "external", "kind", osc_work_kind_to_string(w->kind)));
        return sd_event_add_defer(c->event, &c->answer, on_answer, c);
}

static OscModel *load_model(const char *path, const char *hostname) {
        _cleanup_free_ char *data = NULL, *err = NULL;
        OscModel *m = NULL;
        size_t size;
        int r;

        r = read_full_file(path, 4 << 20, &data, &size);
        if (r == -ENOENT)
                return NULL;
        if (r >= 0)
                r = osc_model_decode_yaml(data, size, &(OscModelOptions) { .host_name = hostname }, &m, &err);
        if (r < 0) {
                fprintf(stderr, "oscapply: %s: %s\n", path, err ?: strerror(-r));
                exit(2);
        }
        return m;
}

/* The saved changes if they are for this checksum, else NULL. */
static OscChanges *load_changes(Ctx *c, const char *checksum) {
        _cleanup_free_ char *p = state_path(c, "osc-changes.json");
        OscChanges *changes = NULL;
        json_t *j = json_load_file(p, 0, NULL);

        if (j && osc_changes_from_json(j, &changes, NULL) >= 0 && !streq_ptr(changes->checksum, checksum))
                changes = osc_changes_free(changes);
        json_decref(j);
        return changes;
}

static int compute(Ctx *c, const char *checksum, const char *hostname, const char *handover) {
        _cleanup_free_ char *last = state_path(c, "last-applied-osc.yaml"), *err = NULL;
        _cleanup_(osc_model_freep) OscModel *old = load_model(last, hostname), *new = NULL;
        static const char *const replaced[] = { "gardener-node-agent.service", NULL };
        int r;

        if (!old && handover)
                old = load_model(handover, hostname);
        new = load_model(c->new_path, hostname);
        if (!new)
                return -ENOENT;
        r = osc_diff(&(OscDiffInput) { .old = old, .new = new, .checksum = checksum,
                                       .current_os_version = "1.0", .replaced_units = (char *const *) replaced },
                     &c->changes, &err);
        if (r < 0) {
                fprintf(stderr, "oscapply: diff: %s\n", err ?: strerror(-r));
                return r;
        }
        return persist(c);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "root", required_argument, NULL, 'r' },
                { "unit-dir", required_argument, NULL, 'u' },
                { "state", required_argument, NULL, 's' },
                { "checksum", required_argument, NULL, 'c' },
                { "hostname", required_argument, NULL, 'h' },
                { "handover", required_argument, NULL, 'H' },
                { "kill-after", required_argument, NULL, 'k' },
                { "job-timeout", required_argument, NULL, 't' },
                { "external", required_argument, NULL, 'e' },
                {}
        };
        const char *root = "/", *unit_dir = NULL, *checksum = "checksum", *hostname = "node", *handover = NULL;
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        uint64_t job_timeout_usec = 30 * USEC_PER_SEC;
        UnitControl *uc = NULL;
        OscApplier *a = NULL;
        Ctx c = {};
        json_t *plan;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (opt) {
                case 'r': root = optarg; break;
                case 'u': unit_dir = optarg; break;
                case 's': c.state = optarg; break;
                case 'c': checksum = optarg; break;
                case 'h': hostname = optarg; break;
                case 'H': handover = optarg; break;
                case 'e': c.external = optarg; break;
                case 'k': c.kill_after = (unsigned) strtoul(optarg, NULL, 10); break;
                case 't':
                        if (parse_duration(optarg, &job_timeout_usec) < 0)
                                return 2;
                        break;
                default:
                        return 2;
                }
        if (optind + 1 != argc || !unit_dir || !c.state) {
                fprintf(stderr, "usage: oscapply --root DIR --unit-dir DIR --state DIR [...] NEW-OSC.yaml\n");
                return 2;
        }
        c.new_path = argv[optind];
        r = read_full_file(c.new_path, 4 << 20, &c.new_yaml, &c.new_size);
        if (r < 0)
                return 2;

        c.changes = load_changes(&c, checksum);
        if (!c.changes && compute(&c, checksum, hostname, handover) < 0)
                return 2;

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
                r = unit_control_new(bus, job_timeout_usec, &uc);
        if (r >= 0)
                r = osc_applier_new(c.event, uc, c.changes,
                                    &(OscApplierParams) { .root_directory = root, .unit_directory = unit_dir },
                                    &(OscApplierCallbacks) { .item_done = item_done, .finished = finished,
                                                             .external = c.external ? external : NULL },
                                    &c, &a);
        c.applier = a;
        if (r >= 0)
                r = osc_applier_start(a);
        if (r >= 0)
                r = sd_event_loop(c.event);
        if (r < 0) {
                fprintf(stderr, "oscapply: %s\n", strerror(-r));
                c.exit_code = 2;
        }
        sd_event_source_disable_unref(c.answer);
        osc_applier_free(a);
        unit_control_free(uc);
        osc_changes_free(c.changes);
        sd_event_unref(c.event);
        free(c.new_yaml);
        return c.exit_code;
}
