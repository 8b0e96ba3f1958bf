#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Node lifecycle, resourceVersion discontinuities and the Lease (docs/kube-api.md §3.6, §8, §10 faults 13, 15, 17;
docs/contract.md §8.14): READY=1 also when the Node does not exist yet, ADDED after DELETED with a new uid re-targets
the Lease owner, a reset or jumped RV leads to a relist instead of a stuck watch, and a Lease conflict is
resolved by re-reading it."""

import os
import re
import shutil
import tempfile
import time

from lib import itest
from lib.itest import check, eq
import agentrun
from agentrun import Agent, lists, node_requests
from kubeemu import wait_for

MICROTIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def lease(emu, name):
    return emu.get("leases", name, namespace="kube-system", group="coordination.k8s.io")


def lease_requests(emu, name, since=0):
    """Requests for that Lease: by path, or a create whose body names it."""
    base = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    return [e for e in emu.request_log(since=since, path="^" + base)
            if e["path"] == base + "/" + name or
            (e["path"] == base and ((e.get("body") or {}).get("metadata") or {}).get("name") == name)]


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeLifecycle(itest.EmulatorTest):
    def test_1_node_absent_then_created_deleted_recreated(self):
        """Fault 15: no Node at start (empty list), then ADDED, DELETED, ADDED with a new uid."""
        emu = self.emu
        with Agent(emu, "l1", lease=True) as agent:
            agent.wait_ready(5)
            check(any("to be registered" in s for s in agent.notify.statuses()), "STATUS %r" % agent.notify.statuses())
            agent.wait_view(lambda v: v["present"] is False, 5, "absent in the view")
            time.sleep(1)
            eq(lease_requests(emu, "gardener-node-agent-l1"), [], "Lease requests without a Node to own it")

            first = emu.seed_node("l1", labels={"gen": "1"})
            agent.wait_label("gen", "1", 5)
            lz = wait_for(lambda: lease(emu, "gardener-node-agent-l1"), 5, "the Lease")
            eq(lz["metadata"]["ownerReferences"][0]["uid"], first["metadata"]["uid"], "Lease owner")
            eq(lz["metadata"]["ownerReferences"][0]["kind"], "Node", "owner kind")
            eq(lz["spec"]["holderIdentity"], "gardener-node-agent-l1", "holderIdentity")
            eq(lz["spec"]["leaseDurationSeconds"], 4, "leaseDurationSeconds")
            check(MICROTIME.match(lz["spec"]["renewTime"]), "renewTime %r is not MicroTime", lz["spec"]["renewTime"])

            emu.delete("nodes", "l1")
            agent.wait_view(lambda v: v["present"] is False, 5, "deleted in the view")
            second = emu.seed_node("l1", labels={"gen": "2"}, uid="uid-of-the-second-l1")
            v = agent.wait_label("gen", "2", 5)
            eq(v["metadata"]["uid"], "uid-of-the-second-l1", "new uid in the view")
            wait_for(lambda: lease(emu, "gardener-node-agent-l1")["metadata"]["ownerReferences"][0]["uid"] ==
                     second["metadata"]["uid"], 5, "the Lease owner to follow the new uid")
            eq(len(lists(node_requests(emu, "l1"))), 1, "LISTs: deletion and re-creation arrive on the watch")

    def test_2_rv_reset_relists_consistently(self):
        """Fault 17: the server restarts with a lower RV: the agent's RV is "too large" (504) → consistent LIST."""
        emu = self.emu
        emu.config(too_large_wait=0.5)
        emu.seed_node("l2")
        with Agent(emu, "l2") as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.rv_reset(50)
            emu.label_node("l2", {"after": "reset"})
            agent.wait_label("after", "reset", 15)
            reqs = lists(node_requests(emu, "l2", since))
            check(reqs, "a relist")
            check(any(r["params"].get("resourceVersion", "") == "" for r in reqs),
                  "a consistent LIST (resourceVersion=\"\"): %r" % [r["params"] for r in reqs])

    def test_3_rv_jump_relists(self):
        """Fault 17: the RV jumps far ahead and the history is gone: the next watch gets 410 → relist."""
        emu = self.emu
        emu.seed_node("l3")
        with Agent(emu, "l3") as agent:
            agent.wait_ready()
            agent.wait_watching(timeout=5)
            since = agentrun.last_seq(emu)
            emu.rv_jump(100000)
            emu.compact()
            emu.label_node("l3", {"after": "jump"})
            agent.wait_label("after", "jump", 15)
            v = agent.view()
            eq(v["metadata"]["resourceVersion"], emu.get_node("l3")["metadata"]["resourceVersion"], "view RV")
            check(int(v["metadata"]["resourceVersion"]) > 100000, "RV after the jump")
            check(lists(node_requests(emu, "l3", since)), "relisted")

    def test_4_lease_conflict_rereads(self):
        """Fault 13: a 409 on the Lease PUT (stale RV) → GET, then PUT again right away."""
        emu = self.emu
        emu.seed_node("l4")
        with Agent(emu, "l4", lease=True) as agent:
            agent.wait_ready()
            wait_for(lambda: [e for e in lease_requests(emu, "gardener-node-agent-l4") if e["method"] == "PUT" and
                              e["status"] == 200], 5, "a renewal")
            since = agentrun.last_seq(emu)
            # Someone else writes the Lease: our copy is stale, the next PUT conflicts for real.
            emu.patch("leases", "gardener-node-agent-l4", {"metadata": {"labels": {"touched": "yes"}}},
                      namespace="kube-system", group="coordination.k8s.io")
            reqs = wait_for(lambda: (lambda r: r if len(r) >= 3 and r[-1]["status"] == 200 and
                                     r[-1]["method"] == "PUT" else None)(
                [e for e in lease_requests(emu, "gardener-node-agent-l4", since) if e["end"]]), 10,
                "409, GET, PUT")
            eq([(e["method"], e["status"]) for e in reqs[:3]], [("PUT", 409), ("GET", 200), ("PUT", 200)],
               "conflict resolution")
            check(reqs[2]["time"] - reqs[0]["end"] < 0.5, "re-read and renewed at once")
            # The renewal built on the re-read object keeps the other writer's change.
            eq(lease(emu, "gardener-node-agent-l4")["metadata"].get("labels", {}).get("touched"), "yes",
               "foreign label")
            # An injected conflict goes the same way.
            since = agentrun.last_seq(emu)
            emu.inject("conflict", verbs=["update"], resource="leases")
            wait_for(lambda: (lambda r: r if len(r) >= 3 else None)(
                [(e["method"], e["status"]) for e in lease_requests(emu, "gardener-node-agent-l4", since) if e["end"]]), 10,
                "409, GET, PUT")
            check(agent.alive(), "alive")

    def test_5_lease_deleted_comes_back_failures_retried(self):
        """docs/node-protocol.md §8 item 1: the Lease is GNA's (name, holder, controller owner); a deleted Lease is re-created
        with the next renewal; renewals failing with 500 for a while are retried within the duration and the
        agent keeps running."""
        emu = self.emu
        node = emu.seed_node("l6")
        name = "gardener-node-agent-l6"
        with Agent(emu, "l6", lease=True) as agent:
            agent.wait_ready()
            lz = wait_for(lambda: lease(emu, name), 5, "the Lease")
            eq(lz["spec"]["holderIdentity"], name, "holderIdentity")
            eq(lz["metadata"]["ownerReferences"],
               [{"apiVersion": "v1", "kind": "Node", "name": "l6", "uid": node["metadata"]["uid"],
                 "controller": True, "blockOwnerDeletion": True}], "ownerReferences")

            emu.delete("leases", name, namespace="kube-system", group="coordination.k8s.io")
            back = wait_for(lambda: (lambda o: o if o and o["metadata"]["uid"] != lz["metadata"]["uid"] else None)(
                lease(emu, name)), 5, "the Lease re-created")
            eq(back["metadata"]["ownerReferences"][0]["uid"], node["metadata"]["uid"], "owner of the re-created Lease")

            since = agentrun.last_seq(emu)
            emu.inject("internal-error", verbs=["update"], resource="leases", count=3)
            wait_for(lambda: (lambda r: r if len(r) >= 4 and r[-1] == ("PUT", 200) else None)(
                [(e["method"], e["status"]) for e in lease_requests(emu, name, since) if e["end"]]), 10,
                "three failed renewals, then one that works")
            reqs = [e for e in lease_requests(emu, name, since) if e["end"]]
            # Retried with backoff, well within the 4 s duration: the Lease never went stale.
            check(reqs[-1]["end"] - reqs[0]["time"] < 4, "retries took %.1f s", reqs[-1]["end"] - reqs[0]["time"])
            check(agent.alive(), "alive")

    def test_6_role_and_zone_labels(self):
        """docs/node-protocol.md Appendix A: node-role.kubernetes.io/worker and topology.kubernetes.io/zone (from
        <osc.rootDirectory>/var/lib/gardener-node-agent/zone), patched only when they differ: once at start,
        again when someone removes one, never while they are there."""
        emu = self.emu
        root = tempfile.mkdtemp(prefix="agent-root-")
        os.makedirs(os.path.join(root, "var/lib/gardener-node-agent"))
        with open(os.path.join(root, "var/lib/gardener-node-agent/zone"), "w") as f:
            f.write("eu-west-1b\n")
        emu.seed_node("l7")
        try:
            with Agent(emu, "l7", config_extra="osc:\n  rootDirectory: %s\n" % root) as agent:
                agent.wait_ready()
                v = agent.wait_label("topology.kubernetes.io/zone", "eu-west-1b", 10)
                eq(v["metadata"]["labels"].get("node-role.kubernetes.io/worker"), "", "worker role label")
                since = agentrun.last_seq(emu)
                emu.label_node("l7", {"unrelated": "x"})
                agent.wait_label("unrelated", "x", 5)
                time.sleep(0.5)     # a patch would follow the event at once; none may
                eq([e for e in emu.request_log(since=since, path="^/api/v1/nodes/l7$") if e["method"] == "PATCH"], [],
                   "label patches while the labels are there")
                emu.label_node("l7", {"topology.kubernetes.io/zone": None}, manager="someone")
                agent.wait_label("topology.kubernetes.io/zone", "eu-west-1b", 10)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def test_8_lease_changed_behind_the_agents_back(self):
        """gardener/gardener#15716 (GNA's Lease unrenewed for 2 h: it renewed from a cached copy): another writer
        sets the Lease's renewTime 2 h back (its resourceVersion moves on); the agent's next renewal PUTs the
        resourceVersion it last got from the server, gets 409, GETs afresh and renews from that: a fresh
        renewTime within one renew period (duration/4 = 1 s), one 409 and no PUT on the old data again."""
        emu = self.emu
        emu.seed_node("l8")
        name = "gardener-node-agent-l8"
        with Agent(emu, "l8", lease=True) as agent:
            agent.wait_ready()
            wait_for(lambda: [e for e in lease_requests(emu, name) if e["method"] == "PUT" and e["status"] == 200], 5,
                     "a renewal")
            since = agentrun.last_seq(emu)
            stale = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(time.time() - 7200))
            t0 = time.time()
            bumped = emu.patch("leases", name, {"spec": {"renewTime": stale}}, namespace="kube-system",
                               group="coordination.k8s.io")["object"]["metadata"]["resourceVersion"]
            fresh = wait_for(lambda: (lambda o: o if o["spec"]["renewTime"] != stale else None)(lease(emu, name)), 5,
                             "the Lease renewed again")
            took = time.time() - t0
            check(took < 2.0, "renewed %.2f s after the foreign write (one period is 1 s)", took)
            check(fresh["spec"]["renewTime"] > stale, "renewTime moved forward")
            reqs = [e for e in lease_requests(emu, name, since) if e["end"]]
            # A renewal may have raced the foreign write and landed before it; after it, exactly this:
            i = [n for n, e in enumerate(reqs) if e["status"] == 409][0]
            eq([(e["method"], e["status"]) for e in reqs[i:i + 3]], [("PUT", 409), ("GET", 200), ("PUT", 200)],
               "one conflict, a fresh read, a renewal")
            check(reqs[i]["body"]["metadata"]["resourceVersion"] != bumped, "the conflicting PUT had our last RV")
            eq(reqs[i + 2]["body"]["metadata"]["resourceVersion"], bumped, "renewed from the fresh read")
            eq([e for e in reqs if e["status"] == 409], [reqs[i]], "no second PUT on the old data")
            check(agent.alive(), "alive")

    def test_7_lease_disabled(self):
        emu = self.emu
        emu.seed_node("l5")
        with Agent(emu, "l5", lease=False) as agent:
            agent.wait_ready()
            agent.wait_view(lambda v: v["present"], 5)
            time.sleep(1.5)
            eq(lease_requests(emu, "gardener-node-agent-l5"), [], "Lease requests with lease.enabled=false")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
