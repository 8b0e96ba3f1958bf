# SPDX-License-Identifier: Apache-2.0
"""A local in-place-update sandbox made of real parts, for the demo (tests/demo/demo.py) and its tests.

    import sandbox
    with sandbox.Sandbox(narrate=print) as sb:    # everything up, the agent running
        sb.publish_osc(kubelet_version="1.32.1")  # "gardenlet": new OSC Secret + checksum
        sb.mcm_candidate(); sb.mcm_select(); sb.mcm_ready_for_update()     # "MCM"
        sb.wait_node(lambda n: sandbox.label(n, sandbox.UPDATE_RESULT), 120, "an update result")

What runs (all on 127.0.0.1, all ours, stopped by PID or by the user manager's own cgroup):
  * the API-server emulator (tests/emulator) holding Node `demo-node` and the OSC Secret
    `kube-system/gardener-node-agent-demo` (docs/node-protocol.md §2.1: data osc.yaml, annotation checksum/data-script);
  * Debian's docker-registry with TLS (lib/registry.py) serving `hyperkube:v1.31.4` and `hyperkube:v1.32.1`
    (file /kubelet in the top layer, like Gardener's hyperkube image) and `hyperkube-broken:v1.32.1`, a
    build whose /healthz answers 500;
  * a real systemd user manager on a private bus (lib/usermgr.py) running `containerd.service` (a
    stand-in that sleeps), `kubelet.service` (ExecStart = kubelet.binaryPath, the stand-in kubelet) and
    `inplace-agent.service` (Type=notify, the real agent binary). The agent reaches this manager as its
    "system bus" through the manager's DefaultEnvironment=DBUS_SYSTEM_BUS_ADDRESS.

The stand-in kubelet is a Python zipapp: `--version` prints "Kubernetes v<version>", otherwise it serves
/healthz on --healthz-bind-address:--healthz-port (200 "ok", or 500 for the broken build) and logs klog-style
lines. Random padding inside the zip makes it a realistic download (kubelet_size, default 8 MiB). A
kubelet posts its version into Node .status.nodeInfo when it starts; the stand-in cannot reach the API
server, so kubelet.service's ExecStartPost= (bin/kubelet-report in the sandbox) does that post for it, which
keeps the VERSION column of `kubectl get node` truthful.

Initial state, the "hand-over" story: the node was set up earlier at Kubernetes 1.31.4 (by provisioning or
gardener-node-agent). kubelet.binaryPath is a plain file holding kubelet 1.31.4, the Secret describes 1.31.4
and the Node already carries checksum/cloud-config-data equal to the Secret's checksum/data-script. The
agent starts, finds nothing to do, and adopts the plain file into its store (docs/contract.md §8.2: moved to
<stateDirectory>/kubelet/1.31.4/kubelet, binaryPath becomes a symlink). The first in-place work is whatever
publish_osc() asks for.

Layout under Sandbox.base (/tmp/ipa-sandbox-*): etc/inplace-agent/config.yaml, etc/os-release,
var/lib/inplace-agent (stateDirectory), opt/bin/kubelet (binaryPath), opt/bin/os-update (the OSC's
osUpdate command: rewrites etc/os-release like provider-local does, no reboot), bin/kubelet-report,
emulator/ (state, kubeconfig, emulator.log), registry/ (storage, CA, registry.log), kubectl-cache/.
Unit logs: Sandbox.um.log_path(unit). SANDBOX_KEEP=1 keeps the directories after stop().

Stdlib only. Waits poll a condition with a deadline.
"""

import base64
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import gardener  # noqa: E402
import gardener_osc  # noqa: E402
import kubeemu  # noqa: E402
import registry  # noqa: E402
import usermgr  # noqa: E402

SRCDIR = os.path.normpath(os.path.join(HERE, "..", "..", ".."))

NODE = "demo-node"
POOL = "demo"
SECRET = "gardener-node-agent-" + POOL
OSC_NAMESPACE = "kube-system"
AGENT_UNIT = "inplace-agent.service"
KUBELET_UNIT = "kubelet.service"
CONTAINERD_UNIT = "containerd.service"
IMAGE_REPO = "hyperkube"
BROKEN_REPO = "hyperkube-broken"
FILE_IN_IMAGE = "/kubelet"
KUBELET_OSC_PATH = "/opt/bin/kubelet"      # kubelet.binaryPath's default; on disk below osc.rootDirectory
KUBELET_DIR = "/var/lib/kubelet"           # the kubelet's credentials, below osc.rootDirectory

# Wire names (docs/contract.md §4, §6; docs/node-protocol.md Appendix A) and what gardenlet and MCM do: lib/gardener.py.
from gardener import (AGENT_CONDITION, CANDIDATE, FAILED_REASON, FAILURE, K8S_VERSION, MCM_CONDITION,  # noqa: E402,F401
                      MCM_MESSAGES, NODE_CHECKSUM, PLAN, PREFER_NO_SCHEDULE, PROGRESS, SECRET_CHECKSUM,
                      SECRET_NAME_LABEL, SELECTED, UPDATE_RESULT, UPDATING_OS, annotation, annotation_json,
                      condition, label, progress_phase, sha256_hex)

DEFAULT_VERSIONS = ("1.31.4", "1.32.1")
DEFAULT_OS_VERSION = "1592.6"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"


class SandboxError(RuntimeError):
    pass


# ------------------------------------------------------------------------------------------ helpers

def default_agent():
    """$AGENT, else <source>/build/inplace-agent."""
    return os.environ.get("AGENT") or os.path.join(SRCDIR, "build", "inplace-agent")


def missing_prerequisites(agent=None):
    missing = usermgr.missing_prerequisites() + registry.missing_prerequisites()
    if not python_with_h2():
        missing.append("python3-h2 (the stand-in containerd's gRPC server)")
    agent = agent or default_agent()
    if not os.access(agent, os.X_OK):
        missing.append("the agent binary %s (build it: meson setup build && ninja -C build)" % agent)
    return missing


def packaged_unit_environment():
    """Environment= assignments of units/inplace-agent.service."""
    env = {}
    with open(os.path.join(SRCDIR, "units", "inplace-agent.service")) as f:
        for line in f:
            if line.startswith("Environment="):
                for item in line.split("=", 1)[1].split():
                    k, _, v = item.partition("=")
                    env[k] = v
    return env


def pid_alive(pid):
    """The process exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def base64_decode(s):
    return base64.b64decode(s)


def write_file(path, data, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.rename(tmp, path)
    return path


def read_text(path):
    """A file's text, None when it does not exist."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return None


