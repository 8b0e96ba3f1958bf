# SPDX-License-Identifier: Apache-2.0
"""The machine tier's machine: the agent's .deb installed with apt into a Debian 12 image and booted
under systemd-nspawn, with systemd as PID 1, journald, a system D-Bus and logind.

    import machine
    machine.missing_prerequisites()                   # what is missing here for the tier, if anything
    layers = machine.prepare(log=print)               # cached image + .deb + installed layer
    with machine.Machine(layers, "node-a") as m:      # a throw-away overlay of the cached image
        m.write("/etc/inplace-agent/config.d/90-test.yaml", "...")
        m.boot()                                      # returns once the system is up
        print(m.run("systemctl", "status", "inplace-agent").stdout)
        m.run("systemctl", "reboot"); m.wait_exit() == 133; m.boot()   # a real reboot

What is cached (under CACHE, default /var/cache/inplace-agent-machine; one flock serialises
concurrent runs):
  images/<key>/root      a minbase Debian 12 with PACKAGES: what a Gardener machine image brings
                         (systemd, D-Bus, containerd) plus python3 for the kubelet stand-in, made by
                         mmdebstrap (35-60 s) or, where it is missing, debootstrap (60-135 s). Keyed
                         by suite, packages and IMAGE_RECIPE.
  debs/<key>/            the .deb built from the tree (.ci/build-deb.sh, nocheck), keyed by the
                         content of every file that can change it (package_input()).
  installed/<key>/upper  an overlay layer on the image: `apt-get install ./inplace-agent_*.deb`
                         (Depends: pulled by apt, Recommends: not), keyed by image and .deb.
  apt-archives/          apt's download cache, shared by the installs, so a warm run needs no mirror.
Each machine is an overlay (lower: installed layer + image, upper: a temporary directory under
/var/tmp/ipa-machine-*), so a scenario never changes the cache. Old cache entries are pruned.

The Debian mirror is the one this host's apt uses (/etc/apt/sources.list*), read at run time.

nspawn here: never registered with machined (--register=no); on a host without systemd as PID 1
(a CI container) also --keep-unit, as there is no manager to make a scope; no --private-network,
so the container shares the host's network namespace and reaches the emulator and registry on
127.0.0.1 (and anything it listens on is on the host's loopback: tests pick free ports). The
container's PID 1 is found as nspawn's child; commands run in it with nsenter. `systemctl reboot`
inside makes nspawn exit with 133; booting the same overlay again is a real reboot (new boot id).
stop() powers the container off (SIGKILL to its PID 1 after a deadline), unmounts and removes the
overlay; a SIGTERM to the test process (meson's timeout) runs it too.

Stdlib only. Waits poll a condition with a deadline.
"""

import atexit
import concurrent.futures
import fcntl
import glob
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("SRCDIR") or os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(SRCDIR, "tests", "integration", "lib"))
import registry  # noqa: E402
from registry import wait_until  # noqa: E402,F401

CACHE = os.environ.get("INPLACE_MACHINE_CACHE", "/var/cache/inplace-agent-machine")
SUITE = "bookworm"
# What a Gardener machine image has for the agent to work with (Garden Linux: systemd, D-Bus,
# containerd and runc, CA certificates), plus python3 for the stand-in kubelet. Everything else
# of the agent's (libcurl, jansson, libarchive, libyaml, ISA-L) must come from its Depends:.
PACKAGES = ("systemd", "systemd-sysv", "dbus", "containerd", "ca-certificates", "python3")
# Bump when the image recipe below changes: a new key, a new image.
IMAGE_RECIPE = 1
WORK_PREFIX = "/var/tmp/ipa-machine-"
KEEP_ENTRIES = 2                # cache entries of each kind kept besides the current one
COMMAND_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "TERM": "dumb",
               "SYSTEMD_PAGER": "", "SYSTEMD_COLORS": "0", "SYSTEMD_URLIFY": "0", "COLUMNS": "200"}


class MachineError(RuntimeError):
    pass


def log_nothing(msg):
    pass


# ------------------------------------------------------------------------------------------ prerequisites

def overlay_supported():
    try:
        with open("/proc/filesystems") as f:
            return any(line.split()[-1] == "overlay" for line in f if line.strip())
    except OSError:
        return False


