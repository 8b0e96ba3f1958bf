#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 13, steps 1-3, against a real systemd user manager and a scratch root: the OSC model, the diff
engine and the appliers (apply/osc-files, apply/osc-apply over D-Bus), driven by tests/helpers/oscapply
($OSCAPPLY), which does what the executor does minus the API server. Cases from upstream's
test/integration/nodeagent/operatingsystemconfig: first apply, a unit changed/added/deleted, drop-ins
added/removed, a file mode change restarting the unit that lists it, deleted files, SIGKILL and resume
(nothing applied twice), failures that keep the last-applied OSC, the replaced unit, handover from GNA,
containerd's config.toml, drop-in and hosts.toml (docs/node-protocol.md §6.4 steps 5 and 9)."""

import json
import os
import shutil
import stat
import subprocess
import tempfile
import tomllib
import unittest

from lib import itest
import usermgr

OSCAPPLY = os.environ.get("OSCAPPLY", "")
RUNNING = "/bin/sh -c 'echo started; exec sleep infinity'"
# OSCAPPLY_WRAP="valgrind --leak-check=full --error-exitcode=99 -q" runs the driver under a checker.
WRAP = os.environ.get("OSCAPPLY_WRAP", "").split()


def inline(path, data, permissions=None):
    f = {"path": path, "content": {"inline": {"data": data}}}
    if permissions is not None:
        f["permissions"] = permissions
    return f


