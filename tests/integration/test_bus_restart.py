#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 23 finding 3 and issue 24 scenario 8 with the real agent in the sandbox (lib/sandbox.py): the
way to systemd breaks under an apply, and nothing is lost.

The sandbox's bus is the user manager's own dbus.service (socket-activated by dbus.socket), as on a
node: restarting it ends every client's connection, and systemd --user reconnects to the new daemon by
itself, like PID 1 does on a node. Each OSC adds or changes `ipa-slow.service`, whose start takes 3 s,
so the agent's restart job is in flight (waiting for JobRemoved) when the bus goes:

  1. dbus.service restarted under the apply: the apply completes, the log says once that the bus was
     lost and once that it is back, and the next apply works (before the fix: the job ended "no result
     within 30s", every later apply "Transport endpoint is not connected", for good);
  2. `systemctl --user daemon-reexec` under the apply (systemd leaves the bus and comes back as a new
     instance): the apply completes;
  3. `systemctl --user daemon-reload` under the apply: the apply completes;
  4. the bus down for a while (dbus.socket and dbus.service stopped): STATUS= says so, the units check
     and the health checks (every second here) report nothing false on the Node meanwhile, an apply
     published meanwhile waits and completes once the bus is back, and STATUS= is plain again;
  5. the agent started while the bus is down: it connects when the bus comes, and applies."""

import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
SLOW = "ipa-slow.service"
TUNING = "units-check=1s,health-check=1s,health-grace=3s"
LOST = "Lost the connection to the system bus"
BACK = "Reconnected to the system bus."


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
    agent_env={"INPLACE_AGENT_KUBE_TUNING": TUNING})


def slow_unit_osc(round_):
    """The sandbox's OSC plus ipa-slow.service, whose content (and so its restart) differs per round."""
    unit = ("  units:\n  - name: %s\n    enable: true\n    command: restart\n    content: |\n"
            "      [Service]\n      Type=oneshot\n      RemainAfterExit=yes\n      Environment=ROUND=%s\n"
            "      ExecStart=/bin/sleep 3\n" % (SLOW, round_))
    return SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4")).replace("  units:\n", unit, 1)


def failure(node):
    return S.annotation(node, S.FAILURE) or ""


class BusRestart(unittest.TestCase):
    def wait_applied(self, checksum, timeout):
        n = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum or failure(n), timeout,
                         "checksum %s (or a failure)" % checksum)
        self.assertEqual(failure(n), "", "the apply failed")
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), checksum)
        return n

    def apply_under(self, round_, disturb, timeout=25):
        """Publishes round_'s OSC, calls disturb() while the agent waits for the slow unit's restart, and
        waits for the checksum: well within systemd.jobTimeout (30 s), which a lost job would run into."""
        checksum = SB.publish_text(slow_unit_osc(round_))
        usermgr.wait_until(lambda: SB.um.show(SLOW, "Environment") == "ROUND=%s" % round_ and
                           SB.um.active_state(SLOW) == "activating", 30, "%s starting (round %s)" % (SLOW, round_))
        disturb()
        self.wait_applied(checksum, timeout)
        self.assertEqual(SB.um.active_state(SLOW), "active")
        return checksum

    def test_1_bus_restart_under_apply(self):
        log0 = len(SB.agent_log())
        self.apply_under("1", lambda: SB.um.systemctl("restart", "dbus.service"))
        log = SB.agent_log()[log0:]
        self.assertEqual(log.count(LOST), 1, log)
        self.assertEqual(log.count(BACK), 1, log)
        self.assertNotIn("Transport endpoint is not connected", log)
        # The next apply works over the new connection.
        self.apply_under("1b", lambda: None)

    def test_2_daemon_reexec_under_apply(self):
        self.apply_under("2", lambda: SB.um.systemctl("daemon-reexec"))
        self.apply_under("2b", lambda: None)

    def test_3_daemon_reload_under_apply(self):
        self.apply_under("3", lambda: SB.um.systemctl("daemon-reload"))

    def test_4_bus_down_for_a_while(self):
        def status():
            return SB.um.show(S.AGENT_UNIT, "StatusText")

        rv = int(SB.node()["metadata"]["resourceVersion"])
        log0 = len(SB.agent_log())
        warnings = len([e for e in SB.events() if e.get("type") == "Warning"])
        SB.um.systemctl("stop", "dbus.socket", "dbus.service")
        try:
            usermgr.wait_until(lambda: "system bus down" in status(), 10, "STATUS= to say the bus is down")
            # An apply published meanwhile: its unit restart waits for the bus (within jobTimeout).
            checksum = SB.publish_text(slow_unit_osc("4"))
            time.sleep(3)   # the outage itself (not a wait for something): the duties run every second
            self.assertIn("system bus down", status())
        finally:
            SB.um.systemctl("start", "dbus.socket", "dbus.service")
        self.wait_applied(checksum, 25)
        usermgr.wait_until(lambda: "system bus down" not in status(), 10, "STATUS= without the note")
        # One line when the bus went, one when it came back; no failed read or job on its own line.
        log = SB.agent_log()[log0:]
        self.assertEqual([line for line in log.splitlines() if "[warning]" in line or "[err" in line],
                         [line for line in log.splitlines() if LOST in line], log)
        self.assertEqual(log.count(BACK), 1, log)
        # Nothing false on the Node: SystemdUnitsReady never went False, no Warning Event.
        for e in SB.node_history(since_rv=rv):
            for c in e["object"].get("status", {}).get("conditions", []):
                if c.get("type") == "SystemdUnitsReady":
                    self.assertEqual(c.get("status"), "True", c)
        self.assertEqual(len([e for e in SB.events() if e.get("type") == "Warning"]), warnings,
                         [e.get("message") for e in SB.events() if e.get("type") == "Warning"])

    def test_5_no_bus_at_start(self):
        """The agent starts while the bus is down: once it is up, unit work and the duties start."""
        SB.stop_agent()
        log0 = len(SB.agent_log())
        SB.um.systemctl("stop", "dbus.socket", "dbus.service")
        try:
            SB.start_agent()
            usermgr.wait_until(lambda: "Cannot connect to the system bus" in SB.agent_log()[log0:], 10,
                               "the agent to say the bus is missing")
        finally:
            SB.um.systemctl("start", "dbus.socket", "dbus.service")
        usermgr.wait_until(lambda: "Connected to the system bus." in SB.agent_log()[log0:], 20,
                           "the agent to connect")
        self.apply_under("5", lambda: None)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