def http_status(url, timeout=2.0):
    """HTTP status of a GET (None when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------------------------------ stand-ins

KUBELET_MAIN = r'''# Stand-in kubelet of the inplace-agent sandbox (tests/integration/lib/sandbox.py).
import datetime, http.server, os, signal, sys, time
VERSION, HEALTHY = %(version)r, %(healthy)r
# A kubelet slow to sync: /healthz fails for its first STAND_IN_HEALTHY_AFTER seconds (the unit's
# environment; 0 by default).
STARTED, WARMUP = time.monotonic(), float(os.environ.get("STAND_IN_HEALTHY_AFTER") or 0)

def opt(name, default):
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
        if a == name and i + 1 < len(args):
            return args[i + 1]
    return default

def klog(sev, src, msg):
    t = datetime.datetime.now()
    sys.stderr.write("%%s%%s %%s %%7d %%s] %%s\n" %% (sev, t.strftime("%%m%%d"), t.strftime("%%H:%%M:%%S.%%f"),
                                                 os.getpid(), src, msg))
    sys.stderr.flush()

if "--version" in sys.argv[1:]:
    print("Kubernetes " + VERSION)
    sys.exit(0)

def bootstrap(boot, real):
    """kubelet's TLS bootstrap, as far as the node's files go: without a kubeconfig it needs the bootstrap
    kubeconfig (or it does not start, like kubelet); from it, it gets a client certificate (pki/) and
    writes the kubeconfig naming the bootstrap kubeconfig's cluster and that certificate."""
    import base64, hashlib, json
    if os.path.exists(real):
        return
    try:
        with open(boot) as f:
            cfg = json.load(f)              # what the agent writes: JSON, which is YAML
    except OSError as e:
        klog("E", "run.go:72", '"command failed" err="failed to run Kubelet: unable to load bootstrap '
             'kubeconfig: stat %%s: %%s"' %% (boot, e.strerror.lower()))
        sys.exit(1)
    user = (cfg.get("users") or [{}])[0].get("user") or {}
    used = user.get("client-key-data") or user.get("token") or ""
    if user.get("client-key-data"):
        used = base64.b64decode(used).decode(errors="replace")
    pki = os.path.join(os.path.dirname(real), "pki")
    os.makedirs(pki, exist_ok=True)
    pem = os.path.join(pki, "kubelet-client-current.pem")
    with open(pem, "w") as f:
        f.write("stand-in kubelet client certificate, bootstrapped %%s\n" %% datetime.datetime.now().isoformat())
    with open(real, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "Config", "clusters": cfg.get("clusters"),
                   "users": [{"name": "default-auth", "user": {"client-certificate": pem, "client-key": pem}}],
                   "contexts": [{"name": "default-context", "context": {"cluster": "default-cluster",
                                                                      "user": "default-auth"}}],
                   "current-context": "default-context"}, f)
    os.chmod(real, 0o600)
    klog("I", "bootstrap.go:101", '"Bootstrapped the client certificate" bootstrapKubeconfig="%%s" '
         'credentialSHA256="%%s"' %% (boot, hashlib.sha256(used.encode()).hexdigest()))

if opt("--bootstrap-kubeconfig", None):
    bootstrap(opt("--bootstrap-kubeconfig", None), opt("--kubeconfig", None))

class Healthz(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.split("?")[0] not in ("/healthz", "/healthz/"):
            code, body = 404, b"404 page not found\n"
        elif HEALTHY and time.monotonic() - STARTED < WARMUP:
            code, body = 500, b"[+]ping ok\n[-]syncloop failed: not synced yet\nhealthz check failed\n"
        elif HEALTHY:
            code, body = 200, b"ok"
        else:
            code, body = 500, b"[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
            klog("E", "healthz.go:261", '"Health check failed" checker="syncloop" '
                 'err="stand-in kubelet %%s was built broken"' %% VERSION)
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass

def stop(signum, frame):
    klog("I", "server.go:1268", '"Shutting down kubelet" signal="%%s"' %% signal.Signals(signum).name)
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)
bind = opt("--healthz-bind-address", "127.0.0.1")
port = int(opt("--healthz-port", "10248"))
http.server.HTTPServer.allow_reuse_address = True
server = http.server.HTTPServer((bind, port), Healthz)
klog("I", "server.go:484", '"Kubelet version" kubeletVersion="%%s"' %% VERSION)
klog("I", "server.go:203", '"Started healthz server" address="%%s:%%d" healthy=%%s' %% (bind, port,
     "true" if HEALTHY else "false"))
server.serve_forever()
'''

# Stand-in containerd: answers containerd's Version call (gRPC over HTTP/2 on
# <root>/run/containerd/containerd.sock), what the agent's health check asks, with python3-h2; any
# other method gets a trailers-only Unimplemented, as grpc-go answers. SIGSTOP makes it accept (the
# kernel's backlog) without answering, like a hung containerd.
CONTAINERD_VERSION, CONTAINERD_REVISION = "1.6.20~ds1", "sandbox-stand-in"
CONTAINERD_MAIN = r'''#!/usr/bin/env python3
import os, signal, socket, sys, threading
import h2.config, h2.connection, h2.events, h2.exceptions
path = sys.argv[1]
VERSION, REVISION = %(version)r, %(revision)r
METHOD = "/containerd.services.version.v1.Version/Version"

def string_field(number, value):
    b = value.encode()
    return bytes([number << 3 | 2, len(b)]) + b       # both shorter than 128 bytes

def reply(conn, stream, method):
    if method != METHOD:
        conn.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc"), ("grpc-status", "12"),
                                   ("grpc-message", "unknown service %%s" %% method)], end_stream=True)
        return
    msg = string_field(1, VERSION) + string_field(2, REVISION)
    conn.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    conn.send_data(stream, bytes(1) + len(msg).to_bytes(4, "big") + msg)
    conn.send_headers(stream, [("grpc-status", "0")], end_stream=True)

def serve(c):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    methods = {}
    try:
        c.sendall(conn.data_to_send())
        while True:
            data = c.recv(65536)
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    methods[ev.stream_id] = dict(ev.headers).get(":path")
                elif isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    reply(conn, ev.stream_id, methods.pop(ev.stream_id, None))
            c.sendall(conn.data_to_send())
    except (OSError, h2.exceptions.ProtocolError):
        pass
    finally:
        c.close()

os.makedirs(os.path.dirname(path), exist_ok=True)
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
s.listen(16)
signal.signal(signal.SIGTERM, lambda *a: (os.unlink(path), os._exit(0)))
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
''' % {"version": CONTAINERD_VERSION, "revision": CONTAINERD_REVISION}


def python_with_h2():
    """An interpreter that can import h2 (python3-h2): ours, or Debian's when ours is another one."""
    for exe in (sys.executable, "/usr/bin/python3"):
        if os.access(exe, os.X_OK) and subprocess.run([exe, "-c", "import h2"], capture_output=True).returncode == 0:
            return exe
    return None


KUBELET_REPORT = r'''#!/usr/bin/env python3
# ExecStartPost= of the sandbox's kubelet.service: post the started kubelet's version into the Node's
# .status.nodeInfo, which a real kubelet does itself (the stand-in cannot reach the API server). With a
# fourth argument (a JSON file: the Node's labels, address, osImage), register the Node first when it
# does not exist, as a kubelet with --register-node does at its start.
import json, subprocess, sys, urllib.error, urllib.parse, urllib.request
control_url, node, binary = sys.argv[1:4]
out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.split()
version = out[-1] if out else "unknown"

def call(method, path, body=None):
    req = urllib.request.Request(control_url + path, data=json.dumps(body).encode() if body else None,
                                 method=method, headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=10).read()

if len(sys.argv) > 4:
    try:
        call("GET", "/object?" + urllib.parse.urlencode({"resource": "nodes", "name": node}))
    except urllib.error.HTTPError as e:
        if e.code != 404:
            raise
        with open(sys.argv[4]) as f:
            spec = json.load(f)
        call("POST", "/node", dict(spec, name=node, kubelet_version=version, manager="kubelet"))
        print("kubelet-report: registered node %s" % node)
