# SPDX-License-Identifier: Apache-2.0
"""Footprint of the idle daemon in the sandbox (real user manager, D-Bus, Lease, Node and OSC watches
open, production watch and Lease timings): installed size, VmRSS / RssAnon / PSS after the idle window,
CPU time per idle hour (extrapolated from the window), shared objects mapped, and wake-ups (context
switches of all its threads) over the window next to the requests it made (Lease renewals, watch
renewals): every wake-up should have a request behind it."""

import os
import subprocess
import time

from common import cpu_seconds, proc_status, row, shared_objects, skipped, smaps_rollup_kib, status_kib
import agentrun  # noqa: E402  (tests/integration/lib)
import sandbox as S  # noqa: E402

GROUP = "footprint"


def installed_size(ctx):
    dest = os.path.join(ctx.tmp, "destdir")
    subprocess.run(["meson", "install", "-C", ctx.build, "--no-rebuild", "--quiet", "--destdir", dest],
                   check=True, capture_output=True)
    total = 0
    for root, _, files in os.walk(dest):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    stripped = os.path.join(ctx.tmp, "inplace-agent.stripped")
    subprocess.run(["strip", "-o", stripped, ctx.agent], check=True)
    return total, os.path.getsize(stripped)


def ctxt_switches(pid):
    """Context switches of all threads: each voluntary one is a sleep, i.e. a wake-up after it."""
    n = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        st = proc_status("%d/task/%s" % (pid, tid))
        n += int(st["voluntary_ctxt_switches"]) + int(st["nonvoluntary_ctxt_switches"])
    return n


def run(ctx):
    rows = []
    total, stripped = installed_size(ctx)
    rows.append(row(GROUP, "installed size (meson install, all files)", total / 1024.0, "KiB",
                    note="stripped binary %.0f KiB" % (stripped / 1024.0)))
    missing = S.missing_prerequisites(ctx.agent)
    if missing:
        return rows + [skipped(GROUP, "idle daemon", "missing " + ", ".join(missing))]
    window = 15 if ctx.quick else 60
    with S.Sandbox(agent=ctx.agent, versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
                   agent_config={"lease": {"enabled": True, "duration": "40s"}}) as sb:
        pid = sb.um.main_pid(S.AGENT_UNIT)
        # Settle: the first seconds hold start-up work (adoption, first lists, the first Lease).
        sb.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == sb.osc["checksum"], 30, "the agent settled")
        time.sleep(3)
        seq = agentrun.last_seq(sb.emu)
        cpu0, sw0, t0 = cpu_seconds(pid), ctxt_switches(pid), time.monotonic()
        time.sleep(window)
        cpu1, sw1, t1 = cpu_seconds(pid), ctxt_switches(pid), time.monotonic()
        reqs = sb.emu.request_log(since=seq)
        st, sm, libs = proc_status(pid), smaps_rollup_kib(pid), shared_objects(pid)
    span = t1 - t0
    rows += [
        row(GROUP, "idle VmRSS after %d s" % window, status_kib(st, "VmRSS") / 1024.0, "MiB"),
        row(GROUP, "idle RssAnon (private heap+stacks)", status_kib(st, "RssAnon") / 1024.0, "MiB", target=("<=", 2)),
        row(GROUP, "idle PSS", sm.get("Pss", 0) / 1024.0, "MiB", target=("<=", 8)),
        row(GROUP, "shared objects mapped", len(libs), ""),
        row(GROUP, "CPU time per idle hour (extrapolated)", (cpu1 - cpu0) * 3600 / span, "s",
            note="%.2f s over %.0f s" % (cpu1 - cpu0, span)),
        row(GROUP, "wake-ups (context switches) per idle minute", (sw1 - sw0) * 60 / span, "",
            note="%d requests to the API server in the window: %s" % (
                len(reqs), ", ".join(sorted(set("%s %s" % (e.get("verb"), e.get("path")) for e in reqs))) or "none")),
    ]
    return rows
