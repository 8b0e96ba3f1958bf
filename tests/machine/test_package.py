#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, scenario 7: the package's lifecycle on a booted, working node.

  1. upgrade to a newer build while idle (`apt-get install ./inplace-agent_<newer>.deb` inside the
     machine): postinst restarts the agent once (one stop, one start in the journal), its state is
     kept (no new CSR, the same last-applied OSC and checksum);
  2. upgrade while a gated update waits for the drain: the agent restarts once, resumes the same
     transaction in WaitingForDrain, and completes it after ReadyForUpdate;
  3. purge: what the package owns goes (its files, the conffile, the unit's enablement, the
     catalog's entries; the agent is stopped), nothing else does: the running kubelet and its store
     in /var/lib/inplace-agent, the OSC's files and units, the administrator's drop-ins.

The newer build is the same .deb repacked with a higher version (dpkg-deb), as a rebuild would be.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import itest  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import FAILED_REASON, NODE_CHECKSUM, PROGRESS, UPDATE_RESULT, annotation, annotation_json, label  # noqa: E402

H = None
NODE = "node-package"
IDS = harness.message_ids()
STORY = {}

setUpModule, tearDownModule = harness.module_fixture(globals(), NODE)


def repack(deb, suffix, directory):
    """The .deb with Version <version><suffix>: a newer build of the same tree for dpkg and apt."""
    tree = os.path.join(directory, "tree" + suffix)
    subprocess.run(["dpkg-deb", "-R", deb, tree], check=True)
    control = os.path.join(tree, "DEBIAN", "control")
    with open(control) as f:
        text = f.read()
    version = [ln.split(": ", 1)[1] for ln in text.splitlines() if ln.startswith("Version: ")][0]
    with open(control, "w") as f:
        f.write(text.replace("Version: " + version, "Version: " + version + suffix))
    out = os.path.join(directory, "inplace-agent_%s%s_amd64.deb" % (version, suffix))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", tree, out], check=True, capture_output=True)
    return out, version + suffix


def lifecycle_ids(m, cursor):
    return [e.get("MESSAGE_ID") for e in m.entries_after(cursor, harness.AGENT_UNIT)
            if e.get("MESSAGE_ID") in (IDS["AGENT_STARTED"], IDS["AGENT_STOPPED"])]


def upgrade(m, deb):
    """Copies deb into the machine and installs it with apt; returns the journal cursor from before."""
    with open(deb, "rb") as f:
        m.write("/var/tmp/" + os.path.basename(deb), f.read())
    cursor = m.cursor()
    m.run("apt-get", "install", "-y", "--no-install-recommends", "/var/tmp/" + os.path.basename(deb),
          env={"DEBIAN_FRONTEND": "noninteractive"}, timeout=180)
    m.wait_active(harness.AGENT_UNIT, 30)
    return cursor


def state(m):
    return json.loads(m.read(harness.STATE + "/state.json") or "{}")


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ipa-machine-debs-")
        cls.debs = [repack(H.layers.deb, s, cls.tmp) for s in ("+machine1", "+machine2")]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_1_upgrade_while_idle(self):
        t, w = H.t, H.w
        t.step("scenario 7: the package's lifecycle: upgrade while idle")
        m = H.node_up(w.osc("1.31.4"))
        checksum = annotation(H.node(), NODE_CHECKSUM)
        csrs = len(w.emu.list("certificatesigningrequests", group="certificates.k8s.io"))
        before = (m.read(harness.STATE + "/last-applied-osc.yaml"), m.read(harness.STATE + "/kubeconfig"),
                  m.invocation(harness.KUBELET_UNIT))
        deb, version = self.debs[0]
        cursor = upgrade(m, deb)
        self.assertEqual(m.run("dpkg-query", "-W", "-f", "${Version}", "inplace-agent").stdout, version)
        self.assertEqual(lifecycle_ids(m, cursor), [IDS["AGENT_STOPPED"], IDS["AGENT_STARTED"]],
                         "not one restart of the agent")
        self.assertEqual((m.read(harness.STATE + "/last-applied-osc.yaml"), m.read(harness.STATE + "/kubeconfig"),
                          m.invocation(harness.KUBELET_UNIT)), before)
        self.assertEqual(len(w.emu.list("certificatesigningrequests", group="certificates.k8s.io")), csrs)
        self.assertEqual(annotation(H.node(), NODE_CHECKSUM), checksum)
        t.ok("upgraded to %s: the agent restarted once, state and certificate kept, the kubelet untouched" % version)
        t.block("journalctl -u inplace-agent (the upgrade)", m.messages_after(cursor, harness.AGENT_UNIT))

    def test_2_upgrade_while_a_gated_update_waits(self):
        t, w, g, m = H.t, H.w, H.g, H.m
        t.step("scenario 7: upgrade while a gated update waits for the drain")
        checksum = w.publish(w.osc("1.32.1"))
        g.mcm_candidate()
        H.wait_phase("Staged")
        g.mcm_select()
        n = H.wait_phase("WaitingForDrain")
        tx = annotation_json(n, PROGRESS)["transaction"]
        deb, version = self.debs[1]
        cursor = upgrade(m, deb)
        self.assertEqual(lifecycle_ids(m, cursor), [IDS["AGENT_STOPPED"], IDS["AGENT_STARTED"]])
        self.assertEqual(state(m).get("transaction"), tx)
        t.ok("upgraded to %s while update %s waits: restarted once, the transaction kept" % (version, tx))
        g.mcm_ready_for_update()
        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 120, "update-result")
        self.assertEqual(label(n, UPDATE_RESULT), "successful", annotation(n, FAILED_REASON))
        self.assertEqual(annotation_json(n, PROGRESS)["transaction"], tx)
        H.wait_checksum(checksum, 30)
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.32.1")
        t.ok("update %s completed after the upgrade: update-result=successful" % tx)
        g.mcm_observe_result()
        g.mcm_finish()

    def test_3_purge(self):
        t, m = H.t, H.m
        t.step("scenario 7: purge")
        owned = [p for p in m.run("dpkg", "-L", "inplace-agent").stdout.splitlines()
                 if p and m.run("test", "-f", p, check=False).returncode == 0]
        conffiles = m.run("dpkg-query", "-W", "-f", "${Conffiles}", "inplace-agent").stdout.split()[0::2]
        kubelet = (m.invocation(harness.KUBELET_UNIT), m.run("readlink", world.KUBELET_PATH).stdout.strip())
        kept = [world.TEST_CONFIG, world.TEST_DROPIN, world.KUBELET_CONFIG, "/etc/containerd/config.toml",
                "/etc/systemd/system/kubelet.service", harness.STATE + "/state.json", kubelet[1]]
        out = m.run("apt-get", "purge", "-y", "inplace-agent", env={"DEBIAN_FRONTEND": "noninteractive"},
                    timeout=180)
        t.block("apt-get purge -y inplace-agent", out.stdout[-1500:] + out.stderr[-500:])
        left = [p for p in owned + conffiles if m.run("test", "-e", p, check=False).returncode == 0]
        self.assertEqual(left, [], "purge left package files behind")
        self.assertNotEqual(m.run("dpkg-query", "-W", "-f", "${Status}", "inplace-agent", check=False).stdout,
                            "install ok installed")
        self.assertFalse(m.run("test", "-e", "/etc/systemd/system/multi-user.target.wants/inplace-agent.service",
                               check=False).returncode == 0, "the unit is still enabled")
        self.assertEqual(m.active_state(harness.AGENT_UNIT), "inactive")
        catalog = m.run("journalctl", "--list-catalog", IDS["AGENT_STARTED"], check=False).stdout
        self.assertNotIn("inplace-agent", catalog, "the catalog's entries outlived the package")
        gone = [p for p in kept if m.run("test", "-e", p, check=False).returncode != 0]
        self.assertEqual(gone, [], "purge removed what is not the package's")
        self.assertEqual((m.invocation(harness.KUBELET_UNIT), m.run("readlink", world.KUBELET_PATH).stdout.strip()),
                         kubelet)
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.32.1")
        world.wait_for(lambda: H.kubelet_healthz() == 200, 30, "the kubelet's /healthz")
        t.ok("purged: %d package files and the conffile gone, the unit disabled and stopped; kept: %s"
             % (len(owned), ", ".join(kept)))


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
