#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`tests/demo/run-demo --machine` (tests/demo/machine_demo.py) completes non-interactively: the
demo's story on a booted machine ends with update-result=successful, kubelet 1.32.1 running and
healthy, its checks all met, and the machine gone. The demo's transcript is this test's output."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import machine  # noqa: E402   (first: puts tests/integration/lib on sys.path)
import itest  # noqa: E402

DEMO = os.path.normpath(os.path.join(HERE, "..", "demo", "machine_demo.py"))


class MachineDemo(unittest.TestCase):
    def test_demo_completes(self):
        with tempfile.NamedTemporaryFile(suffix=".json") as summary:
            r = subprocess.run([sys.executable, DEMO, "--non-interactive", "--summary-json", summary.name],
                               stdin=subprocess.DEVNULL, timeout=540)
            with open(summary.name) as f:
                s = json.load(f) if os.path.getsize(summary.name) else {}
        bad = [c["name"] for c in s.get("checks", []) if not c["ok"]]
        self.assertTrue(r.returncode == 0 and s.get("ok") and not bad,
                        "the machine demo exited %d (error %s; checks not met: %s)" % (r.returncode, s.get("error"), bad))
        print("machine demo: %d checks met in %.1f s" % (len(s["checks"]), s["wall_seconds"]))


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