call("POST", "/patch", {"resource": "nodes", "name": node, "subresource": "status", "type": "strategic",
                        "manager": "kubelet", "patch": {"status": {"nodeInfo": {"kubeletVersion": version}}}})
print("kubelet-report: node %s runs kubelet %s" % (node, version))
'''

OS_UPDATE = r'''#!/bin/sh
# The OSC's status.inPlaceUpdates.osUpdate.command in the sandbox: like provider-local's, it rewrites
# PRETTY_NAME (and VERSION_ID) of the sandbox's os-release and needs no reboot.
set -eu
version="$1"
case "$version" in *[!0-9.]*|"") echo "invalid arguments: version '$version'"; exit 2;; esac
sed -i -E -e "s/^PRETTY_NAME=.*/PRETTY_NAME=\"Garden Linux $version\"/" \
          -e "s/^VERSION_ID=.*/VERSION_ID=$version/" '%(os_release)s'
echo "sandbox OS updated to $version (no reboot needed)"
'''


def stand_in_kubelet(version, healthy=True, size=8 << 20):
    """Bytes of a stand-in kubelet: a zipapp (shebang + zip) whose __main__ is KUBELET_MAIN. `size` bytes of
    stored (uncompressed, incompressible) padding make it a realistic download without slowing its start:
    Python reads only the zip directory and __main__.py."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(zipfile.ZipInfo("__main__.py", (2024, 1, 1, 0, 0, 0)),
                   KUBELET_MAIN % {"version": "v" + version.lstrip("v"), "healthy": bool(healthy)},
                   compress_type=zipfile.ZIP_DEFLATED)
        z.writestr(zipfile.ZipInfo("padding.bin", (2024, 1, 1, 0, 0, 0)), os.urandom(size),
                   compress_type=zipfile.ZIP_STORED)
    return b"#!/usr/bin/env python3\n" + buf.getvalue()


def kubelet_image_layers(data):
    """The layers of a kubelet image like Gardener's hyperkube: a distroless-like base, the binary at
    FILE_IN_IMAGE in the top layer (gzip)."""
    base = registry.compress(registry.tar_bytes([
        {"name": "etc/", "type": "dir"},
        {"name": "etc/os-release", "data": b"ID=distroless\nPRETTY_NAME=\"Distroless\"\n", "mode": 0o644}]),
        "gzip")
    top = registry.compress(registry.tar_bytes([{"name": FILE_IN_IMAGE.lstrip("/"), "data": data,
                                                 "mode": 0o755}]), "gzip")
    return [(base, "gzip"), (top, "gzip")]


# ------------------------------------------------------------------------------------------ the sandbox

# The kubelet's config file of the OSC (docs/node-protocol.md §2.3: its evictionHard/kubeReserved/cpuManagerPolicy are
# in-place triggers); below osc.rootDirectory like every OSC file.
KUBELET_CONFIG_PATH = "/var/lib/kubelet/config/kubelet"
KUBELET_CONFIG_TEXT = ("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n"
                       "  memory.available: %s\n")
DEFAULT_EVICTION = "100Mi"
DROPIN_TEMPLATE = """    dropIns:
    - name: 50-sandbox.conf
      content: |
        %(content)s
"""


class Sandbox:
    """Emulator + registry + user manager + units + agent. A context manager; stop() is idempotent."""

    def __init__(self, agent=None, start_agent=True, versions=DEFAULT_VERSIONS, initial_version=None,
                 broken_versions=("1.32.1",), kubelet_size=8 << 20, os_version=DEFAULT_OS_VERSION,
                 log_level="info", health_timeout="20s", agent_config=None, narrate=None, keep=None,
                 fake_boot_id=False, agent_env=None, fake_hostname=False, kubelet_bootstrap=False,
                 gardener_osc=False):
        self.agent = os.path.abspath(agent or default_agent())
        self.start_agent_now = start_agent
        self.versions = tuple(versions)
        self.initial_version = initial_version or self.versions[0]
        self.broken_versions = tuple(broken_versions)
        self.kubelet_size = kubelet_size
        self.initial_os_version = os_version
        self.log_level = log_level
        self.health_timeout = health_timeout
        self.agent_config_extra = agent_config or {}
        self.narrate = narrate or (lambda msg: None)
        self.keep = keep if keep is not None else bool(os.environ.get("SANDBOX_KEEP"))
        self.fake_boot_id = fake_boot_id
        self.fake_hostname = fake_hostname
        # The stand-in kubelet gets --bootstrap-kubeconfig/--kubeconfig below the root and bootstraps like
        # kubelet (the node starts with its credentials, as after kubelet's own TLS bootstrap).
        self.kubelet_bootstrap = kubelet_bootstrap
        # The OSC as gardenlet writes it (lib/gardener_osc.py: every component, GNA's unit, the OS and
        # provider extensions' additions) instead of the kubelet alone.
        self.gardener_osc = gardener_osc
        self.extra_ca = None            # PEM appended to the cluster CA bundle (a CA rotation's new CA)
        # The packaged unit's Environment= first (the sandbox runs the agent as shipped), then the
        # test's own (e.g. timing).
        self.agent_env = dict(packaged_unit_environment(), **(agent_env or {}))
        self.base = None
        self.emu = self.reg = self.um = self.gardener = None
        self.images = {}            # (version, broken) -> {"ref", "layer_bytes", "file_bytes"}
        self.timings = {}           # component -> seconds to start
        self.osc = None             # what publish_osc() published last
        self._children = []         # Popen objects we started besides emulator/registry/manager
        self._pids_seen = set()     # every PID we know we started, for leftover_processes()
        self._stopped = False

    # ---------------------------------------------------------------- paths

    def path(self, *parts):
        return os.path.join(self.base, *parts)

    def rooted(self, path):
        """An OSC path below the scratch osc.rootDirectory."""
        return self.base + path

    def starts_file(self, unit):
        return self.path("starts-" + unit)

    def starts(self, unit):
        """How often a counting_unit() started."""
        return (read_text(self.starts_file(unit)) or "").count("start")

    def counting_unit(self, unit, what="test unit"):
        """A unit file for `unit` that stays active and counts its starts (starts())."""
        return ("[Unit]\nDescription=%s %s\n[Service]\nExecStartPre=/bin/sh -c 'echo start >> %s'\n"
                "ExecStart=/bin/sleep infinity\n[Install]\nWantedBy=default.target\n"
                % (what, unit, self.starts_file(unit)))

    @property
    def config_path(self):
        return self.path("etc", "inplace-agent", "config.yaml")

    @property
    def os_release(self):
        return self.path("etc", "os-release")

    @property
    def state_dir(self):
        return self.path("var", "lib", "inplace-agent")

    @property
    def binary_path(self):
        """Where the kubelet is on disk: kubelet.binaryPath (an OSC path) below osc.rootDirectory."""
        return self.base + KUBELET_OSC_PATH

    @property
    def os_update_command(self):
        return self.path("opt", "bin", "os-update")

    @property
    def healthz_url(self):
        return "http://127.0.0.1:%d/healthz" % self.healthz_port

    @property
    def kubeconfig(self):
        return self.emu.kubeconfig

    # ---------------------------------------------------------------- lifecycle

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()
        return False

    def _timed(self, name, fn):
        t0 = time.monotonic()
        r = fn()
        self.timings[name] = time.monotonic() - t0
        return r

    def start(self):
        self.base = tempfile.mkdtemp(prefix="ipa-sandbox-", dir="/tmp")
        self.healthz_port = registry.free_port()
        self.narrate("API-server emulator")
        self.emu = self._timed("emulator", lambda: kubeemu.start(state_dir=self.path("emulator")))
        self.gardener = gardener.Actors(self.emu, NODE, SECRET, POOL, OSC_NAMESPACE)
        self._pids_seen.add(self.emu.pid)
        self.narrate("docker-registry with TLS on 127.0.0.1")
        self.reg = registry.Registry(self.base)
        self._timed("registry", self.reg.start)
        self._pids_seen.add(self.reg.proc.pid)
        self.narrate("kubelet images " + ", ".join(self.versions) +
                     "".join(" (+ broken %s)" % v for v in self.broken_versions))
        self._timed("images", self._push_images)
        if self.gardener_osc:
            self._timed("stand-in images", lambda: gardener_osc.push_stand_in_images(self.reg))
        # Created (not started) first: the agent's config names its unit directory (systemd.unitDirectory).
        self.um = usermgr.UserManager(prefix="ipa-sandbox-um-", keep=self.keep)
        self._write_files()
        self._timed("check-config", self._check_config)
        self.narrate("OSC Secret %s/%s and Node %s at kubelet %s" % (OSC_NAMESPACE, SECRET, NODE,
                                                                     self.initial_version))
        self._prepare_cluster()
        self.narrate("systemd user manager on a private bus")
        self._timed("user-manager", self.um.start)
        self._pids_seen.add(self.um.pid)
        if self.fake_boot_id:
            self._mount_boot_id()
        if self.fake_hostname:
            self._mount_hostname()
        self.narrate("units %s, %s" % (CONTAINERD_UNIT, KUBELET_UNIT))
        self._timed("units", self._start_units)
        if self.start_agent_now:
            self.narrate("inplace-agent as %s (Type=notify)" % AGENT_UNIT)
            self._timed("agent", self.start_agent)
        return self

    def stop(self):
        """Stops everything we started (by PID / by the user manager's cgroup) and removes the temporary
        directories. Returns the PIDs still alive afterwards (empty: nothing left behind)."""
        if self._stopped:
            return []
        self._stopped = True
        if self.um and self.um.proc and self.um.proc.poll() is None:
            for unit in (AGENT_UNIT, KUBELET_UNIT, CONTAINERD_UNIT):
                try:
                    pid = self.um.main_pid(unit)
                    if pid:
                        self._pids_seen.add(pid)
                except (usermgr.UserManagerError, subprocess.SubprocessError, ValueError):
                    pass
        for p in self._children:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(3)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.um:
            self.um.stop()
        if self.reg:
            self.reg.stop()
        if self.emu:
            self.emu.stop()
        left = self.leftover_processes()
        if self.base and not self.keep:
            shutil.rmtree(self.base, ignore_errors=True)
        return left

    def leftover_processes(self):
        """PIDs of processes we started that are still alive, plus any process whose command line names
        one of our directories."""
        alive = {pid for pid in self._pids_seen if pid_alive(pid)}
        marks = [m for m in (self.base, self.um.base if self.um else None) if m]
        for d in os.listdir("/proc"):
            if not d.isdigit() or int(d) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read().decode(errors="replace")
            except OSError:
                continue
            if any(m in cmd for m in marks):
                alive.add(int(d))
        return sorted(alive)

    # ---------------------------------------------------------------- images

    def image_ref(self, version, broken=False):
        return "%s/%s:v%s" % (self.reg.host, BROKEN_REPO if broken else IMAGE_REPO, version.lstrip("v"))

    def _push_image(self, version, broken):
        data = stand_in_kubelet(version, healthy=not broken, size=self.kubelet_size)
        layers = kubelet_image_layers(data)
        repo = BROKEN_REPO if broken else IMAGE_REPO
        self.reg.push_image(repo, "v" + version, layers)
        self.images[(version, broken)] = {"ref": self.image_ref(version, broken), "file_bytes": len(data),
                                          "layer_bytes": sum(len(d) for d, _ in layers), "kubelet": data}

    def _push_images(self):
        # In parallel: compressing and uploading release the GIL, and the images are independent.
        jobs = [(v, False) for v in self.versions] + [(v, True) for v in self.broken_versions]
        errors = []

        def push(v, broken):
            try:
                self._push_image(v, broken)
            except Exception as e:          # re-raised below, in the caller's thread
                errors.append(e)
        threads = [threading.Thread(target=push, args=j) for j in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    # ---------------------------------------------------------------- files and config

    def agent_config_text(self):
        c = {
            "nodeName": NODE,
            "kubeconfig": self.emu.kubeconfig,
            "stateDirectory": self.state_dir,
            "osRelease": self.os_release,
            "osc": {"namespace": OSC_NAMESPACE, "rootDirectory": self.base},
            "kubelet": {"binaryPath": KUBELET_OSC_PATH, "unit": KUBELET_UNIT, "healthzURL": self.healthz_url,
                        "healthTimeout": self.health_timeout, "keepVersions": 2},
            "osUpdate": {"backend": "command", "timeout": "60s", "reboot": "none"},
            "registry": {"caFile": self.reg.ca_file},
            "restart": {"selfUnit": AGENT_UNIT},
            # OSC files go below the sandbox, OSC units into the user manager's unit directory.
            # The replaced units' drop-ins into the user manager's runtime directory (/run/systemd/system's
            # place in a user manager's search path).
            "systemd": {"jobTimeout": "30s", "unitDirectory": self.um.unit_dir,
                        "runtimeUnitDirectory": self.um.runtime_unit_dir},
            "lease": {"enabled": True, "duration": "8s"},
        }
        for k, v in self.agent_config_extra.items():
            if isinstance(v, dict) and isinstance(c.get(k), dict):
                c[k].update(v)
            else:
                c[k] = v
        # JSON is YAML; one key per line keeps it readable for the demo.
        return "# inplace-agent configuration of the sandbox (docs/contract.md §3)\n" + _yaml(c)

    def _write_files(self):
        self.write_os_release(self.initial_os_version)
        write_file(self.os_update_command, OS_UPDATE % {"os_release": self.os_release}, 0o755)
        write_file(self.path("bin", "kubelet-report"), KUBELET_REPORT, 0o755)
        write_file(self.path("bin", "containerd"), CONTAINERD_MAIN, 0o755)
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        self._write_node_files()
        write_file(self.config_path, self.agent_config_text())

    def _write_node_files(self):
        """The node as provisioned: kubelet.binaryPath is a plain file (adopted by the agent, §8.2)."""
        write_file(self.binary_path, self.images[(self.initial_version, False)]["kubelet"], 0o755)
        if self.kubelet_bootstrap:
            self.provision_kubelet_credentials()

    def provision_kubelet_credentials(self, pem="stand-in kubelet client certificate, provisioned\n"):
        """The kubelet as after its own TLS bootstrap: kubeconfig-real naming pki/kubelet-client-current.pem."""
        kdir = self.base + KUBELET_DIR
        shutil.rmtree(kdir + "/pki", ignore_errors=True)
        write_file(kdir + "/pki/kubelet-client-current.pem", pem, 0o600)
        real = {"apiVersion": "v1", "kind": "Config", "current-context": "kubelet",
                "clusters": [{"name": "old", "cluster": {"server": "https://old:443", "certificate-authority": "/old"}}],
                "users": [{"name": "old", "user": {"client-certificate": KUBELET_DIR + "/pki/kubelet-client-current.pem",
                                                   "client-key": KUBELET_DIR + "/pki/kubelet-client-current.pem"}}],
                "contexts": [{"name": "kubelet", "context": {"cluster": "default-cluster", "user": "default-auth"}}]}
        write_file(kdir + "/kubeconfig-real", json.dumps(real), 0o600)

    def _check_config(self):
        r = subprocess.run([self.agent, "check-config", "--config", self.config_path], capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise SandboxError("inplace-agent check-config rejected %s (%d):\n%s%s" % (
                self.config_path, r.returncode, r.stdout, r.stderr))

    # ---------------------------------------------------------------- "gardenlet": the OSC Secret

    def osc_yaml(self, kubelet_version, os_version, image, min_version=None, eviction=DEFAULT_EVICTION,
                 dropin=None, extra_files=""):
        if self.gardener_osc:
            return self.gardener_osc_yaml(kubelet_version, os_version, image, min_version, eviction, dropin,
                                          extra_files)
        return OSC_TEMPLATE % {"secret": SECRET, "os_version": os_version, "kubelet": kubelet_version,
                               "path": KUBELET_OSC_PATH, "image": image, "file": FILE_IN_IMAGE,
                               "command": self.os_update_command, "unit": KUBELET_UNIT,
                               "config": KUBELET_CONFIG_PATH, "eviction": eviction, "extra_files": extra_files,
                               "dropins": DROPIN_TEMPLATE % {"content": dropin.replace("\n", "\n        ")} if dropin else "",
                               "min_version": '    minVersionForUpdate: "%s"\n' % min_version if min_version else ""}

    def gardener_osc_params(self, kubelet_version, os_version, image, eviction=DEFAULT_EVICTION, dropin=None):
        """lib/gardener_osc.py's parameters for this sandbox: units execute below the scratch root; the
        OS extension's inplace-update.sh runs the sandbox's os-update command (which tests rewrite)."""
        return gardener_osc.Params(
            registry=self.reg.host, kubelet_image=image, kubelet_unit=self.kubelet_unit_text(),
            kubelet_config=KUBELET_CONFIG_TEXT % eviction, cluster_ca=self.cluster_ca(),
            component_config=self.component_config(), os_version=os_version, root=self.base,
            os_update_command=self.base + gardener_osc.OS_UPDATE_SCRIPT,
            os_update_script="#!/bin/sh\n# The sandbox's OS update (Sandbox.os_update_command)\nexec %s \"$@\"\n"
                             % self.os_update_command,
            kubelet_dropin=("50-sandbox.conf", dropin) if dropin else None)

    def gardener_osc_yaml(self, kubelet_version, os_version, image, min_version=None, eviction=DEFAULT_EVICTION,
                          dropin=None, extra_files=""):
        """The OSC gardenlet writes (lib/gardener_osc.py) as YAML in OSC_TEMPLATE's layout: spec.files
        (then `extra_files`) and spec.units at indent 2, so tests can splice in more."""
        osc = gardener_osc.build(self.gardener_osc_params(kubelet_version, os_version, image, eviction, dropin))
        y = gardener_osc.yaml_items
        return ("apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\nmetadata:\n"
                "  name: %s\n  namespace: kube-system\nspec:\n  type: gardenlinux\n  purpose: reconcile\n"
                "  inPlaceUpdates:\n    operatingSystemVersion: \"%s\"\n    kubelet: \"%s\"\n%s%s"
                "  files:\n%s%s  units:\n%sstatus:\n  extensionUnits:\n%s  extensionFiles:\n%s"
                "  inPlaceUpdates:\n    osUpdate:\n      command: %s\n      args:\n      - \"%s\"\n"
                % (SECRET, os_version, kubelet_version,
                   '    minVersionForUpdate: "%s"\n' % min_version if min_version else "", self.osc_rotation(),
                   y(osc["files"], 2), extra_files, y(osc["units"], 2), y(osc["extensionUnits"], 2),
                   y(osc["extensionFiles"], 2), osc["inPlaceUpdates"]["osUpdate"]["command"], os_version))

    def gardener_osc_started_units(self):
        """The units of the last published Gardener OSC that should be active (lib/gardener_osc.py)."""
        o = self.osc
        return gardener_osc.started_units(gardener_osc.build(self.gardener_osc_params(
            o["kubelet"], o["os_version"], o["image"], o["eviction"], o["dropin"])))

    def write_gardener_osc_files(self):
        """The inline files of the last published Gardener OSC (the OS extension's inplace-update.sh
        among them) below the root, as its apply leaves them: for a node whose OSC counts as applied."""
        o = self.osc
        built = gardener_osc.build(self.gardener_osc_params(o["kubelet"], o["os_version"], o["image"], o["eviction"],
                                                            o["dropin"]))
        for f in built["files"] + built["extensionFiles"]:
            inline = f["content"].get("inline")
            if inline:
                data = inline["data"]
                write_file(self.base + f["path"], base64.b64decode(data) if inline.get("encoding") else data,
                           f["permissions"])

    def cluster_ca(self):
        """The cluster's CA bundle as the OSC carries it: the API server's CA, and during a CA rotation the
        new CA beside it (FreshNodeSandbox.extra_ca)."""
        with open(self.emu.ca) as f:
            return f.read() + (self.extra_ca or "")

    def component_config(self):
        """gardener-node-agent's component config (GNA's NodeAgentConfiguration) as provisioned and in the OSC."""
        return ("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"
                "apiServer:\n  server: %s\n  caFile: %s/cluster-ca.crt\n"
                "controllers:\n  operatingSystemConfig:\n    secretName: %s\n    kubernetesVersion: %s\n"
                % (self.emu.server, GNA_DIR, SECRET, self.initial_version))

    def write_os_units(self):
        """Units of the OS image that the Gardener OSC names without content (containerd.service is
        written by _start_units): stand-ins in the user manager."""
        if self.gardener_osc:
            self.um.write_unit("systemd-sysctl.service", self.um.service(
                "/bin/true", type="oneshot", unit_extra="Description=Apply Kernel Variables (sandbox stand-in)\n",
                service_extra="RemainAfterExit=yes\n"))

    def osc_rotation(self):
        """spec.inPlaceUpdates.credentialsRotation (FreshNodeSandbox's), as YAML."""
        return ""

    def publish_osc(self, kubelet_version=None, os_version=None, broken=False, image=None, min_version=None,
                    eviction=None, dropin=None, extra_files=""):
        """Write the OSC Secret as gardenlet does (docs/node-protocol.md §1.1 row 3): osc.yaml plus checksum/data-script =
        sha256 hex of it. Defaults: the last published kubelet version / OS version / kubelet config
        (evictionHard memory.available = `eviction`) / kubelet drop-in (`dropin`: the content of
        kubelet.service.d/50-sandbox.conf; "" removes it). broken=True points the kubelet file at the
        broken build of that version. min_version sets spec.inPlaceUpdates.minVersionForUpdate;
        extra_files is YAML appended to spec.files. Returns the checksum."""
        prev = self.osc or {}
        kubelet_version = (kubelet_version or prev.get("kubelet") or self.initial_version).lstrip("v")
        os_version = os_version or prev.get("os_version") or self.initial_os_version
        eviction = eviction or prev.get("eviction") or DEFAULT_EVICTION
        dropin = prev.get("dropin") if dropin is None else dropin
        if image is None:
            if (kubelet_version, bool(broken)) not in self.images:
                raise SandboxError("no %simage for kubelet %s" % ("broken " if broken else "", kubelet_version))
            image = self.images[(kubelet_version, bool(broken))]["ref"]
        text = self.osc_yaml(kubelet_version, os_version, image, min_version, eviction, dropin, extra_files)
        checksum = self.gardener.publish_osc_text(text)
        self.osc = {"kubelet": kubelet_version, "os_version": os_version, "image": image, "broken": bool(broken),
                    "checksum": checksum, "yaml": text, "eviction": eviction, "dropin": dropin}
        return checksum

    def publish_text(self, text):
        """Publish an arbitrary osc.yaml (as gardenlet would) with its checksum; returns the checksum."""
        checksum = self.gardener.publish_osc_text(text)
        return checksum

    def write_last_applied(self, units=(), files=()):
        """<stateDirectory>/last-applied-osc.yaml as the agent commits it (atomically, by rename), for the
        duties that read it. units: (name, enable, content or None); files: (path, inline data)."""
        lines = ["apiVersion: extensions.gardener.cloud/v1alpha1", "kind: OperatingSystemConfig", "spec:",
                 "  files:" if files else "  files: []"]
        for path, data in files:
            lines += ["  - path: %s" % path, "    content:", "      inline:", "        data: %s" % json.dumps(data)]
        lines.append("  units:" if units else "  units: []")
        for name, enable, content in units:
            lines += ["  - name: %s" % name, "    enable: %s" % ("true" if enable else "false")]
            if content is not None:
                lines.append("    content: %s" % json.dumps(content))
        write_file(os.path.join(self.state_dir, "last-applied-osc.yaml"), "\n".join(lines) + "\n", 0o600)

    def secret(self):
        return self.gardener.secret()

    def secret_checksum(self):
        return annotation(self.secret(), SECRET_CHECKSUM)

    def _prepare_cluster(self):
        """The API server's side before the node starts: the OSC Secret and the registered Node."""
        self.publish_osc(kubelet_version=self.initial_version, os_version=self.initial_os_version)
        self._seed_node()

    def _seed_node(self):
        v = self.initial_version
        self.emu.seed_node(
            NODE, kubelet_version="v" + v, os_image="Garden Linux %s" % self.initial_os_version,
            labels={SECRET_NAME_LABEL: SECRET, "worker.gardener.cloud/pool": POOL, K8S_VERSION: v,
                    "node-role.kubernetes.io/worker": "", "node.kubernetes.io/role": "node"},
            annotations={NODE_CHECKSUM: self.osc["checksum"]})
        # The kubelet's own heartbeat Lease, which `kubectl describe node` shows.
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
        self.emu.put({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                      "metadata": {"name": NODE, "namespace": "kube-node-lease"},
                      "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40, "renewTime": now}},
                     manager="kubelet")

    # ---------------------------------------------------------------- units

    # The kubelet's registration of the Node (a JSON file for bin/kubelet-report); None: the Node is
    # registered by the sandbox.
    kubelet_registration = None

    def kubelet_unit_text(self):
        post = "-%s %s %s %s %s" % (sys.executable, self.path("bin", "kubelet-report"),
                                    "http://127.0.0.1:%d" % self.emu.control_port, NODE, self.binary_path)
        if self.kubelet_registration:
            post += " " + self.kubelet_registration
        kdir = self.base + KUBELET_DIR
        creds = ("--bootstrap-kubeconfig=%s/kubeconfig-bootstrap --kubeconfig=%s/kubeconfig-real " % (kdir, kdir)
                 if self.kubelet_bootstrap else "")
        return self.um.service(
            "%s %s--healthz-bind-address=127.0.0.1 --healthz-port=%d --node-ip=127.0.0.1 --v=2"
            % (self.binary_path, creds, self.healthz_port),
            unit_extra="Description=kubelet daemon (sandbox stand-in)\nAfter=%s\nWants=%s\n"
                       % (CONTAINERD_UNIT, CONTAINERD_UNIT),
            service_extra="ExecStartPost=%s\nRestart=always\nRestartSec=2s\nTimeoutStopSec=5s\n" % post)

    @property
    def containerd_socket(self):
        return self.path("run", "containerd", "containerd.sock")

    def containerd_unit_text(self):
        return self.um.service("%s %s %s" % (python_with_h2(), self.path("bin", "containerd"), self.containerd_socket),
                               unit_extra="Description=containerd container runtime (sandbox stand-in)\n")

    def agent_unit_text(self):
        return self.um.service(
            "%s run --config %s --log-level %s" % (self.agent, self.config_path, self.log_level),
            type="notify",
            unit_extra="Description=In-place node update agent (sandbox)\n",
            service_extra="Restart=always\nRestartSec=1s\nWatchdogSec=30s\nTimeoutStartSec=30s\n"
                          "TimeoutStopSec=10s\n" +
                          "".join("Environment=%s=%s\n" % kv for kv in sorted(self.agent_env.items())))

    def _start_units(self):
        self.um.write_unit(CONTAINERD_UNIT, self.containerd_unit_text())
        self.um.write_unit(KUBELET_UNIT, self.kubelet_unit_text())
        self.um.write_unit(AGENT_UNIT, self.agent_unit_text())
        self.write_os_units()
        self.um.daemon_reload()
        self.um.systemctl("start", CONTAINERD_UNIT, KUBELET_UNIT)
        self.wait_kubelet_healthy(20)

    def start_agent(self, timeout=30):
        """systemctl start: returns once the agent sent READY=1."""
        self.um.systemctl("start", AGENT_UNIT, timeout=timeout)
        pid = self.um.main_pid(AGENT_UNIT)
        if pid:
            self._pids_seen.add(pid)

    def stop_agent(self):
        self.um.systemctl("stop", AGENT_UNIT, check=False)

    def wait_kubelet_healthy(self, timeout, healthy=True):
        want = 200 if healthy else 500
        return usermgr.wait_until(lambda: http_status(self.healthz_url) == want, timeout,
                                  "kubelet /healthz to answer %d" % want)

    def use_os_image_backend(self, repo, name_prefix, reboot_log):
        """Before start_agent(): osUpdate.backend image with the OS images <registry>/<repo>:<version>,
        boot entries <name_prefix>-<version>+3.efi in efi/EFI/Linux below the sandbox (returned), and a
        reboot.target of the user manager that only starts a oneshot service appending a line to
        reboot_log (one line a reboot request)."""
        efi = self.path("efi", "EFI", "Linux")
        os.makedirs(efi)
        self.agent_config_extra["osUpdate"] = {
            "backend": "image", "timeout": "30s", "reboot": "systemd",
            "image": {"reference": "%s/%s:{version}" % (self.reg.host, repo), "installDirectory": efi,
                      "namePrefix": name_prefix, "bootTries": 3}}
        write_file(self.config_path, self.agent_config_text())
        self._check_config()
        os.makedirs(os.path.dirname(reboot_log), exist_ok=True)
        self.um.write_unit("inplace-reboot-marker.service", self.um.service(
            "%s -c 'echo reboot >> %s'" % (shutil.which("sh"), reboot_log), type="oneshot"))
        self.um.write_unit("reboot.target", "[Unit]\nDescription=Fake reboot\nWants=inplace-reboot-marker.service\n")
        self.um.daemon_reload()
        return efi

    # ---------------------------------------------------------------- simulated reboots

    @property
    def boot_id_file(self):
        return self.path("boot_id")

    def _mount_boot_id(self):
        """fake_boot_id=True: a file of ours bind-mounted over /proc/sys/kernel/random/boot_id in the user
        manager's private mount namespace, so the agent (and every unit) sees a boot id that
        simulate_reboot() can change. Needs root and nsenter (the manager already runs in its own mount
        namespace, see usermgr.py); nothing outside that namespace is affected."""
        write_file(self.boot_id_file, str(uuid.uuid4()) + "\n")
        r = subprocess.run(["nsenter", "-t", str(self.um.pid), "-m", "mount", "--bind", self.boot_id_file,
                            BOOT_ID_PATH], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise SandboxError("cannot bind-mount a fake boot id: %s" % r.stderr.strip())

    @property
    def hostname_file(self):
        return self.path("hostname")

    def _mount_hostname(self):
        """fake_hostname=True: like the boot id, a file of ours over /proc/sys/kernel/hostname in the user
        manager's mount namespace; set_hostname() rewrites it in place (same inode, so the mount shows it)."""
        write_file(self.hostname_file, socket.gethostname() + "\n")
        r = subprocess.run(["nsenter", "-t", str(self.um.pid), "-m", "mount", "--bind", self.hostname_file,
                            "/proc/sys/kernel/hostname"], capture_output=True, text=True, timeout=10)
        if r.returncode != 0:
            raise SandboxError("cannot bind-mount a fake hostname: %s" % r.stderr.strip())

    def set_hostname(self, name):
        with open(self.hostname_file, "w") as f:
            f.write(name + "\n")

    def boot_id(self):
        with open(self.boot_id_file if self.fake_boot_id else BOOT_ID_PATH) as f:
            return f.read().strip()

    def write_os_release(self, version):
        """os-release as the booted OS would show it (what the sandbox's os-update command writes, too)."""
        write_file(self.os_release, 'PRETTY_NAME="Garden Linux %s"\nNAME="Garden Linux"\nID=gardenlinux\n'
                   'VERSION_ID=%s\n' % (version, version))

    def simulate_reboot(self, os_version):
        """A reboot as the agent can tell (needs fake_boot_id=True): the agent stops, the boot id changes,
        os-release shows `os_version` (what the boot loader booted: the new OS, or the old one after a
        rollback), the agent starts again (returns after its READY=1)."""
        if not self.fake_boot_id:
            raise SandboxError("simulate_reboot() needs Sandbox(fake_boot_id=True)")
        self.stop_agent()
        # In place: the bind mount holds this inode.
        with open(self.boot_id_file, "w") as f:
            f.write(str(uuid.uuid4()) + "\n")
        self.write_os_release(os_version)
        self.start_agent()

    # ---------------------------------------------------------------- "MCM" (docs/node-protocol.md §1.1 rows 5-12): lib/gardener.py

    def mcm_candidate(self):
        return self.gardener.mcm_candidate()

    def mcm_select(self):
        return self.gardener.mcm_select()

    def mcm_drain(self):
        return self.gardener.mcm_drain()

    def mcm_ready_for_update(self, drain=True):
        return self.gardener.mcm_ready_for_update(drain)

    def mcm_observe_result(self):
        return self.gardener.mcm_observe_result()

    # ---------------------------------------------------------------- queries

    def node(self):
        return self.gardener.node()

    def wait_node(self, predicate, timeout, what=None):
        """Poll the Node until predicate(node) is truthy; returns the Node. TimeoutError names `what`."""
        return self.gardener.wait_node(predicate, timeout, what)

    def node_history(self, since_rv=0):
        """Every stored version of the Node since since_rv: [{"rv", "type", "time", "object"}]."""
        return self.gardener.node_history(since_rv)

    def events(self):
        """core/v1 Events about the Node (any namespace)."""
        return self.gardener.events()

    def agent_log(self):
        """The agent's output (stderr lines, journal-like: '<time> inplace-agent[pid]: message [tx=..]')."""
        return self.um.logs(AGENT_UNIT) if self.um else ""

    def unit_log(self, unit):
        return self.um.logs(unit) if self.um else ""

    def kubelet_version(self, path=None):
        """What `<binaryPath> --version` prints, e.g. "Kubernetes v1.32.1" (None if it does not run)."""
        try:
            r = subprocess.run([path or self.binary_path, "--version"], capture_output=True, text=True, timeout=10)
        except OSError:
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    def kubelet_target(self):
        """Where binaryPath points (None while it is a plain file)."""
        return os.readlink(self.binary_path) if os.path.islink(self.binary_path) else None

    def store_versions(self):
        try:
            return sorted(os.listdir(os.path.join(self.state_dir, "kubelet")))
        except OSError:
            return []

    def kubelet_healthz(self):
        return http_status(self.healthz_url)

    def systemctl(self, *args, check=False):
        return self.um.systemctl(*args, check=check)

    # ---------------------------------------------------------------- kubectl

    def kubectl_argv(self, *args):
        return ["kubectl", "--kubeconfig", self.emu.kubeconfig, "--cache-dir", self.path("kubectl-cache")] + \
            list(args)

    def kubectl(self, *args, timeout=30):
        return subprocess.run(self.kubectl_argv(*args), capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, HOME=self.path("kubectl-home")))

    def spawn(self, argv, on_line, env=None):
        """Start a helper (e.g. `kubectl get node -w`) whose output lines go to on_line(str) from a thread.
        stop() terminates it by PID."""
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             text=True, bufsize=1, env=env or dict(os.environ, HOME=self.path("kubectl-home")))
        self._children.append(p)
        self._pids_seen.add(p.pid)

        def pump():
            for line in p.stdout:
                on_line(line.rstrip("\n"))
        t = threading.Thread(target=pump, daemon=True)
        t.start()
        return p

    def kill_child(self, p):
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(3)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


OSC_TEMPLATE = """apiVersion: extensions.gardener.cloud/v1alpha1
kind: OperatingSystemConfig
metadata:
  name: %(secret)s
  namespace: kube-system
spec:
  type: gardenlinux
  purpose: reconcile
  inPlaceUpdates:
    operatingSystemVersion: "%(os_version)s"
    kubelet: "%(kubelet)s"
%(min_version)s  files:
  - path: %(path)s
    permissions: 493
    content:
      imageRef:
        image: %(image)s
        filePathInImage: %(file)s
  - path: %(config)s
    permissions: 384
    content:
      inline:
        data: |
          apiVersion: kubelet.config.k8s.io/v1beta1
          kind: KubeletConfiguration
          evictionHard:
            memory.available: %(eviction)s
%(extra_files)s  units:
  - name: %(unit)s
    enable: true
%(dropins)s    filePaths:
    - %(path)s
    - %(config)s
status:
  inPlaceUpdates:
    osUpdate:
      command: %(command)s
      args:
      - "%(os_version)s"
"""


def _yaml(obj, indent=0):
    """Block-style YAML for nested dicts of scalars (strings JSON-quoted, which YAML accepts)."""
    out = []
    pad = "  " * indent
    for k, v in obj.items():
        if isinstance(v, dict):
            if v:
                out.append("%s%s:\n%s" % (pad, k, _yaml(v, indent + 1)))
            else:
                out.append("%s%s: {}\n" % (pad, k))
        else:
            out.append("%s%s: %s\n" % (pad, k, json.dumps(v)))
    return "".join(out)


# ------------------------------------------------------------------------------------------ a fresh node

GNA_DIR = gardener_osc.GNA_DIR
GNA_UNIT = gardener_osc.GNA_UNIT
GNA_CONFIG = gardener_osc.GNA_CONFIG                   # what gardener-node-init provisions, and the OSC carries
GNA_BOOTSTRAP_TOKEN = GNA_DIR + "/credentials/bootstrap-token"
MACHINE = "demo-machine"
MACHINE_LABEL = "node.gardener.cloud/machine-name"
BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET = "fresh1", "fr3shn0d3s3cr3t1"


class FreshNodeSandbox(Sandbox):
    """A node that has never seen an OSC, under a scratch osc.rootDirectory (Sandbox.base): on disk only
    what gardener-node-init leaves (GNA's bootstrap token, cluster-ca.crt, machine-name and component
    config below the root), the OS's containerd.service running, nothing of the kubelet. The agent runs
    with kubelet.binaryPath's default (/opt/bin/kubelet, an OSC path: the kubelet lands at
    <root>/opt/bin/kubelet), no kubeconfig (it bootstraps its own certificate from GNA's token) and
    gardener-node-agent.service as a replaced unit.

    start() ends with the agent running and its client certificate bootstrapped; no Node exists. The
    OSC Secret is not published: publish_osc() is the first apply. The Node appears only when the OSC's
    kubelet.service starts the kubelet: its ExecStartPost= (bin/kubelet-report) registers it as the
    kubelet's --register-node would (labels as kubelet's --node-labels would set them; InternalIP
    127.0.0.1; no checksum), from bin/kubelet-registration.json. register_node() does the same by hand.

    The OSC it publishes is the one gardenlet writes (lib/gardener_osc.py): the kubelet's imageRef at
    /opt/bin/kubelet, kubelet.service with its content (ExecStart=<root>/opt/bin/kubelet with
    --bootstrap-kubeconfig/--kubeconfig below the root: the stand-in kubelet bootstraps from
    kubeconfig-bootstrap like a real one, and does not start without it), every other component, GNA's
    unit with its component config and binary (neither written nor pulled), the OS and provider
    extensions' additions."""

    def __init__(self, **kw):
        kw.setdefault("versions", ("1.31.4",))
        kw.setdefault("broken_versions", ())
        kw.setdefault("kubelet_size", 256 << 10)
        kw.setdefault("gardener_osc", True)
        kw["kubelet_bootstrap"] = True
        super().__init__(**kw)
        self.rotation = {}              # spec.inPlaceUpdates.credentialsRotation: "ca"/"sa" -> time

    # ---------------------------------------------------------------- paths

    @property
    def agent_kubeconfig(self):
        return os.path.join(self.state_dir, "kubeconfig")

    @property
    def agent_pem(self):
        return os.path.join(self.state_dir, "node-agent-client.pem")

    # ---------------------------------------------------------------- the node's files

    def agent_config_text(self):
        text = super().agent_config_text()
        # No kubelet.binaryPath: its default is the OSC's path. Our own kubeconfig does not exist yet.
        lines = [ln for ln in text.split("\n") if not ln.startswith("  binaryPath:")]
        return "\n".join(lines).replace('kubeconfig: %s' % json.dumps(self.emu.kubeconfig),
                                        'kubeconfig: %s' % json.dumps(self.agent_kubeconfig))

    @property
    def kubelet_registration(self):
        return self.path("bin", "kubelet-registration.json")

    def registration(self):
        """The Node as kubelet registers it (its --node-labels), no checksum yet."""
        return {"address": "127.0.0.1", "os_image": "Garden Linux %s" % self.initial_os_version,
                "labels": {SECRET_NAME_LABEL: SECRET, "worker.gardener.cloud/pool": POOL, MACHINE_LABEL: MACHINE,
                           "node.kubernetes.io/role": "node"}}

    def _write_node_files(self):
        """gardener-node-init's files, and nothing else (and the stand-in kubelet's registration)."""
        write_file(self.path("bin", "kubelet-registration.json"), json.dumps(self.registration()), 0o644)
        write_file(self.rooted(GNA_BOOTSTRAP_TOKEN), "%s.%s" % (BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET), 0o600)
        write_file(self.rooted(GNA_DIR + "/cluster-ca.crt"), self.cluster_ca(), 0o644)
        write_file(self.rooted(GNA_DIR + "/machine-name"), MACHINE + "\n", 0o644)
        write_file(self.rooted(GNA_CONFIG), self.component_config(), 0o600)

    # ---------------------------------------------------------------- the OSC

    def osc_rotation(self):
        if not self.rotation:
            return ""
        out = "    credentialsRotation:\n"
        if self.rotation.get("ca"):
            out += "      certificateAuthorities:\n        lastInitiationTime: \"%s\"\n" % self.rotation["ca"]
        if self.rotation.get("sa"):
            out += "      serviceAccountKey:\n        lastInitiationTime: \"%s\"\n" % self.rotation["sa"]
        return out

    # ---------------------------------------------------------------- start

    def _prepare_cluster(self):
        """Nothing registered yet; gardener-node-init's bootstrap token is known to the API server, the
        machine (the seed's Machine, with the node template's labels) to the node-agent authorizer."""
        self.emu.config(csr_auto_approve=True)
        self.emu.seed_machine(MACHINE, self.registration()["labels"])
        self.emu.seed_bootstrap_token(BOOTSTRAP_TOKEN_ID, BOOTSTRAP_TOKEN_SECRET)

    def _start_units(self):
        """The OS's containerd.service; the kubelet is the OSC's."""
        self.um.write_unit(CONTAINERD_UNIT, self.containerd_unit_text())
        self.um.write_unit(AGENT_UNIT, self.agent_unit_text())
        self.write_os_units()
        self.um.daemon_reload()
        self.um.systemctl("start", CONTAINERD_UNIT)

    def start_agent(self, timeout=30):
        super().start_agent(timeout)
        usermgr.wait_until(lambda: os.path.exists(self.agent_pem), 30, "the agent's bootstrapped certificate")

    def register_node(self):
        """The Node as the kubelet registers it (see registration()), by hand."""
        self.emu.seed_node(NODE, kubelet_version="v" + self.initial_version, **self.registration())
