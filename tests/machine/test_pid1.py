#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, scenario 8: PID 1 and bus events while the agent works.

  1. `systemctl daemon-reexec` while an OSC apply waits for a unit's restart job: PID 1 re-executes
     (its bus name drops and comes back, its jobs are serialized across), the agent's apply still
     completes within the job's time, no apply is lost, and the agent is the same process;
  2. `systemctl daemon-reload` during the next apply: the same;
  3. afterwards the agent still drives systemd over its bus: the restart annotation restarts the
     kubelet (a new invocation);
  4. the system bus itself restarted (`systemctl restart dbus`): the same agent reconnects (one
     "Lost", one "Reconnected" line) and applies the next OSC, with a unit's restart job, over the
     new connection.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import itest  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import FAILURE, NODE_CHECKSUM, RESTART_ANNOTATION, annotation, annotation_json  # noqa: E402

H = None
NODE = "node-pid1"
SLOW = "machine-slow.service"
# Within the budget a lost JobRemoved would blow: systemd.jobTimeout is 90 s by default.
APPLY_TIMEOUT = 45

setUpModule, tearDownModule = harness.module_fixture(globals(), NODE)


def slow_unit(generation):
    """A unit whose restart job takes seconds: the window for PID 1 to go away under the apply."""
    return {"name": SLOW, "enable": True, "command": "restart",
            "content": "[Unit]\nDescription=machine tier: a slow restart (%d)\n[Service]\nType=oneshot\n"
                       "RemainAfterExit=yes\nExecStart=/bin/sleep 4\n[Install]\nWantedBy=multi-user.target\n"
                       % generation}


class Pid1(unittest.TestCase):
    def apply_during(self, generation, *systemctl):
        t, w, m = H.t, H.w, H.m
        pid = m.unit_property(harness.AGENT_UNIT, "MainPID")
        checksum = w.publish(w.osc("1.31.4", units=[slow_unit(generation)]))
        world.wait_for(lambda: m.active_state(SLOW) == "activating", 60, "the apply's restart of " + SLOW)
        t.command(m, "systemctl", *systemctl, title="systemctl %s   (while the agent waits for %s's restart job)"
                  % (" ".join(systemctl), SLOW))
        H.wait_checksum(checksum, APPLY_TIMEOUT)
        self.assertIsNone(annotation_json(H.node(), FAILURE), "the apply failed on the way")
        self.assertEqual(m.active_state(SLOW), "active")
        self.assertEqual(m.unit_property(harness.AGENT_UNIT, "MainPID"), pid, "the agent was restarted")
        t.ok("the apply completed across `systemctl %s`, the agent is the same process (%s)" % (
            " ".join(systemctl), pid))

    def test_1_daemon_reexec_during_an_apply(self):
        t, w = H.t, H.w
        t.step("scenario 8: PID 1 re-executes and reloads while the agent applies")
        H.node_up(w.osc("1.31.4"))
        self.apply_during(1, "daemon-reexec")

    def test_2_daemon_reload_during_an_apply(self):
        self.apply_during(2, "daemon-reload")

    def test_3_bus_still_works(self):
        t, g, m = H.t, H.g, H.m
        before = m.invocation(harness.KUBELET_UNIT)
        H.w.emu.label_node(NODE, annotations={RESTART_ANNOTATION: "kubelet"}, manager="operator")
        g.wait_node(lambda n: annotation(n, RESTART_ANNOTATION) is None, 60, "the annotation to be taken")
        world.wait_for(lambda: m.invocation(harness.KUBELET_UNIT) != before, 60, "a new kubelet invocation")
        t.ok("after re-exec and reload the agent still restarts units over its bus")

    def test_4_dbus_restarted(self):
        """The system bus itself restarted (dbus-daemon is not PID 1: its connections end): the same
        agent process notices, reconnects, and applies the next OSC over the new connection (a
        unit's restart job, SystemdUnitsReady read again)."""
        t, w, m, g = H.t, H.w, H.m, H.g
        pid, restarts = (m.unit_property(harness.AGENT_UNIT, p) for p in ("MainPID", "NRestarts"))
        c0 = m.cursor()
        m.run("systemctl", "restart", "dbus.service")
        t.say("systemctl restart dbus.service: every bus connection ended")
        checksum = w.publish(w.osc("1.31.4", units=[slow_unit(3)]))
        n = g.wait_node(lambda n: annotation(n, NODE_CHECKSUM) == checksum or "not connected" in (
            annotation_json(n, FAILURE) or {}).get("message", ""), APPLY_TIMEOUT, "the apply's outcome")
        self.assertEqual(annotation(n, NODE_CHECKSUM), checksum, annotation_json(n, FAILURE))
        self.assertEqual(m.active_state(SLOW), "active")
        self.assertIn("machine tier: a slow restart (3)", m.unit_property(SLOW, "Description"))
        self.assertEqual((m.unit_property(harness.AGENT_UNIT, "MainPID"),
                          m.unit_property(harness.AGENT_UNIT, "NRestarts")), (pid, restarts),
                         "the agent was restarted instead of reconnecting")
        journal = m.messages_after(c0, harness.AGENT_UNIT)
        self.assertEqual(journal.count("Lost the connection to the system bus"), 1, journal[-3000:])
        self.assertEqual(journal.count("Reconnected to the system bus."), 1, journal[-3000:])
        t.block("journalctl -u inplace-agent (the bus restart)", "\n".join(
            ln for ln in journal.splitlines() if "system bus" in ln))
        t.ok("the next OSC was applied after the system bus restarted, by the same agent (PID %s, %s restarts) "
             "on a new connection" % (pid, restarts))


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
