#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 15: GNA's quieter duties, with the real agent in the sandbox (lib/sandbox.py: emulator, user
manager running containerd.service and kubelet.service stand-ins, the agent as a unit) and shortened
periods (INPLACE_AGENT_KUBE_TUNING units-check/units-stuck):
  * an emulated gardenlet health check (docs/node-protocol.md §8 items 1 and 3: Lease gardener-node-agent-<node> renewed
    within its duration, SystemdUnitsReady True) passes on the healthy node;
  * a failed unit turns SystemdUnitsReady False/UnhealthyUnits, one stuck activating first
    True/ProgressingUnits and then False "stuck in activating"; back to AllUnitsHealthy when it runs;
  * the condition is patched by type (MCM's InPlaceUpdate condition survives) and only on change: no
    Node write while nothing changes;
  * an OSC with the kube-apiserver static pod manifest labels the node control-plane (docs/node-protocol.md §2.2 step 3);
  * the units checked are those of <stateDirectory>/last-applied-osc.yaml, followed when the file is
    replaced (a failing unit listed there turns the condition False; replaced units are left out);
  * the drift check at start (docs/node-protocol.md §8 item 7, issue 26 item 2): after a restart, a file edited on disk
    and a missing file and unit file are journaled with upstream's reasons and messages, restored, and
    named in one Warning Event OSCDriftRepaired."""

import calendar
import hashlib
import json
import os
import time
import unittest

from lib import itest
import sandbox

COND = "SystemdUnitsReady"
LEASE = "gardener-node-agent-" + sandbox.NODE
TUNING = "units-check=1s,units-stuck=4s"
DELAY = "node-agent.gardener.cloud/reconciliation-delay"
ROLE_CP = "node-role.kubernetes.io/control-plane"
SB = None


def prepare(sb):
    # SystemdUnitsReady checks the units of the last-applied OSC (none: no condition, as upstream).
    sb.write_last_applied(units=[(sandbox.CONTAINERD_UNIT, True, None), (sandbox.KUBELET_UNIT, True, None)])


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), setup=prepare, versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
    agent_env={"INPLACE_AGENT_KUBE_TUNING": TUNING, "INPLACE_AGENT_DEBUG_NODE_VIEW": "1"})


def units_ready(node):
    return sandbox.condition(node, COND)


def rfc3339(s):
    return calendar.timegm(time.strptime(s.split(".")[0].rstrip("Z"), "%Y-%m-%dT%H:%M:%S"))


def gardenlet_node_agent_healthy():
    """What gardenlet's shoot care checks per node: the Lease is fresh, SystemdUnitsReady is not False."""
    lease = SB.emu.get("leases", LEASE, namespace="kube-system", group="coordination.k8s.io")
    if not lease:
        return False, "no Lease %s" % LEASE
    renew = rfc3339(lease["spec"]["renewTime"])
    if renew + lease["spec"]["leaseDurationSeconds"] < time.time():
        return False, "gardener-node-agent stopped running on node %s" % sandbox.NODE
    c = units_ready(SB.node())
    if c and c["status"] == "False":
        return False, c["message"]
    return True, ""


def node_status_writes(since):
    return [e for e in SB.emu.request_log(since=since, path="^/api/v1/nodes/%s/status$" % sandbox.NODE)
            if e["method"] == "PATCH"]


class Duties(unittest.TestCase):
    def wait_condition(self, pred, timeout, what):
        return units_ready(SB.wait_node(lambda n: units_ready(n) and pred(units_ready(n)), timeout, what))

    def wait_healthy(self):
        return self.wait_condition(lambda c: c["reason"] == "AllUnitsHealthy", 20, "AllUnitsHealthy")

    def test_1_healthy_node_then_idle(self):
        SB.emu.set_condition(sandbox.NODE, "InPlaceUpdate", "True", "CandidateForUpdate",
                             sandbox.MCM_MESSAGES["CandidateForUpdate"])
        c = self.wait_healthy()
        self.assertEqual((c["status"], c["message"]),
                         ("True", "All systemd units from the operating system config are running as expected."))
        # The Lease's first create and the condition's first patch race; gardenlet looks again too.
        try:
            sandbox.kubeemu.wait_for(lambda: gardenlet_node_agent_healthy()[0], 10, "gardenlet's health check")
        except TimeoutError:
            self.fail(gardenlet_node_agent_healthy()[1])
        lease = SB.emu.get("leases", LEASE, namespace="kube-system", group="coordination.k8s.io")
        self.assertEqual(lease["spec"]["holderIdentity"], LEASE)
        self.assertEqual(lease["metadata"]["ownerReferences"][0]["uid"], SB.node()["metadata"]["uid"])
        self.assertTrue(lease["metadata"]["ownerReferences"][0]["controller"])
        # Patched by type: MCM's condition is still there.
        self.assertIsNotNone(sandbox.condition(SB.node(), "InPlaceUpdate"))
        # Several rounds (1 s each) with nothing changing: no write at all.
        seq = SB.emu.request_log()[-1]["seq"]
        first = time.monotonic()
        SB.wait_node(lambda n: time.monotonic() - first > 4, 10, "four check periods")
        self.assertEqual(node_status_writes(seq), [], "Node status writes while nothing changed")

    def test_2_failed_unit(self):
        self.wait_healthy()
        t0 = time.monotonic()
        SB.systemctl("kill", "--signal=KILL", sandbox.CONTAINERD_UNIT, check=True)
        c = self.wait_condition(lambda c: c["status"] == "False", 20, "SystemdUnitsReady False")
        self.assertEqual((c["reason"], c["message"]), ("UnhealthyUnits", "containerd.service: failed"))
        ok, why = gardenlet_node_agent_healthy()
        self.assertFalse(ok)
        self.assertEqual(why, "containerd.service: failed")
        self.assertLess(time.monotonic() - t0, 120, "gardenlet sees it within two minutes")
        SB.systemctl("reset-failed", sandbox.CONTAINERD_UNIT)
        SB.systemctl("start", sandbox.CONTAINERD_UNIT, check=True)
        c = self.wait_healthy()
        self.assertEqual(c["status"], "True")

    def test_3_stuck_activating(self):
        self.wait_healthy()
        # A containerd that never says it is ready: activating until its (absent) start timeout.
        SB.um.write_unit(sandbox.CONTAINERD_UNIT, SB.um.service("/bin/sleep infinity", type="notify",
                                                                service_extra="TimeoutStartSec=infinity\n"))
        SB.um.daemon_reload()
        SB.systemctl("restart", "--no-block", sandbox.CONTAINERD_UNIT, check=True)
        c = self.wait_condition(lambda c: c["reason"] == "ProgressingUnits", 20, "ProgressingUnits")
        self.assertEqual(c["status"], "True")
        self.assertRegex(c["message"], r"^containerd\.service: activating for \ds$")
        c = self.wait_condition(lambda c: c["status"] == "False", 20, "stuck in activating")
        self.assertEqual(c["reason"], "UnhealthyUnits")
        self.assertRegex(c["message"], r"^containerd\.service: stuck in activating for \ds$")
        SB.um.write_unit(sandbox.CONTAINERD_UNIT, SB.containerd_unit_text())
        SB.um.daemon_reload()
        SB.systemctl("restart", sandbox.CONTAINERD_UNIT, check=True)
        self.wait_healthy()


    def publish_and_time(self, **kw):
        """Publish a changed OSC (same versions, other content) and return the seconds until the agent
        wrote its checksum to the Node."""
        t0 = time.monotonic()
        checksum = SB.publish_osc(**kw)
        SB.wait_node(lambda n: sandbox.annotation(n, sandbox.NODE_CHECKSUM) == checksum, 30, "checksum applied")
        took = time.monotonic() - t0
        # docs/node-protocol.md §1.3: the OSCApplied Event (action Reconcile) goes with the checksum.
        sandbox.kubeemu.wait_for(lambda: [e for e in SB.events() if e.get("reason") == "OSCApplied" and
                                          e.get("action") == "Reconcile" and
                                          e["message"] == "Operating system config has been applied successfully"],
                                 10, "the OSCApplied Event")
        return took

    def test_4_reconciliation_delay(self):
        DELAY = "node-agent.gardener.cloud/reconciliation-delay"
        SB.emu.label_node(sandbox.NODE, annotations={DELAY: "4s"}, manager="gardener-resource-manager")
        # The agent has seen it (not only the emulator): the Secret event must not overtake the Node's.
        sandbox.kubeemu.wait_for(lambda: "Reconciliation delay for OSC updates: 4s" in SB.agent_log(), 10,
                                 "the agent reading the delay")
        took = self.publish_and_time(min_version="1.0.1")
        self.assertGreaterEqual(took, 3.9, "an OSC update waits the delay")
        self.assertLess(took, 15)
        # Unparseable: the previous delay (4s) stays.
        SB.emu.label_node(sandbox.NODE, annotations={DELAY: "soon"}, manager="gardener-resource-manager")
        sandbox.kubeemu.wait_for(lambda: '="soon" is not a duration' in SB.agent_log(), 10,
                                 "the agent reading the unparseable delay")
        took = self.publish_and_time(min_version="1.0.2")
        self.assertGreaterEqual(took, 3.9, "an unparseable delay keeps the previous one")
        # Zero: at once.
        seen = SB.agent_log().count("Reconciliation delay for OSC updates:")
        SB.emu.label_node(sandbox.NODE, annotations={DELAY: "0s"}, manager="gardener-resource-manager")
        sandbox.kubeemu.wait_for(lambda: SB.agent_log().count("Reconciliation delay for OSC updates:") > seen, 10,
                                 "the agent reading the zero delay")
        took = self.publish_and_time(min_version="1.0.3")
        self.assertLess(took, 3)

    def wait_agent_sees_gate(self, reason):
        """The agent's own view (node-view.json), not only the emulator, has the InPlaceUpdate reason: else
        the Secret event published next can overtake the Node event (as under ASan on a loaded machine)."""
        def seen():
            try:
                with open(os.path.join(SB.state_dir, "node-view.json")) as f:
                    view = json.load(f)
            except (FileNotFoundError, ValueError):
                return False
            return [c.get("reason") for c in view.get("conditions", []) if c.get("type") == "InPlaceUpdate"] == [reason]
        sandbox.kubeemu.wait_for(seen, 10, "the agent seeing InPlaceUpdate %s" % reason)

    def test_5_delay_skipped_with_the_gate_open(self):
        DELAY = "node-agent.gardener.cloud/reconciliation-delay"
        SB.emu.label_node(sandbox.NODE, annotations={DELAY: "1h"}, manager="gardener-resource-manager")
        sandbox.kubeemu.wait_for(lambda: "Reconciliation delay for OSC updates: 1h" in SB.agent_log(), 10,
                                 "the agent reading the delay")
        SB.emu.set_condition(sandbox.NODE, "InPlaceUpdate", "True", "ReadyForUpdate",
                             sandbox.MCM_MESSAGES["ReadyForUpdate"])
        self.wait_agent_sees_gate("ReadyForUpdate")
        took = self.publish_and_time(min_version="1.0.4")
        self.assertLess(took, 5, "no delay while the gate is open")
        # A waiting update goes as soon as the gate opens.
        SB.emu.set_condition(sandbox.NODE, "InPlaceUpdate", "True", "CandidateForUpdate",
                             sandbox.MCM_MESSAGES["CandidateForUpdate"])
        self.wait_agent_sees_gate("CandidateForUpdate")
        checksum = SB.publish_osc(min_version="1.0.5")
        sandbox.kubeemu.wait_for(lambda: "waiting the reconciliation delay of 1h" in SB.agent_log(), 10,
                                 "the agent waiting")
        self.assertNotEqual(sandbox.annotation(SB.node(), sandbox.NODE_CHECKSUM), checksum)
        SB.emu.set_condition(sandbox.NODE, "InPlaceUpdate", "True", "ReadyForUpdate",
                             sandbox.MCM_MESSAGES["ReadyForUpdate"])
        SB.wait_node(lambda n: sandbox.annotation(n, sandbox.NODE_CHECKSUM) == checksum, 10, "applied at the gate")
        SB.emu.set_condition(sandbox.NODE, "InPlaceUpdate", remove=True)

    def test_6_control_plane_role(self):
        # test_5 left a delay of 1h: the agent itself must have read the 0s before the OSC comes (the
        # emulator's Node alone is no proof; a waiting OSC keeps the delay it was given, as upstream).
        seen = SB.agent_log().count("Reconciliation delay for OSC updates: 0s")
        SB.emu.label_node(sandbox.NODE, annotations={DELAY: "0s"}, manager="gardener-resource-manager")
        sandbox.kubeemu.wait_for(lambda: SB.agent_log().count("Reconciliation delay for OSC updates: 0s") > seen, 10,
                                 "the agent reading the zero delay")
        self.assertNotIn(ROLE_CP, SB.node()["metadata"]["labels"])
        # As upstream's It "should add the 'control-plane' role label": the manifest's path decides, and
        # it has no content at all (issue 30): skipped with a notice, the rest of the OSC applied.
        checksum = SB.publish_osc(min_version="1.0.6", extra_files=(
            "  - path: /etc/kubernetes/manifests/kube-apiserver.yaml\n    permissions: 384\n    content: {}\n"))
        n = SB.wait_node(lambda n: ROLE_CP in n["metadata"].get("labels", {}), 15, "the control-plane label")
        self.assertEqual(n["metadata"]["labels"][ROLE_CP], "")
        SB.wait_node(lambda n: sandbox.annotation(n, sandbox.NODE_CHECKSUM) == checksum, 30, "the OSC applied")
        self.assertFalse(os.path.exists(SB.path("etc", "kubernetes", "manifests", "kube-apiserver.yaml")))
        self.assertEqual(SB.agent_log().count("skipping file /etc/kubernetes/manifests/kube-apiserver.yaml: its content "
                                              "has neither inline, secretRef nor imageRef"), 1)

    def test_7_units_of_the_last_applied_osc(self):
        FAILING = "ipa-failing.service"
        SB.um.write_unit(FAILING, SB.um.service("/bin/false", type="oneshot"))
        SB.um.daemon_reload()
        SB.systemctl("start", FAILING)          # fails, as it should
        self.wait_healthy()                     # not a unit of the OSC yet
        # gardener-node-agent.service is replaced by the agent (docs/contract.md §9.4): never "not loaded".
        SB.write_last_applied(units=[(sandbox.CONTAINERD_UNIT, True, None), (sandbox.KUBELET_UNIT, True, None),
                                  (FAILING, True, None), ("gardener-node-agent.service", True, None)])
        c = self.wait_condition(lambda c: c["status"] == "False", 20, "SystemdUnitsReady False")
        self.assertEqual((c["reason"], c["message"]), ("UnhealthyUnits", "ipa-failing.service: failed"))
        SB.write_last_applied(units=[(sandbox.CONTAINERD_UNIT, True, None), (sandbox.KUBELET_UNIT, True, None)])
        self.wait_healthy()

    def test_8_drift_repaired_at_start(self):
        conf = "/etc/ipa-drift.conf"
        last = os.path.join(SB.state_dir, "last-applied-osc.yaml")
        units = [(sandbox.CONTAINERD_UNIT, True, None), (sandbox.KUBELET_UNIT, True, None)]
        missing = ("ipa-drift-missing.service", True, "[Service]\nType=oneshot\nExecStart=/bin/true\n")
        sandbox.write_file(SB.path(conf.lstrip("/")), "v1\n", 0o600)
        SB.write_last_applied(files=[(conf, "v1\n")], units=units)
        SB.stop_agent()
        SB.start_agent()
        sandbox.write_file(SB.path(conf.lstrip("/")), "v2, edited by hand\n", 0o600)
        SB.write_last_applied(files=[(conf, "v1\n"), ("/etc/ipa-drift-gone.conf", "x")], units=units + [missing])
        SB.stop_agent()
        SB.start_agent()
        repaired = sandbox.kubeemu.wait_for(
            lambda: [e for e in SB.events() if e.get("reason") == "OSCDriftRepaired"], 20, "the drift Event")
        self.assertEqual(len(repaired), 1, repaired)
        msg = repaired[0]["message"]
        for what in ("FileMismatch %s" % conf, "FileMissing /etc/ipa-drift-gone.conf",
                     "UnitFileMissing ipa-drift-missing.service", "restart unit ipa-drift-missing.service"):
            self.assertIn(what, msg)
        self.assertEqual(sandbox.read_text(SB.path(conf.lstrip("/"))), "v1\n")
        self.assertEqual(sandbox.read_text(SB.path("etc", "ipa-drift-gone.conf")), "x")
        self.assertTrue(os.path.exists(os.path.join(SB.um.unit_dir, "ipa-drift-missing.service")))
        # Each finding in the journal with upstream's reason and message.
        log = SB.agent_log()
        for reason, message in (
                ("FileMismatch", "File %s mismatch: expected %s, actual %s" % (
                    conf, hashlib.sha256(b"v1\n").hexdigest(), hashlib.sha256(b"v2, edited by hand\n").hexdigest())),
                ("FileMissing", "File /etc/ipa-drift-gone.conf is missing"),
                ("UnitFileMissing", "Unit file ipa-drift-missing.service is missing")):
            self.assertIn("Drift from %s: %s: %s" % (last, reason, message), log)
        SB.write_last_applied(units=units)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
