# SPDX-License-Identifier: Apache-2.0
"""A real systemd user manager with its own D-Bus bus, for integration tests.

Why a user manager: the agent talks to systemd over D-Bus (org.freedesktop.systemd1). On a test machine
where systemd is not PID 1 (or where we must not touch the real one), `systemd --user` is the same
code with the same bus API, and the agent reaches it through DBUS_SYSTEM_BUS_ADDRESS.

Recipe (works as root on Debian 12 with dbus-user-session, systemd not PID 1):
  * a private base directory holding the runtime dir (XDG_RUNTIME_DIR, 0700), XDG_CONFIG_HOME, HOME,
    a fake /run/systemd (with an empty system/, so sd_booted() is true in the namespace) and logs;
  * a start target that Wants= dbus.socket and dbus.service: the manager's own dbus.socket creates
    $XDG_RUNTIME_DIR/bus, the manager registers org.freedesktop.systemd1 on it once dbus.service runs
    (a dbus-daemon started by us beforehand does not work);
  * `unshare -m --propagation private` so the bind mount over /run/systemd stays private;
  * its own child cgroup: a manager that finds itself in the root cgroup moves *every* process of the
    machine into /init.scope, and two managers in one cgroup would kill each other's units. The child
    cgroup also lets stop() kill whatever the manager leaves behind, and nothing else.

Units' stdout/stderr: there is no journald, so the manager runs with DefaultStandardOutput=inherit
(its own stdout is manager.log) and service() points units at logs/<unit>.log.

Usage:
    import usermgr
    usermgr.missing_prerequisites()          # what is missing here, if anything
    with usermgr.UserManager() as um:
        um.write_unit("a.service", um.service("sleep infinity"))
        um.daemon_reload()
        um.systemctl("start", "a.service")
        um.invocation_id("a.service")

Stdlib only. Every wait polls a condition with a deadline; nothing sleeps for synchronisation.
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SYSTEMD = "/lib/systemd/systemd"
START_TARGET = "usermgr-test.target"
CGROUP_ROOT = "/sys/fs/cgroup"


class UserManagerError(RuntimeError):
    pass


def missing_prerequisites():
    """Names of missing prerequisites (empty list when everything is there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (unshare -m, bind mounts, cgroups)")
    for tool in ("unshare", "mount", "systemctl", "busctl", "dbus-daemon"):
        if shutil.which(tool) is None:
            missing.append(tool)
    if not os.access(SYSTEMD, os.X_OK):
        missing.append(SYSTEMD)
    for unit in ("dbus.socket", "dbus.service"):
        if not any(os.path.exists(os.path.join(d, unit))
                   for d in ("/usr/lib/systemd/user", "/lib/systemd/user", "/etc/systemd/user")):
            missing.append("user unit %s (dbus-user-session)" % unit)
    return missing


def wait_until(predicate, timeout, what, interval=0.005):
    """Poll predicate() until it returns a truthy value; returns that value or raises TimeoutError."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = predicate()
            if v:
                return v
        except (OSError, subprocess.SubprocessError, UserManagerError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s%s" %
                               (timeout, what, (" (last error: %s)" % last_exc) if last_exc else ""))
        time.sleep(interval)
        interval = min(interval * 2, 0.05)


def _own_cgroup_dirs():
    """(hierarchy directory, our path in it) for the hierarchies systemd tracks processes in."""
    out = []
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base = os.path.join(CGROUP_ROOT, "unified")
            if not os.path.isdir(base):
                base = CGROUP_ROOT                      # pure cgroup v2
        elif "cpuset" in controllers.split(","):
            continue                                    # needs cpus/mems set up; systemd leaves it alone
        else:
            name = controllers[len("name="):] if controllers.startswith("name=") else controllers
            base = os.path.join(CGROUP_ROOT, name)
        if os.path.isfile(os.path.join(base, "cgroup.procs")):
            out.append((base, path))
    return out


class UserManager:
    """One `systemd --user` instance with a private bus. Use as a context manager or start()/stop()."""

    def __init__(self, prefix="usermgr-", manager_log_level="info", keep=None):
        self.base = tempfile.mkdtemp(prefix=prefix, dir="/tmp")      # short: unix socket paths <108
        self.runtime_dir = os.path.join(self.base, "rt")
        self.config_home = os.path.join(self.base, "config")
        self.unit_dir = os.path.join(self.config_home, "systemd", "user")
        self.home = os.path.join(self.base, "home")
        self.fake_run_systemd = os.path.join(self.base, "run-systemd")
        self.log_dir = os.path.join(self.base, "logs")
        self.manager_log_path = os.path.join(self.base, "manager.log")
        self.bus_path = os.path.join(self.runtime_dir, "bus")
        self.bus_address = "unix:path=" + self.bus_path
        self.manager_log_level = manager_log_level
        self.keep = keep if keep is not None else bool(os.environ.get("USERMGR_KEEP"))
        self.proc = None
        self.cgroups = []
        self.start_seconds = None
        for d in (self.unit_dir, self.home, os.path.join(self.fake_run_systemd, "system"), self.log_dir):
            os.makedirs(d, exist_ok=True)
        os.makedirs(self.runtime_dir, mode=0o700, exist_ok=True)
        os.chmod(self.runtime_dir, 0o700)
        # The manager's runtime unit directory, as PID 1 has /run/systemd/system (the agent's
        # systemd.runtimeUnitDirectory in the sandbox).
        self.runtime_unit_dir = os.path.join(self.runtime_dir, "systemd", "user")
        os.makedirs(self.runtime_unit_dir, exist_ok=True)

    # ---------------------------------------------------------------- environment for clients

    @property
    def env(self):
        """Environment for clients: systemctl --user / busctl --user, and the agent (system bus)."""
        e = dict(os.environ)
        e.update(XDG_RUNTIME_DIR=self.runtime_dir,
                 DBUS_SESSION_BUS_ADDRESS=self.bus_address,
                 DBUS_SYSTEM_BUS_ADDRESS=self.bus_address,
                 SYSTEMD_PAGER="", SYSTEMD_COLORS="0", LC_ALL="C.UTF-8")
        return e

    # ---------------------------------------------------------------- lifecycle

    def _write_manager_config(self):
        with open(os.path.join(self.unit_dir, START_TARGET), "w") as f:
            f.write("[Unit]\nDescription=usermgr.py start target\n"
                    "Wants=dbus.socket dbus.service\nAfter=dbus.socket\n")
        # DefaultEnvironment: every unit, the agent included, reaches this manager as "the system bus".
        with open(os.path.join(self.config_home, "systemd", "user.conf"), "w") as f:
            f.write("[Manager]\nDefaultStandardOutput=inherit\nDefaultStandardError=inherit\n"
                    "DefaultTimeoutStopSec=10s\nDefaultTimeoutStartSec=30s\n"
                    "DefaultEnvironment=DBUS_SYSTEM_BUS_ADDRESS=%s\n" % self.bus_address)

    def _make_cgroups(self):
        name = os.path.basename(self.base)
        for base, path in _own_cgroup_dirs():
            d = os.path.join(base, path.lstrip("/"), name)
            try:
                os.mkdir(d)
                self.cgroups.append(d)
            except OSError:
                pass

    def start(self, timeout=10.0):
        """Start the manager; returns once systemd1 answers on the bus and the start job finished."""
        if self.proc:
            raise UserManagerError("already started")
        self._write_manager_config()
        self._make_cgroups()
        t0 = time.monotonic()
        # The shell moves itself into our cgroups, makes /run/systemd private, then becomes systemd:
        # the PID we hold is the manager's own, so stop() can signal exactly it.
        script = ('for c in "$@"; do echo $$ > "$c/cgroup.procs" 2>/dev/null; done; '
                  'mount --bind "$RUNSYS" /run/systemd || exit 1; '
                  'exec "$SYSTEMD" --user --unit="$TARGET" --log-target=console --log-color=no '
                  '--log-level="$LEVEL"')
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": self.home, "XDG_RUNTIME_DIR": self.runtime_dir,
               "XDG_CONFIG_HOME": self.config_home, "LANG": "C.UTF-8",
               "RUNSYS": self.fake_run_systemd, "SYSTEMD": SYSTEMD, "TARGET": START_TARGET,
               "LEVEL": self.manager_log_level}
        log = open(self.manager_log_path, "ab")
        try:
            self.proc = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script, "sh"] + self.cgroups,
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                cwd=self.home, start_new_session=True)
        finally:
            log.close()
        try:
            wait_until(self._ready, timeout, "the user manager to answer on " + self.bus_path)
        except BaseException:
            tail = self.manager_log()[-3000:]
            self.stop()
            raise UserManagerError("user manager did not come up; manager.log tail:\n" + tail)
        self.start_seconds = time.monotonic() - t0
        return self

    def _ready(self):
        if self.proc.poll() is not None:
            raise TimeoutError("user manager exited with %s" % self.proc.returncode)
        if not os.path.exists(self.bus_path):
            return False
        # Through the bus (this is what the agent uses), not the private socket systemctl prefers.
        r = self.busctl("call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                        "org.freedesktop.DBus.Properties", "Get", "ss",
                        "org.freedesktop.systemd1.Manager", "SystemState", check=False)
        return r.returncode == 0 and ('"running"' in r.stdout or '"degraded"' in r.stdout)

    def stop(self, timeout=5.0):
        """Stop the manager and everything it started; kills only our own PID / our cgroups."""
        if self.proc and self.proc.poll() is None:
            # A clean exit stops every unit first (exit.target conflicts with them all).
            self.systemctl("exit", check=False, timeout=timeout)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self._kill_cgroups()
        self._remove_cgroups()
        if not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)

    def _cgroup_pids(self):
        pids = set()
        for top in self.cgroups:
            for d, _, _ in os.walk(top):
                try:
                    with open(os.path.join(d, "cgroup.procs")) as f:
                        pids.update(int(x) for x in f.read().split())
                except OSError:
                    pass
        return pids

    def _kill_cgroups(self):
        # Everything in our cgroups descends from the manager we started.
        for pid in self._cgroup_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            wait_until(lambda: not self._cgroup_pids(), 5, "leftover processes to die")
        except TimeoutError as e:
            print("usermgr: %s" % e, file=sys.stderr)

    def _remove_cgroups(self):
        for top in self.cgroups:
            for d, _, _ in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        self.cgroups = [c for c in self.cgroups if os.path.isdir(c)]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if exc[0] is not None and not self.keep:
            sys.stderr.write("---- manager.log (tail) ----\n%s\n" % self.manager_log()[-4000:])
        self.stop()
        return False

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    # ---------------------------------------------------------------- units

    def write_unit(self, name, text, pin=True):
        """Write (or replace) a unit file in the manager's unit directory. Call daemon_reload() after.

        pin: keep the unit loaded after it stops. systemd garbage-collects an inactive, unreferenced
        unit, and a reloaded unit shows fresh defaults (ExecMainCode=0, Result=success), which would
        make exit-status checks pass vacuously."""
        if "/" in name:
            raise ValueError("unit name with '/': %r" % name)
        path = os.path.join(self.unit_dir, name)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)
        if pin:
            self.pin(name)
        return path

    def pin(self, unit):
        """Reference `unit` from the (always active) start target so it is never garbage-collected.
        An ordering dependency is a reference but starts nothing. Needs daemon_reload()."""
        d = os.path.join(self.unit_dir, START_TARGET + ".d")
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "pin-%s.conf" % unit), "w") as f:
            f.write("[Unit]\nBefore=%s\n" % unit)

    def remove_unit(self, name):
        for p in (os.path.join(self.unit_dir, name),
                  os.path.join(self.unit_dir, START_TARGET + ".d", "pin-%s.conf" % name)):
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass

    def log_path(self, unit):
        return os.path.join(self.log_dir, unit + ".log")

    def service(self, exec_start, type="simple", service_extra="", unit_extra=""):
        """Text of a service unit whose stdout+stderr append to log_path(<unit>) (use %n)."""
        return ("[Unit]\nDescription=test unit %%n\n%s\n"
                "[Service]\nType=%s\nExecStart=%s\n"
                "StandardOutput=append:%s/%%n.log\nStandardError=inherit\n%s\n"
                % (unit_extra, type, exec_start, self.log_dir, service_extra))

    def daemon_reload(self, timeout=10):
        self.systemctl("daemon-reload", timeout=timeout)

    # ---------------------------------------------------------------- queries and commands

    def systemctl(self, *args, check=True, timeout=30):
        """Run `systemctl --user ARGS` against this manager; returns CompletedProcess (text)."""
        r = subprocess.run(["systemctl", "--user", "--no-pager", "--no-ask-password"] + list(args),
                           env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise UserManagerError("systemctl --user %s failed (%d): %s%s" %
                                   (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r

    def busctl(self, *args, check=True, timeout=10):
        r = subprocess.run(["busctl", "--user", "--no-pager"] + list(args),
                           env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise UserManagerError("busctl --user %s failed (%d): %s" % (" ".join(args), r.returncode, r.stderr))
        return r

    def show_all(self, unit, *props):
        """{prop: value} for the given properties (all properties when none are given)."""
        args = ["show", unit]
        if props:
            args.append("--property=" + ",".join(props))
        out = self.systemctl(*args).stdout
        res = {}
        for line in out.splitlines():
            k, _, v = line.partition("=")
            res[k] = v
        return res

    def show(self, unit, prop):
        return self.systemctl("show", unit, "--property=" + prop, "--value").stdout.rstrip("\n")

    def invocation_id(self, unit):
        return self.show(unit, "InvocationID")

    def active_state(self, unit):
        return self.show(unit, "ActiveState")

    def main_pid(self, unit):
        return int(self.show(unit, "MainPID") or 0)

    def wait_for_state(self, unit, states, timeout=10, prop="ActiveState"):
        """Wait until prop of unit is one of states (str or iterable); returns the value."""
        if isinstance(states, str):
            states = (states,)
        return wait_until(lambda: (lambda v: v if v in states else None)(self.show(unit, prop)),
                          timeout, "%s %s in %s" % (unit, prop, states))

    # ---------------------------------------------------------------- logs

    def logs(self, unit):
        """What the unit wrote to log_path(unit) (empty string when nothing yet)."""
        try:
            with open(self.log_path(unit), errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    journal = logs

    def manager_log(self):
        try:
            with open(self.manager_log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""
