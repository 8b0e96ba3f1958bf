# SPDX-License-Identifier: Apache-2.0
"""The update decider explored (issue 31): tests/unit/core/explore-update (the model of
tests/unit/core/update-model.h around the real decider, -O2) explores every event sequence breadth-first
up to a depth, with visited-state hashing, and checks the invariants after every effect. Reports the
distinct states explored, the depth completed and the wall time per scenario; a violation is a figure
that did not meet its target (0), with the shortest sequence printed on stderr as a ready-to-paste test.

Scenarios: each desired-state kind alone (deep), then every kind at once (shallower: the state space
grows with the number of OSCs a sequence may switch between). --quick runs smaller depths."""

import json
import os
import subprocess
import sys

from common import row

GROUP = "explore"
# (name, --oscs, depth, quick depth); ModelOsc indices: 1 kubelet patch, 2 minor, 3 OS, 4 files,
# 5 gated files, 6 rotation.
SCENARIOS = [
    ("os-update", "3", 13, 10),
    ("os-update-image", "3", 13, 10),
    ("kubelet-minor", "2", 12, 9),
    ("files", "45", 11, 8),
    ("rotation", "6", 12, 9),
    ("all-oscs", "all", 7, 6),
]


def run(ctx):
    exe = os.path.join(ctx.build, "tests", "explore-update")
    rows = []
    for name, oscs, depth, quick in SCENARIOS:
        args = [exe, "--oscs", oscs, "--depth", str(quick if ctx.quick else depth)]
        if name.endswith("-image"):
            args.append("--image")
        p = subprocess.run(args, capture_output=True, text=True, timeout=3600)
        if p.returncode not in (0, 1):
            raise RuntimeError("%s: exit %d: %s" % (name, p.returncode, p.stderr.strip()))
        r = json.loads(p.stdout.strip().splitlines()[-1])
        if r["violation"]:
            print(p.stderr, file=sys.stderr)
        ctx.log("explore %s: %s" % (name, p.stdout.strip()))
        note = "depth %d, %.1f s%s" % (r["depth"], r["seconds"], ", truncated" if r["truncated"] else "")
        rows.append(row(GROUP, "%s states (%s)" % (name, note), r["states"], "states"))
        rows.append(row(GROUP, "%s violations" % name, 1 if r["violation"] else 0, "", target=("==", 0),
                        note=r["violation"]))
    return rows
