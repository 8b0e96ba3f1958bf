#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 4 against a real systemd user manager: unit-control (async jobs, job timeout, restart
confirmation by InvocationID) and restart-handler (annotation parsing, order, dedupe, rejections, removal
even after failures, no repeats after a failed removal or a crash, own unit last and not re-processed).

The driver is tests/helpers/unitctl ($UNITCTL), which prints one JSON object per line. The Node
annotation is simulated by a file (handle-file) whose removal is the annotation removal; the end-to-end
test against the API emulator reuses the same RestartHandler once the kube client lands."""

import json
import os
import subprocess
import sys
import time
import unittest

from lib import itest
import usermgr

UNITCTL = os.environ.get("UNITCTL", "")
LONG_RUNNING = "/bin/sh -c 'echo started; exec sleep infinity'"


class UnitControl(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        um = cls.um = usermgr.UserManager(prefix="unitctl-").start()
        for name in ("kubelet", "containerd", "other"):
            um.write_unit(name + ".service", um.service(LONG_RUNNING))
        um.write_unit("fails.service", um.service("/bin/sh -c 'echo started; exit 3'", type="oneshot"))
        um.write_unit("missing-binary.service", um.service("/nonexistent/binary", type="exec"))
        um.write_unit("hang.service", um.service(LONG_RUNNING, service_extra="ExecStartPre=/bin/sleep 30\n"))
        um.write_unit("notify.service", um.service(
            "/bin/sh -c 'echo started; systemd-notify --ready; exec sleep infinity'",
            type="notify", service_extra="NotifyAccess=all\n"))
        um.write_unit("reloadable.service", um.service(
            LONG_RUNNING, service_extra="ExecReload=/bin/sh -c 'echo reloaded'\n"))
        um.write_unit("oneshot.service", um.service("/bin/sh -c 'echo started'", type="oneshot"))
        um.daemon_reload()
        um.systemctl("start", "kubelet.service", "containerd.service", "other.service")

    @classmethod
    def tearDownClass(cls):
        cls.um.stop()

    # ---- helpers

    def unitctl(self, *args, timeout=30):
        t0 = time.monotonic()
        r = subprocess.run([UNITCTL] + list(args), env=self.um.env, capture_output=True, text=True,
                           timeout=timeout)
        self.elapsed = time.monotonic() - t0
        self.assertEqual(r.returncode, 0, "unitctl %s: %s" % (args, r.stderr))
        return [json.loads(line) for line in r.stdout.splitlines()]

    def started(self, unit):
        return self.um.logs(unit).count("started\n")

    def by_event(self, events, kind):
        return [e for e in events if e["event"] == kind]

    def tmp(self, name):
        return os.path.join(self.um.base, "%s-%s" % (self.id().rsplit(".", 1)[-1], name))

    # ---- unit-control: the generic jobs

    def test_restart_confirms_new_invocation(self):
        before = {u: self.um.invocation_id(u) for u in ("kubelet.service", "containerd.service")}
        res = self.unitctl("restart", "kubelet.service", "containerd.service")
        self.assertEqual([e["unit"] for e in res], ["kubelet.service", "containerd.service"])
        for e in res:
            self.assertTrue(e["ok"], e)
            self.assertEqual(e["jobResult"], "done")
            self.assertEqual((e["activeState"], e["subState"]), ("active", "running"))
            self.assertEqual(e["invocationBefore"], before[e["unit"]])
            self.assertNotEqual(e["invocationAfter"], e["invocationBefore"])
            self.assertEqual(e["invocationAfter"], self.um.invocation_id(e["unit"]))

    def test_restart_of_unknown_unit(self):
        [e] = self.unitctl("restart", "no-such-unit.service")
        self.assertFalse(e["ok"])
        self.assertIn("not found", e["detail"])
        self.assertIsNone(e["jobResult"])

    def test_restart_of_failing_unit(self):
        [e] = self.unitctl("restart", "fails.service")
        self.assertFalse(e["ok"])
        self.assertEqual(e["jobResult"], "failed")
        self.assertEqual(e["activeState"], "failed")
        self.assertEqual(e["serviceResult"], "exit-code")
        self.assertIn("exit-code", e["detail"])

    def test_start_of_missing_binary(self):
        [e] = self.unitctl("restart", "missing-binary.service")
        self.assertFalse(e["ok"])
        self.assertEqual(e["jobResult"], "failed")
        self.assertEqual(e["serviceResult"], "exit-code")

    def test_job_timeout(self):
        [hang, nxt] = self.unitctl("--job-timeout", "1s", "restart", "hang.service", "other.service")
        self.assertFalse(hang["ok"])
        self.assertEqual(hang["errno"], 110)                         # ETIMEDOUT
        self.assertIn("no result within 1s", hang["detail"])
        self.assertGreaterEqual(hang["durationUsec"], 1_000_000)
        self.assertLess(hang["durationUsec"], 2_000_000)
        self.assertTrue(nxt["ok"], nxt)                               # processing continues
        self.um.systemctl("stop", "hang.service")

    def test_notify_unit(self):
        [e] = self.unitctl("restart", "notify.service")
        self.assertTrue(e["ok"], e)
        self.assertEqual(e["activeState"], "active")
        [e2] = self.unitctl("restart", "notify.service")
        self.assertTrue(e2["ok"], e2)
        self.assertEqual(e2["invocationBefore"], e["invocationAfter"])
        self.assertNotEqual(e2["invocationAfter"], e["invocationAfter"])

    def test_oneshot_that_ran_is_success(self):
        n = self.started("oneshot.service")
        [e] = self.unitctl("restart", "oneshot.service")
        self.assertTrue(e["ok"], e)
        self.assertEqual(e["activeState"], "inactive")
        self.assertEqual(self.started("oneshot.service"), n + 1)

    def test_stop_start_reload_daemon_reload(self):
        [e] = self.unitctl("stop", "other.service")
        self.assertTrue(e["ok"], e)
        self.assertEqual(self.um.active_state("other.service"), "inactive")
        [e] = self.unitctl("start", "other.service")
        self.assertTrue(e["ok"], e)
        self.assertEqual(self.um.active_state("other.service"), "active")

        self.um.systemctl("start", "reloadable.service")
        [e] = self.unitctl("reload", "reloadable.service")
        self.assertTrue(e["ok"], e)
        usermgr.wait_until(lambda: "reloaded" in self.um.logs("reloadable.service"), 2, "ExecReload output")
        [e] = self.unitctl("reload", "other.service")                # no ExecReload=
        self.assertFalse(e["ok"])
        self.assertIn("not applicable", e["detail"])

        self.um.write_unit("late.service", self.um.service(LONG_RUNNING))
        [e] = self.unitctl("daemon-reload")
        self.assertTrue(e["ok"], e)
        self.assertEqual(self.um.show("late.service", "LoadState"), "loaded")

    # ---- restart-handler: issue 4 acceptance

    def test_acceptance_two_units_in_order(self):
        ann = self.tmp("annotation")
        with open(ann, "w") as f:
            f.write("kubelet,containerd")
        before = {u: self.um.invocation_id(u) for u in ("kubelet.service", "containerd.service")}
        ev = self.unitctl("handle-file", ann)
        units = self.by_event(ev, "unit")
        self.assertEqual([(e["unit"], e["ok"]) for e in units],
                         [("kubelet.service", True), ("containerd.service", True)])
        self.assertEqual(self.by_event(ev, "rejected"), [])
        for u in before:
            self.assertNotEqual(self.um.invocation_id(u), before[u])
        k = int(self.um.show("kubelet.service", "ExecMainStartTimestampMonotonic"))
        c = int(self.um.show("containerd.service", "ExecMainStartTimestampMonotonic"))
        self.assertLess(k, c)                                          # one after the other
        self.assertFalse(os.path.exists(ann))                          # annotation gone
        self.assertEqual(ev[-1]["event"], "finished")
        print("two restarts + removal: %.3fs" % self.elapsed, file=sys.stderr)

    def test_acceptance_hostile_value(self):
        ann = self.tmp("annotation")
        value = "../../etc/passwd,foo;rm -rf /,,kubelet, kubelet "
        with open(ann, "w") as f:
            f.write(value)
        n = self.started("kubelet.service")
        ev = self.unitctl("handle-file", ann)
        self.assertEqual([(e["unit"], e["ok"]) for e in self.by_event(ev, "unit")], [("kubelet.service", True)])
        usermgr.wait_until(lambda: self.started("kubelet.service") == n + 1, 2, "kubelet's start line")
        self.assertEqual(self.started("kubelet.service"), n + 1)      # once
        rej = self.by_event(ev, "rejected")
        self.assertEqual([e["entry"] for e in rej], ["../../etc/passwd", "foo;rm -rf /", ""])
        for e in rej:
            self.assertTrue(e["message"].startswith('rejected unit name "%s": ' % e["entry"]), e)
        self.assertFalse(os.path.exists(ann))
        self.assertIn(self.um.show("inplace-agent.service", "LoadState"), ("not-found",))  # nothing else touched

    def test_acceptance_failing_unit_does_not_stop_the_rest(self):
        ann = self.tmp("annotation")
        with open(ann, "w") as f:
            f.write("fails,missing-binary,no-such-unit,kubelet")
        before = self.um.invocation_id("kubelet.service")
        ev = self.unitctl("handle-file", ann)
        res = {e["unit"]: e for e in self.by_event(ev, "unit")}
        self.assertEqual(list(res), ["fails.service", "missing-binary.service", "no-such-unit.service",
                                     "kubelet.service"])
        self.assertFalse(res["fails.service"]["ok"])
        self.assertIn("job result: failed", res["fails.service"]["detail"])
        self.assertIn("exit-code", res["fails.service"]["detail"])
        self.assertFalse(res["no-such-unit.service"]["ok"])
        self.assertIn("not found", res["no-such-unit.service"]["detail"])
        self.assertTrue(res["kubelet.service"]["ok"])
        self.assertNotEqual(self.um.invocation_id("kubelet.service"), before)
        self.assertFalse(os.path.exists(ann))

    def test_acceptance_hanging_unit_times_out(self):
        ev = self.unitctl("--job-timeout", "1s", "handle", "hang,kubelet")
        res = self.by_event(ev, "unit")
        self.assertEqual([(e["unit"], e["ok"]) for e in res], [("hang.service", False), ("kubelet.service", True)])
        self.assertIn("no result within 1s", res[0]["detail"])
        self.assertEqual(self.by_event(ev, "remove"), [{"event": "remove", "ok": True}])
        self.um.systemctl("stop", "hang.service")

    def test_failed_removal_does_not_repeat_restarts(self):
        ann = self.tmp("annotation")
        with open(ann, "w") as f:
            f.write("kubelet,containerd")
        n = {u: self.started(u) for u in ("kubelet.service", "containerd.service")}
        ev = self.unitctl("--fail-removal", "2", "--retry", "100ms", "--state", self.tmp("record.json"), "handle-file", ann)
        self.assertEqual([e["ok"] for e in self.by_event(ev, "remove")], [False, False, True])
        self.assertEqual(len(self.by_event(ev, "unit")), 2)
        for u in n:
            usermgr.wait_until(lambda: self.started(u) >= n[u] + 1, 2, "%s start line" % u)
            self.assertEqual(self.started(u), n[u] + 1, u)
        self.assertFalse(os.path.exists(ann))

    def test_resume_from_record_after_crash(self):
        # A previous instance restarted kubelet, then died before containerd.
        rec = self.tmp("record.json")
        with open(rec, "w") as f:
            json.dump({"value": "kubelet,containerd", "done": ["kubelet.service"],
                       "rejectedReported": True, "removed": False}, f)
        k = self.um.invocation_id("kubelet.service")
        c = self.um.invocation_id("containerd.service")
        ev = self.unitctl("--state", rec, "handle", "kubelet,containerd")
        self.assertEqual([e["unit"] for e in self.by_event(ev, "unit")], ["containerd.service"])
        self.assertEqual(self.um.invocation_id("kubelet.service"), k)
        self.assertNotEqual(self.um.invocation_id("containerd.service"), c)
        with open(rec) as f:
            self.assertTrue(json.load(f)["removed"])

    def test_stale_value_after_removal_is_ignored(self):
        rec = self.tmp("record.json")
        with open(rec, "w") as f:
            json.dump({"value": "kubelet", "done": ["kubelet.service"], "rejectedReported": True,
                       "removed": True}, f)
        k = self.um.invocation_id("kubelet.service")
        self.assertEqual(self.unitctl("--state", rec, "handle", "kubelet"), [{"event": "idle"}])
        self.assertEqual(self.um.invocation_id("kubelet.service"), k)
        # Once the annotation is seen absent, the same value again is a new request.
        self.assertEqual(self.unitctl("--state", rec, "handle", ""), [{"event": "idle"}])
        self.assertFalse(os.path.exists(rec))
        ev = self.unitctl("--state", rec, "handle", "kubelet")
        self.assertEqual([e["unit"] for e in self.by_event(ev, "unit")], ["kubelet.service"])

    def test_acceptance_own_unit_last_and_not_reprocessed(self):
        ann = self.tmp("annotation")
        rec = self.tmp("record.json")
        agent = "fake-agent.service"
        with open(ann, "w") as f:
            f.write("fake-agent,kubelet,containerd")
        # The driver runs *as* the agent's unit, so restarting its own unit stops it, like the agent.
        self.um.write_unit(agent, self.um.service(
            "%s --self-unit %s --state %s handle-file %s" % (UNITCTL, agent, rec, ann)))
        self.um.daemon_reload()
        n = {u: self.started(u) for u in ("kubelet.service", "containerd.service")}
        self.um.systemctl("start", agent)
        first = self.um.invocation_id(agent)

        def lines():
            return [json.loads(x) for x in self.um.logs(agent).splitlines() if x.startswith("{")]

        # The restarted instance finds no annotation, says so, and exits.
        usermgr.wait_until(lambda: {"event": "idle"} in lines(), 10, "the restarted agent to go idle")
        ev = lines()
        # docs/contract.md §9.12: the annotation goes first, then the units, the agent's own last.
        self.assertEqual([e["event"] for e in ev], ["remove", "unit", "unit", "idle"], ev)
        self.assertEqual([e["unit"] for e in self.by_event(ev, "unit")], ["kubelet.service", "containerd.service"])
        self.assertNotEqual(self.um.invocation_id(agent), first)       # it was restarted ...
        self.assertEqual(self.um.show(agent, "NRestarts"), "0")         # ... by the job, not by a crash
        for u in n:
            self.assertEqual(self.started(u), n[u] + 1, u)              # ... after the others, once
        self.assertFalse(os.path.exists(ann))
        self.assertFalse(os.path.exists(rec))                           # seen absent: record dropped


if __name__ == "__main__":
    itest.main(missing=usermgr.missing_prerequisites() + itest.unbuilt("UNITCTL"))
