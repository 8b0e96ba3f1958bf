#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 22: the agent against gardener-node-agent's behaviour on a real fresh node, one that has never
seen an OSC and whose Node does not exist yet (lib/sandbox.py FreshNodeSandbox: a scratch
osc.rootDirectory holding only gardener-node-init's files, kubelet.binaryPath at its default
/opt/bin/kubelet, no kubeconfig: the agent bootstraps its certificate from GNA's token; the OSC Secret
published by the test; the Node registered only by the kubelet the OSC starts). In order:
  1. before any OSC and any Node, the agent watches the OSC Secret its provisioned component config
     names (controllers.operatingSystemConfig.secretName), says that it waits for it, and writes nothing;
     a Node registered early (then deleted again, for the rest of the story) gets no SystemdUnitsReady:
     upstream's readManagedUnits skips without a last-applied OSC;
  2. the first OSC is applied end to end before the Node exists, as upstream does: files below the
     root, the OSC's units started by the user manager, the kubelet pulled from the registry to
     <root>/opt/bin/kubelet, bootstrapped from the kubeconfig-bootstrap the agent wrote from GNA's token
     (as GNA's bootstrapper does), running and healthy; the agent, SIGKILLed in the middle of the apply,
     resumes that one transaction; the kubelet registers the Node (kubelet.service's ExecStartPost=),
     and then the checksum is written, once; kubeconfig-bootstrap and GNA's bootstrap token are removed
     once the OSC is applied and the Node exists (upstream's reconcile end), GNA's unit and binary are
     neither written nor pulled;
  3. the Node's InternalIP, dropped from status.addresses, is restored from the last one seen
     (upstream's ensureNodeInternalIP), Hostname kept;
  4. a CA rotation in place renews the agent's client certificate (its kubeconfig names the new one)
     and re-bootstraps the kubelet, whose kubeconfig-bootstrap is removed again at the end;
  5. the Lease gardener-node-agent-<node> is not renewed while the Node is gone, and is again once the
     Node is back (upstream's lease controller reconciles its Node);
  6. when the Node's label and the provisioned component config name different OSC Secrets, the label
     wins, and the journal says so once.
And on a fresh node of its own (KubeletCannotRegister), whose kubelet does not register the Node: the
first OSC is applied, and the agent says in STATUS= and the journal that the Node does not come."""

import base64
import json
import os
import re
import signal
import subprocess
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
COND = "SystemdUnitsReady"
LEASE = "gardener-node-agent-" + S.NODE
TUNING = "units-check=1s,health-check=1s,csr-poll=200ms,identity-retry-base=500ms,identity-retry-cap=2s"


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), S.FreshNodeSandbox, agent_env={"INPLACE_AGENT_KUBE_TUNING": TUNING})


def read(path):
    return S.read_text(path)


def kubelet_file(name):
    return SB.rooted(S.KUBELET_DIR + "/" + name)


def history_has(pred, since_rv=0):
    return any(pred(e["object"]) for e in SB.node_history(since_rv) if e.get("object"))


def read_state():
    try:
        with open(os.path.join(SB.state_dir, "state.json")) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None         # not written yet, or caught between write and rename: ask again


def status():
    return SB.um.show(S.AGENT_UNIT, "StatusText")


def kill_agent_when(pred, what):
    """SIGKILL the agent the moment its state.json satisfies pred (polled); systemd restarts it."""
    st = usermgr.wait_until(lambda: (lambda st: st if st and pred(st) else None)(read_state()), 60, what,
                            interval=0.005)
    pid = SB.um.main_pid(S.AGENT_UNIT)
    os.kill(pid, signal.SIGKILL)
    usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 20, "the agent restarted")
    SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))
    return st


def cert_serial_of(pem):
    r = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pem.encode(), stdout=subprocess.PIPE,
                       check=True)
    return r.stdout.decode().strip()


def new_ca_pem():
    """A CA certificate of our own: the rotation's new CA in the bundle."""
    r = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", "/dev/null", "-subj", "/CN=rotated-ca", "-days", "1"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True)
    return r.stdout.decode()


class FreshNode(unittest.TestCase):
    def wait_checksum(self, checksum, timeout=90):
        return SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, timeout,
                            "checksum/cloud-config-data %s" % checksum)

    def test_1_nothing_before_an_osc(self):
        usermgr.wait_until(lambda: "Waiting for the OSC secret; the Node is not registered yet" in status(), 30,
                           "the agent seeing no Node and no OSC")
        self.assertIn("gardener-node-agent's component config %s names OSC Secret %s." %
                      (SB.rooted(S.GNA_CONFIG), S.SECRET), SB.agent_log())
        self.assertIn("Watching OSC Secret kube-system/%s." % S.SECRET, SB.agent_log())
        time.sleep(3.5)         # three units-check periods
        self.assertIsNone(SB.node(), "a Node before the kubelet")
        self.assertEqual(SB.node_history(), [], "the Node written before the kubelet registered it")
        self.assertEqual(SB.events(), [])

        # Without a Node no condition could be written: with one (the agent labels it a worker, checks
        # the kubelet's health), still no SystemdUnitsReady.
        SB.register_node()
        usermgr.wait_until(lambda: "Node %s found" % S.NODE in SB.agent_log(), 10, "the agent seeing the Node")
        t0 = time.monotonic()
        n = SB.wait_node(lambda n: S.condition(n, COND) or time.monotonic() - t0 > 3.5, 10,
                         "three units-check periods with the Node")
        self.assertIsNone(S.condition(n, COND), "%s without a last-applied OSC" % COND)
        SB.emu.delete("nodes", S.NODE)
        usermgr.wait_until(lambda: "Node %s was deleted." % S.NODE in SB.agent_log(), 10, "the agent seeing it")
        usermgr.wait_until(lambda: "Waiting for the OSC secret; the Node is not registered yet" in status(), 10,
                           "the agent waiting for the Node again")

    def test_2_first_apply(self):
        rv = SB.emu.current_rv()
        checksum = SB.publish_osc()
        # Killed while the OSC's files and units are being applied (the kubelet staged and switched): the
        # restarted agent resumes that transaction, from its saved remaining work.
        st = kill_agent_when(lambda st: st.get("checksum") == checksum and st.get("phase") == "Applying" and
                             "switch-kubelet" in (st.get("done") or ()), "the first OSC's apply under way")
        n = self.wait_checksum(checksum)
        log = SB.agent_log()
        self.assertEqual(set(re.findall(r"Update ([0-9a-f]+): ", log)), {st["transaction"]}, "another transaction")
        self.assertIn("Resuming from %s/state.json: transaction %s in phase Applying." % (SB.state_dir,
                                                                                          st["transaction"]), log)
        self.assertIn("The Node %s does not exist yet: what is reported to it waits until the kubelet registers it."
                      % S.NODE, log)
        # The Node came from the kubelet (kubelet.service's ExecStartPost=), not before its unit started;
        # the agent wrote the checksum once, after it.
        self.assertIn("kubelet-report: registered node %s" % S.NODE, SB.unit_log(S.KUBELET_UNIT))
        hist = [e["object"] for e in SB.node_history(rv) if e.get("object")]
        self.assertEqual(hist[0]["metadata"]["managedFields"][0]["manager"], "kubelet")
        self.assertIsNone(S.annotation(hist[0], S.NODE_CHECKSUM))
        writes = [o for i, o in enumerate(hist) if S.annotation(o, S.NODE_CHECKSUM) and
                  not S.annotation(hist[i - 1], S.NODE_CHECKSUM)]
        self.assertEqual(len(writes), 1, "checksum/cloud-config-data written %d times" % len(writes))
        applied = sandbox.kubeemu.wait_for(lambda: [e for e in SB.events() if e.get("reason") == "OSCApplied"], 10,
                                           "the OSCApplied Event")
        self.assertEqual([e.get("count", 1) for e in applied], [1], "OSCApplied more than once")
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
        # Every unit of gardenlet's OSC (lib/gardener_osc.py) runs, but the replaced one.
        for name in SB.gardener_osc_started_units():
            self.assertEqual(SB.um.active_state(name), "active", name)
        self.assertEqual(SB.unit_log(S.KUBELET_UNIT).count("Bootstrapped the client certificate"), 1)
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

    def test_4_ca_rotation(self):
        """The new CA joins the bundle in cluster-ca.crt (GNA's apiServer.caFile); the rotation is gated like
        upstream's; the agent renews against that bundle, and its kubeconfig names it from then on."""
        def kubeconfig_cert_serial():
            kc = json.loads(read(SB.agent_kubeconfig))          # the agent writes JSON, which is YAML
            user = kc["users"][0]["user"]
            if "client-certificate-data" in user:
                pem = base64.b64decode(user["client-certificate-data"]).decode()
            else:
                pem = read(user["client-certificate"])
            return cert_serial_of(pem)

        def kubeconfig_cluster():
            return json.loads(read(SB.agent_kubeconfig))["clusters"][0]["cluster"]

        before = kubeconfig_cert_serial()
        bootstraps = SB.unit_log(S.KUBELET_UNIT).count("Bootstrapped the client certificate")
        # The kubeconfig trusts the CA it was provisioned with as data (as one from a bootstrapKubeconfig
        # with certificate-authority-data does): the renewal has to trust the new bundle, and name it.
        kc = json.loads(read(SB.agent_kubeconfig))
        cluster = kc["clusters"][0]["cluster"]
        cluster["certificate-authority-data"] = base64.b64encode(read(cluster.pop("certificate-authority"))
                                                                 .encode()).decode()
        S.write_file(SB.agent_kubeconfig, json.dumps(kc), 0o600)
        SB.extra_ca = new_ca_pem()
        SB.rotation["ca"] = "2026-11-26T10:00:00Z"
        checksum = SB.publish_osc()
        SB.mcm_candidate()
        SB.mcm_select()
        SB.wait_node(lambda n: "credentialsRotation" in (S.annotation(n, S.PLAN) or ""), 30, "the plan")
        self.assertEqual(kubeconfig_cert_serial(), before, "rotated before the gate opened")
        SB.mcm_ready_for_update()
        n = self.wait_checksum(checksum)
        self.assertEqual(S.label(n, S.UPDATE_RESULT), "successful")
        self.assertEqual(read(SB.rooted(S.GNA_DIR + "/cluster-ca.crt")), SB.cluster_ca())
        # The agent's own kubeconfig names the certificate issued for the rotation, not the old one.
        self.assertNotEqual(kubeconfig_cert_serial(), before, "the agent's kubeconfig kept its old certificate")
        self.assertEqual(kubeconfig_cluster(), {"server": SB.emu.server,
                                                "certificate-authority": SB.rooted(S.GNA_DIR + "/cluster-ca.crt")},
                         "the agent's kubeconfig does not name the new bundle")
        # The kubelet bootstrapped again from the kubeconfig-bootstrap the rotation wrote, removed since.
        self.assertGreater(SB.unit_log(S.KUBELET_UNIT).count("Bootstrapped the client certificate"), bootstraps)
        self.assertFalse(os.path.exists(kubelet_file("kubeconfig-bootstrap")), "kubeconfig-bootstrap left behind")
        SB.mcm_observe_result()

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

    def test_6_label_wins_over_the_provisioned_config(self):
        """The Node's label and GNA's provisioned component config name different Secrets: the label is
        followed (gardenlet keeps it current), and the journal says so once."""
        write = SB.rooted(S.GNA_CONFIG)
        S.write_file(write, read(write).replace("secretName: %s\n" % S.SECRET, "secretName: another-secret\n"), 0o600)
        self.assertIn("another-secret", read(write))
        SB.um.systemctl("restart", S.AGENT_UNIT)
        usermgr.wait_until(lambda: SB.agent_log().count("Watching OSC Secret kube-system/%s." % S.SECRET) >= 2, 30,
                           "the agent watching the label's Secret again")
        log = SB.agent_log()
        self.assertEqual(log.count("Node label %s names OSC Secret %s, gardener-node-agent's component config "
                                   "another-secret; following the label." % (S.SECRET_NAME_LABEL, S.SECRET)), 1)
        self.assertNotIn("Watching OSC Secret kube-system/another-secret", log)
        usermgr.wait_until(lambda: "Up to date" in status(), 30, "the agent up to date")


class KubeletCannotRegister(unittest.TestCase):
    """A fresh node whose kubelet cannot register its Node (its registration is missing): the first OSC is
    applied, and the agent says that the Node does not come (STATUS=, journal) instead of waiting in
    silence; once the kubelet registers it after all, the checksum follows."""

    class Sandbox(S.FreshNodeSandbox):
        @property
        def kubelet_registration(self):
            return self.path("bin", "no-registration.json")      # absent: kubelet-report registers nothing

    @classmethod
    def setUpClass(cls):
        cls.sb = itest.start_sandbox(cls.Sandbox, agent_env={"INPLACE_AGENT_KUBE_TUNING": TUNING +
                                                             ",node-registration=3s"})

    @classmethod
    def tearDownClass(cls):
        itest.stop_sandbox(cls.sb)

    def test_the_agent_says_so(self):
        sb = self.sb
        checksum = sb.publish_osc()
        said = "The first OSC %s is applied, but the Node is still not registered 3s later: the kubelet does not " \
               "register it (see %s: its bootstrap kubeconfig, the API server)." % (checksum, S.KUBELET_UNIT)
        usermgr.wait_until(lambda: "The first OSC %s is applied; waiting for the kubelet to register the Node"
                           % checksum in sb.um.show(S.AGENT_UNIT, "StatusText"), 60, "the agent waiting for the Node")
        usermgr.wait_until(lambda: said in sb.um.show(S.AGENT_UNIT, "StatusText"), 30, "the agent saying so")
        self.assertEqual(sb.agent_log().count(said), 1)
        self.assertEqual(sb.um.active_state(S.KUBELET_UNIT), "active")
        self.assertIsNone(sb.node())
        sb.register_node()              # the kubelet after all
        sb.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 30, "the checksum")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(), failfast=True)
