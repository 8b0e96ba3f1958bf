"""Run the real inplace-agent binary against the API-server emulator and observe it.

    with kubeemu.start(nodes=["n1"], config=FAST) as emu, agentrun.Agent(emu, "n1") as agent:
        agent.wait_ready()
        emu.label_node("n1", {"x": "y"})
        agent.wait_view(lambda v: v["metadata"]["labels"].get("x") == "y", 5, "label x=y")

The agent runs with --log-level debug, its stderr in <dir>/agent.log. Its view of the Node comes from the
debug dump <stateDirectory>/node-view.json (INPLACE_AGENT_DEBUG_NODE_VIEW=1), its sd_notify messages from a
private NOTIFY_SOCKET. Timings are shortened through INPLACE_AGENT_KUBE_TUNING (include/kube/kube-tuning.h).
Only the agent's own PID is ever signalled. Python 3 stdlib only.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from kubeemu import wait_for

AGENT = os.environ.get("AGENT", "")

# Fast but faithful: short watches and silence detection, no start-up delay, small backoff.
FAST_TUNING = {
    "watch-timeout": "2s-4s",
    "watch-silence": "3s",
    "startup-delay": "0s",
    "backoff-base": "200ms",
    "backoff-cap": "2s",
    "reconnect-spread": "1s",
    "cert-check": "1s",
}

# Emulator settings that go with FAST_TUNING (itest.emulator_fixture(config=...)): a bookmark every second.
FAST_EMULATOR = {"bookmark_interval": 1.0, "bookmark_before_deadline": 0.5}


class Notify:
    """A NOTIFY_SOCKET that records every sd_notify datagram."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []          # (monotonic time, {key: value})
        self.lock = threading.Lock()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode(errors="replace").splitlines() if "=" in line)
            with self.lock:
                self.messages.append((time.monotonic(), fields))

    def first(self, key, value=None):
        with self.lock:
            for t, f in self.messages:
                if key in f and (value is None or f[key] == value):
                    return t, f
        return None

    def statuses(self):
        with self.lock:
            return [f["STATUS"] for _, f in self.messages if "STATUS" in f]

    def close(self):
        self.stopped = True
        self.sock.close()


