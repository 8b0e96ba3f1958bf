#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""reboot.c against real D-Bus peers.

A private systemd user manager provides the bus (its dbus.socket) and plays the system manager;
the client reaches it through DBUS_SYSTEM_BUS_ADDRESS exactly as the agent would reach the real
system bus.

- osUpdate.reboot=systemd: StartUnit("reboot.target", "replace-irreversibly") on the user manager,
  whose reboot.target (defined here) pulls in a oneshot service that creates a marker file.
- osUpdate.reboot=login1: tests/helpers/fake-login1 owns org.freedesktop.login1 on that bus and
  records Reboot() calls; also a denying fake and no fake at all.
- osUpdate.reboot=none: no bus traffic, "reboot required but disabled".

Skips (77) when it cannot run a private user manager: not root, no unshare/mount, no systemd,
no dbus user session units.
"""

import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
SYSTEMD = "/lib/systemd/systemd"
USER_DBUS_SOCKET = "/usr/lib/systemd/user/dbus.socket"


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(SKIP)


def wait_for(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class PrivateUserManager:
    """A systemd --user instance in a private mount namespace with its own runtime and config dirs.

    Minimal private harness; tests/integration/lib/usermgr.py (branch systemd) is the shared one
    once merged. /run/systemd is replaced by a directory holding an empty system/ so the manager
    believes it runs under systemd but sees nothing of the host's system manager."""

    TARGET = "inplace-itest.target"

    def __init__(self, root, units):
        self.root = root
        self.runtime = os.path.join(root, "runtime")
        self.config = os.path.join(root, "config")
        self.home = os.path.join(root, "home")
        self.fake_run = os.path.join(root, "run-systemd")
        self.log_path = os.path.join(root, "user-manager.log")
        self.units = dict(units)
        self.units[self.TARGET] = "[Unit]\nDescription=inplace-agent test session\nWants=dbus.socket\n"
        self.proc = None

    @property
    def bus_path(self):
        return os.path.join(self.runtime, "bus")

    @property
    def bus_address(self):
        return f"unix:path={self.bus_path}"

    def start(self):
        os.makedirs(self.runtime, mode=0o700)
        os.chmod(self.runtime, 0o700)
        os.makedirs(os.path.join(self.fake_run, "system"))
        os.makedirs(self.home)
        unit_dir = os.path.join(self.config, "systemd", "user")
        os.makedirs(unit_dir)
        for name, text in self.units.items():
            with open(os.path.join(unit_dir, name), "w") as f:
                f.write(text)

        env = {
            "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
            "XDG_RUNTIME_DIR": self.runtime,
            "XDG_CONFIG_HOME": self.config,
            "HOME": self.home,
        }
        # The shell only glues mount and exec together inside the new namespace (test side only).
        script = 'mount --bind "$1" /run/systemd || exit 1; shift; exec "$@"'
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "--", "/bin/sh", "-c", script, "sh",
             self.fake_run, SYSTEMD, "--user", f"--unit={self.TARGET}"],
            env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: os.path.exists(self.bus_path) or self.proc.poll() is not None, 20,
                 "the user manager's bus socket")
        if self.proc.poll() is not None:
            raise AssertionError(f"user manager exited early:\n{self.read_log()}")

    def read_log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            # The manager stops its units (dbus.service included) on SIGTERM.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if getattr(self, "log", None):
            self.log.close()


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
    if os.geteuid() != 0:
        skip("needs root for a private mount namespace")
    for tool in ("unshare", "mount", "touch"):
        if not shutil.which(tool):
            skip(f"{tool} not found")
    if not os.access(SYSTEMD, os.X_OK) or not os.path.exists(USER_DBUS_SOCKET):
        skip("no systemd user manager or no D-Bus user session units")
    if not os.path.isdir("/run/systemd"):
        skip("/run/systemd missing: nothing to bind the fake over")

    with tempfile.TemporaryDirectory(prefix="test-reboot-") as root:
        marker = os.path.join(root, "reboot-target-started")
        units = {
            # Stands in for the real reboot.target: starting it only leaves a marker behind.
            "reboot.target": "[Unit]\nDescription=Fake reboot\nWants=inplace-reboot-marker.service\n",
            "inplace-reboot-marker.service":
                f"[Unit]\nDescription=Marker\n\n[Service]\nType=oneshot\n"
                f"ExecStart={shutil.which('touch')} {marker}\n",
        }
        mgr = PrivateUserManager(root, units)
        fakes = []
        try:
            try:
                mgr.start()
            except (AssertionError, OSError) as e:
                if "mount" in mgr.read_log() or isinstance(e, OSError):
                    skip(f"cannot run a private user manager here: {e}\n{mgr.read_log()}")
                raise
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": mgr.bus_address}

            # none: no bus at all.
            rc, out, err = run_client(client, "none", {"PATH": env["PATH"]})
            assert (rc, out) == (0, "disabled: reboot required but disabled"), (rc, out, err)

            # systemd: the manager registers on its bus once dbus.service is up; until then the
            # bus answers ServiceUnknown/NameHasNoOwner. Poll with a deadline.
            def systemd_accepted():
                rc, out, err = run_client(client, "systemd", env)
                if rc == 0:
                    return out
                if rc == 1 and ("ServiceUnknown" in out or "NameHasNoOwner" in out):
                    return None
                raise AssertionError(f"systemd mode failed: rc={rc} out={out} err={err}")
            assert wait_for(systemd_accepted, 30, "the user manager on its bus") == "accepted"
            wait_for(lambda: os.path.exists(marker), 15, "reboot.target to pull in the marker service")
            print("systemd: StartUnit(reboot.target) accepted, marker written")

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
            print("login1 absent: reported as failure")
        except AssertionError:
            print(mgr.read_log(), file=sys.stderr)
            raise
        finally:
            for f in fakes:
                f.stop()
            mgr.stop()
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
