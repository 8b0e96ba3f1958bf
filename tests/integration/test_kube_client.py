#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""kube-client and kube-events through the kubedrv driver against the emulator (docs/kube-api.md §4, §5, §7.1,
§3.7; §10 faults 7, 12, 16, 18): request shapes, Status decoding, Retry-After with a bounded retry count,
no blind replay of a POST after a lost connection, a 401 answered by re-reading the token file, and client-go
style Event deduplication (count patch, re-create after expiry, spam filter, bounded queue)."""

import json
import os
import subprocess

from lib import itest
from lib.itest import check, eq
import agentrun
from kubeemu import wait_for

KUBEDRV = os.environ.get("KUBEDRV", "")
EVENTS = "/api/v1/namespaces/default/events"
SLACK = 0.02        # the emulator stamps a request's end after its answer was written


def drv(emu, *cmd, node="n1", uid=None, tuning="backoff-base=200ms", timeout=60, kubeconfig=None):
    args = [KUBEDRV, "--kubeconfig", kubeconfig or emu.kubeconfig_tokenfile, "--node", node]
    if uid:
        args += ["--uid", uid]
    out = subprocess.run(args + list(cmd), capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, INPLACE_AGENT_KUBE_TUNING=tuning))
    if out.returncode != 0:
        raise AssertionError("kubedrv %r exited %d: %s" % (cmd, out.returncode, out.stderr))
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def node_events(emu, node):
    return [e for e in emu.list("events", namespace="default") if e["involvedObject"].get("name") == node]


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeClient(itest.EmulatorTest):
    def test_01_status_decoding(self):
        emu = self.emu
        emu.seed_node("c1")
        r = drv(emu, "get", "/api/v1/nodes/missing", "get", "/api/v1/nodes/c1",
                "patch", "merge", "/api/v1/nodes/c1", '{"metadata":{"labels":{"bad":"no spaces allowed"}}}',
                "patch", "merge", "/api/v1/nodes/c1", '{"metadata":{"labels":{"ok":"yes","gone":null}}}')
        eq((r[0]["errno"], r[0]["status"], r[0]["reason"]), ("ENOENT", 404, "NotFound"), "missing node")
        eq(r[0]["message"], 'nodes "missing" not found', "Status message")
        eq((r[1]["error"], r[1]["object"]["metadata"]["name"]), (0, "c1"), "GET")
        eq((r[2]["errno"], r[2]["status"], r[2]["reason"]), ("EINVAL", 422, "Invalid"), "invalid label")
        eq(r[3]["error"], 0, "merge patch")
        eq(emu.get_node("c1")["metadata"]["labels"].get("ok"), "yes", "label set")
        log = emu.request_log(path="^/api/v1/nodes/c1$", method="PATCH")
        eq(log[-1]["content_type"], "application/merge-patch+json", "Content-Type")
        check(log[-1]["user_agent"].startswith("inplace-agent/") and log[-1]["user_agent"].endswith("(linux/amd64)"),
              "User-Agent %r", log[-1]["user_agent"])

    def test_02_condition_by_strategic_merge(self):
        """The recipe manager_patch_node_condition() uses: SMP on /status merges conditions by type."""
        emu = self.emu
        emu.seed_node("c2")
        r = drv(emu, "patch", "strategic", "/api/v1/nodes/c2/status",
                '{"status":{"conditions":[{"type":"InPlaceUpdateAgent","status":"True","reason":"Idle",'
                '"message":"nothing to do","lastHeartbeatTime":"2025-01-02T03:04:05Z",'
                '"lastTransitionTime":"2025-01-02T03:04:05Z"}]}}')
        eq(r[0]["error"], 0, "SMP")
        types = [c["type"] for c in emu.get_node("c2")["status"]["conditions"]]
        check("Ready" in types and "InPlaceUpdateAgent" in types, "kubelet's conditions kept: %r", types)
        eq(emu.request_log(path="^/api/v1/nodes/c2/status$")[-1]["content_type"],
           "application/strategic-merge-patch+json", "Content-Type")

    def test_03_retry_after_on_writes(self):
        """Fault 7: 429 with Retry-After: 2 on PATCH and on POST → each repeated once, not before 2 s."""
        emu = self.emu
        emu.seed_node("c3")
        emu.inject("too-many-requests", verbs=["patch"], params={"retry_after": 2})
        emu.inject("too-many-requests", verbs=["create"], params={"retry_after": 2})
        r = drv(emu, "patch", "merge", "/api/v1/nodes/c3", '{"metadata":{"labels":{"x":"1"}}}',
                "post", EVENTS, json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "c3.manual"},
                                            "involvedObject": {"kind": "Node", "name": "c3"}, "reason": "R",
                                            "message": "m", "type": "Normal"}))
        for x in r:
            eq((x["error"], x["attempts"]), (0, 2), "%s after a 429" % x["cmd"])
            check(x["elapsed_ms"] >= 2000, "%s repeated after %d ms, Retry-After was 2 s", x["cmd"], x["elapsed_ms"])
        patches = emu.request_log(path="^/api/v1/nodes/c3$", method="PATCH")
        eq([p["status"] for p in patches], [429, 200], "PATCH statuses")
        # Server-side stamps: "end" is taken after the answer left, so allow a few ms of that.
        check(patches[1]["time"] - patches[0]["end"] >= 2.0 - SLACK, "no PATCH before Retry-After")

    def test_04_retry_after_retry_cap(self):
        """At most 1 + 10 attempts, whatever the server keeps saying."""
        emu = self.emu
        emu.seed_node("c4")
        emu.inject("too-many-requests", verbs=["get"], params={"retry_after": 1}, count=-1)
        r = drv(emu, "get", "/api/v1/nodes/c4", timeout=30)
        eq((r[0]["errno"], r[0]["status"], r[0]["attempts"]), ("EAGAIN", 429, 11), "after the cap")
        eq(len(emu.request_log(path="^/api/v1/nodes/c4$")), 11, "requests sent")
        emu.clear_faults()

    def test_05_unavailable_is_not_replayed_for_post(self):
        """503 + Retry-After: PATCH/PUT are repeated (state-setting), a POST is not (it may have happened)."""
        emu = self.emu
        emu.seed_node("c5")
        emu.inject("service-unavailable", verbs=["patch"], params={"retry_after": 1})
        emu.inject("service-unavailable", verbs=["create"], params={"retry_after": 1})
        r = drv(emu, "patch", "merge", "/api/v1/nodes/c5", '{"metadata":{"labels":{"y":"1"}}}',
                "post", EVENTS, json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "c5.manual"},
                                            "involvedObject": {"kind": "Node", "name": "c5"}, "reason": "R",
                                            "message": "m", "type": "Normal"}))
        eq((r[0]["error"], r[0]["attempts"]), (0, 2), "PATCH after 503")
        eq((r[1]["errno"], r[1]["status"], r[1]["attempts"]), ("EAGAIN", 503, 1), "POST after 503")

    def test_06_lost_connection_replays_only_repeatable(self):
        """Fault 18: the connection dies before an answer. GET and PATCH are repeated after 1 s; a POST is not —
        the emulator sees it exactly once."""
        emu = self.emu
        emu.seed_node("c6")
        since = agentrun.last_seq(emu)
        emu.inject("close", verbs=["get"], params={"rst": True})
        emu.inject("close", verbs=["patch"])
        emu.inject("close", verbs=["create"])
        r = drv(emu, "get", "/api/v1/nodes/c6",
                "patch", "merge", "/api/v1/nodes/c6", '{"metadata":{"annotations":{"a":"1"}}}',
                "post", EVENTS, json.dumps({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "c6.manual"},
                                            "involvedObject": {"kind": "Node", "name": "c6"}, "reason": "R",
                                            "message": "m", "type": "Normal"}))
        # Repeated either by the client (after 1 s) or, on a reused connection, by libcurl at once.
        eq(r[0]["error"], 0, "GET after a reset")
        eq(r[1]["error"], 0, "PATCH after a lost connection")
        eq(len(emu.request_log(path="^/api/v1/nodes/c6$", method="GET")), 2, "GETs that reached the server")
        eq(len(emu.request_log(path="^/api/v1/nodes/c6$", method="PATCH")), 2, "PATCHes that reached the server")
        eq(emu.get_node("c6")["metadata"]["annotations"].get("a"), "1", "the PATCH took effect")
        eq((r[2]["errno"], r[2]["attempts"]), ("ECONNRESET", 1), "POST after a lost connection")
        eq(len(emu.request_log(since=since, path="^" + EVENTS + "$", method="POST")), 1,
           "POSTs that reached the server")

    def test_07_unauthorized_rereads_token_file(self):
        """Fault 12: a 401 makes the client re-read the token file; a new token there → one immediate retry."""
        emu = self.emu
        emu.seed_node("c7")
        old, new = "c7-old", "c7-new"
        emu.add_token(old, "c7-old-user", ["system:masters"])
        emu.add_token(new, "c7-new-user", ["system:masters"])
        emu.write_token_file(old)
        since = agentrun.last_seq(emu)
        # The token file is read at start; rotate it and revoke the old token between the two GETs.
        proc = subprocess.Popen([KUBEDRV, "--kubeconfig", emu.kubeconfig_tokenfile, "--node", "c7",
                                 "get", "/api/v1/nodes/c7", "sleep", "2s", "get", "/api/v1/nodes/c7"],
                                stdout=subprocess.PIPE, text=True,
                                env=dict(os.environ, INPLACE_AGENT_KUBE_TUNING="token-refresh=50s"))
        wait_for(lambda: [e for e in emu.request_log(since=since) if e["user"] == "c7-old-user"], 5, "first GET")
        since = agentrun.last_seq(emu)
        emu.write_token_file(new)
        emu.revoke_token(old)
        out, _ = proc.communicate(timeout=20)
        lines = [json.loads(x) for x in out.splitlines()]
        second = [x for x in lines if x["cmd"] == "get"][1]
        eq((second["error"], second["attempts"]), (0, 2), "GET with a revoked token, then the rotated one")
        check(second["elapsed_ms"] < 500, "retried at once (%d ms)", second["elapsed_ms"])
        eq([(e["status"], e["user"]) for e in emu.request_log(since=since)],
           [(401, None), (200, "c7-new-user")], "requests")

    def test_08_events_dedup_with_count_patch(self):
        emu = self.emu
        node = emu.seed_node("c8")
        uid = node["metadata"]["uid"]
        since = agentrun.last_seq(emu)
        r = drv(emu, "event", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", "flush",
                "event", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", "flush",
                "event", "Normal", "InPlaceUpdateStaged", "staged kubelet 1.32.1", "flush",
                "event", "Warning", "InPlaceUpdateFailed", "something else", "flush", node="c8", uid=uid)
        check(all(x["error"] == 0 for x in r), "emits: %r" % r)
        reqs = emu.request_log(since=since, path="^" + EVENTS)
        eq([e["method"] for e in reqs], ["POST", "PATCH", "PATCH", "POST"], "requests")
        eq(reqs[1]["content_type"], "application/strategic-merge-patch+json", "count patch type")
        eq(set(reqs[1]["body"]), {"count", "lastTimestamp", "message"}, "count patch body")
        evs = sorted(node_events(emu, "c8"), key=lambda e: e["reason"])
        eq(len(evs), 2, "Events stored")
        e = [x for x in evs if x["reason"] == "InPlaceUpdateStaged"][0]
        eq(e["count"], 3, "count")
        eq(e["metadata"]["namespace"], "default", "namespace")
        eq(e["involvedObject"], {"kind": "Node", "apiVersion": "v1", "name": "c8", "uid": uid}, "involvedObject")
        eq(e["source"], {"component": "inplace-agent", "host": "c8"}, "source")
        eq((e["reportingComponent"], e["reportingInstance"]), ("inplace-agent", "c8"), "reporting")
        eq(e["type"], "Normal", "type")
        check(e["metadata"]["name"].startswith("c8."), "name %r", e["metadata"]["name"])
        check(e["firstTimestamp"] <= e["lastTimestamp"], "timestamps")
        # kubectl describe node finds them (docs/kube-api.md §5.2).
        status, _, found = emu.https_json("GET", "/api/v1/events?fieldSelector=involvedObject.kind%3DNode,"
                                          "involvedObject.name%3Dc8,involvedObject.namespace%3D,"
                                          "involvedObject.uid%3D" + uid)
        eq((status, len(found["items"])), (200, 2), "kubectl describe's query")

    def test_09_expired_event_is_created_again(self):
        """Fault 16: the count PATCH finds the Event expired (404) → POST it again, with the current count."""
        emu = self.emu
        emu.seed_node("c9")
        since = agentrun.last_seq(emu)
        proc = subprocess.Popen([KUBEDRV, "--kubeconfig", emu.kubeconfig_tokenfile, "--node", "c9",
                                 "event", "Normal", "R", "same", "flush", "sleep", "1500ms",
                                 "event", "Normal", "R", "same", "flush"], stdout=subprocess.PIPE, text=True)
        wait_for(lambda: node_events(emu, "c9"), 5, "the first Event")
        emu.expire_events()
        proc.communicate(timeout=15)
        eq(proc.returncode, 0, "kubedrv")
        reqs = emu.request_log(since=since, path="^" + EVENTS)
        eq([(e["method"], e["status"]) for e in reqs], [("POST", 201), ("PATCH", 404), ("POST", 201)], "requests")
        evs = node_events(emu, "c9")
        eq([e["count"] for e in evs], [2], "re-created with the current count")

    def test_10_spam_filter_and_bounded_queue(self):
        """25 events per object and type pass, the rest is dropped locally; while the server hangs, the queue
        holds at most 32 and refuses more instead of growing."""
        emu = self.emu
        emu.seed_node("c10")
        since = agentrun.last_seq(emu)
        cmds = []
        for i in range(30):
            cmds += ["event", "Warning", "Spam", "message %d" % i]
        r = drv(emu, *(cmds + ["flush"]), node="c10")
        eq([x["error"] for x in r], [0] * 30, "emit results (drops by the spam filter are silent)")
        eq(len(emu.request_log(since=since, path="^" + EVENTS)), 25, "Events sent for 30 in a burst")

        emu.inject("slow-headers", verbs=["create"], params={"delay": 2})
        since = agentrun.last_seq(emu)
        cmds = []
        for i in range(40):
            cmds += ["event", "Normal" if i % 2 else "Warning", "Queue", "message %d" % i]
        r = drv(emu, *(cmds + ["flush"]), node="c11")
        full = [x for x in r if x.get("errno") == "ENOBUFS"]
        print("    40 events while the server hangs: %d queued, %d refused" % (40 - len(full), len(full)))
        check(len(full) >= 40 - 32 - 1, "queue bounded: only %d refused", len(full))
        sent = emu.request_log(since=since, path="^" + EVENTS)
        eq(len(sent), 40 - len(full), "every queued Event was sent once the server answered")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("KUBEDRV"))