def missing_prerequisites():
    missing = []
    if os.geteuid() != 0:
        missing.append("root (the image build, overlay mounts, systemd-nspawn)")
    if not bootstrap_command("/", "")[0]:
        missing.append("mmdebstrap or debootstrap (apt-get install mmdebstrap)")
    for tool, package in (("systemd-nspawn", "systemd-container"),
                          ("nsenter", "util-linux"), ("dpkg-buildpackage", "dpkg-dev"), ("dh", "debhelper"),
                          ("dpkg-deb", "dpkg")):
        if shutil.which(tool) is None:
            missing.append("%s (apt-get install %s)" % (tool, package))
    if not overlay_supported():
        missing.append("the overlay file system (modprobe overlay)")
    return missing + registry.missing_prerequisites()


# ------------------------------------------------------------------------------------------ cache

class CacheLock:
    """The cache's flock: one preparer at a time (two runs on one machine wait for each other)."""

    def __enter__(self):
        os.makedirs(CACHE, exist_ok=True)
        self.fd = os.open(os.path.join(CACHE, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def digest(*parts):
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:20]


def prune(kind, keep):
    """Removes the oldest entries of CACHE/kind, keeping `keep` and the KEEP_ENTRIES newest others."""
    entries = sorted((e for e in glob.glob(os.path.join(CACHE, kind, "*")) if os.path.basename(e) != keep),
                     key=os.path.getmtime, reverse=True)
    for e in entries[KEEP_ENTRIES:]:
        shutil.rmtree(e, ignore_errors=True)


def run_logged(argv, logfile, what, env=None, timeout=900):
    """Runs argv with its output appended to logfile; MachineError with the log's tail on failure."""
    with open(logfile, "ab") as out:
        r = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                           timeout=timeout)
    if r.returncode != 0:
        with open(logfile, "rb") as f:
            tail = f.read()[-4000:].decode(errors="replace")
        raise MachineError("%s failed (exit %d), log %s:\n%s" % (what, r.returncode, logfile, tail))


# ------------------------------------------------------------------------------------------ the image

def debian_mirror():
    """The Debian archive URI this host's apt uses for SUITE's main component (one-line and deb822
    formats); never a host name of our own."""
    files = ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*.list")) + \
        sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))
    for path in files:
        try:
            with open(path) as f:
                text = f.read()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = {}
                for line in stanza.splitlines():
                    if line.startswith("#") or ":" not in line:
                        continue
                    k, _, v = line.partition(":")
                    fields[k.strip().lower()] = v.split()
                if ("deb" in fields.get("types", []) and SUITE in fields.get("suites", []) and
                        "main" in fields.get("components", []) and fields.get("uris")):
                    return fields["uris"][0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 4 and words[0] == "deb" and words[2] == SUITE and "main" in words[3:]:
                    return words[1]
    raise MachineError("no Debian '%s main' source in this host's apt configuration (/etc/apt/sources.list*);"
                       " the image is built from the mirror apt uses" % SUITE)


MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"


def bootstrap_command(root, mirror):
    """(argv, name) of the tool that makes the image below `root`; (None, None) when there is none.
    mmdebstrap where it is installed: apt's parallel downloads and dpkg without fsync take 35 s and
    26 s of CPU where debootstrap takes 60-135 s and 63 s (2 shared cores). Both give the same
    packages: minbase, /usr merged without the usrmerge package (which would bring perl), apt's
    package lists kept for `apt-get install ./x.deb` offline."""
    if shutil.which("mmdebstrap") and os.path.isdir(MERGED_USR_HOOKS):
        return ["mmdebstrap", "--variant=minbase", "--hook-dir=" + MERGED_USR_HOOKS, "--skip=cleanup/apt/lists",
                "--include=" + ",".join(PACKAGES), SUITE, root, mirror], "mmdebstrap"
    if shutil.which("debootstrap"):
        return ["debootstrap", "--variant=minbase", "--include=" + ",".join(PACKAGES), SUITE, root,
                mirror], "debootstrap"
    return None, None


def image_key():
    return digest("image", SUITE, sorted(PACKAGES), IMAGE_RECIPE, os.uname().machine)


def ensure_image(log=log_nothing):
    """The cached Debian 12 root file system (built when missing). Returns its path."""
    key = image_key()
    root = os.path.join(CACHE, "images", key, "root")
    if os.path.exists(os.path.join(CACHE, "images", key, "complete")):
        return root
    mirror = debian_mirror()
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="image-", dir=os.path.join(CACHE))
    try:
        argv, tool = bootstrap_command(os.path.join(tmp, "root"), mirror)
        log("building the Debian 12 image %s (%s from %s, under a minute)" % (key, tool, mirror))
        logfile = os.path.join(tmp, tool + ".log")
        run_logged(argv, logfile, tool)
        finish_image(os.path.join(tmp, "root"), logfile)
        with open(os.path.join(tmp, "complete"), "w") as f:
            json.dump({"suite": SUITE, "packages": PACKAGES, "mirror": mirror, "recipe": IMAGE_RECIPE, "tool": tool,
                       "seconds": round(time.monotonic() - t0, 1)}, f)
        dest = os.path.join(CACHE, "images", key)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    prune("images", key)
    log("image built in %.0f s" % (time.monotonic() - t0))
    return root


