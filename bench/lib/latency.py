# SPDX-License-Identifier: Apache-2.0
"""Reaction latency and unit restart.

Reaction: the real agent against the API-server emulator with production watch timings; a Node label
(and, alternately, an MCM condition) is changed N times and for each change the time from the emulator
committing it (its watch history timestamp) to the agent having applied the event (the CLOCK_REALTIME
stamp in its debug view file, taken when the event is applied, before any decision runs on it) is
taken. Both stamps are this machine's CLOCK_REALTIME, so polling adds no error.

Unit restart: a real systemd user manager on a private bus; the same unit restarted 50 times
(a) with confirmation over D-Bus by the agent's unit-control module (tests/helpers/unitctl: job, then
    the new InvocationID and active/running checked), one process for all 50, each restart timed at its
    JSON line;
(b) by `systemctl --user restart` (one process per restart, as an operator or a script does it)."""

import os
import subprocess
import time

from common import quantiles, row, skipped
import agentrun  # noqa: E402  (tests/integration/lib)
import kubeemu  # noqa: E402
import usermgr  # noqa: E402

GROUP = "latency"
LONG_RUNNING = "/bin/sh -c 'exec sleep infinity'"


def reaction(ctx, n):
    agentrun.AGENT = ctx.agent
    lat = {"label": [], "condition": []}
    with kubeemu.start(nodes=["bench"]) as emu, \
            agentrun.Agent(emu, "bench", tuning={"watch-timeout": "300s-600s", "watch-silence": "90s"}) as agent:
        agent.wait_label("kubernetes.io/hostname", "bench", 10)
        emu.wait_for_watch(timeout=10)
        for i in range(n):
            kind = "label" if i % 2 == 0 else "condition"
            if kind == "label":
                obj = emu.label_node("bench", {"bench/seq": str(i)})
            else:
                obj = emu.set_condition("bench", "InPlaceUpdate", "True", "CandidateForUpdate", "seq %d" % i)
            rv = int(obj["metadata"]["resourceVersion"])
            v = agent.wait_view(lambda v: int(v.get("metadata", {}).get("resourceVersion", 0) or 0) >= rv, 5,
                                "rv %d" % rv)
            committed = [e for e in emu.history(since_rv=rv - 1)["events"] if e["rv"] == rv][0]["time"]
            lat[kind].append((v["updatedUsec"] / 1e6 - committed) * 1000)
            time.sleep(0.01)
    rows = []
    for kind, values in lat.items():
        p50, p99 = quantiles(values)
        rows.append(row(GROUP, "%s change -> agent acting on it, p50 (%d changes)" % (kind, len(values)), p50, "ms"))
        rows.append(row(GROUP, "%s change -> agent acting on it, p99" % kind, p99, "ms", target=("<", 20),
                        note="max %.1f ms" % max(values)))
    return rows


def unit_restart(ctx, n):
    with usermgr.UserManager(prefix="bench-unit-") as um:
        # No start rate limit: 50 restarts in a row would hit the default 5 per 10 s.
        um.write_unit("bench.service", um.service(LONG_RUNNING, unit_extra="StartLimitIntervalSec=0\n"))
        um.daemon_reload()
        um.systemctl("start", "bench.service")
        # (a) the agent's unit-control over D-Bus, confirmed
        p = subprocess.Popen([ctx.unitctl, "restart"] + ["bench.service"] * n, env=um.env, stdout=subprocess.PIPE,
                             text=True)
        dbus, t = [], time.monotonic()
        for line in p.stdout:
            now = time.monotonic()
            if '"ok": true' in line or '"ok":true' in line:
                dbus.append(now - t)
            t = now
        p.wait()
        if p.returncode != 0 or len(dbus) != n:
            raise RuntimeError("unitctl: %d of %d restarts confirmed (exit %d)" % (len(dbus), n, p.returncode))
        # (b) systemctl --user restart, one process each
        sysctl = []
        for _ in range(n):
            t = time.monotonic()
            um.systemctl("restart", "bench.service")
            sysctl.append(time.monotonic() - t)
    d50, d99 = quantiles([x * 1000 for x in dbus])
    s50, s99 = quantiles([x * 1000 for x in sysctl])
    return [row(GROUP, "unit restart over D-Bus with confirmation, p50 (%d)" % n, d50, "ms", s50,
                "systemctl restart p50"),
            row(GROUP, "unit restart over D-Bus with confirmation, p99", d99, "ms", s99, "systemctl restart p99")]


def run(ctx):
    rows = reaction(ctx, 200)
    missing = usermgr.missing_prerequisites()
    if missing:
        return rows + [skipped(GROUP, "unit restart", "missing " + ", ".join(missing))]
    try:
        return rows + unit_restart(ctx, 50)
    except (RuntimeError, usermgr.UserManagerError) as e:
        return rows + [skipped(GROUP, "unit restart", str(e))]
