#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 6 items that need the real agent (the sandbox, lib/sandbox.py):
  1. SIGKILL of the agent during a large (~192 MiB) kubelet download of an ungated patch update: after the
     restart the download resumes or restarts and the update completes; kubelet.binaryPath never points at a
     partial file (watched from a thread the whole time) and no .partial blob is left behind;
  2. a corrupted layer blob in the registry (its storage file tampered) for a gated update: once the node is
     selected the failure is reported (update-result=failed, code DigestMismatch) before any drain, nothing is
     installed, binaryPath unchanged, the kubelet never restarted."""

import glob
import os
import sys
import threading
import time
import unittest

from lib import itest
import registry
import sandbox
import usermgr

S = sandbox
SB = None
BIG = 192 << 20


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10)


def push_kubelet(version, size):
    """Push hyperkube:v<version> (the sandbox's image layout) with a stand-in kubelet of `size` padding bytes.
    Returns the top layer's digest."""
    data = S.stand_in_kubelet(version, size=size)
    base = registry.compress(registry.tar_bytes([{"name": "etc/", "type": "dir"}]), "gzip")
    top = registry.compress(registry.tar_bytes([{"name": S.FILE_IN_IMAGE.lstrip("/"), "data": data,
                                                 "mode": 0o755}]), "gzip")
    SB.reg.push_image(S.IMAGE_REPO, "v" + version, [(base, "gzip"), (top, "gzip")])
    SB.images[(version, False)] = {"ref": SB.image_ref(version), "file_bytes": len(data),
                                   "layer_bytes": len(base) + len(top), "kubelet": None}
    return "sha256:" + S.sha256_hex(top)


def partials():
    return [p for p in glob.glob(os.path.join(SB.state_dir, "staging", "blobs", "*.partial"))
            if os.path.getsize(p) > 0]


def kubelet_starts(version):
    return SB.unit_log(S.KUBELET_UNIT).count("runs kubelet v%s\n" % version)


class LinkWatcher:
    """Records every target kubelet.binaryPath points at, polled from a thread."""

    def __init__(self, path):
        self.path, self.targets, self.stop_flag = path, set(), False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop_flag:
            try:
                self.targets.add(os.readlink(self.path))
            except OSError:
                self.targets.add(None if not os.path.exists(self.path) else "<plain file>")
            time.sleep(0.001)

    def stop(self):
        self.stop_flag = True
        self.t.join()
        return self.targets


class KubeletUpdate(unittest.TestCase):
    def test_1_sigkill_during_large_download(self):
        t0 = time.monotonic()
        push_kubelet("1.31.9", BIG)
        print("pushed a %d MiB kubelet in %.1fs" % (BIG >> 20, time.monotonic() - t0), file=sys.stderr)
        usermgr.wait_until(lambda: SB.kubelet_target(), 20, "the adoption of the provisioned kubelet")
        watcher = LinkWatcher(SB.binary_path)
        try:
            pid = SB.um.main_pid(S.AGENT_UNIT)
            checksum = SB.publish_osc(kubelet_version="1.31.9")
            usermgr.wait_until(partials, 60, "a .partial blob with data", interval=0.002)
            SB.um.systemctl("kill", "-s", "KILL", S.AGENT_UNIT)
            killed_at = max(os.path.getsize(p) for p in partials() or [SB.state_dir])
            usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 30, "the agent restarted")
            SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))
            n = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 75, "the 1.31.9 update")
        finally:
            targets = watcher.stop()
        self.assertEqual(S.progress_phase(n), "Succeeded")
        self.assertIsNone(S.label(n, S.UPDATE_RESULT))
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.31.9")
        SB.wait_kubelet_healthy(10)
        self.assertEqual(kubelet_starts("1.31.9"), 1)
        store = os.path.join(SB.state_dir, "kubelet")
        for t in targets:
            self.assertTrue(t and t.startswith(store + "/") and t.endswith("/kubelet") and ".partial" not in t,
                            "binaryPath pointed at %r" % t)
        self.assertEqual(os.path.getsize(os.path.realpath(SB.binary_path)), SB.images[("1.31.9", False)]["file_bytes"])
        self.assertEqual(partials(), [])
        log = SB.agent_log()
        self.assertIn("Resuming from", log)
        print("killed with %d bytes in a .partial blob; binaryPath targets seen: %s" % (killed_at, sorted(targets)),
              file=sys.stderr)

    def test_2_corrupted_blob_gated(self):
        digest = push_kubelet("1.32.1", 2 << 20)
        blob = SB.reg.blob_file(digest)
        with open(blob, "r+b") as f:
            f.seek(os.path.getsize(blob) // 2)
            chunk = f.read(64)
            f.seek(os.path.getsize(blob) // 2)
            f.write(bytes(b ^ 0xFF for b in chunk))
        target = SB.kubelet_target()
        SB.publish_osc(kubelet_version="1.32.1")
        SB.mcm_candidate()
        SB.wait_node(lambda n: "1.32.1" in (S.annotation(n, S.PLAN) or ""), 30, "the plan")
        SB.mcm_select()
        n = SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "failed", 45, "update-result=failed")
        failure = S.annotation_json(n, S.FAILURE) or {}
        self.assertEqual(failure.get("code"), "DigestMismatch", failure)
        self.assertTrue(S.annotation(n, S.FAILED_REASON))
        # Before the drain: MCM has only selected the node; no cordon, no ReadyForUpdate.
        self.assertFalse(n.get("spec", {}).get("unschedulable"))
        self.assertEqual((S.condition(n, S.MCM_CONDITION) or {}).get("reason"), "SelectedForUpdate")
        self.assertEqual(SB.kubelet_target(), target)
        self.assertNotIn("1.32.1", SB.store_versions())
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.31.9")
        self.assertEqual(kubelet_starts("1.32.1"), 0)
        self.assertEqual(partials(), [])


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(), failfast=True)
