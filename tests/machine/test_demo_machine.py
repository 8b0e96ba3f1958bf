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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import machine  # noqa: E402

DEMO = os.path.normpath(os.path.join(HERE, "..", "demo", "machine_demo.py"))


def main():
    machine.skip_if_missing()
    with tempfile.NamedTemporaryFile(suffix=".json") as summary:
        r = subprocess.run([sys.executable, DEMO, "--non-interactive", "--summary-json", summary.name],
                           stdin=subprocess.DEVNULL, timeout=540)
        with open(summary.name) as f:
            s = json.load(f) if os.path.getsize(summary.name) else {}
    bad = [c["name"] for c in s.get("checks", []) if not c["ok"]]
    if r.returncode != 0 or not s.get("ok") or bad:
        print("FAIL: the machine demo exited %d (error %s; checks not met: %s)" % (r.returncode, s.get("error"), bad))
        return 1
    print("machine demo: %d checks met in %.1f s" % (len(s["checks"]), s["wall_seconds"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
