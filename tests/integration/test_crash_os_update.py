#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16, crash consistency of a gated OS update (command backend) with the real agent: SIGKILL at every
persisted step boundary, at two points inside the OS command and at random moments.

One sandbox (lib/sandbox.py; the agent is a unit of a real `systemd --user`, Restart=always, restarted
after 100 ms without a start limit) runs a series of gated OS updates, one transaction each: gardenlet
publishes an OSC whose only change is the OS version (1600.1, 1600.2, ...), MCM plays candidate ->
selected -> ReadyForUpdate (as test_os_update.py does), the command (the sandbox's osUpdate.command, a
script of ours) rewrites os-release like provider-local's and exits 0, no reboot.

MCM's gate is driven one step at a time, each only once the record says the agent waits for it
(candidate with the OSC; selected once it is Staged and reported so; drained and ReadyForUpdate once it
is WaitingForDrain and reported so): every transaction takes the same path, Planned -> Staging -> Staged
-> WaitingForDrain -> Applying. Opened all at once, the gate raced with staging (seen before staging
ended: Staging -> Applying; seen after: through Staged and WaitingForDrain), and a kill run whose path
differed from the recorded one waited for steps it never persisted.

Kill points:
  * every persisted step: a first, undisturbed transaction records the sequence of distinct steps that
    `<stateDirectory>/state.json` goes through (phase, steps done, "OS change started", progress/event
    phase written); then one transaction per step is SIGKILLed the moment state.json first records that
    step (inotify on the state directory: the agent writes .state.json.tmp and renames it, IN_MOVED_TO
    wakes us; the kill follows the read within a millisecond). The step the agent actually died at is
    read back from state.json once it is dead, and that is what is counted;
  * inside the OS command: held (blocked on a FIFO nobody writes) before it changes the OS, and after it
    changed the OS but before it exits; the kill comes once the script says it is held;
  * random: RANDOM_KILLS kills at a seeded random delay (OSCRASH_SEED=<n> reproduces the delays) after the
    transaction's first record or the restarted agent's first record, within the time the undisturbed
    transaction took from its first record to its last; up to KILLS_PER_RANDOM_RUN per transaction.
The kill is SIGKILL to the unit's MainPID (the agent alone, at once; `systemctl kill` would add the
latency of a systemctl process), and systemd does the rest as it would after a crash: the unit's
remaining processes (the OS command) are stopped, the agent is started again.

How the agent keeps an OS update idempotent across a kill (what the checks below hold it to): the
record that asks for the OS command carries "OS change started" (osStartedUsec, bootId) and is persisted
before the command starts; a restarted agent that finds it started but not finished never runs the
command a second time: on the same boot and still on the old OS it reports the update failed
("interrupted"); already on the desired OS (the command got that far) it continues with verification;
on a new boot it waits for / checks the reboot. Every other step (marker, progress, result, checksum) is
a Node patch that may be sent again and changes nothing the second time.

