#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Idle load (docs/contract.md §8.13, docs/kube-api.md §7.4): with nothing to do the agent sends only watch renewals and
Lease renewals — no relists, no Node writes, no polling. Time is compressed: watches of 2-4 s instead of
300-600 s, a bookmark every second, a 4 s Lease renewed every ~1 s; ~20 s of wall time stand for more than
ten minutes of a real node's life (5-10 watch cycles, 20 Lease renewals)."""

import time

from lib import itest
from lib.itest import check, eq
import agentrun
from agentrun import Agent, node_requests
from kubeemu import wait_for

IDLE_SECONDS = 20
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config=agentrun.FAST_EMULATOR)


class KubeIdle(itest.EmulatorTest):
    def test_idle_means_watch_and_lease_renewals_only(self):
        emu = self.emu
        emu.seed_node("i1", labels={"quiet": "yes"})
        # Other nodes keep changing, as in a real cluster: the agent must not care.
        with Agent(emu, "i1", lease=True, lease_duration="4s") as agent:
            agent.wait_label("quiet", "yes", 5)
            wait_for(lambda: [e for e in emu.request_log(path="^" + LEASES) if e["method"] == "PUT"], 5,
                     "the first Lease renewal")
            since = agentrun.last_seq(emu)
            t0 = time.time()
            for i in range(IDLE_SECONDS):
                emu.seed_node("busy-%d" % (i % 3), labels={"tick": str(i)})
                time.sleep(1)
            t1 = time.time()
            reqs = [e for e in emu.request_log(since=since) if e["time"] < t1]

            ours = node_requests(emu, "i1", since)
            watches = [e for e in ours if e["verb"] == "watch"]
            leases = [e for e in reqs if e["path"] == LEASES + "/gardener-node-agent-i1"]
            other = [e for e in reqs if e not in ours and e not in leases]
            eq(other, [], "requests other than watch and Lease renewals")
            eq([e for e in ours if e["verb"] != "watch"], [], "LISTs while idle")
            eq(sorted(set(e["method"] for e in leases)), ["PUT"], "Lease methods while idle")
            eq([e for e in leases if e["status"] != 200], [], "failed renewals")

            # Each watch starts where the previous one ended (bookmarks), and ends at its own deadline.
            rvs = [int(w["params"]["resourceVersion"]) for w in watches]
            check(rvs == sorted(rvs), "watch RVs go backwards: %r", rvs)
            check(rvs[-1] > rvs[0], "bookmarks advanced the RV: %r", rvs)
            ended = [w for w in emu.watches(since=0) if "i1" in w["query"] and w["end"] and w["start"] >= t0]
            early = [w for w in ended if w["end_reason"] != "deadline"]
            eq([w["end_reason"] for w in early], [], "watches that did not run to their deadline")

            n_watch, n_lease = len(watches), len(leases)
            per_watch = IDLE_SECONDS / max(n_watch, 1)
            print("    %.0f s idle: %d watch renewals (every %.1f s, timeoutSeconds 2-4), %d Lease renewals "
                  "(every %.2f s, duration 4 s)" % (t1 - t0, n_watch, per_watch, n_lease, (t1 - t0) / max(n_lease, 1)))
            print("    scaled to production settings (watch 300-600 s, Lease 40 s): %.1f watches and %.0f Lease "
                  "PUTs per 10 min, nothing else" % (600 / 450, 600 / 10))
            check(IDLE_SECONDS / 4 - 1 <= n_watch <= IDLE_SECONDS / 2 + 1, "%d watches in %d s", n_watch, IDLE_SECONDS)
            check(IDLE_SECONDS * 0.85 <= n_lease <= IDLE_SECONDS * 1.15 + 1, "%d Lease renewals in %d s", n_lease,
                  IDLE_SECONDS)

            # The Lease really moves: renewTime advances, holder and duration stay.
            lz = emu.get("leases", "gardener-node-agent-i1", namespace="kube-system", group="coordination.k8s.io")
            eq(lz["spec"]["holderIdentity"], "gardener-node-agent-i1", "holder")
            eq(lz["spec"]["leaseDurationSeconds"], 4, "duration")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
