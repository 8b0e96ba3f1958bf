#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, one booted Debian 12 node (tests/machine/lib/machine.py) telling one story in
order, each step starting where the last one left the node:

  1. fresh node: the image holds what gardener-node-init leaves (bootstrap token, cluster-ca.crt,
     machine-name, component config) and the agent as installed by apt; the seed's Machine is
     declared, no Node exists. At boot the agent bootstraps its certificate by CSR and reads the OSC
     Secret its provisioned component config names; gardenlet publishes the OSC; the agent applies
     it whole without a Node, with osc.rootDirectory / (unit files and drop-ins in
     /etc/systemd/system, files in /etc, /var/lib, /opt, containerd's config, the kubelet from the
     registry); the kubelet runs under the real systemd and registers the Node (the stand-in's
     ExecStartPost=); then the Node gets checksum/cloud-config-data (once), the Lease and
     SystemdUnitsReady.
  2. gated in-place update: kubelet 1.31.4 -> 1.32.1 with a kubelet config value and a drop-in,
     nothing touched until MCM's labels and ReadyForUpdate, then update-result=successful and the
     kubelet really restarted, once, by the real systemd.
  4. the restart annotation on real system services (containerd, kubelet restarted, new
     invocations); system.slice refused with a Warning, the agent and the kubelet untouched.
  5. an operator's view: `systemctl status inplace-agent` with its Status: line, `journalctl -u
     inplace-agent -o verbose` with MESSAGE_ID and INPLACE_TRANSACTION on each phase, `journalctl
     -x` with the installed catalog's text, `inplace-agent status`; a configuration error, as an
     operator meets it (exit 2, the journal names file and key, -x explains it), and fixed.
"""

import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import itest  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import (FAILED_REASON, K8S_VERSION, NODE_CHECKSUM, PLAN, RESTART_ANNOTATION,  # noqa: E402
                      UNITS_CONDITION, UPDATE_RESULT, annotation, condition, label)

H = None
NODE = "node-story"
# The update's drop-in; the new kubelet is slow to sync (its /healthz fails for 3 s after each start),
# while the health check probes every second: the update's own restart must bring no "unhealthy"
# Warning.
DROPIN = "[Service]\nEnvironment=MACHINE_TEST_DROPIN=1 STAND_IN_HEALTHY_AFTER=3"
IDS = harness.message_ids()
STORY = {}                  # what one scenario leaves for the next: the update's transaction id


# The health check every second, its probes that an update owns in the journal (debug).
setUpModule, tearDownModule = harness.module_fixture(globals(), NODE, tuning={"health-check": "1s"}, log_level="debug")


def health_warnings(since=()):
    """The health check's Warnings about the kubelet (reason kubelet), but for those in `since`."""
    return [e for e in H.g.events() if e.get("reason") == "kubelet" and e.get("type") == "Warning"
            and e["metadata"]["name"] not in since]


class Node(unittest.TestCase):
    def test_0_bootstrap_without_node(self):
        """A new machine has no Node yet: the bootstrap token is good only until the Node exists
        (gardener-resource-manager's approver denies it afterwards)."""
        t, w = H.t, H.w
        t.step("scenario 1: a fresh node bootstraps, applies the whole OSC, runs the kubelet")
        H.new_machine()
        H.boot()
        kubeconfig = H.wait_certificate()
        csrs = [c for c in w.emu.list("certificatesigningrequests", group="certificates.k8s.io")
                if c["spec"]["username"] == "system:bootstrap:" + world.BOOTSTRAP_TOKEN_ID]
        self.assertTrue(kubeconfig and csrs, "no CSR was made with the bootstrap token")
        t.ok("certificate by CertificateSigningRequest %s (bootstrap token %s)" % (
            csrs[-1]["metadata"]["name"], world.BOOTSTRAP_TOKEN_ID))

    def test_0b_secret_found_without_node(self):
        """docs/node-protocol.md §2.1: the agent takes the OSC Secret's name from the component config
        gardener-node-init provisioned (controllers.operatingSystemConfig.secretName) and reads it before
        any Node exists (the node-agent authorizer allows it for the declared Machine's Secret)."""
        w = H.w
        world.wait_for(lambda: any(world.SECRET in "%s?%s" % (e.get("path"), e.get("query"))
                                   for e in w.emu.request_log(path=r"/secrets") if e.get("status") == 200),
                       30, "a read of the OSC Secret before the Node exists")
        self.assertIsNone(w.emu.get_node(NODE), "a Node exists before any kubelet ran")
        H.t.ok("the agent watches Secret %s (from %s) with no Node" % (world.SECRET, world.GNA_CONFIG))

    def test_1_fresh_node(self):
        t, w = H.t, H.w
        m = H.m
        rv = w.emu.current_rv()
        checksum = w.publish(w.osc("1.31.4"))
        t.say("gardenlet published OSC %s…: kubelet 1.31.4 from %s, containerd config, units, files; no Node yet"
              % (checksum[:12], w.reg.host))
        n = H.wait_checksum(checksum, 180)
        t.ok("checksum/cloud-config-data %s… on the Node after %.1fs" % (checksum[:12], t.mark("applied") -
                                                                          t.marks["booted"]))
        # The Node is the kubelet's: created by the OSC's kubelet.service (its registration, as
        # --register-node does), after the agent had applied the OSC without it.
        history = [e for e in H.g.node_history(since_rv=rv) if e.get("object")]
        self.assertEqual(history[0]["type"], "ADDED")
        self.assertIsNone(annotation(history[0]["object"], NODE_CHECKSUM), "the Node was created with a checksum")
        self.assertEqual({f["manager"] for f in history[0]["object"]["metadata"].get("managedFields", [])},
                         {"kubelet"})
        registered = m.journal("-u", harness.KUBELET_UNIT, "-o", "cat")
        self.assertIn("kubelet-report: registered node " + NODE, registered)
        checksums = [annotation(e["object"], NODE_CHECKSUM) for e in history]
        self.assertEqual(len([c for i, c in enumerate(checksums) if c and (i == 0 or checksums[i - 1] != c)]), 1,
                         "the checksum was written more than once: %s" % checksums)
        t.ok("the Node was registered by the kubelet the OSC started (kubelet.service ExecStartPost=), "
             "the checksum written once after")
        users = {e["user"] for e in w.emu.request_log(verb="patch") if "/nodes/" + NODE in e.get("path", "")}
        self.assertEqual(users, {"gardener.cloud:node-agent:machine:" + NODE})
        # GNA's bootstrap token goes after the first complete apply, as GNA does.
        self.assertIsNone(m.read(world.GNA_DIR + "/credentials/bootstrap-token"))

        # The OSC on disk.
        unit_dir = "/etc/systemd/system"
        self.assertIn("ExecStart=/opt/bin/kubelet", m.read(unit_dir + "/kubelet.service", ""))
        self.assertIn("LimitNOFILE=1048576", m.read(unit_dir + "/containerd.service.d/override.conf", ""))
        self.assertIsNone(m.read(unit_dir + "/gardener-node-agent.service"), "a replaced unit was written")
        self.assertIn("net.ipv4.conf.all.forwarding = 1", m.read("/etc/sysctl.d/99-k8s-general.conf", ""))
        self.assertIn("memory.available: 100Mi", m.read(world.KUBELET_CONFIG, ""))
        self.assertIn("BEGIN CERTIFICATE", m.read("/var/lib/ca-certificates-local/ROOTcerts.crt", ""))
        self.assertIn('sandbox_image = "registry.k8s.io/pause:3.10"', m.read("/etc/containerd/config.toml", ""))
        self.assertIn("mirror.gcr.io", m.read("/etc/containerd/certs.d/docker.io/hosts.toml", ""))
        target = m.run("readlink", world.KUBELET_PATH).stdout.strip()
        self.assertTrue(target.startswith(harness.STATE + "/kubelet/1.31.4/"), target)
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.31.4")
        # Directories the agent made on the way (the unit's UMask=0077 must not reach them).
        dirs = ("/opt/bin", "/etc/containerd", "/etc/containerd/certs.d", "/var/bin/containerruntimes",
                "/var/lib/kubelet/config", "/etc/systemd/system/containerd.service.d")
        self.assertEqual(m.run("stat", "-c", "%a", *dirs).stdout.split(), ["755"] * len(dirs))
        t.command(m, "ls", "-l", world.KUBELET_PATH, "/etc/systemd/system/kubelet.service",
                  "/etc/containerd/config.toml", "/etc/sysctl.d/99-k8s-general.conf")

        # Units under the real systemd: the kubelet enabled and running, containerd restarted with
        # the agent's config, which containerd itself accepts.
        self.assertEqual(m.unit_property(harness.KUBELET_UNIT, "UnitFileState"), "enabled")
        m.wait_active(harness.KUBELET_UNIT, 30)
        world.wait_for(lambda: H.kubelet_healthz() == 200, 30, "the kubelet's /healthz")
        m.wait_active("containerd.service", 30)
        self.assertIn("LimitNOFILE=1048576", m.run("systemctl", "cat", "containerd.service").stdout)
        dump = m.run("containerd", "config", "dump").stdout
        self.assertIn('config_path = "/etc/containerd/certs.d"', dump)
        self.assertIn("SystemdCgroup = true", dump)
        t.command(m, "systemctl", "status", "--no-pager", "--lines=3", "kubelet.service", "containerd.service")
        # Every unit of gardenlet's OSC (lib/gardener_osc.py) runs; systemd-sysctl.service is the
        # image's, whose condition (a writable /proc/sys) a container does not meet.
        for unit in w.started_units(w.osc("1.31.4")):
            if unit == "systemd-sysctl.service" and m.unit_property(unit, "ConditionResult") == "no":
                continue
            m.wait_active(unit, 30)
        self.assertNotEqual(m.unit_property("gardener-node-agent.service", "ActiveState"), "active")
        # Debian's containerd answers the health check's gRPC Version call (issue 30 item 6).
        answered = world.wait_for(lambda: [e for e in m.journal_json("-u", harness.AGENT_UNIT)
                                           if re.match(r"containerd \S+ \(revision \S*\) answers on unix://",
                                                       e.get("MESSAGE", ""))], 60, "containerd's Version answer")
        t.ok(answered[0]["MESSAGE"])

        # The node duties: the Lease, SystemdUnitsReady.
        lease = world.wait_for(lambda: w.emu.get("leases", "gardener-node-agent-" + NODE, namespace="kube-system",
                                                 group="coordination.k8s.io"), 60, "the agent's Lease")
        self.assertEqual(lease["spec"]["holderIdentity"], "gardener-node-agent-" + NODE)   # upstream: the Lease's name
        n = H.g.wait_node(lambda n: (condition(n, UNITS_CONDITION) or {}).get("status") == "True", 90,
                          "SystemdUnitsReady=True")
        t.ok("Lease %s held by %s; %s" % (lease["metadata"]["name"], lease["spec"]["holderIdentity"],
                                          condition(n, UNITS_CONDITION)))
        self.assertEqual(annotation(n, NODE_CHECKSUM), checksum)

    def test_2_gated_update(self):
        t, w, g, m = H.t, H.w, H.g, H.m
        t.step("scenario 2: a gated in-place update: kubelet 1.32.1, a kubelet config value and a drop-in")
        before, c0 = m.invocation(harness.KUBELET_UNIT), m.cursor()
        warned = {e["metadata"]["name"] for e in health_warnings()}
        checksum = w.publish(w.osc("1.32.1", eviction="150Mi", dropin=DROPIN))
        t.say("gardenlet published OSC %s…: kubelet 1.32.1, evictionHard memory.available 150Mi, drop-in "
              "kubelet.service.d/50-machine-test.conf" % checksum[:12])
        seen = world.wait_for(lambda: [ln for ln in H.agent_journal("-o", "cat").splitlines()
                                       if checksum in ln and "wait for ReadyForUpdate" in ln], 60,
                              "the agent to see the OSC and hold it")
        t.ok("the agent holds it: %s" % seen[-1])
        self.assertIn("memory.available: 100Mi", m.read(world.KUBELET_CONFIG))
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.31.4")
        self.assertEqual(m.invocation(harness.KUBELET_UNIT), before)
        g.mcm_candidate()
        n = H.wait_phase("Staged")
        t.ok("MCM: candidate-for-update -> the agent staged kubelet 1.32.1 (store: %s); plan: %s" % (
            ", ".join(m.run("ls", harness.STATE + "/kubelet").stdout.split()), annotation(n, PLAN)[:120]))
        self.assertIn("1.32.1", annotation(n, PLAN))
        g.mcm_select()
        H.wait_phase("WaitingForDrain")
        t.ok("MCM: selected-for-update -> WaitingForDrain")
        g.mcm_drain()
        g.mcm_ready_for_update(drain=False)
        t0 = t.mark("ready")
        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 120, "update-result")
        self.assertEqual(label(n, UPDATE_RESULT), "successful", annotation(n, FAILED_REASON))
        n = H.wait_checksum(checksum, 30)
        t.ok("MCM: ReadyForUpdate -> update-result=successful after %.1fs; %s=%s" % (
            t.mark("result") - t0, K8S_VERSION, label(n, K8S_VERSION)))
        self.assertEqual(label(n, K8S_VERSION), "1.32.1")
        STORY["tx"] = (harness.annotation_json(n, harness.PROGRESS) or {}).get("transaction")

        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.32.1")
        self.assertIn("memory.available: 150Mi", m.read(world.KUBELET_CONFIG))
        self.assertIn("MACHINE_TEST_DROPIN=1", m.unit_property(harness.KUBELET_UNIT, "Environment"))
        self.assertNotEqual(m.invocation(harness.KUBELET_UNIT), before)
        starts = m.messages_after(c0, harness.KUBELET_UNIT).count("Kubelet version")
        self.assertEqual(starts, 1, "the kubelet started %d times for one update" % starts)
        world.wait_for(lambda: H.kubelet_healthz() == 200, 30, "the kubelet's /healthz")
        # The health check probed through the update's restart and the new kubelet's first seconds
        # (a probe a second): the update owned the kubelet then, nothing was said.
        self.assertEqual(health_warnings(warned), [], "a health Warning for the update's own restart")
        self.assertGreaterEqual(len([e for e in m.entries_after(c0, harness.AGENT_UNIT)
                                     if "probe failed while an update step owns" in e.get("MESSAGE", "")]), 1,
                                "no probe fell into the update's restart")
        t.command(m, "systemctl", "status", "--no-pager", "--lines=4", harness.KUBELET_UNIT)
        g.mcm_observe_result()
        g.mcm_finish()

    def test_4_restart_annotation(self):
        t, g, m = H.t, H.g, H.m
        t.step("scenario 4: the restart annotation on real system services; system.slice refused")
        units = ("containerd.service", harness.KUBELET_UNIT)
        before = {u: m.invocation(u) for u in units + (harness.AGENT_UNIT,)}
        agent_pid = m.unit_property(harness.AGENT_UNIT, "MainPID")
        H.w.emu.label_node(NODE, annotations={RESTART_ANNOTATION: "containerd,kubelet"}, manager="operator")
        g.wait_node(lambda n: annotation(n, RESTART_ANNOTATION) is None, 60, "the annotation to be taken")
        world.wait_for(lambda: all(m.invocation(u) != before[u] for u in units), 60, "new invocations")
        m.wait_active(harness.KUBELET_UNIT, 30)
        m.wait_active("containerd.service", 30)
        t.ok("%s=containerd,kubelet: both restarted by systemd (new invocation IDs), the annotation removed"
             % RESTART_ANNOTATION)
        t.block("journalctl -u inplace-agent MESSAGE_ID=%s" % IDS["UNIT_RESTARTED"],
                m.journal("-u", harness.AGENT_UNIT, "MESSAGE_ID=" + IDS["UNIT_RESTARTED"], "-n", "4"))
        restarted = {u: m.invocation(u) for u in units}

        H.w.emu.label_node(NODE, annotations={RESTART_ANNOTATION: "system.slice"}, manager="operator")
        g.wait_node(lambda n: annotation(n, RESTART_ANNOTATION) is None, 60, "the annotation to be taken")
        ev = world.wait_for(lambda: [e for e in g.events() if "system.slice" in (e.get("message") or "")
                                     and e.get("type") == "Warning"], 30, "a Warning naming system.slice")
        t.ok("system.slice refused: %s %s: %s" % (ev[-1]["type"], ev[-1]["reason"], ev[-1]["message"]))
        self.assertEqual(m.invocation(harness.AGENT_UNIT), before[harness.AGENT_UNIT])
        self.assertEqual(m.unit_property(harness.AGENT_UNIT, "MainPID"), agent_pid)
        self.assertEqual({u: m.invocation(u) for u in units}, restarted)
        self.assertEqual(m.active_state("system.slice"), "active")

    def test_5_operator_view(self):
        t, m = H.t, H.m
        tx = STORY.get("tx")
        self.assertTrue(tx, "scenario 2 left no transaction to look at")
        t.step("scenario 5: an operator's view of update %s" % tx)
        status = t.command(m, "systemctl", "status", "--no-pager", "--lines=0", harness.AGENT_UNIT)
        self.assertRegex(status, r"Status: \"Node %s: " % NODE)
        entries = m.journal_json("-u", harness.AGENT_UNIT, "INPLACE_TRANSACTION=" + tx)
        phases = {e.get("MESSAGE_ID"): e.get("INPLACE_PHASE") for e in entries if e.get("MESSAGE_ID")}
        for key in ("UPDATE_PLANNED", "UPDATE_STAGED", "UPDATE_APPLIED", "UPDATE_SUCCEEDED"):
            self.assertIn(IDS[key], phases, "no %s line (MESSAGE_ID=%s) for %s" % (key, IDS[key], tx))
        # One location per entry, the caller's (sd-journal.h's sendv macro used to add log.c's too).
        done = [e for e in entries if e.get("MESSAGE_ID") == IDS["UPDATE_SUCCEEDED"]][-1]
        self.assertEqual((done.get("CODE_FILE"), done.get("CODE_FUNC")), ("agent/update/executor.c", "log_phase_line"))
        t.ok("each phase's line carries MESSAGE_ID and INPLACE_TRANSACTION=%s: %s" % (
            tx, ", ".join("%s (%s)" % (p, mid[:8]) for mid, p in phases.items())))
        succeeded = m.journal("-u", harness.AGENT_UNIT, "-o", "verbose", "MESSAGE_ID=" + IDS["UPDATE_SUCCEEDED"],
                              "INPLACE_TRANSACTION=" + tx)
        t.block("journalctl -u inplace-agent -o verbose MESSAGE_ID=%s INPLACE_TRANSACTION=%s"
                % (IDS["UPDATE_SUCCEEDED"], tx), succeeded)
        self.assertIn("INPLACE_TRANSACTION=" + tx, succeeded)
        explained = t.command(m, "journalctl", "--no-pager", "-x", "-u", harness.AGENT_UNIT,
                              "INPLACE_TRANSACTION=" + tx, "MESSAGE_ID=" + IDS["UPDATE_SUCCEEDED"])
        self.assertIn("Subject: In-place update %s has succeeded" % tx, explained)
        self.assertIn("Defined-By: inplace-agent", explained)
        story = t.command(m, "inplace-agent", "status")
        self.assertIn(tx, story)
        self.assertIn("Succeeded", story)
        self.assertIn("1.32.1", story)
        as_json = json.loads(m.run("inplace-agent", "status", "--json").stdout)
        self.assertIn(tx, json.dumps(as_json))

        # A configuration error as an operator meets it, then fixed.
        broken = "/etc/inplace-agent/config.d/95-operator.yaml"
        m.write(broken, "kubelet:\n  healthTimeout: soon\n")
        c0 = m.cursor()
        r = m.run("systemctl", "restart", harness.AGENT_UNIT, check=False)
        self.assertNotEqual(r.returncode, 0)
        line = world.wait_for(lambda: m.messages_after(c0, harness.AGENT_UNIT, MESSAGE_ID=IDS["CONFIG_ERROR"]).strip(),
                              30, "the configuration error in the journal")
        self.assertIn(broken, line)
        self.assertIn("healthTimeout", line)
        t.command(m, "journalctl", "--no-pager", "-x", "-n", "12", "-u", harness.AGENT_UNIT,
                  "MESSAGE_ID=" + IDS["CONFIG_ERROR"])
        t.command(m, "systemctl", "status", "--no-pager", "--lines=0", harness.AGENT_UNIT)
        m.run("rm", broken)
        m.run("systemctl", "restart", harness.AGENT_UNIT)
        m.wait_active(harness.AGENT_UNIT, 30)
        ids = [e.get("MESSAGE_ID") for e in m.entries_after(c0, harness.AGENT_UNIT)]
        self.assertIn(IDS["AGENT_STOPPED"], ids)
        self.assertIn(IDS["AGENT_STARTED"], ids)
        t.ok("fixed: the agent stopped and started again, each with its catalog entry")


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
