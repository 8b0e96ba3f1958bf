#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 5 acceptance with the real agent in the sandbox (lib/sandbox.py), one sandbox, steps in order:
  1. idle: no Node patches over a few seconds (docs/contract.md §8.13);
  2. ungated kubelet patch update 1.31.4 -> 1.31.5: applied without any MCM signal, no update-result label
     (§8.4), checksum/cloud-config-data and kubernetes-version set; `inplace-agent status --json` shows it;
  3. malformed inputs (OSC YAML syntax error, `kubelet: 123`, `operatingSystemVersion: ""`, update-result=weird,
     an InPlaceUpdate condition without reason): journal diagnostics for the OSC, no crash, no action;
  4. minVersionForUpdate above the OS version with a gated change (1.31.5 -> 1.32.1): blocked in the plan; on
     selected-for-update update-result=failed naming both versions, failure code MinVersionNotMet, nothing run;
  5. docs/node-protocol.md §9 scenario 23, the retry path: update-result=failed and no ReadyForUpdate, the OSC fixed -> the Pods on
     the node deleted, update-result=successful, update-failed-reason removed; gardener-resource-manager's
     Pod (gardener PR #15030), a mirror Pod and a static Pod (owned by the Node) are left alone, a DELETE
     answered 500 fails the step (retried, the result only after it), and the Event
     InPlaceUpdatePodsDeleted names what was deleted and what was left alone, with counts;
  6. docs/node-protocol.md §9 scenario 24: already successful + ReadyForUpdate -> no pod deletion, no Node patch;
  7. SIGKILL of the agent at phase boundaries (Staging, Applying) of an ungated update -> after the restart the
     transaction finishes exactly once: one InPlaceUpdateSucceeded Event, one final progress patch;
  8. SIGKILL of the agent right after Staged of a gated update (1.32.3 -> 1.33.0): after the restart and
     ReadyForUpdate, the update runs once, update-result=successful written in exactly one patch."""

import json
import os
import subprocess
import sys
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4", "1.31.5", "1.32.1", "1.32.2", "1.32.3", "1.33.0"), broken_versions=(),
    kubelet_size=4 << 20, health_timeout="20s")


def publish_text(text):
    """Publish an arbitrary osc.yaml (as gardenlet would) with its checksum."""
    return SB.publish_text(text)


def osc_text(kubelet, os_version=S.DEFAULT_OS_VERSION):
    return SB.osc_yaml(kubelet, os_version, SB.images[(kubelet, False)]["ref"])


def read_text(path):
    with open(path) as f:
        return f.read()


def last_seq():
    log = SB.emu.request_log()
    return max((e.get("seq", 0) for e in log), default=0)


def kubelet_starts(version):
    return SB.unit_log(S.KUBELET_UNIT).count("runs kubelet v%s\n" % version)


def agent_events(reason):
    return sum((e.get("count") or 1) for e in SB.events() if e.get("reason") == reason)


def state_phase():
    try:
        with open(os.path.join(SB.state_dir, "state.json")) as f:
            return json.load(f).get("phase")
    except (OSError, ValueError):
        return None


class UpdateEngine(unittest.TestCase):
    def assert_agent_alive(self, pid):
        self.assertEqual(SB.um.active_state(S.AGENT_UNIT), "active")
        self.assertEqual(SB.um.main_pid(S.AGENT_UNIT), pid, "the agent restarted (crash?)")

    def test_1_idle_no_node_patches(self):
        usermgr.wait_until(lambda: "Watching OSC Secret" in SB.agent_log(), 20, "the agent watching the OSC")
        time.sleep(1)   # let start-up writes drain; what follows is the idle window itself
        seq = last_seq()
        time.sleep(4)
        writes = [(e["method"], e["path"]) for e in SB.emu.request_log(since=seq)
                  if e.get("method") in ("PATCH", "PUT") and "/nodes/" in e.get("path", "")]
        self.assertEqual(writes, [], "idle agent patched the Node")

    def test_2_ungated_patch_update(self):
        checksum = SB.publish_osc(kubelet_version="1.31.5")
        n = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "checksum of the 1.31.5 OSC")
        self.assertEqual(S.label(n, S.K8S_VERSION), "1.31.5")
        self.assertIsNone(S.label(n, S.UPDATE_RESULT), "the ungated path must not write update-result")
        self.assertEqual(S.progress_phase(n), "Succeeded")
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.31.5")
        self.assertIn("1.31.5", SB.kubelet_target())
        SB.wait_kubelet_healthy(10)
        self.assertIn("Kubelet 1.31.5 staged at %s/kubelet/1.31.5/kubelet" % SB.state_dir, SB.agent_log())
        # No history entry ever carried update-result.
        for h in SB.node_history():
            self.assertIsNone(S.label(h.get("object"), S.UPDATE_RESULT))
        r = subprocess.run([SB.agent, "status", "--json", "--state-dir", SB.state_dir], capture_output=True,
                           text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r.stderr)
        st = json.loads(r.stdout)
        self.assertIn("1.31.5", json.dumps(st))
        self.assertIn("Succeeded", json.dumps(st))

    def test_3_malformed_inputs(self):
        pid = SB.um.main_pid(S.AGENT_UNIT)
        good = osc_text("1.31.5")
        target = SB.kubelet_target()
        cases = [
            ("syntax error", good.replace("kind: OperatingSystemConfig", "kind: [OperatingSystemConfig"), True),
            ("kubelet: 123", good.replace('kubelet: "1.31.5"', "kubelet: 123"), True),
            # osc.c reads an empty string as "not given" (no OS update requested): no diagnostic, no OS action.
            ("empty OS version", good.replace('operatingSystemVersion: "%s"' % S.DEFAULT_OS_VERSION,
                                              'operatingSystemVersion: ""'), False),
        ]
        os_release = read_text(SB.os_release)
        seen = {(S.annotation_json(SB.node(), S.FAILURE) or {}).get("transaction")}
        for what, text, diagnosed in cases:
            self.assertNotEqual(text, good, what)
            before = SB.agent_log().count("Refusing the OSC of Secret")
            checksum = publish_text(text)
            if diagnosed:
                usermgr.wait_until(lambda: SB.agent_log().count("Refusing the OSC of Secret") > before, 20,
                                   "a journal diagnostic for the %s" % what)
                # ... and one on the Node (issue 23): the refused OSC failed at once.
                n = SB.wait_node(lambda n: (S.annotation_json(n, S.FAILURE) or {}).get("transaction") not in seen, 20,
                                 "inplace-agent/failure for the %s" % what)
                failure = S.annotation_json(n, S.FAILURE)
                self.assertEqual(failure["code"], "InvalidDesiredState", what)
                seen.add(failure["transaction"])
                self.assertNotEqual(S.annotation(SB.node(), S.NODE_CHECKSUM), checksum)
            else:
                time.sleep(2)   # the window in which an (unwanted) OS action would start
            self.assert_agent_alive(pid)
            self.assertEqual(SB.kubelet_target(), target, what)
            self.assertEqual(read_text(SB.os_release), os_release, what)
        seq = last_seq()
        SB.emu.label_node(S.NODE, labels={S.UPDATE_RESULT: "weird"})
        SB.emu.set_condition(S.NODE, S.MCM_CONDITION, "True", "", "")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            self.assert_agent_alive(pid)
            time.sleep(0.2)
        self.assertEqual(SB.kubelet_target(), target)
        n = SB.node()
        self.assertEqual(S.label(n, S.UPDATE_RESULT), "weird", "the agent must not touch a label it did not set")
        self.assertEqual(S.progress_phase(n), "Failed")     # the last refused OSC's, untouched since
        kinds = [(e["method"], e["path"]) for e in SB.emu.request_log(since=seq)
                 if e.get("method") in ("PATCH", "PUT") and "/nodes/" in e.get("path", "")
                 and "inplace-agent/" in json.dumps(e.get("body") or "")]
        self.assertEqual(kinds, [], "no action expected on a weird label or a reason-less condition")
        # Back to a sane state for the next steps.
        SB.emu.label_node(S.NODE, labels={S.UPDATE_RESULT: None})
        SB.emu.set_condition(S.NODE, S.MCM_CONDITION, remove=True)
        SB.publish_osc(kubelet_version="1.31.5")
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == SB.osc["checksum"], 20, "settled")

    def test_4_min_version_not_met(self):
        # minVersionForUpdate is the OS image's rule (docs/node-protocol.md §3): it guards an OS version change.
        os_release = read_text(SB.os_release)
        text = osc_text("1.32.1", os_version="1593.0").replace(
            '    kubelet: "1.32.1"\n', '    kubelet: "1.32.1"\n    minVersionForUpdate: "1592.9"\n')
        self.assertIn("minVersionForUpdate", text)
        publish_text(text)
        SB.mcm_candidate()
        n = SB.wait_node(lambda n: "MinVersionNotMet" in (S.annotation(n, S.PLAN) or ""), 30, "a blocked plan")
        self.assertIsNone(S.label(n, S.UPDATE_RESULT), "failed must wait for the selection")
        SB.mcm_select()
        n = SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "failed", 30, "update-result=failed")
        reason = S.annotation(n, S.FAILED_REASON) or ""
        self.assertIn("minVersionForUpdate 1592.9 is not met by the current OS version %s" % S.DEFAULT_OS_VERSION,
                      reason)
        self.assertEqual(S.annotation_json(n, S.FAILURE)["code"], "MinVersionNotMet")
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.31.5")
        self.assertNotIn("1.32.1", SB.kubelet_target() or "")
        self.assertEqual(read_text(SB.os_release), os_release, "the OS update command must not run")
        self.assertEqual(kubelet_starts("1.32.1"), 0)
        self.assertNotIn("sandbox OS updated", SB.agent_log())

    def test_5_retry_path_gnp23(self):
        # MCM reacts to the failure (condition UpdateFailed); gardenlet fixes the OSC; no ReadyForUpdate.
        SB.mcm_observe_result()
        def pod(ns, name, node=S.NODE, **meta):
            SB.emu.put({"apiVersion": "v1", "kind": "Pod", "metadata": dict(name=name, namespace=ns, **meta),
                        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
        node_ref = [{"apiVersion": "v1", "kind": "Node", "name": S.NODE, "uid": SB.node()["metadata"]["uid"],
                     "controller": True}]
        pod("default", "workload-1")
        pod("default", "elsewhere", node="other-node")
        pod("kube-system", "kube-proxy-x1", ownerReferences=[{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                                              "name": "kube-proxy", "uid": "ds-1"}])
        pod("kube-system", "gardener-resource-manager-5f7", labels={"app": "gardener-resource-manager"})
        pod("kube-system", "etcd-" + S.NODE, annotations={"kubernetes.io/config.mirror": "5d41402a"},
            ownerReferences=node_ref)
        pod("kube-system", "kube-apiserver-" + S.NODE, ownerReferences=node_ref)
        SB.emu.inject("internal-error", verbs=["delete"], path="^/api/v1/namespaces/default/pods/workload-1$",
                      count=1)
        checksum = SB.publish_osc(kubelet_version="1.32.1")
        # The checksum follows the result in its own patch (as upstream writes it after the result).
        n = SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "successful"
                         and S.annotation(n, S.NODE_CHECKSUM) == checksum, 60,
                         "update-result=successful and the new checksum/cloud-config-data")
        self.assertIsNone(S.annotation(n, S.FAILED_REASON))
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.32.1")
        self.assertIsNone(SB.emu.get("pods", "workload-1", namespace="default"), "the node's pod was not deleted")
        self.assertIsNone(SB.emu.get("pods", "kube-proxy-x1", namespace="kube-system"))
        self.assertIsNotNone(SB.emu.get("pods", "elsewhere", namespace="default"))
        for left in ("gardener-resource-manager-5f7", "etcd-" + S.NODE, "kube-apiserver-" + S.NODE):
            self.assertIsNotNone(SB.emu.get("pods", left, namespace="kube-system"), "%s was deleted" % left)
        deletes = [e["path"] for e in SB.emu.request_log(path="^/api/v1/namespaces/.*/pods/")
                   if e.get("method") == "DELETE"]
        self.assertFalse([d for d in deletes if "kube-apiserver-" in d or "etcd-" in d or "resource-manager" in d],
                         deletes)
        # The DELETE answered 500 failed the step: it ran again, and the result followed only then.
        self.assertIn("Action DeletePods failed: deleting Pod default/workload-1 failed:", SB.agent_log())
        self.assertEqual(deletes.count("/api/v1/namespaces/default/pods/workload-1"), 2, deletes)
        events = [e["message"] for e in SB.events() if e.get("reason") == "InPlaceUpdatePodsDeleted"]
        self.assertEqual(len(events), 1, events)
        self.assertTrue(events[0].startswith("Deleted 1 Pod(s) still bound to the node after the in-place update: "
                                             "default/workload-1. Left alone 3: "), events[0])
        for left in ("kube-system/gardener-resource-manager-5f7 (gardener-resource-manager)",
                     "kube-system/etcd-%s (mirror pod)" % S.NODE, "kube-system/kube-apiserver-%s (static pod)" % S.NODE):
            self.assertIn(left, events[0])

    def test_6_already_successful_gnp24(self):
        SB.mcm_observe_result()
        SB.emu.put({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "workload-2", "namespace": "default"},
                    "spec": {"nodeName": S.NODE, "containers": [{"name": "c", "image": "busybox"}]}})
        seq = last_seq()
        SB.mcm_ready_for_update(drain=False)
        time.sleep(4)   # the window in which nothing may happen
        self.assertIsNotNone(SB.emu.get("pods", "workload-2", namespace="default"))
        writes = [(e["method"], e["path"], e.get("user")) for e in SB.emu.request_log(since=seq)
                  if e.get("method") in ("PATCH", "PUT", "DELETE", "POST")
                  and ("/nodes/" in e.get("path", "") or "/pods" in e.get("path", ""))]
        self.assertEqual(writes, [], "the agent acted on an already successful node")
        # Leave the gated world for the kill test.
        SB.emu.label_node(S.NODE, labels={S.CANDIDATE: None, S.SELECTED: None, S.UPDATE_RESULT: None})
        SB.emu.set_condition(S.NODE, S.MCM_CONDITION, remove=True)

    def kill_at(self, version, phases):
        started = kubelet_starts(version)
        succeeded = agent_events("InPlaceUpdateSucceeded")
        seq = last_seq()
        pid = SB.um.main_pid(S.AGENT_UNIT)
        checksum = SB.publish_osc(kubelet_version=version)
        phase = usermgr.wait_until(lambda: state_phase() in phases and state_phase(), 60,
                                   "state.json phase in %s" % (phases,), interval=0.002)
        SB.um.systemctl("kill", "-s", "KILL", S.AGENT_UNIT)
        usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 30, "the agent restarted")
        SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))
        n = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the %s update" % version)
        self.assertEqual(S.progress_phase(n), "Succeeded")
        self.assertEqual(SB.kubelet_version(), "Kubernetes v%s" % version)
        SB.wait_kubelet_healthy(10)
        time.sleep(2)   # a duplicate report would show up in this window
        self.assertEqual(agent_events("InPlaceUpdateSucceeded") - succeeded, 1, "success reported %d times" %
                         (agent_events("InPlaceUpdateSucceeded") - succeeded))
        finals = [e for e in SB.emu.request_log(since=seq)
                  if e.get("method") == "PATCH" and "/nodes/" in e.get("path", "")
                  and '\\"phase\\":\\"Succeeded\\"' in json.dumps(e.get("body"))]
        self.assertEqual(len(finals), 1, "final progress patched %d times" % len(finals))
        # The kubelet runs the new version; a restart may be repeated only if the kill hit Applying.
        starts = kubelet_starts(version) - started
        self.assertGreaterEqual(starts, 1)
        self.assertLessEqual(starts, 1 if phase != "Applying" else 2, "kubelet started %d times" % starts)
        self.assertIsNone(S.label(SB.node(), S.UPDATE_RESULT))
        print("killed in %s: kubelet %s started %d time(s)" % (phase, version, starts), file=sys.stderr)

    def test_7_kill_during_staging(self):
        self.kill_at("1.32.2", ("Staging", "Staged"))

    def test_8_kill_during_applying(self):
        self.kill_at("1.32.3", ("Applying",))

    def test_9_kill_after_staged_gated(self):
        succeeded = agent_events("InPlaceUpdateSucceeded")
        seq = last_seq()
        checksum = SB.publish_osc(kubelet_version="1.33.0")
        SB.mcm_candidate()
        usermgr.wait_until(lambda: state_phase() == "Staged", 60, "state.json phase Staged", interval=0.002)
        pid = SB.um.main_pid(S.AGENT_UNIT)
        SB.um.systemctl("kill", "-s", "KILL", S.AGENT_UNIT)
        usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 30, "the agent restarted")
        SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))
        SB.um.wait_for_state(S.AGENT_UNIT, "active", 30)
        self.assertEqual(kubelet_starts("1.33.0"), 0, "nothing may run before the gate")
        SB.mcm_select()
        SB.mcm_ready_for_update()
        # update-result may still say "successful" from an earlier case: the new checksum (written right
        # after the result) is what marks this update as done.
        SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "successful"
                     and S.annotation(n, S.NODE_CHECKSUM) == checksum, 60,
                     "update-result=successful and the new checksum/cloud-config-data")
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.33.0")
        SB.wait_kubelet_healthy(10)
        time.sleep(2)   # a duplicate report would show up in this window
        results = [e for e in SB.emu.request_log(since=seq)
                   if e.get("method") == "PATCH" and "/nodes/" in e.get("path", "")
                   and '"successful"' in json.dumps(e.get("body")) and S.UPDATE_RESULT in json.dumps(e.get("body"))]
        self.assertEqual(len(results), 1, "update-result=successful patched %d times" % len(results))
        self.assertEqual(agent_events("InPlaceUpdateSucceeded") - succeeded, 1)
        self.assertEqual(kubelet_starts("1.33.0"), 1)
        self.assertIn("Resuming from", SB.agent_log())


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(), failfast=True)
