#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16, crash consistency of the OSC apply with the real agent (lib/sandbox.py: the agent is a unit of
a real `systemd --user`, Restart=always, and every SIGKILL here is answered by systemd restarting it).

A series of OSCs is published, each changing several files below the sandbox root (one of them appears
and disappears from round to round), the kubelet unit's drop-in (kubelet.service.d/50-sandbox.conf in the
user manager's unit directory) and, every other round, the kubelet config's evictionHard (an in-place
trigger, so that round is gated: the test plays MCM up to ReadyForUpdate). After each publication the
agent is SIGKILLed at random moments (seeded: CRASH_SEED=<n> reproduces a run; the seed is printed), each
kill measured from the moment the (re)started agent reported READY=1.

Checked right after every kill (read in the order Node, last-applied-osc.yaml, files, so a concurrent
agent cannot make a consistent state look inconsistent):
  * the Node's checksum/cloud-config-data names the previous or the current OSC, nothing else;
  * when it names the current OSC, every file, the drop-in and last-applied-osc.yaml are the current
    OSC's; when last-applied-osc.yaml is the current OSC, so are all files (commit comes last);
  * otherwise every file is whole: the previous OSC's content or the current one's (never partial).
At the end of every round: converged to the round's OSC exactly; the kubelet was restarted at least once
and at most once per kill more (no item applied twice beyond what a kill can repeat); a gated round ends
with exactly one update-result=successful, an ungated one never writes update-result; no temporary file
is left next to any file the agent wrote. At the end: the Node's checksum history is the published
sequence in order (never an older OSC after a newer one, never one that was not published), and
`state.json` parses."""

import json
import os
import random
import signal
import sys
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None

KILLS_WANTED = int(os.environ.get("CRASH_KILLS", "50"))
BUDGET = float(os.environ.get("CRASH_BUDGET", "150"))        # seconds for the rounds (the test's limit: 300)
KILLS_PER_ROUND = 5
SEED = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1 << 30))

ROOT_FILES = ("/etc/ipa-crash/a.conf", "/etc/ipa-crash/b.conf", "/etc/ipa-crash/sub/c.conf")
SOMETIMES_FILE = "/etc/ipa-crash/d.conf"           # only in even rounds: written and removed again
DROPIN_NAME = "50-sandbox.conf"
KUBELET_CONFIG = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
                  "  memory.available: %s\n")


class CrashSandbox(S.Sandbox):
    """The sandbox with the agent restarted without a start limit (50 kills in ~2 minutes would hit
    systemd's default of 5 starts in 10 s) and quickly (the kills are the point)."""

    def agent_unit_text(self):
        text = super().agent_unit_text()
        assert "RestartSec=1s\n" in text
        return text.replace("[Unit]\n", "[Unit]\nStartLimitIntervalSec=0\n", 1) \
                   .replace("RestartSec=1s\n", "RestartSec=200ms\n", 1)


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), CrashSandbox, versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10)


def file_content(round_no, path):
    """A few KiB, different in every round (so a partial write would show)."""
    return "".join("round %d %s line %03d %s\n" % (round_no, path, i, "x" * 40) for i in range(60))


def extra_files_yaml(files):
    out = []
    for path, content in files.items():
        out.append("  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: |\n" % path)
        out.extend("          %s\n" % line for line in content.rstrip("\n").split("\n"))
    return "".join(out)


def dropin_text(round_no):
    return "[Service]\nEnvironment=IPA_CRASH_ROUND=%d" % round_no


def managed_paths():
    """Absolute path on disk of everything an OSC of this test names."""
    paths = {p: SB.path(p.lstrip("/")) for p in ROOT_FILES + (SOMETIMES_FILE,)}
    paths["kubelet-config"] = SB.path(S.KUBELET_CONFIG_PATH.lstrip("/"))
    paths["dropin"] = os.path.join(SB.um.unit_dir, S.KUBELET_UNIT + ".d", DROPIN_NAME)
    return paths


