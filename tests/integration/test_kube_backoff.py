#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Backoff of the Node watch, observed from the emulator's request timestamps (docs/kube-api.md §3.6, §10 faults 6
and 8): with the real defaults the pauses between failed attempts grow from 0.8 s (doubling, +0-100 % jitter),
and a server that closes every watch at once never makes the agent spin."""

import time

from lib import itest
from lib.itest import check
import agentrun
from agentrun import Agent, lists, node_requests, watches
from kubeemu import wait_for


def gaps(reqs):
    """Pause between the end of one request and the start of the next."""
    return [b["time"] - a["end"] for a, b in zip(reqs, reqs[1:])]


def check_growing_jittered(g, base, what):
    """Step k sleeps in [base*2^k, 2*base*2^k) (plus request latency); the jitter makes the ratios differ."""
    ratios = []
    for k, x in enumerate(g):
        lo = base * 2 ** k
        check(lo - 0.02 <= x < 2 * lo + 0.25, "%s: pause %d is %.3fs, expected [%.2f, %.2f)", what, k, x, lo, 2 * lo)
        ratios.append(x / lo)
    check(max(ratios) - min(ratios) > 0.02, "%s: pauses %r show no jitter", what, g)


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeBackoff(itest.EmulatorTest):
    def test_1_internal_errors_back_off_exponentially(self):
        """Fault 8: every LIST answers 500 InternalError (no Retry-After). Real default backoff: 0.8 s → …"""
        emu = self.emu
        emu.seed_node("b1", labels={"x": "0"})
        emu.inject("internal-error", verbs=["list"], count=-1)
        with Agent(emu, "b1", tuning={"backoff-base": None, "backoff-cap": None}) as agent:
            # READY=1 comes after the first LIST failed: systemd must not wait for the API server.
            agent.wait_ready(5)
            check(any("cannot list" in s for s in agent.notify.statuses()), "STATUS %r" % agent.notify.statuses())
            reqs = wait_for(lambda: (lambda r: r if len(r) >= 4 else None)(
                [e for e in lists(node_requests(emu, "b1")) if e["end"]]), 20, "4 LIST attempts")
            # The next pause is [6.4, 12.8) s: heal the server now, the 5th attempt must succeed.
            emu.clear_faults()
            g = gaps(reqs[:4])
            print("    pauses between failed LISTs (500): %s" % ", ".join("%.2fs" % x for x in g))
            check_growing_jittered(g, 0.8, "500 InternalError")
            check(all(r["status"] == 500 for r in reqs[:4]), "all failed: %r", [r["status"] for r in reqs])
            emu.label_node("b1", {"x": "1"})
            agent.wait_label("x", "1", 15)
            reqs = lists(node_requests(emu, "b1"))
            check(len(reqs) == 5 and reqs[4]["status"] == 200, "5th LIST succeeded")
            check(6.4 - 0.02 <= reqs[4]["time"] - reqs[3]["end"] < 12.8 + 0.25, "5th pause %.2fs",
                  reqs[4]["time"] - reqs[3]["end"])

    def test_2_unavailable_without_retry_after_backs_off(self):
        """Fault 8: 503 without Retry-After on the watch; faster backoff settings, same shape."""
        emu = self.emu
        emu.seed_node("b2")
        with Agent(emu, "b2", tuning={"backoff-base": "200ms", "backoff-cap": "30s"}) as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.inject("service-unavailable", verbs=["watch"], count=-1)
            emu.close_connections(watches="clean")
            reqs = wait_for(lambda: (lambda r: r if len(r) >= 4 else None)(
                [e for e in node_requests(emu, "b2", since) if e["status"] == 503 and e["end"]]), 20,
                "4 failed watches")
            emu.clear_faults()
            # A 503 at watch start is "other error": relist after backoff, so each pause is LIST + backoff;
            # count from one failed watch to the next.
            g = [b["time"] - a["end"] for a, b in zip(reqs, reqs[1:])]
            print("    pauses between failed watches (503): %s" % ", ".join("%.2fs" % x for x in g))
            for k, x in enumerate(g):
                lo = 0.2 * 2 ** (k + 1)         # the step after the clean close already used 0.2 s
                check(lo * 0.5 <= x < 2 * lo + 0.5, "pause %d is %.3fs, expected about [%.2f, %.2f)", k, x, lo, 2 * lo)
            emu.label_node("b2", {"ok": "1"})
            agent.wait_label("ok", "1", 15)

    def test_3_very_short_watches_do_not_spin(self):
        """Fault 6: every watch closes cleanly at once with no event → backoff, not a hot loop."""
        emu = self.emu
        emu.seed_node("b3")
        with Agent(emu, "b3", tuning={"backoff-base": "200ms", "backoff-cap": "30s"}) as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.inject("watch-short", count=-1)
            emu.close_connections(watches="clean")
            t0 = time.monotonic()
            time.sleep(6)
            reqs = node_requests(emu, "b3", since)
            w = watches(reqs)
            print("    %d watches and %d LISTs in %.1fs of very short watches" % (len(w), len(lists(reqs)),
                                                                                  time.monotonic() - t0))
            # 0.2 s doubling: at most ~5 backoff steps fit in 6 s; a spinning client would make hundreds.
            check(len(w) <= 7, "%d watches in 6 s", len(w))
            short = [e for e in w if e["fault"] == "watch-short"]
            g = [b["time"] - a["end"] for a, b in zip(short, short[1:])]
            check(all(b > a for a, b in zip(g, g[1:])), "pauses grow: %r" % g)
            emu.clear_faults()
            emu.label_node("b3", {"s": "1"})
            agent.wait_label("s", "1", 15)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