Checked after every kill (the agent dead, before its restart): state.json parses and belongs to this or
the previous transaction; no update-result was written twice; os-release shows the old or the new OS.
At the end of every transaction: exactly one update-result written (history of the Node in the
emulator: no more, no fewer transitions of the label); it is "successful" iff os-release shows the new
OS (then checksum/cloud-config-data is the Secret's and the marker is gone), "failed" iff the old one
(then the marker stays); the OS command started at most once; binaryPath still resolves to the whole,
verified kubelet; no temporary files next to state.json or os-release."""

import ctypes
import ctypes.util
import json
import os
import random
import select
import signal
import sys
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
RANDOM_KILLS = int(os.environ.get("OSCRASH_RANDOM_KILLS", "10"))
SEED = int(os.environ.get("OSCRASH_SEED") or random.SystemRandom().randrange(1 << 30))
RESULT_WAIT = 30
KILLS_PER_RANDOM_RUN = 5

# The OS command: logs "<pid> start <version>" to $LOG, may be held before or after it changes the OS
# (a FIFO that nobody opens for writing: only the kill ends the wait), logs "<pid> end <version>".
SCRIPT = """#!/bin/sh
set -eu
version="$1"
echo "$$ start $version" >> '%(log)s'
if [ -e '%(hold)s.before' ]; then echo "$$ held $version" >> '%(log)s'; read x < '%(fifo)s'; fi
sed -i -E -e "s/^PRETTY_NAME=.*/PRETTY_NAME=\\"Garden Linux $version\\"/" \\
          -e "s/^VERSION_ID=.*/VERSION_ID=$version/" '%(os_release)s'
if [ -e '%(hold)s.after' ]; then echo "$$ held $version" >> '%(log)s'; read x < '%(fifo)s'; fi
echo "$$ end $version" >> '%(log)s'
"""


class CrashSandbox(S.Sandbox):
    """The agent restarted without a start limit and quickly (the kills are the point)."""

    def agent_unit_text(self):
        text = super().agent_unit_text()
        assert "RestartSec=1s\n" in text
        return text.replace("[Unit]\n", "[Unit]\nStartLimitIntervalSec=0\n", 1) \
                   .replace("RestartSec=1s\n", "RestartSec=100ms\n", 1)


class DirWatch:
    """inotify (ctypes) on directories: wait(fn) re-evaluates fn() whenever a file there is renamed into
    place or closed after writing, until it is truthy or the deadline passes; on_change() (if given)
    runs first every time, and describe() (if given) says where things stood at a timeout."""

    IN_CLOSE_WRITE, IN_MOVED_TO = 0x8, 0x80

    def __init__(self, *dirs, on_change=None, describe=None):
        self.on_change, self.describe = on_change, describe
        self.libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1")
        for d in dirs:
            if self.libc.inotify_add_watch(self.fd, d.encode(), self.IN_CLOSE_WRITE | self.IN_MOVED_TO) < 0:
                raise OSError(ctypes.get_errno(), "inotify_add_watch " + d)

    def close(self):
        os.close(self.fd)

    def _drain(self):
        try:
            while os.read(self.fd, 1 << 16):
                pass
        except BlockingIOError:
            pass

    def wait(self, fn, timeout, what):
        deadline = time.monotonic() + timeout
        while True:
            self._drain()           # before fn(): a change after it wakes the select below
            if self.on_change:
                self.on_change()
            v = fn()
            if v:
                return v
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("timed out after %.0fs waiting for %s%s" % (
                    timeout, what, "; " + self.describe() if self.describe else ""))
            select.select([self.fd], [], [], left)


def read_state():
    """state.json as a dict; None if absent. A file that does not parse fails the test right here."""
    try:
        with open(os.path.join(SB.state_dir, "state.json")) as f:
            text, ino = f.read(), os.fstat(f.fileno()).st_ino
    except FileNotFoundError:
        return None
    try:
        st = json.loads(text)
    except ValueError as e:
        raise AssertionError("state.json does not parse (%s): %r" % (e, text[:300]))
    st["_ino"] = ino            # every write is a new file renamed into place: a new inode
    return st


def step_of(st):
    """The persisted step a record stands for."""
    return (st.get("phase"), tuple(st.get("done") or ()), bool(st.get("osStartedUsec")),
            st.get("progressPhase"), st.get("eventPhase"), (st.get("failure") or {}).get("code"))


def step_name(step):
    phase, done, started, progress, event, failure = step
    return "%s done=[%s]%s progress=%s event=%s%s" % (phase, ",".join(done), " os-started" if started else "",
                                                     progress, event, " failure=" + failure if failure else "")


def tx_over(st):
    """The transaction's record says it ended and reported so."""
    done = st.get("done") or ()
    return st.get("phase") in ("Succeeded", "Failed", "RolledBack") and "report-result" in done and \
        st.get("eventPhase") == st["phase"] and (st["phase"] != "Succeeded" or "set-checksum" in done)


def os_to(st):
    return ((st or {}).get("os") or {}).get("to")


def os_version():
    with open(SB.os_release) as f:
        for line in f:
            if line.startswith("VERSION_ID="):
                return line.split("=", 1)[1].strip().strip('"')
    return None


def temp_files():
    left = []
    for d in (SB.state_dir, os.path.dirname(SB.os_release), os.path.dirname(SB.binary_path)):
        left += [os.path.join(d, n) for n in os.listdir(d)
                 if ".tmp" in n or n.endswith(".partial") or n.startswith(".#")]
    return left


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), CrashSandbox, versions=("1.31.4",), broken_versions=(), kubelet_size=4096,
    gardener_osc=True, agent_config={"osUpdate": {"backend": "command", "timeout": "20s", "reboot": "none"}})


