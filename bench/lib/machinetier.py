# SPDX-License-Identifier: Apache-2.0
"""The machine tier's wall time (tests/machine: the .deb booted in a Debian 12 image under
systemd-nspawn), as `tests/run-tests` runs it: first the preparation (the cached image, the .deb of
this tree and its apt install, each built only when missing: its time is the cold part when it had
to build), then every scenario test on the warm cache, one after the other. The target is the
warm run: at most 5 minutes on 2 cores. Not in the default groups (bench/run --only machinetier): it
needs root, systemd-nspawn and debootstrap, and takes minutes."""

import glob
import os
import subprocess
import sys
import time

from common import TOP, row, skipped

GROUP = "machinetier"
MACHINE_DIR = os.path.join(TOP, "tests", "machine")
WARM_TARGET_S = 300


def run_test(script):
    """(seconds, exit status) of one machine-tier test run as meson runs it."""
    env = dict(os.environ, SRCDIR=TOP, PYTHONDONTWRITEBYTECODE="1")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, script], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - t0, r.returncode


def run(ctx):
    sys.path.insert(0, os.path.join(MACHINE_DIR, "lib"))
    import machine as tier
    missing = tier.missing_prerequisites()
    if missing:
        return [skipped(GROUP, "machine tier", "missing " + ", ".join(missing))]
    rows = []
    seconds, status = run_test(os.path.join(MACHINE_DIR, "test_prepare.py"))
    rows.append(row(GROUP, "prepare (image, .deb, apt install; cold when it built)", seconds, "s",
                    note=None if status == 0 else "exit %d" % status))
    total, failed = 0.0, []
    for script in sorted(glob.glob(os.path.join(MACHINE_DIR, "test_*.py"))):
        if script.endswith("test_prepare.py"):
            continue
        seconds, status = run_test(script)
        total += seconds
        name = os.path.basename(script)[len("test_"):-len(".py")]
        ctx.log("machine tier %s: %.0f s (exit %d)" % (name, seconds, status))
        rows.append(row(GROUP, "scenario test %s" % name, seconds, "s", note=None if status == 0 else "FAILED"))
        if status != 0:
            failed.append(name)
    rows.append(row(GROUP, "warm run, every scenario", total, "s", target=("<=", WARM_TARGET_S),
                    note="failed: " + ", ".join(failed) if failed else None))
    return rows
