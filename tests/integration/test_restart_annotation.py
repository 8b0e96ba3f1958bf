#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 4 acceptance through the API, with the real agent in the sandbox (lib/sandbox.py): the Node annotation
worker.gardener.cloud/restart-systemd-services (docs/contract.md §5, §8.7, docs/node-protocol.md §5).
  * "kubelet,containerd": both units restarted in that order (new InvocationID each), the annotation removed,
    one Normal Event SystemDUnitRestart per unit;
  * hostile entries: only kubelet.service restarted, once; a Warning Event `rejected unit name "<entry>": <why>`
    per rejected entry; the annotation removed; the agent still running;
  * a unit whose start fails: a Warning Event, the annotation removed, the next entries still processed;
  * the agent's own unit in the list (also as the replaced gardener-node-agent): restarted last, once (new
    InvocationID), and the new agent does not process the annotation again (no second restart of the others);
  * docs/contract.md §9.12: the slice the agent runs in is rejected (before: the agent restarted its own slice, died before
    removing the annotation and looped); many rejections come as one aggregated Warning; an entry or a whole value
    of hostile length is quoted cut to 253 bytes + "…" in Events and journal lines."""

import os
import time
import unittest

from lib import itest
import sandbox
import usermgr

RESTART = "worker.gardener.cloud/restart-systemd-services"
FAILING_UNIT = "broken-thing.service"
SB = None


def prepare(sb):
    sb.um.write_unit(FAILING_UNIT, sb.um.service("/bin/false", type="oneshot"))
    sb.um.daemon_reload()


setUpModule, tearDownModule = itest.sandbox_fixture(globals(), setup=prepare, versions=("1.31.4",),
                                                    broken_versions=(), kubelet_size=256 << 10)


def restart_events(seen):
    """SystemDUnitRestart Events emitted since event_names() returned `seen`. The agent aggregates a repeated
    Event (same reason and message) by raising its count, so an Event counts once per increment."""
    out = []
    for e in SB.events():
        if e.get("reason") == "SystemDUnitRestart":
            out += [e] * ((e.get("count") or 1) - seen.get(e["metadata"]["name"], 0))
    return out


def event_names():
    return {e["metadata"]["name"]: e.get("count") or 1 for e in SB.events()}


def ids(*units):
    return {u: SB.um.invocation_id(u) for u in units}


def start_usec(unit):
    return int(SB.um.show(unit, "ExecMainStartTimestampMonotonic") or 0)


class RestartAnnotation(unittest.TestCase):
    def annotate(self, value):
        SB.emu.label_node(sandbox.NODE, annotations={RESTART: value}, manager="gardener")

    def wait_annotation_gone(self, timeout=30):
        return SB.wait_node(lambda n: sandbox.annotation(n, RESTART) is None, timeout, "the annotation removed")

    def wait_events(self, seen, count, timeout=30):
        box = {}

        def enough():
            box["e"] = restart_events(seen)
            return len(box["e"]) >= count
        usermgr.wait_until(enough, timeout, "%d SystemDUnitRestart events" % count, interval=0.05)
        return box["e"]

    def test_1_in_order(self):
        before, seen = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT), event_names()
        self.annotate("kubelet,containerd")
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 2)
        after = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT)
        for u in before:
            self.assertNotEqual(before[u], after[u], "%s not restarted" % u)
        self.assertLess(start_usec(sandbox.KUBELET_UNIT), start_usec(sandbox.CONTAINERD_UNIT),
                        "kubelet must be restarted before containerd")
        self.assertEqual(sorted((e["type"], e["message"]) for e in evs),
                         [("Normal", "processed restart of unit containerd.service"),
                          ("Normal", "processed restart of unit kubelet.service")])
        for e in evs:
            self.assertEqual(e["involvedObject"]["kind"], "Node")
            self.assertEqual(e["metadata"]["namespace"], "default")
        self.assertEqual(ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT), after)

    def test_2_hostile_entries(self):
        pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        before, seen = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT), event_names()
        self.annotate("../../etc/passwd,foo;rm -rf /,,kubelet, kubelet ")
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 4)
        # Settle: the handler reports "finished" only after every entry; give stray restarts a chance to show.
        usermgr.wait_until(lambda: 'Handled restart request "../../etc/passwd' in SB.agent_log(), 20,
                           "the agent to finish the request")
        evs = restart_events(seen)
        warnings = [e["message"] for e in evs if e["type"] == "Warning"]
        normals = [e["message"] for e in evs if e["type"] == "Normal"]
        self.assertEqual(normals, ["processed restart of unit kubelet.service"], evs)
        for entry in ("../../etc/passwd", "foo;rm -rf /"):
            self.assertTrue([w for w in warnings if w.startswith('rejected unit name "%s": ' % entry)
                             and len(w) > len('rejected unit name "%s": ' % entry)],
                            "no rejection event for %r in %s" % (entry, warnings))
        for w in warnings:
            self.assertRegex(w, r'^rejected unit name ".*": .+')
        after = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT)
        self.assertNotEqual(before[sandbox.KUBELET_UNIT], after[sandbox.KUBELET_UNIT])
        self.assertEqual(before[sandbox.CONTAINERD_UNIT], after[sandbox.CONTAINERD_UNIT])
        self.assertEqual(SB.um.active_state(sandbox.AGENT_UNIT), "active")
        self.assertEqual(SB.um.main_pid(sandbox.AGENT_UNIT), pid, "the agent must not have been restarted")
        self.assertFalse(os.path.exists("/etc/passwd.service"))

    def test_3_failing_unit(self):
        before, seen = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT), event_names()
        self.annotate("broken-thing,containerd")
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 2)
        by_type = {(e["type"], e["message"].split(" failed")[0]) for e in evs}
        self.assertIn(("Warning", "processed restart of unit broken-thing.service"), by_type, evs)
        self.assertIn(("Normal", "processed restart of unit containerd.service"), by_type, evs)
        after = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT)
        self.assertNotEqual(before[sandbox.CONTAINERD_UNIT], after[sandbox.CONTAINERD_UNIT])
        self.assertEqual(SB.um.active_state(sandbox.AGENT_UNIT), "active")

    def test_4_own_unit_last(self):
        units = (sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT, sandbox.AGENT_UNIT)
        before, seen = ids(*units), event_names()
        agent_pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        self.annotate("gardener-node-agent,inplace-agent,kubelet,containerd")
        self.wait_annotation_gone()
        usermgr.wait_until(lambda: SB.um.invocation_id(sandbox.AGENT_UNIT) != before[sandbox.AGENT_UNIT], 30,
                           "the agent's own unit restarted")
        SB.um.wait_for_state(sandbox.AGENT_UNIT, "active", 30)
        new_pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        SB._pids_seen.add(new_pid)
        self.assertNotEqual(new_pid, agent_pid)
        mid = ids(*units)
        for u in units:
            self.assertNotEqual(before[u], mid[u], "%s not restarted" % u)
        # Own unit last: the others were (re)started before the old agent went away.
        agent_start = start_usec(sandbox.AGENT_UNIT)
        self.assertLess(start_usec(sandbox.KUBELET_UNIT), agent_start)
        self.assertLess(start_usec(sandbox.CONTAINERD_UNIT), agent_start)
        # The new agent has listed the Node (READY=1 only after that) and must not act on the request again:
        # give it a few seconds with the watch up.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            self.assertEqual(ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT),
                             {u: mid[u] for u in units[:2]}, "a unit was restarted twice")
            time.sleep(0.25)
        self.assertEqual(SB.um.main_pid(sandbox.AGENT_UNIT), new_pid, "the agent restarted itself again")
        self.assertIsNone(sandbox.annotation(SB.node(), RESTART))
        normals = [e["message"] for e in restart_events(seen) if e["type"] == "Normal"]
        self.assertEqual(sorted(normals), ["processed restart of unit containerd.service",
                                           "processed restart of unit kubelet.service"], normals)

    def assert_agent_untouched(self, pid, seconds=3):
        """The agent keeps its PID for a few seconds and the annotation does not come back."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            self.assertEqual(SB.um.main_pid(sandbox.AGENT_UNIT), pid, "the agent was restarted")
            self.assertEqual(SB.um.active_state(sandbox.AGENT_UNIT), "active")
            time.sleep(0.25)
        self.assertIsNone(sandbox.annotation(SB.node(), RESTART))

    def test_5_own_slice_rejected(self):
        slc = SB.um.show(sandbox.AGENT_UNIT, "Slice")
        self.assertTrue(slc and slc.endswith(".slice"), slc)
        pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        before, seen = ids(sandbox.KUBELET_UNIT, sandbox.CONTAINERD_UNIT), event_names()
        self.annotate("%s,kubelet" % slc)
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 2)
        self.assertIn(("Warning", 'rejected unit name "%s": is a slice: restarting it restarts every unit in it, '
                                  'the agent, kubelet and containerd included; only services, sockets and timers '
                                  'may be restarted' % slc), [(e["type"], e["message"]) for e in evs])
        self.assertIn(("Normal", "processed restart of unit kubelet.service"),
                      [(e["type"], e["message"]) for e in evs])
        self.assert_agent_untouched(pid)
        self.assertEqual(before[sandbox.CONTAINERD_UNIT], SB.um.invocation_id(sandbox.CONTAINERD_UNIT))

    def test_6_many_rejections_one_event(self):
        pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        seen = event_names()
        bad = ["a.scope", "b.target", "c.mount", "d.device", "e.swap", "f.path", "g.automount", "h.slice"]
        self.annotate(",".join(bad + ["kubelet"]))
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 2)
        usermgr.wait_until(lambda: 'Handled restart request "a.scope' in SB.agent_log(), 20,
                           "the agent to finish the request")
        warnings = [e["message"] for e in restart_events(seen) if e["type"] == "Warning"]
        self.assertEqual(len(warnings), 1, warnings)
        self.assertTrue(warnings[0].startswith("rejected 8 unit names: "), warnings)
        for b in bad:
            self.assertIn('"%s" (' % b, warnings[0])
        self.assert_agent_untouched(pid, seconds=1)

    def test_7_hostile_lengths_are_cut(self):
        pid = SB.um.main_pid(sandbox.AGENT_UNIT)
        seen = event_names()
        self.annotate("x" * 400 + ";")
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 1)
        self.assertEqual([e["message"] for e in evs],
                         ['rejected unit name "%s…": contains a character outside [A-Za-z0-9:_.\\-@]' % ("x" * 253)])
        seen = event_names()
        self.annotate("y" * 20000)
        self.wait_annotation_gone()
        evs = self.wait_events(seen, 1)
        self.assertEqual([e["message"] for e in evs],
                         ['rejected restart annotation of 20000 bytes, more than the limit of 16384: "%s…"'
                          % ("y" * 64)])
        usermgr.wait_until(lambda: 'Handled restart request "yyy' in SB.agent_log(), 20, "the request handled")
        for line in SB.agent_log().splitlines():
            self.assertNotIn("x" * 254, line, "journal line quoting an entry uncut")
            self.assertNotIn("y" * 254, line, "journal line quoting an entry uncut")
            self.assertLess(len(line), 1100, "journal line too long: %s…" % line[:120])
        self.assert_agent_untouched(pid, seconds=1)

    def test_8_nul_elsewhere_does_not_blind(self):
        """Issue 16: a \\u0000 in an annotation and a condition message the agent does not use. Before, every
        watch event and list of the Node failed with "Bad message" and the request below was never seen."""
        log_before = len(SB.agent_log())
        SB.emu.label_node(sandbox.NODE, annotations={"example.com/note": "a\x00b"}, manager="someone")
        SB.emu.set_condition(sandbox.NODE, "NetworkUnavailable", status="False", reason="RouteCreated",
                             message="m\x00n")
        node = SB.node()
        self.assertEqual(sandbox.annotation(node, "example.com/note"), "a\x00b", "the emulator must keep the NUL")
        before, seen = ids(sandbox.KUBELET_UNIT), event_names()
        self.annotate("kubelet")
        self.wait_annotation_gone()            # a PATCH of a Node with NULs, and its answer decoded
        evs = self.wait_events(seen, 1)
        self.assertEqual([e["message"] for e in evs], ["processed restart of unit kubelet.service"])
        self.assertNotEqual(before[sandbox.KUBELET_UNIT], SB.um.invocation_id(sandbox.KUBELET_UNIT))
        log = SB.agent_log()[log_before:]
        self.assertNotIn("undecodable", log)
        self.assertNotIn("Bad message", log)
        self.assertEqual(sandbox.annotation(SB.node(), "example.com/note"), "a\x00b")
        SB.emu.label_node(sandbox.NODE, annotations={"example.com/note": None}, manager="someone")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
