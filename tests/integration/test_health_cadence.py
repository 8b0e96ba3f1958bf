#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 30 item 3: the kubelet health check at upstream's real cadence (no test tuning: a check every
30 s, a restart after 1 min unhealthy; gardener/gardener pkg/nodeagent/controller/healthcheck/kubelet.go,
reconciler.go's 30 s requeue). Takes about 75 s.

  * a kubelet whose /healthz answers 500 from the start is reported at the agent's first round, at once
    (not after a 10 s probe window), and restarted 60 s later, at the third round;
  * a containerd that answers its Version call (the sandbox's stand-in) is never reported nor restarted
    meanwhile (issue 30 item 6)."""

import os
import time
import unittest

from lib import itest
import sandbox

SB = None
UNHEALTHY_DROPIN = "[Service]\nEnvironment=STAND_IN_HEALTHY_AFTER=100000\n"


def prepare(sb):
    sb.write_last_applied(units=[(sandbox.CONTAINERD_UNIT, True, None), (sandbox.KUBELET_UNIT, True, None)])


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), setup=prepare, versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
    start_agent=False)


def first_event(reason, pred):
    for e in SB.events():
        if e.get("reason") == reason and e.get("action") == "HealthCheck" and pred(e["type"], e["message"]):
            return e
    return None


class Cadence(unittest.TestCase):
    def test_kubelet_500_restarted_after_one_minute(self):
        # The stand-in kubelet answers 500 ("not synced yet") for as long as it runs, from its start.
        d = os.path.join(SB.um.unit_dir, sandbox.KUBELET_UNIT + ".d")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "unhealthy.conf"), "w") as f:
            f.write(UNHEALTHY_DROPIN)
        SB.um.daemon_reload()
        SB.systemctl("restart", sandbox.KUBELET_UNIT, check=True)
        SB.wait_kubelet_healthy(20, healthy=False)
        kubelet_before = SB.um.invocation_id(sandbox.KUBELET_UNIT)
        containerd_before = SB.um.invocation_id(sandbox.CONTAINERD_UNIT)

        SB.start_agent()
        t_start = time.monotonic()      # READY=1, right after the first round began
        first = sandbox.kubeemu.wait_for(lambda: first_event("kubelet", lambda t, m: t == "Warning" and m.startswith(
            "Kubelet is unhealthy, health check error: ")), 20, "the first Warning")
        t_first = time.monotonic()
        # The first round runs once the Node is seen (before READY=1): its 500 is a failure at once, not
        # after a 10 s probe window.
        self.assertLess(t_first - t_start, 5, "first failure %.1fs after READY=1" % (t_first - t_start))
        self.assertEqual(first["message"], 'Kubelet is unhealthy, health check error: Get "%s": HTTP 500'
                         % SB.healthz_url)

        sandbox.usermgr.wait_until(lambda: SB.um.invocation_id(sandbox.KUBELET_UNIT) != kubelet_before, 90,
                                   "the kubelet restarted")
        t_restart = time.monotonic()
        waited = t_restart - t_first
        print("first failure %.1fs after READY=1, restart %.1fs after the first failure"
              % (t_first - t_start, waited))
        # Rounds at 0, 30, 60 s: the third one restarts (polling slop and the restart job on top).
        self.assertGreaterEqual(waited, 57, "restarted after %.1fs" % waited)
        self.assertLessEqual(waited, 68, "restarted after %.1fs" % waited)
        self.assertIsNotNone(first_event("kubelet", lambda t, m: t == "Warning" and m.startswith(
            "Kubelet is unhealthy for more than 1m0s, restarting it. Health check error: ")))
        restarted = "Restarted %s (health check)." % sandbox.KUBELET_UNIT
        sandbox.usermgr.wait_until(lambda: restarted in SB.agent_log(), 10, "the restart's journal line")
        self.assertEqual(SB.agent_log().count(restarted), 1)

        # containerd answered every round: never reported, never restarted.
        self.assertIsNone(first_event("containerd", lambda t, m: True))
        self.assertEqual(SB.um.invocation_id(sandbox.CONTAINERD_UNIT), containerd_before)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
