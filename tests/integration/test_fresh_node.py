#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 22: the agent against gardener-node-agent's behaviour on a node that has never seen an OSC
(lib/sandbox.py FreshNodeSandbox: a scratch osc.rootDirectory holding only gardener-node-init's files,
kubelet.binaryPath at its default /opt/bin/kubelet, no kubeconfig: the agent bootstraps its certificate
from GNA's token; the Node registered after that, the OSC Secret published by the test). In order:
  1. before any OSC was applied, SystemdUnitsReady is not written (upstream's readManagedUnits skips
     without a last-applied OSC);
  2. the first OSC is applied end to end: files below the root, the OSC's units started by the user
     manager, the kubelet pulled from the registry to <root>/opt/bin/kubelet, bootstrapped from the
     kubeconfig-bootstrap the agent wrote from GNA's token (as GNA's bootstrapper does), running and
     healthy, then the checksum; kubeconfig-bootstrap and GNA's bootstrap token are removed once the
     OSC is applied (upstream's reconcile end), GNA's unit and binary are neither written nor pulled;
  3. the Node's InternalIP, dropped from status.addresses, is restored from the last one seen
     (upstream's ensureNodeInternalIP), Hostname kept;
  4. a CA rotation in place renews the agent's client certificate (its kubeconfig names the new one)
     and re-bootstraps the kubelet, whose kubeconfig-bootstrap is removed again at the end;
  5. the Lease gardener-node-agent-<node> is not renewed while the Node is gone, and is again once the
     Node is back (upstream's lease controller reconciles its Node)."""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import sandbox  # noqa: E402
import usermgr  # noqa: E402

S = sandbox
SB = None
COND = "SystemdUnitsReady"
LEASE = "gardener-node-agent-" + S.NODE
TUNING = "units-check=1s,health-check=1s,csr-poll=200ms,identity-retry-base=500ms,identity-retry-cap=2s"


def setUpModule():
    global SB
    SB = S.start_for_module(S.FreshNodeSandbox, agent_env={"INPLACE_AGENT_KUBE_TUNING": TUNING})


def tearDownModule():
    S.stop_for_module(SB)


def read(path):
    return S.read_text(path)


def kubelet_file(name):
    return SB.rooted(S.KUBELET_DIR + "/" + name)


def history_has(pred, since_rv=0):
    return any(pred(e["object"]) for e in SB.node_history(since_rv) if e.get("object"))


def cert_serial(path):
    r = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=read(path).encode(),
                       stdout=subprocess.PIPE, check=True)
    return r.stdout.decode().strip()


class FreshNode(unittest.TestCase):
    def wait_checksum(self, checksum, timeout=90):
        try:
            return SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, timeout,
                                "checksum/cloud-config-data %s" % checksum)
        except Exception:
            print("agent log (tail):\n" + SB.agent_log()[-6000:], file=sys.stderr)
            print("kubelet log (tail):\n" + SB.unit_log(S.KUBELET_UNIT)[-2000:], file=sys.stderr)
            raise

    def test_1_no_units_check_before_an_osc(self):
        rv = SB.emu.current_rv()
        usermgr.wait_until(lambda: "Waiting for the OSC secret" in SB.um.show(S.AGENT_UNIT, "StatusText"), 30,
                           "the agent seeing its Node and no OSC")
        t0 = time.monotonic()
        SB.wait_node(lambda n: time.monotonic() - t0 > 3.5, 10, "three units-check periods")
        self.assertFalse(history_has(lambda n: S.condition(n, COND), rv),
                         "SystemdUnitsReady written without a last-applied OSC")

    def test_2_first_apply(self):
        checksum = SB.publish_osc()
        n = self.wait_checksum(checksum)
        self.assertEqual(S.label(n, S.K8S_VERSION), SB.initial_version)
        # Files below the scratch root; GNA's component config written, its binary not pulled.
        self.assertIn("memory.available: 100Mi", read(SB.rooted(S.KUBELET_CONFIG_PATH)))
        self.assertEqual(read(SB.rooted(S.GNA_CONFIG)), SB.component_config())
        self.assertFalse(os.path.lexists(SB.rooted("/opt/bin/gardener-node-agent")))
        self.assertFalse(os.path.exists(os.path.join(SB.um.unit_dir, S.GNA_UNIT)))
        # The kubelet from the registry, at the OSC's path below the root, started by the user manager.
        self.assertTrue(os.path.islink(SB.binary_path))
        self.assertEqual(SB.kubelet_version(), "Kubernetes v%s" % SB.initial_version)
        self.assertEqual(SB.um.active_state(S.KUBELET_UNIT), "active")
        self.assertEqual(SB.kubelet_healthz(), 200)
        self.assertEqual(SB.um.active_state("ipa-hello.service"), "active")
        self.assertIn("Bootstrapped the client certificate", SB.unit_log(S.KUBELET_UNIT))
        self.assertIsNotNone(read(kubelet_file("kubeconfig-real")))
        # The bootstrap credentials have done their job (upstream removes both at the reconcile's end).
        self.assertFalse(os.path.exists(kubelet_file("kubeconfig-bootstrap")), "kubeconfig-bootstrap left behind")
        self.assertFalse(os.path.exists(SB.rooted(S.GNA_BOOTSTRAP_TOKEN)))
        # The units check follows the OSC now.
        c = SB.wait_node(lambda n: S.condition(n, COND), 20, COND)
        self.assertEqual(S.condition(c, COND)["reason"], "AllUnitsHealthy", S.condition(c, COND))

    def test_3_internal_ip_restored(self):
        def addresses(n):
            return {(a["type"], a["address"]) for a in n["status"].get("addresses") or []}

        self.assertIn(("InternalIP", "127.0.0.1"), addresses(SB.node()))
        # kubelet lost its addresses at a start (cloud provider timeout): only the Hostname is left.
        SB.emu.patch("nodes", S.NODE, {"status": {"addresses": [{"type": "Hostname", "address": S.NODE}]}},
                     subresource="status", manager="kubelet")
        n = SB.wait_node(lambda n: ("InternalIP", "127.0.0.1") in addresses(n), 20, "the InternalIP restored")
        self.assertEqual(addresses(n), {("InternalIP", "127.0.0.1"), ("Hostname", S.NODE)})
        want = {("Warning", "Node status does neither have an internal nor an external IP, try to recover from "
                            "last known internal IP: 127.0.0.1"),
                ("Normal", "Updated the lost internal IP address of node status to the previous known: 127.0.0.1 ")}
        sandbox.kubeemu.wait_for(lambda: want <= {(e["type"], e["message"]) for e in SB.events()
                                                 if e.get("reason") == "kubelet"}, 10, "the kubelet Events")

    def test_5_lease_only_with_the_node(self):
        path = "^/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        lease = sandbox.kubeemu.wait_for(lambda: SB.emu.get("leases", LEASE, namespace="kube-system",
                                                            group="coordination.k8s.io"), 20, "the Lease")
        self.assertEqual(lease["metadata"]["ownerReferences"][0]["uid"], SB.node()["metadata"]["uid"])
        SB.emu.delete("nodes", S.NODE)
        usermgr.wait_until(lambda: "Node %s was deleted." % S.NODE in SB.agent_log(), 10, "the agent seeing it")
        time.sleep(0.5)         # a renewal already on the wire may still arrive
        seq = SB.emu.request_log()[-1]["seq"]
        t0 = time.monotonic()
        SB.wait_node(lambda n: time.monotonic() - t0 > 5, 10, "two renew periods and more (8 s Lease)")
        writes = [r for r in SB.emu.request_log(since=seq, path=path) if r["method"] in ("PUT", "POST")]
        self.assertEqual(writes, [], "the Lease renewed for a Node that does not exist")

        SB.register_node()
        uid = SB.node()["metadata"]["uid"]
        sandbox.kubeemu.wait_for(lambda: (SB.emu.get("leases", LEASE, namespace="kube-system",
                                                     group="coordination.k8s.io")["metadata"]["ownerReferences"]
                                          [0]["uid"]) == uid, 10, "the Lease renewed for the new Node")


if __name__ == "__main__":
    S.skip_if_missing()
    unittest.main(verbosity=2, failfast=True)
