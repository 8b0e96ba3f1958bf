# SPDX-License-Identifier: Apache-2.0
"""Bookkeeping of an OSC apply: the bytes the agent writes to its state directory per applied item.

tests/helpers/oscapply (the OSC runner's state and applier code minus the API server; its unit calls go
to a real systemd user manager) applies a 2,000-file OSC under `strace -y -e trace=write,pwrite64,writev`;
every write to a file in the state directory counts (work list, plan, done-log, temporary files), none
to the OSC's own files. The OSC's files go to /dev/shm when there is one (their fsyncs are not what is
measured); the state directory is on the disk of the bench's temporary directory, as on a node.

The baseline is the scheme before issue 23: the whole remaining-work list rewritten after every item,
i.e. the size of the list per item (computed from the list this run writes once, not run)."""

import json
import os
import re
import shutil
import subprocess

from common import row, skipped
import usermgr  # noqa: E402  (tests/integration/lib)

GROUP = "bookkeeping"
FILES = 2000
LINE = re.compile(r"^(?:\d+ +)?(?:write|pwrite64|writev)\((\d+)<([^>]*)>.*\) += (\d+)$")


def osc(n):
    files = [{"path": "/etc/bench/f%05d" % i, "content": {"inline": {"data": "x"}}} for i in range(n)]
    return {"apiVersion": "extensions.gardener.cloud/v1alpha1", "kind": "OperatingSystemConfig",
            "spec": {"files": files}, "status": {}}


def bytes_by_file(trace, state):
    out = {}
    with open(trace) as f:
        for line in f:
            m = LINE.match(line.strip())
            if m and os.path.dirname(m.group(2)) == state:
                name = os.path.basename(m.group(2))
                out[name] = out.get(name, 0) + int(m.group(3))
    return out


def apply_traced(ctx, um, n):
    base = os.path.join(ctx.tmp, "bookkeeping-%d" % n)
    state = os.path.join(base, "state")
    os.makedirs(state)
    root = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else base, "inplace-bench-root-%d-%d" % (os.getpid(), n))
    os.makedirs(root)
    path = os.path.join(base, "osc.json")
    with open(path, "w") as f:
        json.dump(osc(n), f)
    trace = os.path.join(base, "strace.log")
    oscapply = os.path.join(ctx.build, "tests", "oscapply")
    try:
        p = subprocess.run(["strace", "-f", "-qq", "-y", "-s", "0", "-e", "trace=write,pwrite64,writev",
                            "-e", "signal=none", "-o", trace, oscapply, "--root", root, "--unit-dir", um.unit_dir,
                            "--state", state, "--checksum", "bench-%d" % n, path],
                           env=um.env, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    items = sum(1 for line in p.stdout.splitlines() if '"event":"item"' in line)
    if p.returncode != 0 or items != n:
        raise RuntimeError("oscapply: exit %d, %d of %d items: %s" % (p.returncode, items, n, p.stderr[-500:]))
    return items, bytes_by_file(trace, state)


def run(ctx):
    if not shutil.which("strace"):
        return [skipped(GROUP, "bytes per item", "strace is not installed")]
    missing = usermgr.missing_prerequisites()
    if missing:
        return [skipped(GROUP, "bytes per item", "missing " + ", ".join(missing))]
    with usermgr.UserManager(prefix="bench-bookkeeping-") as um:
        items, by_file = apply_traced(ctx, um, FILES)
        small_items, small = apply_traced(ctx, um, FILES // 4)
    total = sum(by_file.values())
    listed = by_file.get(".last-computed-osc-changes.json.tmp", 0)
    log = by_file.get("last-computed-osc-changes.done", 0)
    plan = by_file.get(".last-computed-osc-plan.json.tmp", 0)
    per_item_small = sum(small.values()) / small_items
    note = ("work list %d B once, plan %d B once, done-log %.1f B/item, last-applied %d B; %d items: %.0f B/item" %
            (listed, plan, log / items, by_file.get(".last-applied-osc.yaml.tmp", 0), small_items, per_item_small))
    return [row(GROUP, "state directory bytes written per item, %d-file OSC" % FILES, total / items, "B",
                listed, "whole list rewritten per item (before)", target=("<=", 1024), note=note),
            row(GROUP, "state directory bytes written, %d-file OSC" % FILES, total / 1e6, "MB", listed * items / 1e6,
                "whole list rewritten per item (before)")]