class OscApply(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.um = usermgr.UserManager(prefix="oscapply-").start()

    @classmethod
    def tearDownClass(cls):
        cls.um.stop()

    def setUp(self):
        name = self.id().rsplit(".", 1)[-1]
        self.dir = os.path.join(self.um.base, name)
        self.root = os.path.join(self.dir, "root")
        self.state = os.path.join(self.dir, "state")
        for d in (self.root, self.state):
            os.makedirs(d)
        self.n = 0
        self.prefix = name.replace("_", "-")[5:17]

    # ---- helpers

    def done_log(self):
        """The item indices last-computed-osc-changes.done records as done (after its header line)."""
        try:
            with open(os.path.join(self.state, "last-computed-osc-changes.done")) as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return []
        self.assertTrue(lines[0].startswith("inplace-agent done-log v1 "), lines[0])
        return [int(x) for x in lines[1:] if x]

    def unit_name(self, short):
        return "%s-%s.service" % (self.prefix, short)

    def unit(self, short, extra="", **kw):
        u = {"name": self.unit_name(short),
             "content": self.um.service(RUNNING, service_extra=extra) + "[Install]\nWantedBy=default.target\n"}
        u.update(kw)
        return u

    def apply(self, spec, status=None, expect_ok=True, checksum=None, args=()):
        self.n += 1
        path = os.path.join(self.dir, "osc-%d.yaml" % self.n)
        with open(path, "w") as f:
            json.dump({"apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "OperatingSystemConfig",
                       "spec": spec, "status": status or {}}, f)
        r = subprocess.run(WRAP + [OSCAPPLY, "--root", self.root, "--unit-dir", self.um.unit_dir, "--state", self.state,
                            "--checksum", checksum or "sum-%d" % self.n] + list(args) + [path],
                           env=self.um.env, capture_output=True, text=True, timeout=60)
        events = [json.loads(line) for line in r.stdout.splitlines()]
        self.stderr = r.stderr
        if expect_ok is not None:
            self.assertEqual(r.returncode, 0 if expect_ok else 1, "oscapply: %s\n%s" % (r.stderr, r.stdout))
        self.returncode = r.returncode
        return events

    def plan(self, events):
        return [e for e in events if e["event"] == "plan"][0]["items"]

    def finished(self, events):
        return [e for e in events if e["event"] == "finished"][0]

    def rooted(self, path):
        return self.root + path

    def mode(self, path):
        return stat.S_IMODE(os.stat(path).st_mode)

    def started(self, short):
        return self.um.logs(self.unit_name(short)).count("started\n")

    def inv(self, short):
        return self.um.invocation_id(self.unit_name(short))

    def enabled(self, short):
        return os.path.lexists(os.path.join(self.um.unit_dir, "default.target.wants", self.unit_name(short)))

    # ---- cases

    def test_first_apply(self):
        events = self.apply({
            "files": [inline("/etc/app/a.conf", "a=1\n", 0o644), inline("/etc/app/secret", "s")],
            "units": [self.unit("a", filePaths=["/etc/app/a.conf"]),
                      self.unit("b", dropIns=[{"name": "10-env.conf", "content": "[Service]\nEnvironment=FOO=bar\n"}]),
                      self.unit("off", enable=False)]})
        self.assertEqual(self.plan(events), [
            "write file /etc/app/a.conf (0644)", "write file /etc/app/secret (0600)",
            "write unit %s (with unit file, 0 drop-ins)" % self.unit_name("a"),
            "write unit %s (with unit file, 1 drop-ins)" % self.unit_name("b"),
            "write unit %s (with unit file, 0 drop-ins)" % self.unit_name("off"),
            "reload systemd", "restart unit " + self.unit_name("a"), "restart unit " + self.unit_name("b"),
            "stop unit " + self.unit_name("off")])
        self.assertTrue(self.finished(events)["ok"])
        with open(self.rooted("/etc/app/a.conf")) as f:
            self.assertEqual(f.read(), "a=1\n")
        self.assertEqual(self.mode(self.rooted("/etc/app/a.conf")), 0o644)
        self.assertEqual(self.mode(self.rooted("/etc/app/secret")), 0o600)
        self.assertEqual(self.mode(self.rooted("/etc/app")), 0o755)
        for short in ("a", "b", "off"):
            self.assertEqual(self.mode(os.path.join(self.um.unit_dir, self.unit_name(short))), 0o600)
        self.assertEqual(self.mode(os.path.join(self.um.unit_dir, self.unit_name("b") + ".d", "10-env.conf")), 0o600)
        self.assertEqual(self.um.active_state(self.unit_name("a")), "active")
        self.assertEqual(self.um.active_state(self.unit_name("b")), "active")
        self.assertEqual(self.um.active_state(self.unit_name("off")), "inactive")
        self.assertIn("FOO=bar", self.um.show(self.unit_name("b"), "Environment"))
        self.assertTrue(self.enabled("a"))
        self.assertFalse(self.enabled("off"))
        self.assertTrue(os.path.exists(os.path.join(self.state, "last-applied-osc.yaml")))
        self.assertFalse(os.path.exists(os.path.join(self.state, "last-computed-osc-changes.json")))

        # the same OSC again: nothing to do, nothing restarted
        inv = self.inv("a")
        events = self.apply({
            "files": [inline("/etc/app/a.conf", "a=1\n", 0o644), inline("/etc/app/secret", "s")],
            "units": [self.unit("a", filePaths=["/etc/app/a.conf"]),
                      self.unit("b", dropIns=[{"name": "10-env.conf", "content": "[Service]\nEnvironment=FOO=bar\n"}]),
                      self.unit("off", enable=False)]})
        self.assertEqual(self.plan(events), [])
        self.assertEqual(self.inv("a"), inv)

    def test_units_changed_added_deleted(self):
        self.apply({"units": [self.unit("keep"), self.unit("change"), self.unit("gone")]})
        keep, change = self.inv("keep"), self.inv("change")
        gone_file = os.path.join(self.um.unit_dir, self.unit_name("gone"))
        self.assertTrue(self.enabled("gone"))

        events = self.apply({"units": [self.unit("keep"), self.unit("change", extra="Environment=V=2\n"),
                                       self.unit("new")]})
        self.assertEqual(self.plan(events), [
            "write unit %s (with unit file, 0 drop-ins)" % self.unit_name("change"),
            "write unit %s (with unit file, 0 drop-ins)" % self.unit_name("new"),
            "delete unit " + self.unit_name("gone"), "reload systemd",
            "restart unit " + self.unit_name("change"), "restart unit " + self.unit_name("new")])
        self.assertEqual(self.inv("keep"), keep)
        self.assertNotEqual(self.inv("change"), change)
        self.assertIn("V=2", self.um.show(self.unit_name("change"), "Environment"))
        self.assertEqual(self.um.active_state(self.unit_name("new")), "active")
        self.assertFalse(os.path.exists(gone_file))
        self.assertFalse(self.enabled("gone"))
        self.assertIn(self.um.active_state(self.unit_name("gone")), ("inactive", ""))

    def test_drop_ins_added_and_removed(self):
        d1 = {"name": "10-a.conf", "content": "[Service]\nEnvironment=A=1\n"}
        d2 = {"name": "20-b.conf", "content": "[Service]\nEnvironment=B=2\n"}
        self.apply({"units": [self.unit("x", dropIns=[d1])]})
        dropin_dir = os.path.join(self.um.unit_dir, self.unit_name("x") + ".d")
        inv = self.inv("x")

        self.apply({"units": [self.unit("x", dropIns=[d1, d2])]})
        self.assertEqual(sorted(os.listdir(dropin_dir)), ["10-a.conf", "20-b.conf"])
        env = self.um.show(self.unit_name("x"), "Environment")
        self.assertIn("A=1", env)
        self.assertIn("B=2", env)
        self.assertNotEqual(self.inv("x"), inv)
        inv = self.inv("x")

        self.apply({"units": [self.unit("x", dropIns=[d2])]})
        self.assertEqual(os.listdir(dropin_dir), ["20-b.conf"])
        self.assertNotIn("A=1", self.um.show(self.unit_name("x"), "Environment"))
        self.assertNotEqual(self.inv("x"), inv)

        self.apply({"units": [self.unit("x")]})
        self.assertFalse(os.path.exists(dropin_dir))
        self.assertNotIn("B=2", self.um.show(self.unit_name("x"), "Environment"))

    def test_file_mode_change_restarts_the_unit_listing_it(self):
        spec = lambda mode: {"files": [inline("/etc/m.conf", "m", mode), inline("/etc/other", "o")],
                             "units": [self.unit("lister", filePaths=["/etc/m.conf"]), self.unit("bystander")]}
        self.apply(spec(0o600))
        lister, bystander = self.inv("lister"), self.inv("bystander")
        events = self.apply(spec(0o640))
        self.assertEqual(self.plan(events), [
            "write file /etc/m.conf (0640)", "write unit %s (with unit file, 0 drop-ins)" % self.unit_name("lister"),
            "reload systemd", "restart unit " + self.unit_name("lister")])
        self.assertEqual(self.mode(self.rooted("/etc/m.conf")), 0o640)
        self.assertNotEqual(self.inv("lister"), lister)
        self.assertEqual(self.inv("bystander"), bystander)

    def test_deleted_file_removed_after_unit_commands(self):
        self.apply({"files": [inline("/etc/d1", "1"), inline("/etc/d2", "2")], "units": [self.unit("u")]})
        events = self.apply({"files": [inline("/etc/d1", "1")], "units": [self.unit("u", extra="Environment=Z=1\n")]})
        plan = self.plan(events)
        self.assertEqual(plan[-1], "remove file /etc/d2")
        self.assertLess(plan.index("restart unit " + self.unit_name("u")), plan.index("remove file /etc/d2"))
        self.assertFalse(os.path.exists(self.rooted("/etc/d2")))
        self.assertTrue(os.path.exists(self.rooted("/etc/d1")))

    def test_kill_and_resume_applies_each_item_once(self):
        spec = {"files": [inline("/etc/k1", "1"), inline("/etc/k2", "2")],
                "units": [self.unit("k1"), self.unit("k2")]}
        # items: 2 files, 2 unit writes, reload, 2 restarts; die right after the 6th is persisted
        events = self.apply(spec, expect_ok=None, checksum="kill", args=["--kill-after", "6"])
        self.assertEqual(self.returncode, -9)
        self.assertEqual(len([e for e in events if e["event"] == "item"]), 6)
        # A Type=simple start job is done once the process is forked: wait for its output.
        usermgr.wait_until(lambda: self.started("k1") == 1, 10, "k1 to have started")
        k1 = self.inv("k1")
        self.assertEqual(self.um.active_state(self.unit_name("k2")), "inactive")
        with open(os.path.join(self.state, "last-computed-osc-changes.json")) as f:
            saved = json.load(f)
        self.assertEqual(len(saved["items"]), 7)
        self.assertEqual(self.done_log(), list(range(6)))
        self.assertFalse(os.path.exists(os.path.join(self.state, "last-applied-osc.yaml")))

        events = self.apply(spec, checksum="kill")
        self.assertEqual([e["baseline"] for e in events if e["event"] == "baseline"], ["resumed"])
        self.assertEqual(self.plan(events), ["restart unit " + self.unit_name("k2")])
        self.assertEqual(self.inv("k1"), k1)                 # not restarted again
        usermgr.wait_until(lambda: self.started("k2") == 1, 10, "k2 to have started")
        self.assertEqual(self.started("k1"), 1)
        self.assertEqual(self.um.active_state(self.unit_name("k2")), "active")
        self.assertTrue(os.path.exists(os.path.join(self.state, "last-applied-osc.yaml")))

    def test_own_unit_restarted_last_and_at_most_once(self):
        # restart.selfUnit stands for a unit we do not run in: its restart is the last item, saved as
        # done before its job is sent; surviving it, the run goes on.
        spec = {"files": [inline("/etc/s1", "1")], "units": [self.unit("own"), self.unit("other")]}
        own = self.unit_name("own")
        events = self.apply(spec, expect_ok=None, checksum="self", args=["--self-unit", own, "--kill-after", "6"])
        self.assertEqual(self.plan(events)[-1], "restart unit " + own)
        # Killed right after the 6th item, the own unit's restart, was saved: before its job was sent.
        self.assertEqual(self.returncode, -9)
        self.assertEqual(self.started("own"), 0)
        events = self.apply(spec, checksum="self", args=["--self-unit", own])
        self.assertEqual([e["baseline"] for e in events if e["event"] == "baseline"], ["resumed"])
        self.assertEqual(self.plan(events), [])
        self.assertEqual(self.um.active_state(own), "inactive", "restarted twice")

        spec["units"][0]["content"] += "# changed\n"
        events = self.apply(spec, checksum="self-2", args=["--self-unit", own])
        self.assertEqual(self.plan(events), ["write unit %s (with unit file, 0 drop-ins)" % own, "reload systemd",
                                             "restart unit " + own])
        usermgr.wait_until(lambda: self.started("own") == 1, 10, "the own unit to have started")
        self.assertTrue(self.finished(events)["ok"])

    def test_failing_unit_keeps_the_last_applied_osc(self):
        self.apply({"units": [self.unit("ok")]})
        with open(os.path.join(self.state, "last-applied-osc.yaml")) as f:
            before = f.read()
        bad = {"name": self.unit_name("bad"), "content": self.um.service("/bin/sh -c 'exit 3'", type="oneshot")}
        events = self.apply({"units": [self.unit("ok"), bad]}, expect_ok=False)
        fin = self.finished(events)
        self.assertEqual(fin["code"], "UnitApplyFailed")
        self.assertEqual(fin["subject"], self.unit_name("bad"))
        self.assertIn("restart", fin["detail"])
        self.assertIn("exit-code", fin["detail"])
        with open(os.path.join(self.state, "last-applied-osc.yaml")) as f:
            self.assertEqual(f.read(), before)
        with open(os.path.join(self.state, "last-computed-osc-changes.json")) as f:
            n = len(json.load(f)["items"])
        self.assertNotIn(n - 1, self.done_log())

    def test_symlinks_permission_bits_and_trailing_slash(self):
        # Issue 23, findings 9 and 10. Outside the root: a file and a directory nothing may touch.
        outside = os.path.join(self.dir, "outside")
        victim = os.path.join(outside, "victim")
        os.makedirs(outside)
        with open(victim, "w") as f:
            f.write("keep")
        os.chmod(victim, 0o640)
        os.makedirs(self.rooted("/etc"))
        os.symlink(victim, self.rooted("/etc/target"))      # the target itself: replaced, not followed
        os.symlink(outside, self.rooted("/etc/link"))       # a parent: resolved below the root

        def untouched():
            self.assertEqual(sorted(os.listdir(outside)), ["victim"])
            with open(victim) as f:
                self.assertEqual(f.read(), "keep")
            self.assertEqual(self.mode(victim), 0o640)

        events = self.apply({"files": [inline("/etc/target", "keep", 2541), inline("/etc/all", "a", 4095)]})
        self.assertTrue(self.finished(events)["ok"])
        self.assertEqual(self.plan(events), ["write file /etc/target (0755)", "write file /etc/all (0777)"])
        self.assertFalse(os.path.islink(self.rooted("/etc/target")))
        self.assertEqual(self.mode(self.rooted("/etc/target")), 0o755)     # not 04755
        self.assertEqual(self.mode(self.rooted("/etc/all")), 0o777)        # not 07777
        untouched()

        events = self.apply({"files": [inline("/etc/link/victim", "evil", 0o777)]}, expect_ok=False)
        fin = self.finished(events)
        self.assertEqual((fin["code"], fin["subject"], fin["errno"]), ("FileApplyFailed", "/etc/link/victim", 2))
        untouched()

        self.apply({"files": [inline("/etc/x/", "x")]}, expect_ok=None)
        self.assertEqual(self.returncode, 2)
        self.assertIn('file "/etc/x/": path must be absolute without . or .. or a trailing slash', self.stderr)
        self.assertFalse(os.path.exists(self.rooted("/etc/x")))

    def test_masked_drop_in_and_unit_stay_masked(self):
        # Issue 23, finding 10: a masked drop-in was retried for ever ("File descriptor in bad state").
        d = lambda v: {"name": "10-a.conf", "content": "[Service]\nEnvironment=A=%d\n" % v}
        self.apply({"units": [self.unit("m", dropIns=[d(1)]), self.unit("n")]})
        dropin = os.path.join(self.um.unit_dir, self.unit_name("m") + ".d", "10-a.conf")
        os.unlink(dropin)
        os.symlink("/dev/null", dropin)
        events = self.apply({"units": [self.unit("m", dropIns=[d(2)]), self.unit("n")]})
        self.assertTrue(self.finished(events)["ok"])
        self.assertEqual([(e["path"], e["left_out"]) for e in events if e["event"] == "masked"],
                         [(dropin, "not written")])
        self.assertEqual(os.readlink(dropin), "/dev/null")
        self.assertEqual(self.um.active_state(self.unit_name("m")), "active")

        unit = os.path.join(self.um.unit_dir, self.unit_name("n"))
        os.unlink(unit)
        os.symlink("/dev/null", unit)
        self.um.daemon_reload()
        events = self.apply({"units": [self.unit("m", dropIns=[d(2)]), self.unit("n", extra="Environment=N=1\n")]})
        self.assertTrue(self.finished(events)["ok"], events)
        self.assertEqual([(e["path"], e["left_out"]) for e in events if e["event"] == "masked"],
                         [(unit, "not written or enabled"), (unit, "not restarted")])
        self.assertEqual(os.readlink(unit), "/dev/null")

        # deleted from the OSC: disabled and stopped, and the admin's mask stays
        events = self.apply({"units": [self.unit("m", dropIns=[d(2)])]})
        self.assertEqual(self.plan(events), ["delete unit " + self.unit_name("n"), "reload systemd"])
        self.assertEqual(os.readlink(unit), "/dev/null")

    def test_secret_ref_without_fetcher_is_unsupported(self):
        events = self.apply({"files": [{"path": "/etc/s", "content": {"secretRef": {"name": "n", "dataKey": "k"}}}]},
                            expect_ok=False)
        fin = self.finished(events)
        self.assertEqual(fin["code"], "UnsupportedChange")
        self.assertEqual(fin["subject"], "/etc/s")
        self.assertFalse(os.path.exists(os.path.join(self.state, "last-applied-osc.yaml")))

    def test_external_items_go_to_the_owner(self):
        spec = {"files": [{"path": "/etc/s", "content": {"secretRef": {"name": "n", "dataKey": "k"}}},
                          {"path": "/opt/bin/tool", "content": {"imageRef": {"image": "r/t:v1", "filePathInImage": "/t"}}},
                          inline("/etc/after", "a")]}
        events = self.apply(spec, expect_ok=False, args=["--external", "fail"])
        fin = self.finished(events)
        self.assertEqual((fin["code"], fin["subject"], fin["errno"], fin["detail"]),
                         ("FileApplyFailed", "/etc/s", 5, "simulated failure"))
        self.assertFalse(os.path.exists(self.rooted("/etc/after")))

        events = self.apply(spec, args=["--external", "ok"])
        self.assertEqual([e["kind"] for e in events if e["event"] == "external"], ["write-file", "pull-file"])
        self.assertEqual(self.plan(events), ["write file /etc/s (0600) from secret n key k",
                                             "write file /etc/after (0600)", "pull file /opt/bin/tool (0600) from r/t:v1"])
        self.assertTrue(os.path.exists(self.rooted("/etc/after")))

    def test_replaced_unit_is_never_written_and_its_binary_not_pulled(self):
        gna = {"name": "gardener-node-agent.service", "content": "[Service]\nExecStart=/opt/bin/gardener-node-agent\n",
               "filePaths": ["/opt/bin/gardener-node-agent", "/var/lib/gardener-node-agent/config.yaml"]}
        events = self.apply({
            "files": [{"path": "/opt/bin/gardener-node-agent",
                       "content": {"imageRef": {"image": "r/gna:v1", "filePathInImage": "/gna"}}},
                      inline("/var/lib/gardener-node-agent/config.yaml", "apiServer: {}\n")],
            "units": [gna]})
        self.assertEqual(self.plan(events), ["write file /var/lib/gardener-node-agent/config.yaml (0600)"])
        self.assertFalse(os.path.exists(os.path.join(self.um.unit_dir, "gardener-node-agent.service")))
        self.assertTrue(os.path.exists(self.rooted("/var/lib/gardener-node-agent/config.yaml")))

    def test_handover_from_gna_applies_only_the_diff(self):
        spec = {"files": [inline("/etc/h", "h")], "units": [self.unit("h")]}
        gna_last = self.rooted("/var/lib/gardener-node-agent/last-applied-osc.yaml")
        os.makedirs(os.path.dirname(gna_last))
        with open(gna_last, "w") as f:
            json.dump({"kind": "OperatingSystemConfig", "spec": spec}, f)
        spec2 = {"files": [inline("/etc/h", "h"), inline("/etc/new", "n")], "units": [self.unit("h")]}
        events = self.apply(spec2)
        self.assertEqual([e["baseline"] for e in events if e["event"] == "baseline"], ["handover"])
        self.assertEqual(self.plan(events), ["write file /etc/new (0600)"])
        # from now on our own last-applied OSC is the baseline
        events = self.apply(spec2)
        self.assertEqual([e["baseline"] for e in events if e["event"] == "baseline"], ["last-applied"])
        self.assertEqual(self.plan(events), [])
        self.assertEqual(self.started("h"), 0)

    def test_containerd_answers_before_the_kubelet_restarts(self):
        """Issue 30 item 5: one apply restarts both; containerd's command goes first whatever the OSC's order,
        and the kubelet's restart job is sent only once containerd's socket accepts (the stand-in listens
        1.5 s after its start job is done, as a Type=simple unit's job ends at the fork)."""
        self.root = tempfile.mkdtemp(prefix="ipa-ctd-")     # a socket path has at most 107 bytes
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)
        sock = self.rooted("/run/containerd/containerd.sock")
        ctd_py, kubelet_py = os.path.join(self.dir, "containerd.py"), os.path.join(self.dir, "kubelet.py")
        with open(ctd_py, "w") as f:
            f.write("import os, socket, time\np = %r\ntime.sleep(1.5)\nos.makedirs(os.path.dirname(p), exist_ok=True)\n"
                    "if os.path.exists(p): os.unlink(p)\ns = socket.socket(socket.AF_UNIX)\ns.bind(p)\ns.listen()\n"
                    "print('listening', flush=True)\ntime.sleep(3600)\n" % sock)
        with open(kubelet_py, "w") as f:
            f.write("import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
                    "try:\n    s.connect(%r); print('containerd answered', flush=True)\n"
                    "except OSError as e:\n    print('containerd did not answer: %%s' %% e, flush=True)\n"
                    "time.sleep(3600)\n" % sock)
        kubelet = self.unit_name("kubelet")
        units = [{"name": kubelet, "content": self.um.service("/usr/bin/python3 " + kubelet_py)},
                 {"name": "containerd.service", "content": self.um.service("/usr/bin/python3 " + ctd_py)}]
        events = self.apply({"units": units}, args=["--kubelet-unit", kubelet])
        self.assertEqual(self.plan(events)[-2:], ["restart unit containerd.service", "restart unit " + kubelet])
        usermgr.wait_until(lambda: "containerd" in self.um.logs(kubelet), 10, "the kubelet stand-in's line")
        self.assertEqual(self.um.logs(kubelet), "containerd answered\n")
        self.um.systemctl("stop", "containerd.service", kubelet)

    def test_containerd_config_drop_in_and_registries(self):
        ctd = {"name": "containerd.service",
               "content": self.um.service(RUNNING) + "[Install]\nWantedBy=default.target\n"}
        gvisor = {"path": ["io.containerd.grpc.v1.cri", "containerd", "runtimes", "gvisor"],
                  "values": {"runtime_type": "io.containerd.runsc.v1", "options": {"ConfigPath": "/etc/gvisor \"a\".toml"},
                             "pod_annotations": ["dev.gvisor.*"], "n": 3}}
        spec = lambda image, plugins=(gvisor,): {
            "criConfig": {"name": "containerd", "cgroupDriver": "systemd",
                          "containerd": {"sandboxImage": image, "plugins": list(plugins), "registries": [
                              {"upstream": "docker.io", "server": "https://registry-1.docker.io",
                               "hosts": [{"url": "https://mirror.example:5000", "capabilities": ["pull"]}]}]}},
            "units": [ctd]}
        args = ["--containerd-path", "/usr/local/bin:/usr/bin"]
        config = self.rooted("/etc/containerd/config.toml")
        hosts = self.rooted("/etc/containerd/certs.d/docker.io/hosts.toml")
        drop_in = os.path.join(self.um.unit_dir, "containerd.service.d", "30-env_config.conf")

        events = self.apply(spec("registry.k8s.io/pause:3.10"), args=args)
        self.assertEqual(self.plan(events), [
            "write containerd config", "write registry config for docker.io",
            "write unit containerd.service (with unit file, 1 drop-ins)", "reload systemd",
            "restart unit containerd.service"])
        self.assertEqual([e for e in events if e["event"] == "external"], [])
        with open(config, "rb") as f:
            toml = tomllib.load(f)
        cri = toml["plugins"]["io.containerd.grpc.v1.cri"]
        self.assertEqual(toml["version"], 2)
        self.assertEqual(toml["imports"], ["/etc/containerd/conf.d/*.toml"])
        self.assertEqual(cri["sandbox_image"], "registry.k8s.io/pause:3.10")
        self.assertEqual(cri["registry"]["config_path"], "/etc/containerd/certs.d")
        self.assertEqual(cri["cni"]["bin_dir"], "/opt/cni/bin")
        self.assertEqual(cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"], True)
        self.assertEqual(cri["containerd"]["runtimes"]["gvisor"], gvisor["values"])
        self.assertEqual(self.mode(config), 0o644)
        for d in ("/var/bin/containerruntimes", "/etc/containerd/conf.d", "/etc/containerd/certs.d"):
            self.assertTrue(os.path.isdir(self.rooted(d)), d)
        with open(drop_in) as f:
            self.assertEqual(f.read(), '[Service]\nEnvironment="PATH=/var/bin/containerruntimes:/usr/local/bin:/usr/bin"\n')
        self.assertIn("PATH=/var/bin/containerruntimes:/usr/local/bin:/usr/bin",
                      self.um.show("containerd.service", "Environment"))
        self.assertEqual(self.um.active_state("containerd.service"), "active")
        with open(hosts, "rb") as f:
            h = tomllib.load(f)
        self.assertEqual(h["server"], "https://registry-1.docker.io")
        self.assertEqual(h["host"]["https://mirror.example:5000"]["capabilities"], ["pull"])

        # the same OSC again: only the registries are re-ensured (upstream's Desired is every registry),
        # nothing is rewritten or restarted
        before, hosts_before = os.stat(config), os.stat(hosts)
        inv = self.um.invocation_id("containerd.service")
        events = self.apply(spec("registry.k8s.io/pause:3.10"), args=args)
        self.assertEqual(self.plan(events), ["write registry config for docker.io"])
        self.assertEqual(self.um.invocation_id("containerd.service"), inv)
        after = os.stat(hosts)
        self.assertEqual((after.st_ino, after.st_mtime_ns), (hosts_before.st_ino, hosts_before.st_mtime_ns))

        # without a baseline the item runs again and renders the same bytes: the file is left alone
        os.unlink(os.path.join(self.state, "last-applied-osc.yaml"))
        events = self.apply(spec("registry.k8s.io/pause:3.10"), args=args)
        self.assertEqual(self.plan(events)[0], "write containerd config")
        after = os.stat(config)
        self.assertEqual((after.st_ino, after.st_mtime_ns), (before.st_ino, before.st_mtime_ns))

        # a new sandbox image: config.toml rewritten, containerd restarted, nothing else
        inv = self.um.invocation_id("containerd.service")
        events = self.apply(spec("registry.k8s.io/pause:3.11", plugins=()), args=args)
        self.assertEqual(self.plan(events), ["write containerd config", "write registry config for docker.io",
                                             "restart unit containerd.service"])
        with open(config, "rb") as f:
            cri = tomllib.load(f)["plugins"]["io.containerd.grpc.v1.cri"]
        self.assertEqual(cri["sandbox_image"], "registry.k8s.io/pause:3.11")
        self.assertNotIn("gvisor", cri["containerd"]["runtimes"])
        self.assertNotEqual(self.um.invocation_id("containerd.service"), inv)

        # plugin values that are no TOML: UnsupportedChange naming the field, config.toml untouched
        with open(config) as f:
            good = f.read()
        bad = {"path": ["x"], "values": {"ok": 1, "foo": [1, None]}}
        events = self.apply(spec("registry.k8s.io/pause:3.12", plugins=(gvisor, bad)), args=args, expect_ok=False)
        fin = self.finished(events)
        self.assertEqual((fin["code"], fin["subject"], fin["errno"]),
                         ("UnsupportedChange", "/etc/containerd/config.toml", 22))
        self.assertEqual(fin["detail"], "spec.criConfig.containerd.plugins[1].values.foo[1]: null is not allowed in an array")
        with open(config) as f:
            self.assertEqual(f.read(), good)


if __name__ == "__main__":
    itest.main(missing=usermgr.missing_prerequisites() + itest.unbuilt("OSCAPPLY"))