class Agent:
    def __init__(self, emu, node="n1", kubeconfig=None, tuning=None, lease=False, lease_duration="4s",
                 env=None, start=True, config_extra=""):
        self.emu = emu
        self.node = node
        self.dir = tempfile.mkdtemp(prefix="agent-")
        self.state_dir = os.path.join(self.dir, "state")
        os.makedirs(self.state_dir)
        self.log_path = os.path.join(self.dir, "agent.log")
        self.config_path = os.path.join(self.dir, "config.yaml")
        self.kubeconfig = kubeconfig or emu.kubeconfig_tokenfile
        t = dict(FAST_TUNING)
        t.update(tuning or {})
        self.tuning = ",".join("%s=%s" % kv for kv in t.items() if kv[1] is not None)
        # Whatever an OSC asks for lands in this scratch directory, never on the host.
        self.root_dir = os.path.join(self.dir, "root")
        self.unit_dir = os.path.join(self.dir, "units")
        os.makedirs(self.root_dir)
        os.makedirs(self.unit_dir)
        if not re.search(r"^osc:", config_extra, re.M):
            config_extra += "osc:\n  rootDirectory: %s\n" % self.root_dir
        if not re.search(r"^systemd:", config_extra, re.M):
            config_extra += "systemd:\n  unitDirectory: %s\n  runtimeUnitDirectory: %s\n" % (
                self.unit_dir, os.path.join(self.dir, "run-units"))
        with open(self.config_path, "w") as f:
            f.write("nodeName: %s\nkubeconfig: %s\nstateDirectory: %s\nlease:\n  enabled: %s\n  duration: %s\n%s"
                    % (node, self.kubeconfig, self.state_dir, "true" if lease else "false", lease_duration,
                       config_extra))
        self.notify = Notify(os.path.join(self.dir, "notify.sock"))
        self.env = dict(os.environ, INPLACE_AGENT_KUBE_TUNING=self.tuning, INPLACE_AGENT_DEBUG_NODE_VIEW="1",
                        NOTIFY_SOCKET=self.notify.path)
        for k in ("KUBECONFIG", "NODE_NAME", "KUBERNETES_SERVICE_HOST", "WATCHDOG_USEC", "WATCHDOG_PID"):
            self.env.pop(k, None)
        self.env.update(env or {})
        self.proc = None
        self.started = None
        if start:
            self.start()

    def start(self):
        log = open(self.log_path, "ab")
        self.started = time.monotonic()
        self.started_wall = time.time()
        self.proc = subprocess.Popen([AGENT, "run", "--config", self.config_path, "--log-level", "debug"],
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=self.env)
        log.close()
        return self

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        code = self.stop()
        if exc_type is not None or os.environ.get("AGENT_LOG"):
            print("---- agent log (%s) ----\n%s" % (self.log_path, self.log()[-20000:]))
        if not os.environ.get("KUBEEMU_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        if exc_type is None and code not in (0, None):
            raise AssertionError("agent exited with %s" % code)

    def stop(self, timeout=5):
        """SIGTERM our agent (by PID) and return its exit code."""
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
            code = self.proc.returncode
        self.notify.close()
        return code

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def view(self):
        """The agent's view of the Node ({"present", "metadata", "conditions"}), or None before the first."""
        try:
            with open(os.path.join(self.state_dir, "node-view.json")) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return None

    def labels(self):
        v = self.view()
        return (v or {}).get("metadata", {}).get("labels") or {}

    def wait_view(self, pred, timeout=10.0, what="the agent's view"):
        def check():
            if not self.alive():
                raise AssertionError("agent died (exit %s)" % self.proc.returncode)
            v = self.view()
            return v if v is not None and pred(v) else None
        return wait_for(check, timeout, what)

    def wait_label(self, key, value, timeout=10.0):
        return self.wait_view(lambda v: (v.get("metadata", {}).get("labels") or {}).get(key) == value, timeout,
                              "label %s=%s in the agent's view" % (key, value))

    def wait_ready(self, timeout=10.0):
        return wait_for(lambda: self.notify.first("READY", "1"), timeout, "READY=1")

    def wait_watching(self, timeout=10.0):
        """READY=1 and a watch of this agent's Node open since this agent started. Waiting for "any open
        watch" is a race: a previous test's agent may still hold one the emulator has not noticed closing."""
        self.wait_ready(timeout)
        sel = "metadata.name=%s" % self.node

        def mine():
            return [w for w in self.emu.watches(active=True)
                    if w["start"] >= self.started_wall and
                    urllib.parse.parse_qs(w.get("query") or "").get("fieldSelector") == [sel]]
        return wait_for(mine, timeout, "a watch of node %s" % self.node)

    def wait_settled(self, timeout=10.0):
        """READY=1 and the agent's own first writes to its Node (GNA's role label) seen back through
        its watch: from here on, Node events are the test's own (faults that fire after N events)."""
        self.wait_ready(timeout)
        return self.wait_label("node-role.kubernetes.io/worker", "", timeout)

    def wait_log(self, text, timeout=10.0):
        return wait_for(lambda: text in self.log(), timeout, "%r in the agent log" % text)


def node_requests(emu, node="n1", since=0):
    """Requests for our Node's collection (LIST and WATCH), oldest first."""
    return [e for e in emu.request_log(since=since, path=r"^/api/v1/nodes$")
            if "metadata.name%3D" + node in e["query"] or "metadata.name=" + node in e["query"]]


def lists(reqs):
    return [e for e in reqs if e["verb"] == "list"]


def watches(reqs):
    return [e for e in reqs if e["verb"] == "watch"]


def last_seq(emu):
    log = emu.request_log()
    return log[-1]["seq"] if log else 0