def finish_image(root, logfile):
    """What an image build does after the packages: no downloads kept, no host identity (hostname,
    machine-id: each machine gets its own), apt's lists kept so `apt-get install ./x.deb` resolves
    Depends: offline."""
    run_logged(["chroot", root, "apt-get", "clean"], logfile, "apt-get clean")
    for name in ("etc/hostname",):
        p = os.path.join(root, name)
        if os.path.exists(p):
            os.unlink(p)
    with open(os.path.join(root, "etc", "machine-id"), "w"):
        pass
    # The container's console is nspawn's log file, not a terminal to log in on.
    for unit in ("console-getty.service", "getty@tty1.service"):
        for d in glob.glob(os.path.join(root, "etc/systemd/system/*.wants")):
            p = os.path.join(d, unit)
            if os.path.lexists(p):
                os.unlink(p)


# ------------------------------------------------------------------------------------------ the .deb

def tree_files(srcdir):
    """The files .ci/copy-tree.sh copies (the package build's input), sorted."""
    r = subprocess.run(["git", "-C", srcdir, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True)
    if r.returncode == 0:
        names = [n for n in r.stdout.decode().split("\0") if n and not re.match(r"build[^/]*/", n)]
    else:
        names = []
        for d, dirs, files in os.walk(srcdir):
            rel = os.path.relpath(d, srcdir)
            dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x == ".git"))]
            names += [os.path.normpath(os.path.join(rel, x)) for x in files]
    return sorted(n for n in names if os.path.lexists(os.path.join(srcdir, n)))


def package_input(name):
    """Whether a file of the tree can change the .deb built with nocheck (integration-tests=false,
    tests disabled): not the test suites, benchmarks and documents, only the meson.build files the
    package build reads (not the integration and machine suites', which it skips)."""
    if name in ("tests/integration/meson.build", "tests/machine/meson.build"):
        return False
    if name.startswith("tests/") or name.startswith("bench/"):
        return name.endswith("meson.build")
    return not name.endswith(".md")


def source_key(srcdir):
    h = hashlib.sha256()
    for name in filter(package_input, tree_files(srcdir)):
        path = os.path.join(srcdir, name)
        h.update(name.encode() + b"\0")
        if os.path.islink(path):
            h.update(b"L" + os.readlink(path).encode())
        else:
            h.update(b"X" if os.access(path, os.X_OK) else b"F")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:20]


def ensure_deb(srcdir=SRCDIR, log=log_nothing):
    """The .deb of this tree (built when the tree changed). Returns its path."""
    key = source_key(srcdir)
    d = os.path.join(CACHE, "debs", key)
    found = glob.glob(os.path.join(d, "inplace-agent_*.deb"))
    if found and os.path.exists(os.path.join(d, "complete")):
        return found[0]
    log("building the .deb from %s (.ci/build-deb.sh, nocheck)" % srcdir)
    t0 = time.monotonic()
    shutil.rmtree(d, ignore_errors=True)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=%d" % (os.cpu_count() or 1))
    r = subprocess.run(["nice", "bash", os.path.join(srcdir, ".ci", "build-deb.sh"), d], capture_output=True,
                       text=True, env=env, timeout=1800)
    if r.returncode != 0:
        raise MachineError("building the .deb failed:\n%s%s" % (r.stdout[-3000:], r.stderr[-3000:]))
    with open(os.path.join(d, "complete"), "w") as f:
        f.write("%.1f\n" % (time.monotonic() - t0))
    prune("debs", key)
    log(".deb built in %.0f s" % (time.monotonic() - t0))
    return glob.glob(os.path.join(d, "inplace-agent_*.deb"))[0]


