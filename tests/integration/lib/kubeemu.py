"""Start and drive the Kubernetes API-server emulator (tests/emulator/kube_emulator/) from integration tests.

    from lib import itest        # a test in tests/integration: lib/ on sys.path
    import kubeemu

    with kubeemu.start(nodes=["n1"]) as emu:
        run_agent(kubeconfig=emu.kubeconfig)
        kubeemu.wait_for(lambda: emu.get_node("n1")["metadata"]["labels"].get("x") == "y", 10, "label x=y")
        emu.inject("too-many-requests", verbs=["patch"], params={"retry_after": 7})
        log = emu.request_log(verb="patch")

Everything talks to the emulator's control API (plain HTTP on 127.0.0.1; the docstrings of
tests/emulator/kube_emulator/control.py and faults.py list every route and fault name). `stop()` kills only the emulator's own PID and
removes the temporary state directory (set KUBEEMU_KEEP=1 to keep it; emulator.log is in there).
`RawStream` gives tests the raw chunked framing of a watch (chunk sizes, clean end vs. dropped connection).
Python 3 stdlib only.
"""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
EMULATOR = os.path.normpath(os.path.join(HERE, "..", "..", "emulator", "kube_emulator.py"))  # runs the package


def wait_for(predicate, timeout=10.0, what=None, interval=0.05):
    """Poll predicate() until it returns something truthy (which is returned); TimeoutError at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.1fs waiting for %s" % (timeout, what or getattr(
                predicate, "__name__", "condition")))
        time.sleep(interval)


class ControlError(Exception):
    def __init__(self, code, body):
        super().__init__("control API returned %d: %s" % (code, body))
        self.code, self.body = code, body


class KubeEmulator:
    def __init__(self, info, proc, owns_dir):
        self.info = info
        self.proc = proc
        self.pid = proc.pid if proc else info["pid"]
        self._owns_dir = owns_dir
        self.state_dir = info["state_dir"]
        self.port = info["port"]
        self.control_port = info["control_port"]
        self.server = info["server"]
        self.kubeconfig = info["kubeconfig"]
        self.kubeconfig_tokenfile = info["kubeconfig_tokenfile"]
        self.kubeconfig_cadata = info["kubeconfig_cadata"]
        self.kubeconfig_cert = info.get("kubeconfig_cert")
        self.client_cert, self.client_key = info.get("client_cert"), info.get("client_key")
        self.ca = info["ca"]
        self.token = info["token"]
        self.token_file = info["token_file"]

    # -- plumbing ----------------------------------------------------------------------------------

    def _call(self, method, path, body=None, params=None, timeout=30):
        url = "http://127.0.0.1:%d%s" % (self.control_port, path)
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            raise ControlError(e.code, e.read().decode(errors="replace")) from None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        """Terminate the emulator process we started (by PID only) and remove a temporary state dir."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self._owns_dir and not os.environ.get("KUBEEMU_KEEP"):
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- objects -----------------------------------------------------------------------------------

    def get(self, resource, name, namespace="", group=None):
        """The stored object, or None if absent."""
        try:
            return self._call("GET", "/object", params={"resource": resource, "name": name, "namespace": namespace,
                                                        "group": group})
        except ControlError as e:
            if e.code == 404:
                return None
            raise

    def get_node(self, name):
        return self.get("nodes", name)

    def list(self, resource, namespace=None, group=None):
        return self._call("GET", "/objects", params={"resource": resource, "namespace": namespace, "group": group})

    def put(self, obj, manager="emulator", status_manager=None):
        """Create or replace an object (bypasses auth/validation; emits ADDED/MODIFIED)."""
        return self._call("PUT", "/object", obj, params={"manager": manager, "status_manager": status_manager})

    def seed_node(self, name, labels=None, annotations=None, **kw):
        """A kubelet-registered-looking Node (Ready + pressure conditions, addresses, nodeInfo).
        kw: kubelet_version, os_image, address, unschedulable, taints, uid, conditions, manager."""
        body = dict(kw, name=name, labels=labels or {}, annotations=annotations or {})
        return self._call("POST", "/node", body)

    def seed_machine(self, name, node_template_labels):
        """The seed's Machine `name` (not an API object here): the node-agent authorizer reads the OSC Secret's
        name from its node template labels."""
        return self._call("POST", "/machine", {"name": name, "node_template_labels": node_template_labels})

    def seed_secret(self, name, namespace="kube-system", data=None, labels=None, annotations=None,
                    type="Opaque"):
        """data values are raw strings; the emulator base64-encodes them."""
        return self._call("POST", "/secret", {"name": name, "namespace": namespace, "data": data or {},
                                              "labels": labels or {}, "annotations": annotations or {},
                                              "type": type})

    def delete(self, resource, name, namespace="", group=None):
        return self._call("DELETE", "/object", params={"resource": resource, "name": name, "namespace": namespace,
                                                       "group": group})

    def patch(self, resource, name, patch, type="merge", namespace="", subresource="", manager="emulator-control",
              force=False, group=None):
        """Patch through the real patch engine (no auth). Returns {"code", "object", "warnings"}."""
        return self._call("POST", "/patch", {"resource": resource, "name": name, "patch": patch, "type": type,
                                             "namespace": namespace, "subresource": subresource,
                                             "manager": manager, "force": force, "group": group})

    def set_condition(self, node, type, status="True", reason="", message="", manager="machine-controller-manager",
                      remove=False, heartbeat=False):
        """Set (or remove) a Node condition the way MCM does: read, replace by type, UpdateStatus."""
        return self._call("POST", "/node-condition", {"node": node, "type": type, "status": status,
                                                      "reason": reason, "message": message, "manager": manager,
                                                      "remove": remove, "heartbeat": heartbeat})

    def label_node(self, node, labels=None, annotations=None, manager="machine-controller-manager", **spec):
        """Merge-patch labels/annotations (value None deletes); spec may carry unschedulable/taints."""
        body = dict(spec, node=node, manager=manager)
        if labels is not None:
            body["labels"] = labels
        if annotations is not None:
            body["annotations"] = annotations
        return self._call("POST", "/node-labels", body)["object"]

    def batch(self, ops):
        """Several ops under one store lock (so watchers see the events queued together)."""
        return self._call("POST", "/batch", ops)

    # -- faults ------------------------------------------------------------------------------------

    def inject(self, fault, **rule):
        """Add a fault rule; returns its id. rule: verbs, path, resource, subresource, name, namespace, user,
        count (default 1, -1 = forever), after, duration, params={...}."""
        return self._call("POST", "/faults", dict(rule, fault=fault))["id"]

    def reset(self):
        """Back to how it started, between tests sharing it: no faults, the start configuration, serving
        normally with the good certificate (open connections are kept)."""
        self.clear_faults()
        self.config(**self.start_config)
        self.listen("normal", close_existing=False)
        self.tls(cert="good", client_auth="optional", close_existing=False)

    def clear_faults(self, rule_id=None):
        self._call("DELETE", "/faults", params={"id": rule_id})

    def faults(self):
        return self._call("GET", "/faults")

    # -- logs --------------------------------------------------------------------------------------

    def request_log(self, since=0, path=None, verb=None, user=None, method=None):
        return self._call("GET", "/requests", params={"since": since, "path": path, "verb": verb, "user": user,
                                                      "method": method})

    def clear_request_log(self):
        self._call("DELETE", "/requests")

    def watches(self, active=False, path=None, since=0):
        return self._call("GET", "/watches", params={"active": "1" if active else None, "path": path,
                                                     "since": since})

    def wait_for_watch(self, path=None, timeout=10.0, count=1):
        """Wait until at least `count` watches matching the path regex are open."""
        return wait_for(lambda: len(self.watches(active=True, path=path)) >= count and
                        self.watches(active=True, path=path), timeout, "an open watch on %s" % path)

    def history(self, since_rv=0, resource=None, objects=False):
        return self._call("GET", "/history", params={"since_rv": since_rv, "resource": resource,
                                                     "objects": "1" if objects else None})

    def connections(self):
        return self._call("GET", "/connections")

    # -- runtime knobs -----------------------------------------------------------------------------

    def config(self, **values):
        return self._call("POST", "/config", values)

    def add_token(self, token, user, groups=(), expires_in=None):
        return self._call("POST", "/tokens", {"add": {token: {"user": user, "groups": list(groups),
                                                              "expires_in": expires_in}}})

    def revoke_token(self, token):
        return self._call("POST", "/tokens", {"revoke": [token]})

    def write_token_file(self, token):
        return self._call("POST", "/tokens", {"write_token_file": token})

    def tls(self, cert=None, client_auth=None, close_existing=True):
        return self._call("POST", "/tls", {"cert": cert, "client_auth": client_auth,
                                           "close_existing": close_existing})

    def make_client_cert(self, name, cn, orgs=(), ca="good", expired=False):
        """Mint a client certificate; returns {"cert", "key", "kubeconfig"} paths."""
        return self._call("POST", "/client-cert", {"name": name, "cn": cn, "orgs": list(orgs), "ca": ca,
                                                   "expired": expired})

    def csr(self, name, action, reason="", message=""):
        """approve | deny | fail | sign a CertificateSigningRequest as its controllers would; returns it."""
        return self._call("POST", "/csr", {"name": name, "action": action, "reason": reason, "message": message})

    def seed_bootstrap_token(self, token_id, secret, expiration=None, extra_groups=None):
        """The Secret kube-system/bootstrap-token-<id> that makes "<id>.<secret>" a bootstrap token."""
        data = {"token-id": token_id, "token-secret": secret, "usage-bootstrap-authentication": "true"}
        if expiration:
            data["expiration"] = expiration
        if extra_groups:
            data["auth-extra-groups"] = extra_groups
        return self.seed_secret("bootstrap-token-" + token_id, data=data, type="bootstrap.kubernetes.io/token")

    def listen(self, mode="normal", seconds=None, close_existing=True):
        return self._call("POST", "/listen", {"mode": mode, "seconds": seconds, "close_existing": close_existing})

    def close_connections(self, watches="clean", idle=True, busy=False):
        return self._call("POST", "/close-connections", {"watches": watches, "idle": idle, "busy": busy})

    def rv_jump(self, by, close_watches=True):
        return self._call("POST", "/rv", {"jump": by, "close_watches": close_watches})

    def rv_reset(self, to, close_watches=True):
        return self._call("POST", "/rv", {"reset": to, "close_watches": close_watches})

    def compact(self, rv=None):
        return self._call("POST", "/compact", {"rv": rv} if rv is not None else {})

    def expire_events(self, names=None):
        return self._call("POST", "/expire-events", {"names": names} if names else {})

    def current_rv(self):
        return self.history(since_rv=1 << 62)["rv"]

    # -- raw HTTPS to the API port -----------------------------------------------------------------

    def ssl_context(self, cert=None, key=None):
        ctx = ssl.create_default_context(cafile=self.ca)
        if cert:
            ctx.load_cert_chain(cert, key)
        return ctx

    def https(self, method, path, body=None, headers=None, token=True, timeout=30, cert=None, key=None):
        """One request on a fresh connection. token=True uses the admin token, a string uses that token,
        None/False sends no Authorization. Returns (status, HTTPMessage headers, body bytes)."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=self.ssl_context(cert, key))
        h = {"Accept": "application/json"}
        if token:
            h["Authorization"] = "Bearer " + (self.token if token is True else token)
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        h.update(headers or {})
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, r.headers, r.read()
        finally:
            conn.close()

    def https_json(self, method, path, body=None, **kw):
        status, headers, data = self.https(method, path, body, **kw)
        try:
            obj = json.loads(data) if data else None
        except ValueError:
            obj = data.decode(errors="replace")
        return status, headers, obj


class RawStream:
    """A raw HTTP/1.1 request over TLS that exposes the chunked framing of the response (watch streams)."""

    def __init__(self, emu, path, token=True, timeout=10, headers=None, method="GET"):
        raw = socket.create_connection(("127.0.0.1", emu.port), timeout=timeout)
        self.sock = emu.ssl_context().wrap_socket(raw, server_hostname="localhost")
        h = {"Host": "127.0.0.1:%d" % emu.port, "Accept": "application/json", "User-Agent": "rawstream/1.0"}
        if token:
            h["Authorization"] = "Bearer " + (emu.token if token is True else token)
        h.update(headers or {})
        req = "%s %s HTTP/1.1\r\n%s\r\n" % (method, path, "".join("%s: %s\r\n" % kv for kv in h.items()))
        self.sock.sendall(req.encode())
        self.buf = b""
        self.eof = False
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        self.header_list = []
        for ln in lines[1:]:
            if ln:
                k, _, v = ln.partition(":")
                self.headers[k.strip().lower()] = v.strip()
                self.header_list.append((k.strip().lower(), v.strip()))
        self.chunks = []          # sizes of the HTTP chunks received
        self.ended_cleanly = False
        self.pending = b""

    def _fill(self):
        try:
            d = self.sock.recv(65536)
        except (ssl.SSLError, ConnectionError):
            d = b""
        if not d:
            self.eof = True
        self.buf += d
        return d

    def _read_until(self, sep):
        while sep not in self.buf:
            if not self._fill():
                raise EOFError("connection closed before %r" % sep)
        i = self.buf.index(sep)
        out, self.buf = self.buf[:i], self.buf[i + len(sep):]
        return out

    def _read_n(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError("connection closed inside a chunk")
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_chunk(self):
        """Next chunk's payload; b"" at the terminating chunk; raises EOFError if the connection dropped."""
        size = int(self._read_until(b"\r\n").split(b";")[0], 16)
        if size == 0:
            self._read_until(b"\r\n")
            self.ended_cleanly = True
            return b""
        data = self._read_n(size)
        self._read_n(2)
        self.chunks.append(size)
        return data

    def body(self):
        """Whole non-chunked body (Content-Length) or all chunks until the end."""
        if "content-length" in self.headers:
            return self._read_n(int(self.headers["content-length"]))
        out = b""
        while True:
            c = self.read_chunk()
            if not c:
                return out
            out += c

    def next_line(self, timeout=None):
        """Next newline-terminated line of a chunked stream (None at a clean end; EOFError when dropped)."""
        if timeout is not None:
            self.sock.settimeout(timeout)
        while b"\n" not in self.pending:
            c = self.read_chunk()
            if not c:
                return None
            self.pending += c
        line, _, self.pending = self.pending.partition(b"\n")
        return line

    def next_event(self, timeout=None):
        line = self.next_line(timeout)
        return None if line is None else json.loads(line)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def start(state_dir=None, nodes=(), tokens=(), client_certs=(), config=None, extra_args=(), timeout=20.0,
          python=None):
    """Start the emulator as a subprocess on free ports and wait for its ready file.

    tokens: iterable of "TOKEN[=USER[,GROUP...]]"; the first one goes into the kubeconfigs (default: a random
    admin token). client_certs: iterable of "CN[,ORG...]" (first one -> kubeconfig_cert).
    config: dict of runtime config keys (see DEFAULT_CONFIG in kube_emulator/config.py)."""
    owns = state_dir is None
    state_dir = state_dir or tempfile.mkdtemp(prefix="kubeemu-")
    os.makedirs(state_dir, exist_ok=True)
    ready = os.path.join(state_dir, "ready")
    if os.path.exists(ready):
        os.unlink(ready)
    cmd = [python or sys.executable, EMULATOR, "--state-dir", state_dir, "--port", "0", "--control-port", "0",
           "--ready-file", ready]
    for n in nodes:
        cmd += ["--node", n]
    for t in tokens:
        cmd += ["--token", t]
    for c in client_certs:
        cmd += ["--client-cert", c]
    for k, v in (config or {}).items():
        cmd += ["--config", "%s=%s" % (k, v)]
    cmd += list(extra_args)
    log = open(os.path.join(state_dir, "emulator.log"), "ab")
    proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    deadline = time.monotonic() + timeout
    while not os.path.exists(ready):
        if proc.poll() is not None:
            with open(os.path.join(state_dir, "emulator.log"), "rb") as f:
                tail = f.read()[-4000:].decode(errors="replace")
            raise RuntimeError("emulator exited with %s:\n%s" % (proc.returncode, tail))
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise TimeoutError("emulator not ready after %.0fs" % timeout)
        time.sleep(0.02)
    with open(ready) as f:
        info = json.load(f)
    emu = KubeEmulator(info, proc, owns)
    emu.start_config = dict(config or {})
    return emu
