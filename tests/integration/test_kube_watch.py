#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The watch on our own Node against the API-server emulator (docs/kube-api.md §3.4-§3.6, §10 faults 1-5 and 20):
LIST from the watch cache, WATCH from the list's resourceVersion with bookmarks, and recovery from dropped,
truncated, garbled and expired streams without losing an update and without needless relists."""

import time

from lib import itest
from lib.itest import check, eq
import agentrun
from agentrun import Agent, lists, node_requests, watches
from kubeemu import wait_for


def rv_of(obj):
    return obj["metadata"]["resourceVersion"]


def fault_fired(emu, fault, reason):
    """The injected fault really ended a watch the way intended (not just a timeout)."""
    return wait_for(lambda: [w for w in emu.watches() if w.get("fault") == fault and w.get("end_reason") == reason],
                    10, "a watch ended by %s (%s)" % (fault, reason))


def wait_fault_watch(emu, fault, timeout=10):
    """Wait until the agent's watch carrying the injected fault is open (faults attach at request time)."""
    return wait_for(lambda: [w for w in emu.watches(active=True) if w.get("fault") == fault], timeout,
                    "a watch with fault %s" % fault)


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeWatch(itest.EmulatorTest):
    def test_01_list_then_watch_with_bookmarks(self):
        emu = self.emu
        emu.seed_node("n1", labels={"role": "a"})
        seeded_rv = emu.get_node("n1")["metadata"]["resourceVersion"]
        with Agent(emu, "n1") as agent:
            agent.wait_settled()
            agent.wait_ready()
            agent.wait_label("role", "a")
            agent.wait_watching(timeout=5)
            reqs = node_requests(emu, "n1")
            first, second = reqs[0], reqs[1]
            eq(first["verb"], "list", "first request")
            eq(first["params"].get("resourceVersion"), "0", "first LIST is served from the watch cache")
            eq(first["accept"], "application/json", "Accept")
            check(first["user_agent"].startswith("inplace-agent/") and first["user_agent"].endswith("(linux/amd64)"),
                  "User-Agent %r", first["user_agent"])
            eq(second["verb"], "watch", "second request")
            p = second["params"]
            eq(p.get("fieldSelector"), "metadata.name=n1", "field selector")
            eq(p.get("allowWatchBookmarks"), "true", "bookmarks requested")
            check(2 <= int(p["timeoutSeconds"]) < 4, "timeoutSeconds %s outside [2,4)", p["timeoutSeconds"])
            # (the agent's own first write, GNA's role label, comes after its first watch started)
            check(int(p["resourceVersion"]) >= int(seeded_rv),
                  "watch RV %r older than the Node it listed", p["resourceVersion"])
            # The agent runs without a system bus here, so STATUS= carries that note after the state.
            check(any(s.startswith("Watching node n1") for s in agent.notify.statuses()),
                  "STATUS: %r" % agent.notify.statuses())

            # A label change reaches the agent's view; the RV it reports is the patch's RV.
            obj = emu.label_node("n1", {"role": "b", "extra": "1"})
            v = agent.wait_label("role", "b", 5)
            eq(v["metadata"]["resourceVersion"], rv_of(obj), "view RV")
            eq(v["metadata"]["labels"].get("extra"), "1", "second label of the same patch")

    def test_02_dropped_stream_rewatches_without_relist(self):
        """Fault 1: FIN without the terminating chunk after one event; a second change happens while dropped."""
        emu = self.emu
        emu.seed_node("n2", labels={"step": "0"})
        with Agent(emu, "n2") as agent:
            agent.wait_settled()
            agent.wait_label("step", "0")
            emu.inject("watch-drop", params={"after_events": 1})
            wait_fault_watch(emu, "watch-drop")
            since = agentrun.last_seq(emu)
            a = emu.label_node("n2", {"step": "1"})
            b = emu.label_node("n2", {"step": "2", "other": "x"})
            v = agent.wait_label("step", "2", 10)
            fault_fired(emu, "watch-drop", "fault-drop")
            eq(v["metadata"]["labels"].get("other"), "x", "update made while the stream was down")
            eq(v["metadata"]["resourceVersion"], rv_of(b), "final RV")
            reqs = node_requests(emu, "n2", since)
            eq(lists(reqs), [], "LISTs after a dropped stream")
            rewatch = watches(reqs)[0]
            check(int(rewatch["params"]["resourceVersion"]) >= int(rv_of(a)),
                  "re-watch from %s, before the delivered event %s", rewatch["params"]["resourceVersion"], rv_of(a))

    def test_03_rst_dropped_stream(self):
        """Fault 1 with a TCP RST instead of a FIN."""
        emu = self.emu
        emu.seed_node("n3")
        with Agent(emu, "n3") as agent:
            agent.wait_settled()
            agent.wait_ready()
            emu.inject("watch-drop", params={"after_events": 1, "rst": True})
            wait_fault_watch(emu, "watch-drop")
            since = agentrun.last_seq(emu)
            emu.label_node("n3", {"a": "1"})
            emu.label_node("n3", {"b": "2"})
            agent.wait_view(lambda v: v["metadata"]["labels"].get("a") == "1" and v["metadata"]["labels"].get("b") == "2",
                            10, "both labels")
            fault_fired(emu, "watch-drop", "fault-drop")
            eq(lists(node_requests(emu, "n3", since)), [], "LISTs after a reset stream")

    def test_04_truncated_event_is_discarded(self):
        """Fault 2: half an event, then the connection drops; the fragment is never applied."""
        emu = self.emu
        emu.seed_node("n4", labels={"t": "0"})
        with Agent(emu, "n4") as agent:
            agent.wait_settled()
            agent.wait_label("t", "0")
            emu.inject("watch-truncate", params={"after_events": 1})
            wait_fault_watch(emu, "watch-truncate")
            emu.label_node("n4", {"t": "1"})
            emu.label_node("n4", {"t": "2"})       # the truncated one
            agent.wait_label("t", "2", 10)
            fault_fired(emu, "watch-truncate", "fault-truncate")
            check(agent.alive(), "agent alive")

    def test_05_garbage_line_relists_with_backoff(self):
        """Fault 3a: a non-JSON line in the stream → relist (from the last RV) after a backoff step."""
        emu = self.emu
        emu.seed_node("n5", labels={"g": "0"})
        with Agent(emu, "n5") as agent:
            agent.wait_settled()
            agent.wait_label("g", "0")
            emu.inject("watch-garbage", params={"line": "this is not json", "then": "keep"})
            wait_fault_watch(emu, "watch-garbage")
            since = agentrun.last_seq(emu)
            relist = wait_for(lambda: lists(node_requests(emu, "n5", since)), 10, "a relist")[0]
            garbage = [w for w in emu.watches() if w.get("fault") == "watch-garbage"][-1]
            t_garbage = [e[2] for e in garbage["events"] if e[0] == "GARBAGE"][0]
            check(relist["time"] - t_garbage >= 0.2, "relist %.3fs after the garbage: no backoff",
                  relist["time"] - t_garbage)
            rv = relist["params"].get("resourceVersion")
            check(rv not in (None, "", "0"), "relist from the last RV, got %r", rv)
            emu.label_node("n5", {"g": "1"})
            agent.wait_label("g", "1", 10)

    def test_06_unknown_event_type_relists(self):
        """Fault 3b: valid JSON with an unknown type → like a decode error."""
        emu = self.emu
        emu.seed_node("n6")
        with Agent(emu, "n6") as agent:
            agent.wait_settled()
            agent.wait_ready()
            emu.inject("watch-garbage", params={"unknown_type": True, "type": "SURPRISE", "then": "keep"})
            wait_fault_watch(emu, "watch-garbage")
            since = agentrun.last_seq(emu)
            wait_for(lambda: lists(node_requests(emu, "n6", since)), 10, "a relist")
            emu.label_node("n6", {"u": "1"})
            agent.wait_label("u", "1", 10)

    def test_07_expired_in_stream_relists_then_watches_new_rv(self):
        """Fault 4a: ERROR 410 Expired inside a 200 stream → LIST, then WATCH from that list's RV."""
        emu = self.emu
        emu.seed_node("n7")
        with Agent(emu, "n7") as agent:
            agent.wait_settled()
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.inject("watch-expired")
            emu.label_node("n7", {"e": "1"})        # also makes the next watch end sooner
            reqs = wait_for(lambda: (lambda r: r if len(lists(r)) >= 1 and
                                     [w for w in watches(r) if w["seq"] > lists(r)[0]["seq"]] else None)(
                node_requests(emu, "n7", since)), 15, "LIST then WATCH after 410")
            lst = lists(reqs)[0]
            after = [w for w in watches(reqs) if w["seq"] > lst["seq"]][0]
            expired = [w for w in watches(reqs) if w["seq"] < lst["seq"]]
            check(expired and expired[-1].get("fault") == "watch-expired", "the LIST follows the expired watch")
            check(lst["params"].get("resourceVersion") not in (None, ""),
                  "first relist keeps the RV (not a quorum read)")
            check(int(after["params"]["resourceVersion"]) >= int(lst["params"]["resourceVersion"]),
                  "watch from the new list RV")
            agent.wait_label("e", "1", 10)

    def test_08_expired_http_status_at_watch_start(self):
        """Fault 4b: a plain HTTP 410 Status answer to the watch request."""
        emu = self.emu
        emu.seed_node("n8")
        with Agent(emu, "n8") as agent:
            agent.wait_settled()
            agent.wait_ready()
            since = agentrun.last_seq(emu)
            emu.inject("expired", verbs=["watch"])
            wait_for(lambda: lists(node_requests(emu, "n8", since)), 15, "a relist after 410")
            emu.label_node("n8", {"h": "1"})
            agent.wait_label("h", "1", 10)

    def test_09_expired_relist_falls_back_to_consistent_list(self):
        """Fault 5: the relist with the last RV gets 410 too → LIST with resourceVersion="" at once."""
        emu = self.emu
        emu.seed_node("n9")
        with Agent(emu, "n9") as agent:
            agent.wait_settled()
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.inject("expired", verbs=["list"])
            emu.inject("watch-expired")
            reqs = wait_for(lambda: (lambda r: r if len(lists(r)) >= 2 else None)(node_requests(emu, "n9", since)),
                            15, "two LISTs")
            first, second = lists(reqs)[:2]
            eq(first["status"], 410, "first relist status")
            check(first["params"].get("resourceVersion") not in (None, ""), "first relist from the last RV")
            check("resourceVersion" not in second["params"] or second["params"]["resourceVersion"] == "",
                  "second relist is consistent, got %r" % second["params"])
            check(second["time"] - first["end"] < 0.5, "the fallback LIST is immediate (%.3fs)",
                  second["time"] - first["end"])
            emu.label_node("n9", {"c": "1"})
            agent.wait_label("c", "1", 10)

    def test_10_bookmarks_keep_rv_fresh(self):
        """Fault 20: the Node never changes, everything else does, history is compacted: bookmarks advance the
        agent's RV, so reconnects neither 410 nor relist."""
        emu = self.emu
        emu.seed_node("n10")
        with Agent(emu, "n10") as agent:
            agent.wait_settled()
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            first_watch_rv = int(watches(node_requests(emu, "n10"))[-1]["params"]["resourceVersion"])
            for i in range(5):
                emu.seed_node("other-%d" % i)       # moves the global RV, invisible to our watch
            target = emu.current_rv()
            emu.compact()
            time.sleep(0.1)
            # Next reconnect(s) must start at or after the compaction point: only bookmarks told us about it.
            w = wait_for(lambda: [x for x in watches(node_requests(emu, "n10", since))
                                  if int(x["params"]["resourceVersion"]) >= target], 15, "a watch from a bookmark RV")
            check(int(w[0]["params"]["resourceVersion"]) > first_watch_rv, "RV advanced")
            time.sleep(3)
            reqs = node_requests(emu, "n10", since)
            eq(lists(reqs), [], "LISTs while only bookmarks arrived")
            errors = [x for x in emu.watches(since=0) if x["path"] == "/api/v1/nodes" and
                      "n10" in x["query"] and (x.get("end_reason") or "").startswith("error-410")]
            eq(errors, [], "expired watches")

    def test_11_oversized_event_is_a_warning_once(self):
        """Issue 16: an object over a size limit used to fail only at debug level ("File too large", "Message too
        long"), retried forever in silence. Now one warning naming the object and the limit, per distinct error."""
        emu = self.emu
        emu.seed_node("n11")
        with Agent(emu, "n11") as agent:
            agent.wait_settled()
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            for t in ("BigA", "BigB"):
                emu.set_condition("n11", t, message="x" * (2300 << 10))     # ~4.5 MiB Node: a watch line over 4 MiB
            want = "WATCH /api/v1/nodes/n11: an event is larger than the limit of 4194304 bytes; listing again."
            wait_for(lambda: want in agent.log(), 15, "the warning")
            emu.label_node("n11", {"after": "1"})
            agent.wait_label("after", "1", 15)              # the LIST (< 8 MiB) still delivers
            emu.label_node("n11", {"after": "2"})
            agent.wait_label("after", "2", 15)
            eq(agent.log().count("is larger than the limit"), 1, "warnings")
            # Memory stays bounded: the 4.5 MiB events are refused as they stream, the LIST's 8 MiB cap bounds
            # the peak, and nothing of the refused objects is kept.
            with open("/proc/%d/status" % agent.proc.pid) as f:
                st = {k: int(v.split()[0]) for k, v in (x.split(":", 1) for x in f) if k in ("VmRSS", "VmHWM")}
            with open("/proc/%d/maps" % agent.proc.pid) as f:
                sanitized = "libasan" in f.read()
            print("    after two 4.5 MiB Node events: VmRSS %d KiB, peak VmHWM %d KiB%s"
                  % (st["VmRSS"], st["VmHWM"], " (ASan build: its quarantine keeps freed memory; not bounded here)"
                     if sanitized else ""))
            if not sanitized:
                check(st["VmHWM"] < 96 << 10, "peak RSS %d KiB" % st["VmHWM"])
                check(st["VmRSS"] < 64 << 10, "RSS %d KiB" % st["VmRSS"])


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
