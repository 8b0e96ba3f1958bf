#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16, crash consistency of a gated OS update with the image backend (the real agent; the harness of
test_crash_os_update.py: its sandbox, its inotify watch on state.json, its checks).

The OS image is an OCI artifact whose last layer is the UKI (as in test_os_update.py); the agent stages
it, installs it as <installDirectory>/<namePrefix>-<version>+3.efi and starts reboot.target (here: a
oneshot service that logs each start); the test then simulates the reboot into the new version (the
agent stops, the boot id and os-release change, the agent starts), and the agent verifies and reports.

Kill points: a first, undisturbed transaction records the persisted steps from Staging (the steps
before it are the command backend's, killed in test_crash_os_update.py) up to the recorded reboot
request; then one transaction per step is SIGKILLed the moment state.json first records it. The steps
after the reboot are test_crash_os_update.py's (Verifying ... Succeeded, the same records), and the
agent, started again by the simulated reboot, is through them before it reports READY=1 here.
A kill while the image is being installed fails the update (update-result=failed, the OS old, no
reboot): the agent never starts an OS change a second time.

After every kill and at the end of every transaction, besides test_crash_os_update.py's checks (one
update-result, state.json parses, the OS old or new, binaryPath whole, no temp file): every boot entry in
the install directory is whole (the exact UKI of its version) and no temporary file is next to them; no
result while the node waits for its reboot; reboot.target was started at least once and at most once
per kill more (a request whose record did not survive the kill is made again: the reboot is
idempotent)."""

import os
import sys
import time

from lib import itest
import sandbox
import test_crash_os_update as T
import usermgr

S = sandbox
SB = None
REPO = "gardenlinux-uki"
PREFIX = "gardenlinux"


def prepare(sb):
    sb.reboots = sb.path("os-test", "reboots")
    sb.efi = sb.use_os_image_backend(REPO, PREFIX, sb.reboots)
    sb.start_agent()
    T.SB = sb


setUpModule, tearDownModule = itest.sandbox_fixture(globals(), T.CrashSandbox, setup=prepare, versions=("1.31.4",),
                                                    broken_versions=(), kubelet_size=4096, fake_boot_id=True,
                                                    start_agent=False)


def reboots():
    try:
        with open(SB.reboots) as f:
            return len(f.read().split())
    except FileNotFoundError:
        return 0


def waits_for_reboot(st):
    return st.get("phase") == "Rebooting" and "reboot" in (st.get("done") or ())


class CrashOsImage(T.CrashOsUpdate):
    test_kill_at_every_step_of_an_os_update = None      # the command backend's test, not this one

    def setUp(self):
        super().setUp()
        self.ukis = {}
        self.watch.close()
        self.watch = T.DirWatch(SB.state_dir, self.dir, SB.efi, on_change=self.drive_gate,
                                describe=self.describe)

    def start(self, hold=None):
        version = "1600.%d" % (self.minor + 1)
        self.ukis[version] = b"MZ" + os.urandom(64 << 10)
        SB.reg.push_image(REPO, version, [(b"metadata layer", "gzip"), (self.ukis[version], "gzip")])
        self.reboots0 = reboots()
        return super().start(hold)

    def assert_boot_entries(self, what):
        for name in os.listdir(SB.efi):
            version = name[len(PREFIX) + 1:].split("+", 1)[0] if name.startswith(PREFIX + "-") else None
            self.assertIn(version, self.ukis, "%s: %s in the install directory" % (what, name))
            with open(os.path.join(SB.efi, name), "rb") as f:
                self.assertEqual(f.read(), self.ukis[version], "%s: boot entry %s is not whole" % (what, name))

    def kill(self, what, rv, version):
        r = super().kill(what, rv, version)
        self.assert_boot_entries(what)
        return r

    def reboot_when_asked(self, rv, version, what):
        """Once the record says the reboot was asked for: no result yet; the node boots the new OS. False:
        the transaction ended without asking (a kill while the image was being installed fails it: the
        agent never starts an OS change a second time)."""
        st = self.watch.wait(lambda: (lambda st: T.os_to(st) == version and (waits_for_reboot(st) or
                                                                             T.tx_over(st)) and st)(T.read_state()),
                             T.RESULT_WAIT, what + ": the reboot request")
        if T.tx_over(st):
            return False
        self.assertEqual(self.results_since(rv), [], what + ": a result before the reboot")
        # The agent records the request once systemd queued the job; the oneshot service runs after.
        usermgr.wait_until(lambda: reboots() > self.reboots0, 10, what + ": reboot.target to run")
        self.agent_ready()
        SB.simulate_reboot(version)
        self.pid, self.killed = SB.um.main_pid(S.AGENT_UNIT), None
        SB._pids_seen.add(self.pid)
        return True

    def finish(self, rv, version, what, kills=1):
        result, starts = super().finish(rv, version, what)
        self.assert_boot_entries(what)
        n = reboots() - self.reboots0
        least = 1 if result == "successful" else 0
        self.assertTrue(least <= n <= 1 + kills, "%s: %s, reboot.target started %d times with %d kill(s)" % (
            what, result, n, kills))
        return result, ["reboot.target started %d time(s)" % n]

    def test_kill_at_every_step_of_an_image_update(self):
        t_begin = time.monotonic()
        steps, before = [], []

        def track():
            st = T.read_state()
            if T.os_to(st) == self.version:
                s = T.step_of(st)
                if not steps or steps[-1] != s:
                    steps.append(s)
                return waits_for_reboot(st) if not before else T.tx_over(st)
            return False
        for what in ("warm-up", "undisturbed"):
            steps.clear()
            before.clear()
            rv, version = self.start()
            self.watch.wait(track, T.RESULT_WAIT, what + ": the reboot request")
            before.extend(s for s in steps if s[0] != "Planned")
            SB.simulate_reboot(version)
            self.pid, self.killed = SB.um.main_pid(S.AGENT_UNIT), None
            self.watch.wait(track, T.RESULT_WAIT, what + ": the end")
            self.finish(rv, version, what, kills=0)
        print("the undisturbed image update: %d persisted steps from Staging to the reboot request:" %
              len(before), file=sys.stderr)
        for s in before:
            print("    " + T.step_name(s), file=sys.stderr)

        for i, target in enumerate(before):
            rv, version = self.start()
            what = "image step %d/%d" % (i + 1, len(before))

            def reached(i=i, version=version):
                st = T.read_state()
                if T.os_to(st) != version:
                    return False
                s = T.step_of(st)
                return s == target or (s in before and before.index(s) > i) or T.tx_over(st)
            self.watch.wait(reached, T.RESULT_WAIT, what + " " + T.step_name(target))
            step, _ = self.kill(what, rv, version)
            if not self.reboot_when_asked(rv, version, what):
                self.assertEqual(T.step_of(T.read_state())[0], "Failed", what)
            result, starts = self.finish(rv, version, what)
            self.record(what, step, result, starts)
        print("%d image-update kill points survived in %.1fs" % (len(self.kill_points), time.monotonic() - t_begin),
              file=sys.stderr)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites() + itest.programs("nsenter"))    # nsenter: a fake boot id