def file_sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# ------------------------------------------------------------------------------------------ overlays

def mount_overlay(lowers, upper, work, merged):
    os.makedirs(upper, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    os.makedirs(merged, exist_ok=True)
    opts = "lowerdir=%s,upperdir=%s,workdir=%s" % (":".join(lowers), upper, work)
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, merged], capture_output=True, text=True)
    if r.returncode != 0:
        raise MachineError("mounting the overlay on %s failed: %s" % (merged, r.stderr.strip()))


def unmount(path):
    if os.path.ismount(path):
        r = subprocess.run(["umount", path], capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", "-l", path], capture_output=True)


def keep_unit():
    """nspawn's --keep-unit where no systemd runs the host (it cannot ask PID 1 for a scope); with
    systemd as PID 1 nspawn gets its own transient scope."""
    return [] if os.path.isdir("/run/systemd/system") else ["--keep-unit"]


def nspawn_run(root, argv, logfile, what, binds=(), timeout=600):
    """A command in the tree under systemd-nspawn without booting it (no systemd inside)."""
    cmd = ["systemd-nspawn", "--quiet", "--register=no"] + keep_unit() + ["--as-pid2", "-D", root,
           "--machine=ipa-setup-%s" % uuid.uuid4().hex[:8], "--link-journal=no", "--timezone=off"]
    cmd += ["--bind=%s:%s" % b for b in binds]
    cmd += ["--setenv=%s=%s" % kv for kv in sorted(dict(COMMAND_ENV, DEBIAN_FRONTEND="noninteractive").items())]
    run_logged(cmd + ["--"] + list(argv), logfile, what, timeout=timeout)


def ensure_installed(image_root, deb, log=log_nothing):
    """The overlay layer that holds the agent installed with apt (Depends: resolved and pulled by
    apt from the image's package lists; downloads cached in CACHE/apt-archives). Returns its path."""
    key = digest("installed", os.path.basename(os.path.dirname(image_root)), file_sha(deb))
    d = os.path.join(CACHE, "installed", key)
    if os.path.exists(os.path.join(d, "complete")):
        return os.path.join(d, "upper")
    log("installing %s into the image with apt-get" % os.path.basename(deb))
    t0 = time.monotonic()
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    archives = os.path.join(CACHE, "apt-archives")
    os.makedirs(os.path.join(archives, "partial"), exist_ok=True)
    merged = os.path.join(d, "merged")
    logfile = os.path.join(d, "install.log")
    mount_overlay([image_root], os.path.join(d, "upper"), os.path.join(d, "work"), merged)
    try:
        binds = [(archives, "/var/cache/apt/archives"), (os.path.dirname(deb), "/run/inplace-agent-deb")]
        path = "/run/inplace-agent-deb/" + os.path.basename(deb)
        install = ["apt-get", "install", "-y", "--no-install-recommends", path]
        try:
            nspawn_run(merged, install, logfile, "apt-get install", binds)
        except MachineError:
            # The image's package lists can be older than the mirror (a point release removed a
            # version): refresh them once.
            nspawn_run(merged, ["apt-get", "update"], logfile, "apt-get update", binds)
            nspawn_run(merged, install, logfile, "apt-get install", binds)
        if not os.path.islink(os.path.join(merged, "etc/systemd/system/multi-user.target.wants/inplace-agent.service")):
            raise MachineError("the installed package did not enable inplace-agent.service (log %s)" % logfile)
    finally:
        unmount(merged)
    shutil.rmtree(os.path.join(d, "work"), ignore_errors=True)
    with open(os.path.join(d, "complete"), "w") as f:
        f.write("%.1f\n" % (time.monotonic() - t0))
    prune("installed", key)
    log("installed in %.0f s" % (time.monotonic() - t0))
    return os.path.join(d, "upper")


class Layers:
    """What prepare() returns: the lower layers of every machine (top first) and the .deb."""

    def __init__(self, image_root, installed, deb, timings):
        self.image_root, self.installed, self.deb, self.timings = image_root, installed, deb, timings

    @property
    def lowers(self):
        return [self.installed, self.image_root]


def timed(fn):
    t0 = time.monotonic()
    return fn(), round(time.monotonic() - t0, 1)


def prepare(log=log_nothing, srcdir=SRCDIR):
    """The cached image, the .deb of the tree and the installed layer, each built when missing. The
    image and the .deb at the same time: the one mostly downloads and unpacks, the other compiles."""
    timings = {}
    with CacheLock():
        reap_stale()
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            image = pool.submit(timed, lambda: ensure_image(log))
            deb = pool.submit(timed, lambda: ensure_deb(srcdir, log))
            timings["image_path"], timings["image"] = image.result()
            timings["deb_path"], timings["deb"] = deb.result()
        t0 = time.monotonic()
        installed = ensure_installed(timings["image_path"], timings["deb_path"], log)
        timings["install"] = round(time.monotonic() - t0, 1)
    return Layers(timings.pop("image_path"), installed, timings.pop("deb_path"), timings)


def reap_stale():
    """Overlays of earlier runs whose nspawn is gone (a killed test): unmounted and removed. A
    machine of a run still going (its nspawn PID alive) or kept (MACHINE_KEEP) is never touched."""
    for d in glob.glob(WORK_PREFIX + "*"):
        try:
            with open(os.path.join(d, "nspawn.pid")) as f:
                pid = int(f.read())
        except (OSError, ValueError):
            pid = None
        if (pid and os.path.exists("/proc/%d" % pid)) or os.path.exists(os.path.join(d, "kept")):
            continue
        if pid is None and time.time() - os.path.getmtime(d) < 3600:
            continue            # being set up right now
        unmount(os.path.join(d, "merged"))
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------------------------------ the machine

_LIVE = set()


def _stop_all():
    for m in list(_LIVE):
        m.stop()


def _on_sigterm(signum, frame):
    raise SystemExit(128 + signum)


atexit.register(_stop_all)
signal.signal(signal.SIGTERM, _on_sigterm)


class Machine:
    """One booted Debian 12 node on a throw-away overlay. A context manager; stop() is idempotent."""

    def __init__(self, layers, hostname, keep=None, kmsg=False):
        self.layers = layers
        self.hostname = hostname
        self.keep = keep if keep is not None else bool(os.environ.get("MACHINE_KEEP"))
        self.name = "ipa-%s" % uuid.uuid4().hex[:10]
        self.dir = tempfile.mkdtemp(prefix=WORK_PREFIX)
        self.root = os.path.join(self.dir, "merged")
        self.proc = None
        self.pid1 = None
        self.kmsg_fd, self.kmsg_data = None, b""
        mount_overlay(layers.lowers, os.path.join(self.dir, "upper"), os.path.join(self.dir, "work"), self.root)
        _LIVE.add(self)
        # Its identity, as a cloud image's first boot would get it.
        self.write("/etc/hostname", hostname + "\n")
        self.write("/etc/machine-id", uuid.uuid4().hex + "\n", 0o444)
        # A persistent journal, so the boot before a reboot can be read (journalctl -b -1).
        os.makedirs(self.path("/var/log/journal"), exist_ok=True)
        if kmsg:
            self._kmsg_setup()

    def _kmsg_setup(self):
        """A /dev/kmsg the host reads (kmsg_lines()): nspawn gives a container none, so journald drops
        what it would forward to the kernel log (StandardOutput=kmsg, ForwardToKMsg=). Here a FIFO
        is bound there at every boot, held open on the host (O_RDWR: no reader or writer ever sees
        the other end closed), and journald told not to read it as the kernel's log (ReadKMsg=no: it
        is no ring buffer; journald then opens it for writing only, as where it forwards to)."""
        fifo = os.path.join(self.dir, "kmsg")
        os.mkfifo(fifo, 0o600)
        self.kmsg_fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self.write("/etc/systemd/journald.conf.d/90-machine-test-kmsg.conf",
                   "# tests/machine/lib/machine.py: /dev/kmsg is a FIFO the host reads, no kernel log\n"
                   "[Journal]\nReadKMsg=no\n")

    def kmsg_lines(self):
        """The records written to the machine's /dev/kmsg so far (Machine(kmsg=True)), each as
        journald forwards it: "<priority>identifier[pid]: message"."""
        while self.kmsg_fd is not None:
            try:
                chunk = os.read(self.kmsg_fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.kmsg_data += chunk
        return self.kmsg_data.decode(errors="replace").splitlines()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---------------------------------------------------------------- files (before boot or while up)

    def path(self, p):
        return os.path.join(self.root, p.lstrip("/"))

    def write(self, p, data, mode=0o644):
        full = self.path(p)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        with open(full + ".tmp", "wb") as f:
            f.write(data)
        os.chmod(full + ".tmp", mode)
        os.rename(full + ".tmp", full)

    def read(self, p, default=None):
        try:
            with open(self.path(p)) as f:
                return f.read()
        except OSError:
            return default

    # ---------------------------------------------------------------- lifecycle

    @property
    def console_log(self):
        return os.path.join(self.dir, "console.log")

    def boot(self, timeout=90):
        """Boots the overlay under systemd-nspawn; returns once systemd reports the system up
        (running or degraded). Returns the boot id."""
        if self.running():
            raise MachineError("machine %s is already running" % self.name)
        cmd = ["systemd-nspawn", "--boot", "--register=no"] + keep_unit() + ["-D", self.root,
               "--machine=" + self.name, "--console=passive", "--link-journal=no", "--timezone=off",
               "--resolv-conf=off"]
        if self.kmsg_fd is not None:
            cmd.append("--bind=%s:/dev/kmsg" % os.path.join(self.dir, "kmsg"))
        log = open(self.console_log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        with open(os.path.join(self.dir, "nspawn.pid"), "w") as f:
            f.write(str(self.proc.pid))
        self.pid1 = wait_until(self._find_pid1, 30, "the container's PID 1 (nspawn %d)" % self.proc.pid, 0.05)
        state = wait_until(self._system_state, timeout, "the machine to boot (systemctl is-system-running)", 0.2)
        if state not in ("running", "degraded"):
            raise MachineError("the machine booted into state %s:\n%s" % (state, self.console_tail()))
        return self.boot_id()

    def _find_pid1(self):
        if self.proc.poll() is not None:
            raise MachineError("systemd-nspawn exited with %s:\n%s" % (self.proc.returncode, self.console_tail()))
        try:
            children = subprocess.run(["ps", "-o", "pid=,comm=", "--ppid", str(self.proc.pid)],
                                      capture_output=True, text=True).stdout.split("\n")
        except OSError:
            return None
        for line in children:
            parts = line.split()
            if len(parts) == 2 and parts[1] == "systemd":
                return int(parts[0])
        return None

    def _system_state(self):
        if self.proc.poll() is not None:
            raise MachineError("systemd-nspawn exited with %s during boot:\n%s" % (
                self.proc.returncode, self.console_tail()))
        r = self.run("systemctl", "is-system-running", check=False, timeout=10)
        state = r.stdout.strip()
        # "offline"/"unknown": systemctl cannot reach PID 1 yet (its socket comes up after it starts).
        return state if state not in ("initializing", "starting", "offline", "unknown", "") else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=60):
        """Waits for nspawn to exit (after a poweroff or reboot inside); returns its exit status
        (133: the container asked for a reboot)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError("machine %s did not shut down within %d s" % (self.name, timeout)) from None

    def reboot(self, timeout=90):
        """`systemctl reboot` inside, then the same tree booted again. Returns the new boot id."""
        self.run("systemctl", "reboot", check=False)
        status = self.wait_exit(60)
        if status != 133:
            raise MachineError("nspawn exited with %s on a reboot, not 133" % status)
        return self.boot(timeout)

    def poweroff(self, timeout=60):
        """A clean shutdown: SIGRTMIN+4 to the container's PID 1 is systemd's poweroff request, and it
        needs no D-Bus or systemctl (they may not be up yet, or may be what a test broke)."""
        if not self.running():
            return
        try:
            os.kill(self.pid1, signal.SIGRTMIN + 4)
        except (ProcessLookupError, TypeError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        """SIGKILL to the container's PID 1 ends its whole PID namespace; nspawn then exits."""
        if self.pid1 and self.running():
            try:
                os.kill(self.pid1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.running():
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    def stop(self):
        if self not in _LIVE:
            return
        try:
            self.poweroff()
        finally:
            self.kill()
            unmount(self.root)
            _LIVE.discard(self)
            if self.kmsg_fd is not None:
                os.close(self.kmsg_fd)
                self.kmsg_fd = None
            if self.keep:
                open(os.path.join(self.dir, "kept"), "w").close()      # reap_stale() leaves it
                print("machine %s kept: %s (upper layer: %s/upper)" % (self.name, self.dir, self.dir), file=sys.stderr)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    def console_tail(self, n=40):
        try:
            with open(self.console_log, "rb") as f:
                return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    # ---------------------------------------------------------------- commands inside

    def run(self, *argv, check=True, timeout=60, input=None, env=None):
        """A command inside the booted machine (all its namespaces, its root), with a clean
        environment. Returns the CompletedProcess (text)."""
        if not self.running() or not self.pid1:
            raise MachineError("machine %s is not running" % self.name)
        cmd = ["nsenter", "-t", str(self.pid1), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--",
               "env", "-i"] + ["%s=%s" % kv for kv in sorted(dict(COMMAND_ENV, **(env or {})).items())] + list(argv)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=input,
                           stdin=None if input is not None else subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise MachineError("`%s` in %s exited with %d:\n%s%s" % (" ".join(argv), self.name, r.returncode,
                                                                     r.stdout[-3000:], r.stderr[-3000:]))
        return r

    def sh(self, script, **kw):
        return self.run("sh", "-c", script, **kw)

    def boot_id(self):
        return self.run("cat", "/proc/sys/kernel/random/boot_id").stdout.strip()

    def unit_property(self, unit, prop):
        return self.run("systemctl", "show", "-P", prop, unit).stdout.strip()

    def active_state(self, unit):
        return self.unit_property(unit, "ActiveState")

    def wait_active(self, unit, timeout=60):
        return wait_until(lambda: self.active_state(unit) == "active", timeout, "%s to be active" % unit, 0.2)

    def journal(self, *args):
        """journalctl output (no pager, no hostname width tricks)."""
        return self.run("journalctl", "--no-pager", *args, check=False, timeout=60).stdout

    def cursor(self):
        """The journal's position now, for entries_after() and messages_after()."""
        out = self.journal("-n", "0", "--show-cursor")
        return out.rsplit("-- cursor: ", 1)[-1].strip() if "-- cursor: " in out else None

    def entries_after(self, cursor, unit=None, **fields):
        """The journal entries after `cursor` (JSON objects), those of `unit` (its processes' and
        systemd's about it, as `journalctl -u`) whose fields equal `fields`. Matched here: systemd
        252's `journalctl --after-cursor C -u U` skips the first matching entry when the entry at C
        does not match."""
        entries = self.journal_json("--after-cursor", cursor)
        if unit:
            entries = [e for e in entries
                       if unit in (e.get("_SYSTEMD_UNIT"), e.get("UNIT"), e.get("OBJECT_SYSTEMD_UNIT"))]
        return [e for e in entries if all(e.get(k) == v for k, v in fields.items())]

    def messages_after(self, cursor, unit=None, **fields):
        """The MESSAGE of each of entries_after(), one a line (as `journalctl -o cat`)."""
        return "".join(message(e) + "\n" for e in self.entries_after(cursor, unit, **fields))

    def invocation(self, unit):
        return self.unit_property(unit, "InvocationID")

    def journal_json(self, *args):
        out = self.journal("-o", "json", *args)
        return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def message(entry):
    """A journal entry's MESSAGE as text (journalctl -o json gives a non-UTF-8 one as a byte list)."""
    m = entry.get("MESSAGE")
    return bytes(m).decode(errors="replace") if isinstance(m, list) else (m or "")
