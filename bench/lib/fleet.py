# SPDX-License-Identifier: Apache-2.0
"""Fleet: N idle agents (own state directories and node names, production watch and Lease timings, a
40 s Lease) against one API-server emulator process. Per agent: requests per hour at idle (what they
are: Lease renewals and watch renewals expected, relists not), total memory (sum of RSS and of PSS),
and, after the emulator drops every connection and refuses new ones for 5 s (a restart as the agents
see it), the spread of their reconnects. When the emulator cannot hold N agents, the figure says how
many watches it held and where it stopped; the agents' behaviour is what is measured."""

import collections
import shutil
import time
import urllib.parse

from common import proc_status, row, skipped, smaps_rollup_kib, status_kib
import agentrun  # noqa: E402  (tests/integration/lib)
import kubeemu  # noqa: E402

GROUP = "fleet"
DOWN = 5.0


def node_of(entry):
    """Which agent made the request: the Lease name or the Node field selector."""
    path = entry.get("path") or ""
    if "/leases/" in path:
        name = path.rsplit("/", 1)[1]                           # core/config.c's default name: GNA's
        for prefix in ("gardener-node-agent-", "inplace-agent-"):
            if name.startswith(prefix):
                return name[len(prefix):]
        return name
    if path.startswith("/api/v1/nodes/"):
        return path.split("/")[4]
    sel = urllib.parse.parse_qs(entry.get("query") or "").get("fieldSelector", [""])[0]
    if sel.startswith("metadata.name="):
        return sel.split("=", 1)[1]
    return None


def kind_of(e):
    if "/leases" in (e.get("path") or ""):
        return "lease " + (e.get("verb") or "?")
    return "%s %s" % (e.get("verb") or "?", (e.get("path") or "").rsplit("/", 1)[-1] or "/")


def fleet(ctx, n, window):
    agentrun.AGENT = ctx.agent
    nodes = ["fleet-%04d" % i for i in range(n)]
    production = {k: None for k in agentrun.FAST_TUNING}
    agents, rows = [], []
    label = "N=%d" % n
    with kubeemu.start(nodes=nodes, timeout=120, config={"watch_timeout_min": 1800.0}) as emu:
        try:
            for name in nodes:
                agents.append(agentrun.Agent(emu, name, tuning=production, lease=True, lease_duration="40s"))
            try:
                emu.wait_for_watch(timeout=60 + n * 0.2, count=n)
            except Exception:
                held = len(emu.watches(active=True))
                alive = sum(1 for a in agents if a.alive())
                return [skipped(GROUP, label, "the emulator held %d of %d watches (%d agents alive) "
                                "within %.0f s" % (held, n, alive, 60 + n * 0.2))]
            time.sleep(5)                       # first Lease creations and renewals settle
            seq = agentrun.last_seq(emu)
            t0 = time.monotonic()
            time.sleep(window)
            span = time.monotonic() - t0
            reqs = emu.request_log(since=seq)
            per_node = collections.Counter(node_of(e) for e in reqs)
            kinds = collections.Counter(kind_of(e) for e in reqs)
            relists = sum(1 for e in reqs if e.get("verb") == "list")
            rss = pss = 0
            for a in agents:
                if a.alive():
                    rss += status_kib(proc_status(a.proc.pid), "VmRSS")
                    pss += smaps_rollup_kib(a.proc.pid).get("Pss", 0)
            emu_rss = status_kib(proc_status(emu.pid), "VmRSS")
            per_hour = sum(per_node[x] for x in nodes) / n * 3600 / span
            rows.append(row(GROUP, "%s: requests per agent per idle hour" % label, per_hour, "",
                            note=", ".join("%s %d" % kv for kv in kinds.most_common(4)) + " in %.0f s" % span))
            rows.append(row(GROUP, "%s: relists at idle (all agents)" % label, relists, "", target=("==", 0)))
            rows.append(row(GROUP, "%s: total agent memory (sum of PSS)" % label, pss / 1024.0, "MiB",
                            note="sum of RSS %.0f MiB, %.2f MiB PSS per agent; emulator RSS %.0f MiB"
                            % (rss / 1024.0, pss / 1024.0 / n, emu_rss / 1024.0)))

            # A restart as the agents see it: every connection dropped, connections refused for DOWN s.
            seq = agentrun.last_seq(emu)
            t_down = time.time()
            emu.listen("refuse", seconds=DOWN, close_existing=True)
            kubeemu.wait_for(lambda: len(_first_after(emu, seq, nodes, t_down + DOWN - 0.5)) >= n, 120 + n * 0.2,
                             "all reconnected",
                             interval=0.5)
            back = t_down + DOWN
            kubeemu.wait_for(lambda: len(_first_after(emu, seq, nodes, back - 0.5, watches=True)) >= n,
                             120 + n * 0.2, "all watches back", interval=0.5)
            first = _first_after(emu, seq, nodes, back - 0.5)
            delays = sorted(t - back for t in first.values())
            watch_delays = sorted(t - back for t in _first_after(emu, seq, nodes, back - 0.5, watches=True).values())
            after = emu.request_log(since=seq)
            rows.append(row(GROUP, "%s: relists after the outage (all agents)" % label,
                            sum(1 for e in after if e.get("verb") == "list"), "",
                            note="watches resumed from their resourceVersion: %d"
                            % sum(1 for e in after if e.get("verb") == "watch")))
            rows.append(row(GROUP, "%s: watch reconnect spread after a %.0f s outage (first..last)" % (label, DOWN),
                            watch_delays[-1] - watch_delays[0], "s", target=(">=", 10),
                            note="first %+.2f s, median %+.2f s, last %+.2f s after the listener came back"
                            % (watch_delays[0], watch_delays[len(watch_delays) // 2], watch_delays[-1])))
            rows.append(row(GROUP, "%s: first request of any kind after the outage (first..last)" % label,
                            delays[-1] - delays[0], "s",
                            note="first %+.2f s, median %+.2f s, last %+.2f s: mostly Lease renewals, which "
                            "retry on their own fast backoff (0.2 s base) to keep the node's Lease alive"
                            % (delays[0], delays[len(delays) // 2], delays[-1])))
        finally:
            for a in agents:
                a.stop(timeout=10)
                shutil.rmtree(a.dir, ignore_errors=True)
    return rows


def _first_after(emu, seq, nodes, not_before, watches=False):
    """Each agent's first request (or first watch) logged once the listener is back (a request that
    raced the drop of the connections is logged before; refused connections are not logged at all)."""
    wanted, first = set(nodes), {}
    for e in emu.request_log(since=seq):
        if watches and e.get("verb") != "watch":
            continue
        n = node_of(e)
        if n in wanted and n not in first and e["time"] >= not_before:
            first[n] = e["time"]
    return first


def run(ctx):
    sizes = [100] if ctx.quick else [100, 300, 1000]
    window = 20 if ctx.quick else 60
    rows = []
    for n in sizes:
        ctx.log("fleet: %d agents" % n)
        rows += fleet(ctx, n, window)
    return rows
