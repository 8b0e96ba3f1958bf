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

Skips (77) when usermgr cannot run a user manager here (usermgr.skip_if_missing()).
"""

import os
import selectors
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
import usermgr  # noqa: E402


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


def main():
    client = os.environ.get("REBOOT_CLIENT")
    fake = os.environ.get("FAKE_LOGIN1")
    if not client or not fake:
        print("REBOOT_CLIENT and FAKE_LOGIN1 must point at the built helpers", file=sys.stderr)
        return 1
    usermgr.skip_if_missing(extra_paths=[shutil.which("touch") or "/usr/bin/touch"])

    with tempfile.TemporaryDirectory(prefix="test-reboot-") as root, \
            usermgr.UserManager(prefix="reboot-") as um:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": um.bus_address}
        fakes = []
        try:
            # none: no bus traffic at all.
            rc, out, err = run_client(client, "none", {"PATH": env["PATH"]})
            assert (rc, out) == (0, "disabled: reboot required but disabled"), (rc, out, err)
            print("none: reboot required but disabled")

            # systemd: this manager's reboot.target only pulls in a service leaving a marker.
            marker = os.path.join(root, "reboot-target-started")
            um.write_unit("inplace-reboot-marker.service",
                          um.service(f"{shutil.which('touch')} {marker}", type="oneshot"))
            um.write_unit("reboot.target", "[Unit]\nDescription=Fake reboot\n"
                                           "Wants=inplace-reboot-marker.service\n")
            um.daemon_reload()
            rc, out, err = run_client(client, "systemd", env)
            assert (rc, out) == (0, "accepted"), (rc, out, err)
            usermgr.wait_until(lambda: os.path.exists(marker), 15,
                               "reboot.target to pull in the marker service")
            assert um.active_state("reboot.target") == "active"
            print("systemd: StartUnit(reboot.target, replace-irreversibly) accepted, target reached")

            # login1: a fake logind records the call.
            record = os.path.join(root, "login1-calls")
            fakes.append(FakeLogin1(fake, record, env))
            rc, out, err = run_client(client, "login1", env)
            assert (rc, out) == (0, "accepted"), (rc, out, err)
            with open(record) as f:
                assert f.read() == "Reboot interactive=false\n"
            fakes.pop().stop()
            print("login1: Reboot(false) recorded")

            # login1 refusing: the error reaches the caller with its D-Bus name.
            record = os.path.join(root, "login1-denied-calls")
            fakes.append(FakeLogin1(fake, record, env, deny=True))
            rc, out, err = run_client(client, "login1", env)
            assert rc == 1 and "EACCES" in out and "AccessDenied" in out, (rc, out, err)
            with open(record) as f:
                assert f.read() == "Reboot interactive=false\n"
            fakes.pop().stop()
            print("login1: AccessDenied reported as EACCES")

            # login1 absent: a failure, not a hang.
            rc, out, err = run_client(client, "login1", env)
            assert rc == 1 and out.startswith("failed:"), (rc, out, err)
            print("login1 absent: reported as failure (%s)" % out)
        finally:
            for f in fakes:
                f.stop()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