def read_or_none(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode()
    except FileNotFoundError:
        return None


def disk_state():
    return {k: read_or_none(p) for k, p in managed_paths().items()}


def last_applied():
    return read_or_none(os.path.join(SB.state_dir, "last-applied-osc.yaml"))


def kubelet_starts():
    return SB.unit_log(S.KUBELET_UNIT).count("kubelet-report: node ")


def temp_files():
    """Anything next to a file the agent writes that is not one of the files themselves."""
    dirs = {os.path.dirname(p) for p in managed_paths().values()} | {SB.state_dir}
    left = []
    for d in sorted(dirs):
        try:
            names = os.listdir(d)
        except FileNotFoundError:
            continue
        left += [os.path.join(d, n) for n in names if ".tmp" in n or n.endswith(".partial") or n.startswith(".#")]
    return left


class Osc:
    """One published OSC and what it means on disk."""

    def __init__(self, round_no, eviction):
        self.round = round_no
        self.eviction = eviction
        files = {p: file_content(round_no, p) for p in ROOT_FILES}
        if round_no % 2 == 0:
            files[SOMETIMES_FILE] = file_content(round_no, SOMETIMES_FILE)
        self.files = files
        self.dropin = dropin_text(round_no)
        self.checksum = self.yaml = None

    def publish(self):
        self.checksum = SB.publish_osc(eviction=self.eviction, dropin=self.dropin,
                                       extra_files=extra_files_yaml(self.files))
        self.yaml = SB.osc["yaml"]
        return self.checksum

    def disk(self):
        d = {p: self.files.get(p) for p in ROOT_FILES + (SOMETIMES_FILE,)}
        d["kubelet-config"] = KUBELET_CONFIG % self.eviction
        d["dropin"] = self.dropin + "\n"
        return d


class Initial:
    """The node as handed over: the sandbox's first OSC, applied by someone else."""

    def __init__(self):
        self.round, self.checksum, self.yaml = 0, SB.osc["checksum"], last_applied()
        self._disk = disk_state()

    def disk(self):
        return self._disk


class CrashConsistency(unittest.TestCase):
    kills = 0
    published = []

    def agent_ready(self, old_pid, timeout=30):
        def ready():
            pid = SB.um.main_pid(S.AGENT_UNIT)
            return pid not in (0, old_pid) and SB.um.active_state(S.AGENT_UNIT) == "active" and pid
        pid = usermgr.wait_until(ready, timeout, "the agent restarted and ready", interval=0.02)
        SB._pids_seen.add(pid)
        return pid

    def check_after_kill(self, prev, cur, what):
        node = SB.node()
        shown = S.annotation(node, S.NODE_CHECKSUM)
        la = last_applied()
        disk = disk_state()
        want = cur.disk()
        self.assertIn(shown, (prev.checksum, cur.checksum), "%s: the Node names an OSC of neither round" % what)
        if shown == cur.checksum:
            self.assertEqual(la, cur.yaml, "%s: Node names round %d, last-applied-osc.yaml does not" %
                             (what, cur.round))
            self.assertEqual(disk, want, "%s: Node names round %d, the disk does not match it" % (what, cur.round))
            return "done"
        self.assertIn(la, (prev.yaml, cur.yaml), "%s: last-applied-osc.yaml is neither OSC" % what)
        if la == cur.yaml:
            self.assertEqual(disk, want, "%s: committed round %d before all its files were on disk" %
                             (what, cur.round))
            return "committed"
        old = prev.disk()
        for k in want:
            self.assertIn(disk[k], (old[k], want[k]), "%s: %s is neither round %d's nor round %d's (partial?)" %
                          (what, k, prev.round, cur.round))
        return "mixed" if disk != old else "old"

    def play_mcm(self):
        SB.mcm_candidate()
        SB.mcm_select()
        SB.mcm_ready_for_update()

    def leave_gated_world(self):
        SB.mcm_observe_result()
        SB.emu.label_node(S.NODE, labels={S.CANDIDATE: None, S.SELECTED: None, S.UPDATE_RESULT: None},
                          unschedulable=False)
        SB.emu.set_condition(S.NODE, S.MCM_CONDITION, remove=True)

    def run_round(self, rng, prev, cur, kills, max_delay, outcomes):
        gated = cur.eviction != prev_eviction(prev)
        rv = int(SB.node()["metadata"]["resourceVersion"])
        starts = kubelet_starts()
        pid = SB.um.main_pid(S.AGENT_UNIT)
        cur.publish()
        if gated:
            self.play_mcm()
        for j in range(kills):
            # Squared: denser early, where the (resumed) apply runs; the tail still reaches its end.
            delay = max_delay * rng.random() ** 2
            time.sleep(delay)           # the random kill point: the thing under test, not synchronisation
            os.kill(pid, signal.SIGKILL)
            what = "round %d kill %d (%.3fs after ready)" % (cur.round, j + 1, delay)
            outcome = self.check_after_kill(prev, cur, what)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            CrashConsistency.kills += 1
            pid = self.agent_ready(pid)
        node = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == cur.checksum, 60,
                            "round %d's checksum on the Node" % cur.round)
        if gated:
            node = SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT), 30, "round %d's update-result" % cur.round)
            self.assertEqual(S.label(node, S.UPDATE_RESULT), "successful", S.annotation(node, S.FAILED_REASON))
        self.assertEqual(last_applied(), cur.yaml)
        self.assertEqual(disk_state(), cur.disk())
        SB.wait_kubelet_healthy(20)
        n_starts = kubelet_starts() - starts
        self.assertGreaterEqual(n_starts, 1, "round %d: the kubelet was not restarted for its drop-in" % cur.round)
        self.assertLessEqual(n_starts, 1 + kills, "round %d: the kubelet restarted %d times with %d kills" %
                             (cur.round, n_starts, kills))
        results = [S.label(h.get("object"), S.UPDATE_RESULT) for h in SB.node_history(since_rv=rv)]
        successes = sum(1 for a, b in zip([None] + results, results) if b == "successful" and a != b)
        self.assertEqual(successes, 1 if gated else 0, "round %d: update-result=successful written %d times" %
                         (cur.round, successes))
        reasons = sorted({S.annotation(h.get("object"), S.FAILED_REASON) for h in SB.node_history(since_rv=rv)} -
                         {None})
        self.assertNotIn("failed", results, "round %d: a failure was reported: %s" % (cur.round, reasons))
        # The running agent may be between open and rename of one; a leftover one stays.
        try:
            usermgr.wait_until(lambda: not temp_files(), 5, "no temporary files")
        except TimeoutError:
            self.fail("round %d: temporary files left behind: %s" % (cur.round, temp_files()))
        if gated:
            self.leave_gated_world()
        return n_starts

    def test_kill_during_osc_apply(self):
        print("CRASH_SEED=%d" % SEED, file=sys.stderr)
        rng = random.Random(SEED)
        usermgr.wait_until(lambda: "Watching OSC Secret" in SB.agent_log(), 30, "the agent watching the OSC")
        usermgr.wait_until(lambda: SB.kubelet_target(), 30, "the adoption of the provisioned kubelet")
        prev = Initial()
        published = [prev.checksum]
        outcomes = {}
        # Round 1 without kills: how long an apply takes here sets the range of the random kill points.
        cur = Osc(1, S.DEFAULT_EVICTION)
        t0 = time.monotonic()
        self.run_round(rng, prev, cur, 0, 0, outcomes)
        apply_time = time.monotonic() - t0
        published.append(cur.checksum)
        max_delay = min(max(1.5 * apply_time, 0.5), 4.0)
        print("an undisturbed apply took %.2fs; kill points within %.2fs of the agent's READY=1" %
              (apply_time, max_delay), file=sys.stderr)
        start, round_no, starts = time.monotonic(), 1, []
        evictions = ("100Mi", "150Mi")
        while self.kills < KILLS_WANTED and time.monotonic() - start < BUDGET:
            round_no += 1
            prev = cur
            # Every other round changes evictionHard (gated); the others only files and the drop-in.
            eviction = evictions[(round_no // 2) % 2]
            cur = Osc(round_no, eviction)
            kills = min(KILLS_PER_ROUND, KILLS_WANTED - self.kills)
            t = time.monotonic()
            starts.append(self.run_round(rng, prev, cur, kills, max_delay, outcomes))
            published.append(cur.checksum)
            print("round %d (%s): %d kills, kubelet started %d time(s), %.1fs" % (
                round_no, "gated" if eviction != prev.eviction else "ungated", kills, starts[-1],
                time.monotonic() - t), file=sys.stderr)
        # The Node's checksum history: the published sequence, in order, each at most once.
        shown = []
        for h in SB.node_history():
            c = S.annotation(h.get("object"), S.NODE_CHECKSUM)
            if c and (not shown or shown[-1] != c):
                shown.append(c)
        self.assertEqual(shown, published[published.index(shown[0]):], "checksum history out of order")
        with open(os.path.join(SB.state_dir, "state.json")) as f:
            json.load(f)
        print("CRASH_SEED=%d: %d kill points survived over %d rounds (%s); kubelet restarts per round %s" % (
            SEED, self.kills, round_no, ", ".join("%s %d" % kv for kv in sorted(outcomes.items())), starts),
            file=sys.stderr)
        self.assertGreater(self.kills, 0)


def prev_eviction(prev):
    return getattr(prev, "eviction", S.DEFAULT_EVICTION)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
