#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 9: the demo sandbox (lib/sandbox.py) on its own, without the agent doing any update: the emulator
holds the Node and the OSC Secret as docs/node-protocol.md §2.1 describes them, the registry serves the kubelet images in
the hyperkube layout, the user manager runs the stand-in kubelet and containerd, a hand-made switch of
kubelet.binaryPath (the layout of docs/contract.md §7) plus a unit restart changes the running kubelet, the broken
build fails its health check, the "MCM" steps write the exact condition sequence of docs/node-protocol.md Appendix A, the agent
unit starts as Type=notify with the sandbox config, and stop() leaves no process and no directory behind."""

import gzip
import io
import json
import os
import subprocess
import sys
import tarfile
import time
import unittest

from lib import itest
import sandbox
import usermgr

PULL = os.environ.get("PULL", "")
S = sandbox


class SandboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.sb = itest.start_sandbox(start_agent=False, kubelet_size=1 << 20)
        print("sandbox up in %.2fs %s" % (time.monotonic() - t0,
                                          {k: round(v, 2) for k, v in cls.sb.timings.items()}), file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        sb = cls.sb
        base, um_base = sb.base, sb.um.base
        left = sb.stop()
        assert left == [], "processes left behind: %s" % left
        assert not os.path.exists(base) and not os.path.exists(um_base), "directories left behind"

    # ------------------------------------------------------------------ helpers

    def image_file(self, repo, tag, path):
        """filePathInImage from the top layer of repo:tag, read straight from the registry."""
        reg = self.sb.reg
        status, _, body = reg.request("GET", "/v2/%s/manifests/%s" % (repo, tag),
                                      headers={"Accept": "application/vnd.oci.image.manifest.v1+json"})
        self.assertEqual(status, 200, body[:200])
        manifest = json.loads(body)
        top = manifest["layers"][-1]
        status, _, blob = reg.request("GET", "/v2/%s/blobs/%s" % (repo, top["digest"]))
        self.assertEqual(status, 200)
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tf:
            m = tf.getmember(path.lstrip("/"))
            self.assertEqual(m.mode & 0o777, 0o755)
            return tf.extractfile(m).read()

    def store(self, version, data):
        """Put a kubelet into <stateDirectory>/kubelet/<version>/kubelet by hand (docs/contract.md §7 layout)."""
        return sandbox.write_file(os.path.join(self.sb.state_dir, "kubelet", version, "kubelet"), data, 0o755)

    def switch(self, version):
        """The agent's switch, by hand: a new symlink renamed over binaryPath."""
        target = os.path.join(self.sb.state_dir, "kubelet", version, "kubelet")
        tmp = self.sb.binary_path + ".new"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(target, tmp)
        os.rename(tmp, self.sb.binary_path)

    def restart_kubelet(self):
        before = self.sb.um.invocation_id(S.KUBELET_UNIT)
        self.sb.um.systemctl("restart", S.KUBELET_UNIT)
        self.assertNotEqual(self.sb.um.invocation_id(S.KUBELET_UNIT), before)

    def node_kubelet_version(self):
        return self.sb.node()["status"]["nodeInfo"]["kubeletVersion"]

    # ------------------------------------------------------------------ tests

    def test_1_initial_state(self):
        sb = self.sb
        node = sb.node()
        secret = sb.secret()
        osc = sandbox.base64_decode(secret["data"]["osc.yaml"])
        self.assertEqual(S.annotation(secret, S.SECRET_CHECKSUM), sandbox.sha256_hex(osc))
        self.assertEqual(S.annotation(node, S.NODE_CHECKSUM), S.annotation(secret, S.SECRET_CHECKSUM))
        self.assertEqual(S.label(node, S.SECRET_NAME_LABEL), S.SECRET)
        self.assertEqual(S.label(node, S.K8S_VERSION), "1.31.4")
        text = osc.decode()
        for needle in ('kubelet: "1.31.4"', 'operatingSystemVersion: "1592.6"', "path: " + S.KUBELET_OSC_PATH,
                       "image: " + sb.image_ref("1.31.4"), "filePathInImage: /kubelet",
                       "command: " + sb.os_update_command):
            self.assertIn(needle, text)
        # The provisioned kubelet: a plain file, running, healthy, reported on the Node.
        self.assertTrue(os.path.isfile(sb.binary_path) and not os.path.islink(sb.binary_path))
        self.assertEqual(sb.kubelet_version(), "Kubernetes v1.31.4")
        self.assertEqual(sb.kubelet_healthz(), 200)
        self.assertEqual(sb.um.active_state(S.KUBELET_UNIT), "active")
        self.assertEqual(sb.um.active_state(S.CONTAINERD_UNIT), "active")
        sb.wait_node(lambda n: n["status"]["nodeInfo"]["kubeletVersion"] == "v1.31.4", 10, "nodeInfo v1.31.4")
        with open(sb.os_release) as f:
            self.assertIn('PRETTY_NAME="Garden Linux 1592.6"', f.read())
        # The config is accepted by the agent itself (start() ran check-config) and names our pieces.
        with open(sb.config_path) as f:
            cfg = f.read()
        for needle in (sb.emu.kubeconfig, sb.reg.ca_file, sb.healthz_url, S.KUBELET_OSC_PATH, sb.base, '"8s"'):
            self.assertIn(needle, cfg)

    def test_2_registry_serves_images(self):
        sb = self.sb
        for (version, broken), img in sb.images.items():
            repo = S.BROKEN_REPO if broken else S.IMAGE_REPO
            data = self.image_file(repo, "v" + version, S.FILE_IN_IMAGE)
            self.assertEqual(data, img["kubelet"])
            self.assertEqual(img["ref"], "%s/%s:v%s" % (sb.reg.host, repo, version))

    @unittest.skipUnless(PULL and os.access(PULL, os.X_OK), "$PULL (tests/pull) not built")
    def test_3_agent_staging_code_pulls_from_sandbox(self):
        sb = self.sb
        state = os.path.join(sb.base, "pull-state")
        r = subprocess.run([PULL, "--state-dir", state, "--image", sb.image_ref("1.32.1"), "--file",
                            S.FILE_IN_IMAGE, "--version", "1.32.1", "--ca-file", sb.reg.ca_file,
                            "--binary-path", os.path.join(sb.base, "pull-kubelet")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(state, "kubelet", "1.32.1", "kubelet"), "rb") as f:
            self.assertEqual(f.read(), sb.images[("1.32.1", False)]["kubelet"])

    def test_4_hand_made_switch_and_rollback(self):
        sb = self.sb
        # Adoption by hand (docs/contract.md §8.2), then the 1.32.1 update the agent will do.
        with open(sb.binary_path, "rb") as f:
            self.store("1.31.4", f.read())
        self.switch("1.31.4")
        self.store("1.32.1", self.image_file(S.IMAGE_REPO, "v1.32.1", S.FILE_IN_IMAGE))
        self.switch("1.32.1")
        self.restart_kubelet()
        self.assertEqual(sb.kubelet_version(), "Kubernetes v1.32.1")
        sb.wait_kubelet_healthy(10)
        sb.wait_node(lambda n: n["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.1", 10, "nodeInfo v1.32.1")
        self.assertIn("kubeletVersion=\"v1.32.1\"", sb.unit_log(S.KUBELET_UNIT))

        # The broken build: runs, but /healthz says 500 (what the agent's health check will see).
        self.store("1.32.1", self.image_file(S.BROKEN_REPO, "v1.32.1", S.FILE_IN_IMAGE))
        self.restart_kubelet()
        sb.wait_kubelet_healthy(10, healthy=False)
        self.assertEqual(sb.um.active_state(S.KUBELET_UNIT), "active")

        # Rollback by hand.
        self.switch("1.31.4")
        self.restart_kubelet()
        sb.wait_kubelet_healthy(10)
        self.assertEqual(sb.kubelet_version(), "Kubernetes v1.31.4")
        sb.wait_node(lambda n: n["status"]["nodeInfo"]["kubeletVersion"] == "v1.31.4", 10, "nodeInfo v1.31.4")

    def test_5_publish_osc(self):
        sb = self.sb
        old = sb.secret_checksum()
        c = sb.publish_osc(kubelet_version="1.32.1")
        self.assertNotEqual(c, old)
        secret = sb.secret()
        text = sandbox.base64_decode(secret["data"]["osc.yaml"])
        self.assertEqual(S.annotation(secret, S.SECRET_CHECKSUM), sandbox.sha256_hex(text))
        self.assertIn("image: " + sb.image_ref("1.32.1"), text.decode())
        sb.publish_osc(broken=True)
        self.assertIn("image: " + sb.image_ref("1.32.1", broken=True),
                      sandbox.base64_decode(sb.secret()["data"]["osc.yaml"]).decode())
        sb.publish_osc(kubelet_version="1.31.4", os_version="1592.6")
        self.assertEqual(sb.secret_checksum(), old)             # same content, same checksum

    def test_6_os_update_command(self):
        sb = self.sb
        r = subprocess.run([sb.os_update_command, "1592.7"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(sb.os_release) as f:
            self.assertIn('PRETTY_NAME="Garden Linux 1592.7"', f.read())
        r = subprocess.run([sb.os_update_command, "1592.7; rm -rf /"], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("invalid arguments", r.stdout)
        subprocess.run([sb.os_update_command, "1592.6"], check=True, capture_output=True)

    def test_7_mcm_sequence(self):
        sb = self.sb
        rv = sb.emu.current_rv()
        sb.mcm_candidate()
        sb.mcm_select()
        sb.mcm_ready_for_update()
        node = sb.node()
        self.assertEqual(S.label(node, S.CANDIDATE), "true")
        self.assertEqual(S.label(node, S.SELECTED), "true")
        self.assertTrue(node["spec"].get("unschedulable"))
        self.assertIn(S.PREFER_NO_SCHEDULE, node["spec"].get("taints"))
        seen = []
        for e in sb.node_history(since_rv=rv):
            c = S.condition(e["object"], S.MCM_CONDITION)
            if c and (not seen or seen[-1] != (c["reason"], c["message"])):
                seen.append((c["reason"], c["message"]))
        self.assertEqual(seen, [(r, S.MCM_MESSAGES[r]) for r in
                                ("CandidateForUpdate", "SelectedForUpdate", "DrainSuccessful", "ReadyForUpdate")])
        # Row 12 on a result the agent would write.
        sb.emu.label_node(S.NODE, labels={S.UPDATE_RESULT: "failed"},
                          annotations={S.FAILED_REASON: "kubelet is not healthy after in-place update: HTTP 500"},
                          manager="inplace-agent")
        self.assertEqual(sb.mcm_observe_result(), "UpdateFailed")
        c = S.condition(sb.node(), S.MCM_CONDITION)
        self.assertEqual(c["message"], "Node in-place update failed: kubelet is not healthy after in-place "
                                       "update: HTTP 500")
        # kubectl sees it all.
        r = sb.kubectl("describe", "node", S.NODE)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("UpdateFailed", r.stdout)
        self.assertIn("SchedulingDisabled", sb.kubectl("get", "node", S.NODE).stdout)

    def test_8_agent_unit(self):
        sb = self.sb
        sb.start_agent()
        props = sb.um.show_all(S.AGENT_UNIT, "Type", "ActiveState", "SubState", "MainPID")
        self.assertEqual((props["Type"], props["ActiveState"], props["SubState"]), ("notify", "active", "running"))
        usermgr.wait_until(lambda: "inplace-agent" in sb.agent_log(), 5, "the agent's first log line")
        self.assertIn(S.NODE, sb.agent_log())
        sb.stop_agent()
        self.assertEqual(sb.um.active_state(S.AGENT_UNIT), "inactive")

    def test_9_demo_harness_with_stand_in_agent(self):
        """The demo's own logic (waits, checks, summary, teardown) against tests/demo/stand-in-agent.py, a
        contract-level double: proves the harness while the real agent is covered by test_demo.py."""
        demo = os.path.join(S.SRCDIR, "tests", "demo", "demo.py")
        stand_in = os.path.join(S.SRCDIR, "tests", "demo", "stand-in-agent.py")
        summary = os.path.join(self.sb.base, "summary.json")
        r = subprocess.run([sys.executable, demo, "--non-interactive", "--agent", stand_in, "--summary-json",
                            summary], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout[-6000:] + r.stderr[-3000:])
        with open(summary) as f:
            s = json.load(f)
        self.assertEqual([c["name"] for c in s["checks"] if not c["ok"]], [])
        self.assertEqual(s["kubelet_after"], "Kubernetes v1.32.1")
        self.assertEqual([p["phase"] for p in s["phases"]],
                         ["Planned", "Staging", "Staged", "WaitingForDrain", "Applying", "Verifying", "Succeeded"])
        self.assertEqual(s["leftover_processes"], [])


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
