#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Throttling, slow and unreachable servers for the Node watch (docs/kube-api.md §7.1, §3.7, §10 faults 7, 9, 10):
Retry-After is honoured (no request before it) without relisting, a silent watch is detected and replaced,
slow answers time out, and an unreachable server is retried at a bounded rate and recovered from without a
restart. Fault 14: a 403 on the OSC Secret is said once and retried minutes apart, not at the load backoff,
while the Node watch and the Lease go on."""

import re
import time

from lib import itest
from lib.itest import check, eq
import agentrun
from agentrun import Agent, lists, node_requests, watches
from kubeemu import wait_for

SLACK = 0.02        # the emulator stamps a request's end after its answer was written


def secret_reads(emu, name):
    return [e for e in emu.request_log(path="/secrets") if name in e["path"] + "?" + e["query"] and e["verb"] != "watch"]


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeThrottle(itest.EmulatorTest):
    def test_1_retry_after_on_watch_open(self):
        """Fault 7: plain-text 429 with Retry-After: 3 on the watch → next watch ≥ 3 s later, no relist."""
        emu = self.emu
        emu.seed_node("t1")
        with Agent(emu, "t1") as agent:
            agent.wait_ready()
            # Close a watch that already saw a bookmark: a younger one would count as "very short" (relist).
            wait_for(lambda: [w for w in emu.watches(active=True) if w["events"]], 5, "a watch with a bookmark")
            since = agentrun.last_seq(emu)
            emu.inject("too-many-requests", verbs=["watch"], params={"retry_after": 3})
            emu.close_connections(watches="clean")
            reqs = wait_for(lambda: (lambda r: r if len(r) >= 2 else None)(
                [e for e in watches(node_requests(emu, "t1", since)) if e["end"] or e["status"] == 200]), 10,
                "the throttled watch and the next one")
            throttled, nxt = reqs[0], reqs[1]
            eq(throttled["status"], 429, "throttled watch")
            eq(throttled["retry_after"], "3", "Retry-After sent")
            pause = nxt["time"] - throttled["end"]
            print("    next watch %.2fs after 429 Retry-After: 3" % pause)
            check(pause >= 3.0 - SLACK, "watch retried after %.2fs despite Retry-After: 3", pause)
            check(pause < 3.0 + 2.5, "waited %.2fs, far more than asked", pause)
            eq(lists(node_requests(emu, "t1", since)), [], "relists after a 429")
            emu.label_node("t1", {"a": "1"})
            agent.wait_label("a", "1", 5)

    def test_2_retry_after_on_list(self):
        """Fault 7: 429 Status JSON with retryAfterSeconds on the first LIST → the client itself waits and
        repeats it; READY=1 only after that LIST completed."""
        emu = self.emu
        emu.seed_node("t2", labels={"x": "y"})
        emu.inject("too-many-requests", verbs=["list"], params={"retry_after": 2, "json": True})
        with Agent(emu, "t2") as agent:
            agent.wait_label("x", "y", 10)
            reqs = lists(node_requests(emu, "t2"))
            eq([r["status"] for r in reqs], [429, 200], "LIST statuses")
            pause = reqs[1]["time"] - reqs[0]["end"]
            check(2.0 - SLACK <= pause < 3.5, "LIST repeated after %.2fs, Retry-After was 2", pause)
            t_ready, _ = agent.wait_ready(1)
            check(t_ready - agent.started >= 2.0, "READY=1 %.2fs after start, before the LIST completed",
                  t_ready - agent.started)

    def test_3_retry_after_is_capped(self):
        """A server that always answers 429 Retry-After: 1 gets 1 + 10 attempts per LIST from the client's retry
        loop, 1 s apart; then the reflector's backoff (0.2 s here) decides when to LIST again."""
        emu = self.emu
        emu.seed_node("t3")
        emu.inject("too-many-requests", verbs=["list"], params={"retry_after": 1}, count=-1)
        with Agent(emu, "t3") as agent:
            reqs = wait_for(lambda: (lambda r: r if len(r) >= 12 else None)(
                [e for e in lists(node_requests(emu, "t3")) if e["end"]]), 25, "12 LISTs")
            emu.clear_faults()
            g = [b["time"] - a["end"] for a, b in zip(reqs, reqs[1:])][:11]
            print("    pauses: %s" % ", ".join("%.2f" % x for x in g))
            check(all(1.0 - SLACK <= x < 1.5 for x in g[:10]), "Retry-After: 1 honoured between the 11 attempts: %r", g)
            check(g[10] < 0.95, "after 11 attempts the reflector's backoff (0.2-0.4 s) decides: %r", g)
            agent.wait_ready(1)
            check(any("cannot list" in st for st in agent.notify.statuses()), "STATUS %r" % agent.notify.statuses())

    def test_4_silent_watch_is_replaced(self):
        """Fault 9: the watch goes silent (no events, no bookmarks, TCP open) → reconnect within the silence
        limit (3 s here) plus libcurl's speed-check window."""
        emu = self.emu
        emu.seed_node("t4")
        with Agent(emu, "t4", tuning={"watch-timeout": "20s-21s"}) as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            emu.inject("watch-silent", params={"duration": 30})
            emu.close_connections(watches="clean")
            silent = wait_for(lambda: [w for w in emu.watches() if w.get("fault") == "watch-silent" and w["end"]], 15,
                              "the silent watch to be abandoned")[0]
            lasted = silent["end"] - silent["start"]
            print("    silent watch abandoned after %.2fs" % lasted)
            check(3.0 <= lasted < 11.0, "silent watch lasted %.2fs", lasted)
            eq(silent["end_reason"], "client-closed", "who ended it")
            emu.label_node("t4", {"b": "1"})
            agent.wait_label("b", "1", 10)

    def test_5_slow_headers_time_out(self):
        """Fault 9: headers later than the client's request timeout (2 s here) → the LIST is abandoned and
        repeated; a slow-drip body still parses."""
        emu = self.emu
        emu.seed_node("t5", labels={"drip": "ok"})
        emu.inject("slow-headers", verbs=["list"], params={"delay": 6})
        emu.inject("slow-drip", verbs=["list"], params={"bytes": 200, "interval": 0.01})
        with Agent(emu, "t5", tuning={"request-timeout": "2s"}) as agent:
            agent.wait_label("drip", "ok", 15)
            reqs = lists(node_requests(emu, "t5"))
            check(len(reqs) >= 2, "repeated LIST")
            check(reqs[1]["time"] - reqs[0]["time"] < 4.5, "the slow LIST was abandoned after %.2fs",
                  reqs[1]["time"] - reqs[0]["time"])
            eq(reqs[1]["fault"], "slow-drip", "second LIST dripped")

    def test_6_refused_then_back(self):
        """Fault 10: connection refused for 5 s → bounded retries, recovery without restart."""
        emu = self.emu
        emu.seed_node("t6")
        with Agent(emu, "t6") as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            mark = len(agent.log())
            emu.listen("refuse", seconds=5)
            # The emulator closes the open watch asynchronously: label only once the agent saw it end, so
            # the change really happens while the agent cannot connect (not on the old watch).
            wait_for(lambda: re.search(r"WATCH /api/v1/nodes\S* ended ", agent.log()[mark:]), 5,
                     "the Node watch to end")
            emu.label_node("t6", {"r": "1"})        # happens while the agent cannot connect
            agent.wait_label("r", "1", 15)
            log = agent.log()[mark:]
            attempts = len(re.findall(r"WATCH /api/v1/nodes/t6 ended .*connect-error", log))
            print("    %d connection attempts while refused for 5 s" % attempts)
            check(1 <= attempts <= 8, "%d watch attempts during 5 s of refusal (backoff 0.2 s → 2 s)", attempts)
            check(agent.alive(), "agent alive")

    def test_7_blackholed_then_back(self):
        """Fault 10: SYNs accepted but never answered for 4 s → the watch is abandoned, recovery after."""
        emu = self.emu
        emu.seed_node("t7")
        with Agent(emu, "t7", tuning={"request-timeout": "2s"}) as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            emu.listen("blackhole", seconds=4)
            emu.label_node("t7", {"bh": "1"})
            agent.wait_label("bh", "1", 20)
            check(agent.alive(), "agent alive")

    def test_8_forbidden_secret_backs_off_long(self):
        """Fault 14 (docs/kube-api.md §6.4): a lasting 403 on the OSC Secret is configuration, not load. One warning
        with the server's reason; once it has lasted forbidden-backoff (here 3 s; 2 min in production) the
        attempts are that far apart instead of the 0.2 s → 2 s load backoff; the Node watch and the Lease go on;
        the Secret is read once allowed. A single 403 (an authorizer's cache at first boot) is retried at the
        ordinary backoff."""
        emu = self.emu
        emu.seed_node("t9")
        emu.seed_secret("osc-t9", namespace="kube-system", data={"osc.yaml": "apiVersion: v1\n"})
        emu.inject("forbidden", resource="secrets", count=1)
        with Agent(emu, "t9", config_extra="osc:\n  secretName: osc-t9\n", lease=True,
                   tuning={"forbidden-backoff": "3s"}) as agent:
            agent.wait_settled()
            agent.wait_log("LIST /api/v1/namespaces/kube-system/secrets/osc-t9: rv=", 5)
            reads = secret_reads(emu, "osc-t9")
            eq([e["status"] for e in reads], [403, 200], "a single 403, then the read")
            check(reads[1]["time"] - reads[0]["end"] < 1.5, "a single 403 waited %.1fs",
                  reads[1]["time"] - reads[0]["end"])

        emu.seed_node("t10")
        emu.seed_secret("osc-t10", namespace="kube-system", data={"osc.yaml": "apiVersion: v1\n"})
        rule = emu.inject("forbidden", resource="secrets", count=-1)
        with Agent(emu, "t10", config_extra="osc:\n  secretName: osc-t10\n", lease=True,
                   tuning={"forbidden-backoff": "3s"}) as agent:
            agent.wait_settled()
            agent.wait_log("forbidden (HTTP 403): secrets is forbidden", 10)
            time.sleep(4)                   # the 403 has lasted longer than forbidden-backoff
            t0 = time.time()
            emu.label_node("t10", {"during": "403"})
            agent.wait_label("during", "403", 5)
            renew = emu.get("leases", "gardener-node-agent-t10", namespace="kube-system")["spec"]["renewTime"]
            time.sleep(8)
            reads = [e for e in secret_reads(emu, "osc-t10") if e["time"] >= t0]
            print("    %d Secret reads in 8 s of a lasting 403" % len(reads))
            check(all(e["status"] == 403 for e in reads), "every read forbidden: %r", [e["status"] for e in reads])
            check(1 <= len(reads) <= 3, "%d Secret reads in 8 s: the load backoff (0.2 s → 2 s), not forbidden-backoff",
                  len(reads))
            # One line, the verdict on the Secret (OSCSecretForbidden), not one per retry; the watch says it to
            # its owner only.
            eq(agent.log().count("secrets/osc-t10: forbidden (HTTP 403)"), 0,
               "the watch's warnings for one lasting 403")
            eq(agent.log().count("may not be read: forbidden (HTTP 403)"), 1, "verdicts for one lasting 403")
            check(emu.get("leases", "gardener-node-agent-t10", namespace="kube-system")["spec"]["renewTime"] != renew,
                  "the Lease was not renewed while the Secret was forbidden")
            emu.clear_faults(rule)
            agent.wait_log("LIST /api/v1/namespaces/kube-system/secrets/osc-t10: rv=", 10)
            check(agent.alive(), "agent alive")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
