#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""reboot.c against real D-Bus peers.

A private systemd user manager (lib/usermgr.py) provides the bus and plays the system manager; the
client reaches it through DBUS_SYSTEM_BUS_ADDRESS exactly as the agent would reach the real system
bus.

- osUpdate.reboot=systemd: StartUnit("reboot.target", "replace-irreversibly") on the user manager,
  whose reboot.target (defined here) pulls in a oneshot service that creates a marker file.
- osUpdate.reboot=login1: tests/helpers/fake-login1 owns org.freedesktop.login1 on that bus and
  records Reboot() calls; also a denying fake and no fake at all.
- osUpdate.reboot=none: no bus traffic, "reboot required but disabled".

Skips (77) when usermgr cannot run a user manager here (usermgr.missing_prerequisites()).
"""

import os
import selectors
import shutil
import subprocess
import tempfile
import time
import unittest

from lib import itest
import usermgr


class FakeLogin1:
    def __init__(self, binary, record, env, deny=False):
        args = [binary, record] + (["--deny"] if deny else [])
        self.proc = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 10
        line = ""
        while time.monotonic() < deadline and not line:
            if sel.select(timeout=0.1):
                line = self.proc.stdout.readline()
                if not line:
                    break
        sel.close()
        if line.strip() != "READY":
            self.stop()
            raise AssertionError(f"fake-login1 did not become ready: {self.proc.stderr.read()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


def run_client(client, method, env):
    p = subprocess.run([client, method], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=30)
    return p.returncode, p.stdout.strip(), p.stderr.strip()


class Reboot(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client, cls.fake = os.environ["REBOOT_CLIENT"], os.environ["FAKE_LOGIN1"]
        cls.root = tempfile.mkdtemp(prefix="test-reboot-")
        cls.addClassCleanup(shutil.rmtree, cls.root, ignore_errors=True)
        cls.um = usermgr.UserManager(prefix="reboot-")
        cls.addClassCleanup(cls.um.stop)
        cls.um.start()
        cls.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": cls.um.bus_address}

    def login1(self, record, deny=False):
        """A fake logind on the bus for this test, recording calls in `record`."""
        fake = FakeLogin1(self.fake, os.path.join(self.root, record), self.env, deny=deny)
        self.addCleanup(fake.stop)
        return fake

    def test_1_none(self):
        """none: no bus traffic at all."""
        rc, out, err = run_client(self.client, "none", {"PATH": self.env["PATH"]})
        assert (rc, out) == (0, "disabled: reboot required but disabled"), (rc, out, err)

    def test_2_systemd(self):
        """systemd: this manager's reboot.target only pulls in a service leaving a marker."""
        um = self.um
        marker = os.path.join(self.root, "reboot-target-started")
        um.write_unit("inplace-reboot-marker.service",
                      um.service(f"{shutil.which('touch')} {marker}", type="oneshot"))
        um.write_unit("reboot.target", "[Unit]\nDescription=Fake reboot\n"
                                       "Wants=inplace-reboot-marker.service\n")
        um.daemon_reload()
        rc, out, err = run_client(self.client, "systemd", self.env)
        assert (rc, out) == (0, "accepted"), (rc, out, err)
        usermgr.wait_until(lambda: os.path.exists(marker), 15,
                           "reboot.target to pull in the marker service")
        assert um.active_state("reboot.target") == "active"

    def test_3_login1(self):
        """login1: a fake logind records the call."""
        self.login1("login1-calls")
        rc, out, err = run_client(self.client, "login1", self.env)
        assert (rc, out) == (0, "accepted"), (rc, out, err)
        with open(os.path.join(self.root, "login1-calls")) as f:
            assert f.read() == "Reboot interactive=false\n"

    def test_4_login1_refusing(self):
        """login1 refusing: the error reaches the caller with its D-Bus name."""
        self.login1("login1-denied-calls", deny=True)
        rc, out, err = run_client(self.client, "login1", self.env)
        assert rc == 1 and "EACCES" in out and "AccessDenied" in out, (rc, out, err)
        with open(os.path.join(self.root, "login1-denied-calls")) as f:
            assert f.read() == "Reboot interactive=false\n"

    def test_5_login1_absent(self):
        """login1 absent: a failure, not a hang."""
        rc, out, err = run_client(self.client, "login1", self.env)
        assert rc == 1 and out.startswith("failed:"), (rc, out, err)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("REBOOT_CLIENT", "FAKE_LOGIN1") + usermgr.missing_prerequisites() +
               itest.programs("touch"))