class CrashOsUpdate(unittest.TestCase):
    def setUp(self):
        self.dir = SB.path("os-test")
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")
        self.hold = os.path.join(self.dir, "hold")
        self.fifo = os.path.join(self.dir, "fifo")
        if not os.path.exists(self.fifo):
            os.mkfifo(self.fifo)
        S.write_file(SB.os_update_command, SCRIPT % {"log": self.log, "hold": self.hold, "fifo": self.fifo,
                                                    "os_release": SB.os_release}, 0o755)
        self.watch = DirWatch(SB.state_dir, self.dir, on_change=self.drive_gate, describe=self.describe)
        self.gate = None            # how far MCM let the current transaction go
        self.minor = 0
        self.kill_points = []       # (what, step at death, outcome)
        self.pid = SB.um.main_pid(S.AGENT_UNIT)
        self.killed = None

    def tearDown(self):
        self.watch.close()
        if os.environ.get("OSCRASH_DEBUG"):
            sys.stderr.write("---- agent log ----\n%s\n" % SB.agent_log())

    # ---------------------------------------------------------------- helpers

    def command_log(self, version):
        try:
            with open(self.log) as f:
                return [line.split()[1] for line in f if line.split()[2:] == [version]]
        except FileNotFoundError:
            return []

    def results_since(self, rv):
        """update-result values written since rv: each change of the label to a value counts once."""
        out, last = [], None
        for h in SB.node_history(since_rv=rv):
            v = S.label(h.get("object"), S.UPDATE_RESULT)
            if v and v != last:
                out.append(v)
            last = v
        return out

    def agent_ready(self):
        """The running agent's PID, once systemd has restarted it after our last kill (looked up before the
        next kill, not right after this one: polling systemd and the emulator while the agent starts would
        only slow it down on a small machine)."""
        if self.pid != self.killed:
            return

        def ready():
            pid = SB.um.main_pid(S.AGENT_UNIT)
            return pid not in (0, self.killed) and SB.um.active_state(S.AGENT_UNIT) == "active" and pid
        self.pid = usermgr.wait_until(ready, 30, "the agent restarted and ready", interval=0.05)
        SB._pids_seen.add(self.pid)

    def assert_kubelet_whole(self, what):
        self.assertIsNotNone(SB.kubelet_target(), what + ": binaryPath is not the store's symlink")
        with open(SB.binary_path, "rb") as f:
            self.assertEqual(f.read(), SB.images[("1.31.4", False)]["kubelet"], what + ": binaryPath is not whole")

    def kill(self, what, rv, version):
        """SIGKILL the agent now; check what it left behind once it is dead (systemd restarts it)."""
        os.kill(self.pid, signal.SIGKILL)
        self.killed = self.pid
        usermgr.wait_until(lambda: not S.pid_alive(self.pid), 10, "the agent to die", interval=0.002)
        st = read_state()
        self.assertIsNotNone(st, what + ": no state.json")
        self.assertIn(os_to(st), (version, self.prev_version), what + ": state.json of another transaction")
        results = self.results_since(rv)
        self.assertLessEqual(len(results), 1, "%s: update-result written %d times: %s" % (what, len(results),
                                                                                          results))
        self.assertIn(os_version(), (self.base_version, version), what + ": os-release shows neither OS")
        self.assert_kubelet_whole(what)
        return (step_of(st) if os_to(st) == version else None), st["_ino"]

    def drive_gate(self):
        """MCM's next step, once the record says the agent waits for it, its reports of the phase written
        (see the module's docstring): our Node writes never race with the agent's."""
        st = read_state()
        if os_to(st) != getattr(self, "version", None):
            return
        phase, progress, event = st.get("phase"), st.get("progressPhase"), st.get("eventPhase")
        if phase == "Staged" and (progress, event) == ("Staged", "Staged") and self.gate == "candidate":
            SB.mcm_select()
            self.gate = "selected"
        elif phase == "WaitingForDrain" and progress == "WaitingForDrain" and self.gate == "selected":
            SB.mcm_ready_for_update()
            self.gate = "ready"

    def describe(self):
        st = read_state()
        return "state.json: %s, MCM: %s" % (step_name(step_of(st)) if st else "none", self.gate)

    def start(self, hold=None):
        """A new desired OS version, published with the node a candidate; drive_gate() does the rest of
        MCM's gate in every wait. Returns (rv, version)."""
        for h in ("before", "after"):
            if os.path.exists("%s.%s" % (self.hold, h)):
                os.unlink("%s.%s" % (self.hold, h))
        if hold:
            S.write_file("%s.%s" % (self.hold, hold), "")
        self.agent_ready()
        self.t_start = time.monotonic()
        self.minor += 1
        self.prev_version = getattr(self, "version", None)
        self.version = "1600.%d" % self.minor
        self.base_version = os_version()
        rv = int(SB.node()["metadata"]["resourceVersion"])
        SB.publish_osc(os_version=self.version)
        SB.mcm_candidate()
        self.gate = "candidate"
        return rv, self.version

    def finish(self, rv, version, what):
        """The transaction's end: checks, then MCM takes the node out of the update."""
        # The record says the result, the checksum (on success) and the final Event are out: the agent
        # records each only after the API server took it, so one look at the Node suffices.
        self.watch.wait(lambda: (lambda st: os_to(st) == version and tx_over(st))(read_state()), RESULT_WAIT,
                        what + ": the transaction's end in state.json")
        node = SB.node()
        result = S.label(node, S.UPDATE_RESULT)
        current = os_version()
        self.assertIn(result, ("successful", "failed"), what + ": no update-result")
        if result == "successful":
            self.assertEqual(current, version, what + ": successful, but the OS is still " + current)
            self.assertEqual(S.annotation(node, S.NODE_CHECKSUM), SB.secret_checksum(), what + ": checksum")
            self.assertEqual(S.progress_phase(node), "Succeeded", what)
            self.assertIsNone(S.annotation(node, S.UPDATING_OS), what + ": marker not removed")
        else:
            self.assertEqual(current, self.base_version, "%s: %s (%s), but the OS changed to %s" % (
                what, result, S.annotation(node, S.FAILED_REASON), current))
            self.assertEqual(S.annotation(node, S.UPDATING_OS), version, what + ": marker not kept")
        results = self.results_since(rv)
        self.assertEqual(results, [result], what + ": update-result must be written exactly once")
        starts = self.command_log(version)
        self.assertLessEqual(starts.count("start"), 1, what + ": the OS command started twice")
        self.assertLessEqual(starts.count("end"), 1, what + ": the OS command ran to its end twice")
        self.assert_kubelet_whole(what)
        try:
            usermgr.wait_until(lambda: not temp_files(), 5, "no temporary files")
        except TimeoutError:
            self.fail("%s: temporary files left behind: %s" % (what, temp_files()))
        SB.mcm_observe_result()
        SB.emu.label_node(S.NODE, labels={S.CANDIDATE: None, S.SELECTED: None, S.UPDATE_RESULT: None},
                          unschedulable=False)
        SB.emu.set_condition(S.NODE, S.MCM_CONDITION, remove=True)
        self.t_tx = time.monotonic() - self.t_start
        return result, starts

    def record(self, what, step, result, starts):
        self.kill_points.append((what, step, result, "/".join(starts) or "-"))
        print("  %-34s died at %-70s -> %s, %s (transaction %.1fs)" % (
            what, step_name(step) if step else "(before the transaction)", result,
            "command " + ("/".join(starts) or "never ran") if "start" in starts or not starts else starts[0],
            self.t_tx), file=sys.stderr)

    # ---------------------------------------------------------------- the test

    def test_kill_at_every_step_of_an_os_update(self):
        t_begin = time.monotonic()
        usermgr.wait_until(lambda: "Watching OSC Secret" in SB.agent_log(), 30, "the agent watching the OSC")
        # 1. Undisturbed: the steps state.json goes through.
        steps, first = [], [0.0]

        def track():
            st = read_state()
            if os_to(st) == self.version:
                s = step_of(st)
                if not steps:
                    first[0] = time.monotonic()
                if not steps or steps[-1] != s:
                    steps.append(s)
                    if os.environ.get("OSCRASH_DEBUG"):
                        print("   %.3f %s" % (time.monotonic() - t0, step_name(s)), file=sys.stderr)
                return tx_over(st)
            return False
        # The first OSC this agent applies is a first apply (every file, a kubelet restart): a warm-up.
        for what in ("warm-up", "undisturbed"):
            steps.clear()
            t0 = time.monotonic()
            rv, version = self.start()
            self.watch.wait(track, RESULT_WAIT, "the %s update to finish" % what)
            duration, span = time.monotonic() - t0, time.monotonic() - first[0]
            result, starts = self.finish(rv, version, what)
            self.assertEqual(result, "successful")
        print("OSCRASH_SEED=%d; the undisturbed update took %.2fs (%.2fs from its first record) through %d "
              "persisted steps:" % (SEED, duration, span, len(steps)), file=sys.stderr)
        for s in steps:
            print("    " + step_name(s), file=sys.stderr)

        # 2. One transaction per persisted step, killed when state.json first records it.
        for i, target in enumerate(steps):
            rv, version = self.start()

            def reached(i=i, version=version):
                st = read_state()
                if os_to(st) != version:
                    return False
                s = step_of(st)
                return s == target or (s in steps and steps.index(s) > i) or tx_over(st)
            what = "step %d/%d" % (i + 1, len(steps))
            self.watch.wait(reached, RESULT_WAIT, what + " " + step_name(target))
            step, _ = self.kill(what, rv, version)
            result, starts = self.finish(rv, version, what)
            self.record(what, step, result, starts)

        # 3. Inside the OS command: before and after it changed the OS.
        for hold, want in (("before", "failed"), ("after", "successful")):
            rv, version = self.start(hold=hold)
            what = "OS command held %s the change" % hold
            self.watch.wait(lambda: "held" in self.command_log(version), RESULT_WAIT, what)
            step, _ = self.kill(what, rv, version)
            result, starts = self.finish(rv, version, what)
            self.assertEqual(result, want, what)
            self.record(what, step, result, starts)

        # 4. Random moments while the transaction runs: a seeded delay within the undisturbed transaction's
        #    span after its first record, or after the restarted agent's first record (it persists the
        #    transaction before it acts); a transaction that ends first takes no further kill.
        rng = random.Random(SEED)
        done = 0
        for _ in range(RANDOM_KILLS):           # a transaction may end before its first kill
            if done == RANDOM_KILLS:
                break
            rv, version = self.start()
            killed, ino = [], None
            while done < RANDOM_KILLS and len(killed) < KILLS_PER_RANDOM_RUN:
                st = self.watch.wait(lambda: (lambda st: os_to(st) == version and (st["_ino"] != ino or tx_over(st))
                                              and st)(read_state()), RESULT_WAIT, "the agent at work")
                if tx_over(st):
                    break
                self.agent_ready()
                delay = rng.uniform(0, span)
                # The random kill point, the thing under test, not synchronisation; MCM's gate goes on.
                deadline = time.monotonic() + delay
                self.watch.wait(lambda: time.monotonic() >= deadline, delay + 1, "the random kill point")
                done += 1
                what = "random %d (%.3fs)" % (done, delay)
                step, ino = self.kill(what, rv, version)
                killed.append((what, step))
            result, starts = self.finish(rv, version, "random transaction %s" % version)
            for what, step in killed:
                self.record(what, step, result, starts)

        with open(os.path.join(SB.state_dir, "state.json")) as f:
            json.load(f)
        self.assertEqual(done, RANDOM_KILLS, "transactions ended before their random kills")
        n = len(self.kill_points)
        hit = {k[1] for k in self.kill_points if k[1]}
        print("OSCRASH_SEED=%d: %d OS-update kill points survived (%d at persisted steps: the agent died at %d of "
              "the %d steps; 2 inside the command; %d random) in %.1fs; results %s" % (
                  SEED, n, len(steps), len(hit & set(steps)), len(steps), RANDOM_KILLS, time.monotonic() - t_begin,
                  {r: sum(1 for k in self.kill_points if k[2] == r) for r in ("successful", "failed")}),
              file=sys.stderr)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
