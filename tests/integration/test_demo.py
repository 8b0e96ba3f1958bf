#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 9 acceptance: the demo (tests/demo/demo.py, what tests/demo/run-demo runs) completes
non-interactively with the real agent, in both modes, and leaves the Node in the right final state:
  * success: update-result=successful, checksum/cloud-config-data = the Secret's checksum/data-script,
    worker.gardener.cloud/kubernetes-version=1.32.1, <binaryPath> --version says v1.32.1;
  * --failure (a kubelet 1.32.1 whose /healthz fails): update-result=failed with the health reason in
    update-failed-reason, inplace-agent/failure code KubeletUnhealthy, kubelet 1.31.4 restored and healthy,
    the reason in the agent's journal lines.
Both runs must exit 0, stay under 3 minutes and leave no process behind. The final state is read from the
demo's --summary-json (a snapshot of the Node taken before teardown), not from its own verdict alone."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

from lib import itest
import sandbox

DEMO = os.path.join(itest.SRCDIR, "tests", "demo", "demo.py")
AGENT = sandbox.default_agent()
BUDGET_S = 180


class Demo(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert os.access(DEMO, os.X_OK), "%s missing" % DEMO

    def run_demo(self, *args):
        with tempfile.NamedTemporaryFile(prefix="demo-summary-", suffix=".json") as f:
            r = subprocess.run([sys.executable, DEMO, "--non-interactive", "--summary-json", f.name,
                                "--agent", AGENT] + list(args),
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BUDGET_S + 30)
            try:
                summary = json.load(open(f.name))
            except ValueError:
                summary = {}
        # The demo's narration goes to the test log; the tail is what matters when it fails.
        sys.stderr.write("---- demo.py %s (exit %d) ----\n%s%s\n" % (" ".join(args), r.returncode,
                                                                     r.stdout[-30000:], r.stderr[-5000:]))
        return r.returncode, summary

    def common(self, rc, s):
        self.assertEqual(s.get("error"), None)
        self.assertEqual(rc, 0, "demo failed: %s" % [c for c in s.get("checks", []) if not c["ok"]])
        self.assertTrue(s["ok"])
        self.assertEqual(s["leftover_processes"], [])
        self.assertLess(s["wall_seconds"], BUDGET_S)
        print("demo %s: %.1fs wall, phases %s, %s bytes pulled" % (
            s["mode"], s["wall_seconds"], [(p["phase"], p["seconds"]) for p in s.get("phases", [])],
            s.get("bytes_pulled")), file=sys.stderr)

    def test_1_success(self):
        rc, s = self.run_demo()
        self.common(rc, s)
        labels, ann = s["node"]["labels"], s["node"]["annotations"]
        self.assertEqual(labels.get(sandbox.UPDATE_RESULT), "successful")
        self.assertEqual(ann.get(sandbox.NODE_CHECKSUM), s["secret_checksum"])
        self.assertTrue(s["secret_checksum"])
        self.assertEqual(labels.get(sandbox.K8S_VERSION), "1.32.1")
        self.assertNotIn(sandbox.FAILED_REASON, ann)
        self.assertEqual(s["kubelet_before"], "Kubernetes v1.31.4")
        self.assertEqual(s["kubelet_after"], "Kubernetes v1.32.1")
        self.assertEqual((s["kubelet_unit"], s["kubelet_healthz"]), ("active", 200))
        self.assertEqual(json.loads(ann[sandbox.PROGRESS])["phase"], "Succeeded")

    def test_2_failure_rolls_back(self):
        rc, s = self.run_demo("--failure")
        self.common(rc, s)
        labels, ann = s["node"]["labels"], s["node"]["annotations"]
        self.assertEqual(labels.get(sandbox.UPDATE_RESULT), "failed")
        self.assertIn("not healthy", ann.get(sandbox.FAILED_REASON, ""))
        self.assertEqual(json.loads(ann[sandbox.FAILURE])["code"], "KubeletUnhealthy")
        self.assertNotEqual(ann.get(sandbox.NODE_CHECKSUM), s["secret_checksum"])
        self.assertEqual(s["kubelet_after"], "Kubernetes v1.31.4")
        self.assertEqual((s["kubelet_unit"], s["kubelet_healthz"]), ("active", 200))
        self.assertTrue(s.get("journal_failure_lines"), "no agent log line names the failure")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(AGENT))
