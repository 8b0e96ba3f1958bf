#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 2: the daemon under a real systemd (user) manager as Type=notify with WatchdogSec=: it becomes
active (running), keeps the watchdog fed, shows a Status: line, and stops on SIGTERM within 1 s with
exit status 0 (docs/contract.md §1, §6 sd_notify, §8.14)."""

import os
import signal
import sys
import time
import unittest

from lib import itest
import usermgr

AGENT = os.environ.get("AGENT", "")
UNIT = "inplace-agent-test.service"
STOP_BUDGET_S = 1.0


class DaemonNotify(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.um = usermgr.UserManager(prefix="notify-").start()
        cls.state_dir = os.path.join(cls.um.base, "state")
        os.makedirs(cls.state_dir)
        cls.config = os.path.join(cls.um.base, "config.yaml")
        with open(cls.config, "w") as f:
            # No API server yet: a node name and a kubeconfig that does not exist must still start.
            f.write("nodeName: test-node\nkubeconfig: %s/nonexistent-kubeconfig\n" % cls.um.base)
        cls.um.write_unit(UNIT, cls.um.service(
            "%s run --config %s --state-dir %s --log-level debug" % (AGENT, cls.config, cls.state_dir),
            type="notify",
            service_extra="WatchdogSec=1s\nTimeoutStartSec=5s\nTimeoutStopSec=5s\n"))
        cls.um.daemon_reload()

    @classmethod
    def tearDownClass(cls):
        cls.um.stop()

    def start_agent(self):
        t0 = time.monotonic()
        # Type=notify: `systemctl start` returns only after READY=1 (or fails on timeout).
        self.um.systemctl("start", UNIT, timeout=10)
        elapsed = time.monotonic() - t0
        props = self.um.show_all(UNIT, "ActiveState", "SubState", "MainPID", "StatusText", "Type")
        self.assertEqual(props["Type"], "notify")
        self.assertEqual((props["ActiveState"], props["SubState"]), ("active", "running"),
                         self.um.logs(UNIT))
        self.assertGreater(int(props["MainPID"]), 0)
        return elapsed

    def assert_clean_exit(self):
        props = self.um.show_all(UNIT, "ActiveState", "Result", "ExecMainStatus", "ExecMainCode")
        self.assertEqual(props["ActiveState"], "inactive", props)
        self.assertEqual(props["Result"], "success", props)
        self.assertEqual(props["ExecMainStatus"], "0", props)
        self.assertEqual(props["ExecMainCode"], "1", props)         # CLD_EXITED, not killed

    def test_1_ready_status_watchdog_and_stop(self):
        elapsed = self.start_agent()
        print("start (READY=1) took %.3fs" % elapsed, file=sys.stderr)

        out = self.um.systemctl("status", UNIT, check=False).stdout
        self.assertRegex(out, r"Active: active \(running\)")
        self.assertRegex(out, r"\n\s*Status: \"[^\"]+\"", out)
        self.assertIn("test-node", self.um.show(UNIT, "StatusText"))

        # The watchdog is fed: WatchdogTimestamp advances while the unit stays up past 2x WatchdogSec.
        first = self.um.show(UNIT, "WatchdogTimestampMonotonic")
        usermgr.wait_until(lambda: self.um.show(UNIT, "WatchdogTimestampMonotonic") not in ("", "0", first),
                           3, "a WATCHDOG=1 ping")
        start_mono = int(self.um.show(UNIT, "ExecMainStartTimestampMonotonic"))
        usermgr.wait_until(
            lambda: int(self.um.show(UNIT, "WatchdogTimestampMonotonic")) - start_mono > 2_100_000,
            4, "watchdog pings beyond 2 x WatchdogSec")
        self.assertEqual(self.um.active_state(UNIT), "active")
        self.assertEqual(self.um.show(UNIT, "NRestarts"), "0")

        t0 = time.monotonic()
        self.um.systemctl("stop", UNIT, timeout=10)              # returns when the job is done
        elapsed = time.monotonic() - t0
        print("systemctl stop took %.3fs" % elapsed, file=sys.stderr)
        self.assertLess(elapsed, STOP_BUDGET_S)
        self.assert_clean_exit()

    def test_2_sigterm_from_outside(self):
        self.start_agent()
        pid = self.um.main_pid(UNIT)
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)                             # our own unit's main PID
        usermgr.wait_until(lambda: self.um.active_state(UNIT) in ("inactive", "failed"),
                           STOP_BUDGET_S, "the agent to exit after SIGTERM")
        elapsed = time.monotonic() - t0
        print("SIGTERM -> inactive took %.3fs" % elapsed, file=sys.stderr)
        self.assert_clean_exit()
        self.assertIn("Stopped", self.um.logs(UNIT))

    def test_3_sigint_via_systemctl_kill(self):
        self.start_agent()
        self.um.systemctl("kill", "--signal=SIGINT", UNIT)
        usermgr.wait_until(lambda: self.um.active_state(UNIT) in ("inactive", "failed"),
                           STOP_BUDGET_S, "the agent to exit after SIGINT")
        self.assert_clean_exit()


if __name__ == "__main__":
    itest.main(missing=usermgr.missing_prerequisites() + itest.unbuilt("AGENT"))
