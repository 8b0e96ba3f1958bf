#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""NOT the agent. A contract-level stand-in for inplace-agent, only to test the demo harness itself
(`tests/demo/demo.py --agent tests/demo/stand-in-agent.py`, run by test_sandbox.py): when test_demo.py fails,
a passing stand-in run says the fault is in the agent, not in the harness. It was written before the agent
could update. It implements the happy path of docs/contract.md §5-§8 for a kubelet-
only in-place update and nothing else: no OS update, no retries, no resume after a restart, no lease, no
watch (it polls every 200 ms), no limits on input. The demo test (test_demo.py) always runs the real agent.

    stand-in-agent.py check-config --config FILE
    stand-in-agent.py run --config FILE [--log-level LEVEL]

Talks to the API server with the kubeconfig's token and CA, to systemd over D-Bus (busctl on
$DBUS_SYSTEM_BUS_ADDRESS: RestartUnit), to the registry over HTTPS (registry.caFile); sends READY=1 on
$NOTIFY_SOCKET. Logs to stderr in the agent's format.
"""

import datetime
import gzip
import hashlib
import http.client
import io
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

CANDIDATE = "node.machine.sapcloud.io/candidate-for-update"
SELECTED = "node.machine.sapcloud.io/selected-for-update"
RESULT = "node.machine.sapcloud.io/update-result"
REASON = "node.machine.sapcloud.io/update-failed-reason"
SECRET_LABEL = "worker.gardener.cloud/gardener-node-agent-secret-name"
TX = {"id": None, "phase": None}


def log(msg, level="info"):
    now = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
    tx = " [tx=%s phase=%s]" % (TX["id"], TX["phase"]) if TX["id"] else ""
    sys.stderr.write("%s inplace-agent[%s]: %s%s\n" % (now, level, msg, tx))
    sys.stderr.flush()


def load_config(path):
    """The sandbox writes block YAML with JSON scalars: enough to read it back without a YAML parser."""
    cfg, stack = {}, [(-1, None)]
    with open(path) as f:
        for line in f:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            indent = len(line) - len(line.lstrip())
            key, _, val = line.strip().partition(":")
            while stack[-1][0] >= indent:
                stack.pop()
            prefix = stack[-1][1]
            full = "%s.%s" % (prefix, key) if prefix else key
            if val.strip() in ("", "{}"):
                stack.append((indent, full))
            else:
                cfg[full] = json.loads(val.strip())
    return cfg


class Kube:
    def __init__(self, kubeconfig):
        text = open(kubeconfig).read()
        self.server = re.search(r'server:\s*"?([^"\s]+)', text).group(1)
        self.token = re.search(r'token:\s*"?([^"\s]+)', text).group(1)
        ca = re.search(r'certificate-authority:\s*"?([^"\s]+)', text).group(1)
        self.ctx = ssl.create_default_context(cafile=ca)
        u = urllib.parse.urlparse(self.server)
        self.host, self.port = u.hostname, u.port

    def call(self, method, path, body=None, ctype="application/json"):
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=10)
        h = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            h["Content-Type"] = ctype
        try:
            conn.request(method, path, body=data, headers=h)
            r = conn.getresponse()
            out = r.read()
            if r.status >= 300:
                raise RuntimeError("%s %s: %d %s" % (method, path, r.status, out[:300]))
            return json.loads(out) if out else None
        finally:
            conn.close()


class Agent:
    def __init__(self, cfg):
        self.cfg = cfg
        self.node_name = cfg["nodeName"]
        self.kube = Kube(cfg["kubeconfig"])
        self.state = cfg["stateDirectory"]
        # binaryPath is an OSC path: on disk below osc.rootDirectory (docs/contract.md §9.5).
        self.binary = cfg.get("osc.rootDirectory", "/").rstrip("/") + cfg.get("kubelet.binaryPath", "/opt/bin/kubelet")
        self.unit = cfg.get("kubelet.unit", "kubelet.service")
        self.healthz = cfg["kubelet.healthzURL"]
        self.health_timeout = int(str(cfg.get("kubelet.healthTimeout", "20s")).rstrip("s"))
        self.ca = cfg.get("registry.caFile")
        self.tx = None

    # ---- plumbing
    def node(self):
        return self.kube.call("GET", "/api/v1/nodes/" + self.node_name)

    def patch_node(self, labels=None, annotations=None):
        meta = {}
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        self.kube.call("PATCH", "/api/v1/nodes/%s?fieldManager=inplace-agent" % self.node_name, {"metadata": meta},
                       "application/merge-patch+json")

    def condition(self, status, reason, message):
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        c = {"type": "InPlaceUpdateAgent", "status": status, "reason": reason, "message": message,
             "lastHeartbeatTime": now, "lastTransitionTime": now}
        self.kube.call("PATCH", "/api/v1/nodes/%s/status?fieldManager=inplace-agent" % self.node_name,
                       {"status": {"conditions": [c]}}, "application/strategic-merge-patch+json")

    def event(self, reason, message, type_="Normal"):
        node = self.node()
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "%s.%x" % (self.node_name, time.time_ns()), "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": self.node_name, "uid": node["metadata"]["uid"],
                                 "apiVersion": "v1"},
              "reason": reason, "message": message, "type": type_, "source": {"component": "inplace-agent"},
              "firstTimestamp": now, "lastTimestamp": now, "count": 1}
        try:
            self.kube.call("POST", "/api/v1/namespaces/default/events", ev)
        except RuntimeError as e:
            log("event failed: %s" % e, "warning")

    def progress(self, phase, step="", done=0, total=0, extra_labels=None, extra_annotations=None):
        TX["phase"] = self.tx["phase"] = phase
        p = {"transaction": self.tx["id"], "phase": phase, "step": step, "bytesDone": done, "bytesTotal": total,
             "percent": int(done * 100 / total) if total else (100 if phase in ("Staged", "Succeeded") else 0),
             "updated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        ann = {"inplace-agent/progress": json.dumps(p, separators=(",", ":"))}
        ann.update(extra_annotations or {})
        self.patch_node(labels=extra_labels, annotations=ann)
        log("Phase %s%s." % (phase, (", step " + step) if step else ""))

    def desired(self, node):
        name = (node["metadata"].get("labels") or {}).get(SECRET_LABEL)
        s = self.kube.call("GET", "/api/v1/namespaces/kube-system/secrets/" + name)
        import base64
        osc = base64.b64decode(s["data"]["osc.yaml"]).decode()
        return {"checksum": (s["metadata"].get("annotations") or {}).get("checksum/data-script"),
                "kubelet": re.search(r'kubelet:\s*"([^"]+)"', osc).group(1),
                "image": re.search(r"image:\s*(\S+)", osc).group(1),
                "file": re.search(r"filePathInImage:\s*(\S+)", osc).group(1)}

    # ---- kubelet store
    def store_path(self, v):
        return os.path.join(self.state, "kubelet", v, "kubelet")

    def current(self):
        t = os.readlink(self.binary)
        return os.path.basename(os.path.dirname(t))

    def switch(self, v):
        tmp = self.binary + ".tmp-switch"
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(self.store_path(v), tmp)
        os.rename(tmp, self.binary)
        log("Switched %s to kubelet %s." % (self.binary, v))

    def install(self, v, data):
        p = self.store_path(v)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p + ".tmp", "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o755)
        os.rename(p + ".tmp", p)

    def adopt(self):
        if os.path.islink(self.binary) or not os.path.isfile(self.binary):
            return
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True).stdout.split()
        v = out[-1].lstrip("v") if out else "adopted"
        self.install(v, open(self.binary, "rb").read())
        self.switch(v)
        log("Adopted %s as kubelet %s." % (self.binary, v))

    def pull(self, image, path, on_progress):
        host, _, rest = image.partition("/")
        repo, _, tag = rest.rpartition(":")
        ctx = ssl.create_default_context(cafile=self.ca)

        def get(p, accept=None):
            req = urllib.request.Request("https://%s%s" % (host, p), headers={"Accept": accept} if accept else {})
            return urllib.request.urlopen(req, context=ctx, timeout=30)
        m = json.loads(get("/v2/%s/manifests/%s" % (repo, tag), "application/vnd.oci.image.manifest.v1+json").read())
        total = sum(layer["size"] for layer in m["layers"])
        top = m["layers"][-1]
        buf, done = io.BytesIO(), 0
        with get("/v2/%s/blobs/%s" % (repo, top["digest"])) as r:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                buf.write(chunk)
                done += len(chunk)
                on_progress(done, top["size"])
        blob = buf.getvalue()
        if "sha256:" + hashlib.sha256(blob).hexdigest() != top["digest"]:
            raise RuntimeError("DigestMismatch")
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tf:
            return tf.extractfile(path.lstrip("/")).read(), done, total

    def restart_kubelet(self):
        subprocess.run(["busctl", "--address=" + os.environ["DBUS_SYSTEM_BUS_ADDRESS"], "call",
                        "org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                        "RestartUnit", "ss", self.unit, "replace"], check=True, capture_output=True)
        log("Restarted %s." % self.unit)

    def healthy(self):
        deadline = time.monotonic() + self.health_timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.healthz, timeout=5) as r:
                    if r.status == 200:
                        return None
            except urllib.error.HTTPError as e:
                last = "HTTP %d" % e.code
            except OSError as e:
                last = str(e)
            time.sleep(1)
        return last

    # ---- the loop
    def step(self):
        node = self.node()
        labels = node["metadata"].get("labels") or {}
        ann = node["metadata"].get("annotations") or {}
        d = self.desired(node)
        if ann.get("checksum/cloud-config-data") == d["checksum"]:
            return
        ready = any(c.get("type") == "InPlaceUpdate" and c.get("reason") == "ReadyForUpdate"
                    for c in node["status"].get("conditions") or [])
        if self.tx is None or self.tx["checksum"] != d["checksum"]:
            if self.tx and self.tx.get("done"):
                return
            if labels.get(CANDIDATE) != "true" and not ready:
                return
            self.tx = {"id": uuid.uuid4().hex[:12], "checksum": d["checksum"], "from": self.current(),
                       "to": d["kubelet"], "phase": None}
            TX["id"] = self.tx["id"]
            plan = [{"action": "kubelet", "from": self.tx["from"], "to": d["kubelet"]},
                    {"action": "restart", "unit": self.unit}]
            self.progress("Planned", "plan", extra_annotations={"inplace-agent/plan": json.dumps(plan)})
            self.event("InPlaceUpdatePlanned", "kubelet %s -> %s" % (self.tx["from"], d["kubelet"]))
            last = [0.0]

            def prog(done, total):
                if time.monotonic() - last[0] > 0.5:
                    last[0] = time.monotonic()
                    self.progress("Staging", "pull kubelet", done, total)
            self.progress("Staging", "pull kubelet")
            data, done, total = self.pull(d["image"], d["file"], prog)
            self.install(d["kubelet"], data)
            self.progress("Staged", "", done, total)
            self.event("InPlaceUpdateStaged", "kubelet %s staged" % d["kubelet"])
        if self.tx.get("done"):
            return
        if self.tx["phase"] == "Staged" and (labels.get(SELECTED) == "true" or ready):
            self.progress("WaitingForDrain")
        if ready and self.tx["phase"] == "WaitingForDrain":
            self.progress("Applying", "switch kubelet")
            self.switch(self.tx["to"])
            self.restart_kubelet()
            self.progress("Verifying", "kubelet health")
            err = self.healthy()
            self.tx["done"] = True
            if err is None:
                self.progress("Succeeded", extra_labels={RESULT: "successful",
                                                         "worker.gardener.cloud/kubernetes-version": self.tx["to"]},
                              extra_annotations={"checksum/cloud-config-data": self.tx["checksum"], REASON: None,
                                                 "inplace-agent/failure": None})
                self.condition("True", "Succeeded", "kubelet %s is running" % self.tx["to"])
                self.event("InPlaceUpdateSucceeded", "kubelet %s -> %s" % (self.tx["from"], self.tx["to"]))
            else:
                reason = "kubelet is not healthy after in-place update: " + err
                log(reason + "; rolling back to %s." % self.tx["from"], "error")
                self.switch(self.tx["from"])
                self.restart_kubelet()
                failure = {"code": "KubeletUnhealthy", "class": "terminal", "step": "health", "attempt": 1,
                           "transaction": self.tx["id"], "message": reason}
                self.progress("RolledBack", extra_labels={RESULT: "failed"},
                              extra_annotations={REASON: reason, "inplace-agent/failure": json.dumps(failure)})
                self.condition("False", "RolledBack", reason)
                self.event("InPlaceUpdateRolledBack", reason, "Warning")

    @staticmethod
    def notify(msg):
        ns = os.environ.get("NOTIFY_SOCKET")
        if ns:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
                s.sendto(msg, "\0" + ns[1:] if ns.startswith("@") else ns)

    def run(self):
        log("Starting stand-in agent for node %s." % self.node_name)
        self.adopt()
        self.notify(b"READY=1\nSTATUS=stand-in agent")
        while True:
            self.notify(b"WATCHDOG=1")
            try:
                self.step()
            except Exception as e:
                log("step failed: %s" % e, "warning")
            time.sleep(0.2)


def main():
    args = sys.argv[1:]
    cfg = load_config(args[args.index("--config") + 1])
    if args[0] == "check-config":
        return 0
    Agent(cfg).run()


if __name__ == "__main__":
    sys.exit(main())
