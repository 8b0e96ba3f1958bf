"""The emulator: the store, servers, credentials and state directory put together.

Owns: Emulator (start and stop, the janitor thread: Event TTL, history trim, CSR controllers), the state
directory and ready file, the kubeconfigs it writes, client certificates minted on request, seeding objects
directly (``seed``: bypasses auth, validation of transitions and faults), the MCM-style Node condition
write, and the control API's dispatch (control.py).

State directory
---------------
ready (JSON: pid, port, control_port, server, control_url, token, ca, token_file, kubeconfig, ...), ca.crt,
token (the first token), kubeconfig (token), kubeconfig-tokenfile (tokenFile: DIR/token),
kubeconfig-cadata (certificate-authority-data), kubeconfig-cert (client cert, with --client-cert),
pki/ (CAs, server certs of every mode, minted client certs: pki/client-<name>.crt/.key).
"""

import base64
import json
import os
import re
import shutil
import threading
import traceback
import uuid

from .api import Api, WriteCtx
from .apiserver import ApiServer
from .auth import Tokens
from .config import Config, DEFAULT_CONFIG, SERVER_VERSION
from .control import CONTROL_ROUTES, ControlServer
from .controllers import csr_controllers
from .errors import ControlError, err_not_found
from .faults import Faults
from .kinds import KINDS, KIND_BY_GVR, KIND_BY_STORAGE, KNOWN_NAMESPACES
from .schema import Coercer
from .ssa import track_update
from .store import Store
from .tls import CertFactory, TlsConfig
from .util import Log, deep, now_micro, now_time, write_atomic


def yaml_str(s):
    return json.dumps(s)


def kubeconfig_text(server, ca=None, ca_data=None, token=None, token_file=None, cert=None, key=None,
                    tls_server_name=None):
    cl = ["    server: %s" % yaml_str(server)]
    if ca_data:
        cl.append("    certificate-authority-data: %s" % yaml_str(ca_data))
    elif ca:
        cl.append("    certificate-authority: %s" % yaml_str(ca))
    if tls_server_name:
        cl.append("    tls-server-name: %s" % yaml_str(tls_server_name))
    us = []
    if token:
        us.append("    token: %s" % yaml_str(token))
    if token_file:
        us.append("    tokenFile: %s" % yaml_str(token_file))
    if cert:
        us.append("    client-certificate: %s" % yaml_str(cert))
        us.append("    client-key: %s" % yaml_str(key))
    return "\n".join(["apiVersion: v1", "kind: Config", "clusters:", "- name: emulator", "  cluster:"] + cl +
                     ["users:", "- name: emulator-user", "  user:"] + (us or ["    {}"]) +
                     ["contexts:", "- name: emulator", "  context:", "    cluster: emulator",
                      "    user: emulator-user", "current-context: emulator", ""])


class Emulator:
    def __init__(self, state_dir, host="127.0.0.1", port=0, control_port=0, server_host=None, tokens=None,
                 client_certs=(), cert_mode="good", client_auth="optional", config=None, initial_rv=100,
                 server_version=SERVER_VERSION, sans=(), debug_log=None, ready_file=None):
        self.state_dir = os.path.abspath(state_dir)
        os.makedirs(self.state_dir, exist_ok=True)
        self.host, self.req_port, self.control_req_port = host, port, control_port
        self.server_host = server_host or host
        self.server_version = server_version
        self.cfg = Config(DEFAULT_CONFIG)
        self.cfg.update_from(config or {})
        self.store = Store(self.cfg, initial_rv)
        self.api = Api(self)
        self.tokens = Tokens()
        self.faults = Faults()
        self.machines = {}      # the seed's Machines, as the node-agent authorizer reads them: name -> labels
        self.reqlog, self.watchlog, self.tlslog = Log(), Log(), Log()
        self.debug_log = debug_log
        self.ready_file = ready_file or os.path.join(self.state_dir, "ready")
        tokens = list(tokens or [])
        if not tokens:
            tokens = [(uuid.uuid4().hex, "emulator-admin", ["system:masters"])]
        for tok, user, groups in tokens:
            self.tokens.add(tok, user, groups)
        self.token = tokens[0][0]
        all_sans = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"] + list(sans)
        if server_host and server_host not in ("localhost", "127.0.0.1", "::1"):
            all_sans.append(("IP:" if re.match(r"^[0-9.:]+$", server_host) else "DNS:") + server_host)
        self.certs = CertFactory(os.path.join(self.state_dir, "pki"), all_sans)
        self.tls = TlsConfig(self.certs, cert_mode, client_auth)
        self.client_cert_specs = list(client_certs)
        self.files = {}
        for ns in KNOWN_NAMESPACES:
            self.seed({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns},
                       "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}})
        self.api_server = None
        self.control_server = None
        self._stop = threading.Event()

    def debug(self, msg):
        if self.debug_log:
            with open(self.debug_log, "a") as f:
                f.write("%s %s\n" % (now_micro(), msg))

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self):
        self.api_server = ApiServer(self, self.host, self.req_port)
        self.port = self.api_server.port
        self.control_server = ControlServer(self, "127.0.0.1", self.control_req_port)
        self.control_port = self.control_server.server_address[1]
        self._write_files()
        self.api_server.start()
        threading.Thread(target=self.control_server.serve_forever, kwargs={"poll_interval": 0.2},
                         name="control", daemon=True).start()
        threading.Thread(target=self._janitor, name="janitor", daemon=True).start()
        info = self.info()
        write_atomic(self.ready_file, json.dumps(info, indent=2) + "\n")
        return self

    def stop(self):
        self._stop.set()
        if self.api_server:
            self.api_server.stop()
        if self.control_server:
            self.control_server.shutdown()
            self.control_server.server_close()

    def _janitor(self):
        while not self._stop.wait(0.2):
            try:
                self.store.expire_due()
                self.store.trim()
                csr_controllers(self)
            except Exception:  # noqa: BLE001
                self.debug("janitor: %s" % traceback.format_exc())

    @property
    def server_url(self):
        h = self.server_host
        return "https://%s:%d" % ("[%s]" % h if ":" in h else h, self.port)

    def _write_files(self):
        sd = self.state_dir
        ca = self.certs.ca("good")[0]
        ca_copy = os.path.join(sd, "ca.crt")
        shutil.copyfile(ca, ca_copy)
        token_file = os.path.join(sd, "token")
        write_atomic(token_file, self.token + "\n", 0o600)
        with open(ca_copy) as f:
            ca_data = base64.b64encode(f.read().encode()).decode()
        self.files = {"ca": ca_copy, "token_file": token_file,
                      "kubeconfig": os.path.join(sd, "kubeconfig"),
                      "kubeconfig_tokenfile": os.path.join(sd, "kubeconfig-tokenfile"),
                      "kubeconfig_cadata": os.path.join(sd, "kubeconfig-cadata")}
        write_atomic(self.files["kubeconfig"], kubeconfig_text(self.server_url, ca=ca_copy, token=self.token), 0o600)
        write_atomic(self.files["kubeconfig_tokenfile"],
                     kubeconfig_text(self.server_url, ca=ca_copy, token_file=token_file), 0o600)
        write_atomic(self.files["kubeconfig_cadata"],
                     kubeconfig_text(self.server_url, ca_data=ca_data, token=self.token), 0o600)
        for i, (cn, orgs) in enumerate(self.client_cert_specs):
            r = self.make_client_cert("client" if i == 0 else "client-%d" % i, cn, orgs)
            if i == 0:
                self.files.update({"client_cert": r["cert"], "client_key": r["key"],
                                   "kubeconfig_cert": r["kubeconfig"]})

    def make_client_cert(self, name, cn, orgs=(), ca="good", expired=False):
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", name):
            raise ValueError("bad client certificate name %r" % name)
        crt, key = self.certs.leaf("client-" + name, cn, orgs, usage="clientAuth", ca=ca, expired=expired)
        kc = os.path.join(self.state_dir, "kubeconfig-cert-" + name if name != "client" else "kubeconfig-cert")
        write_atomic(kc, kubeconfig_text(self.server_url, ca=os.path.join(self.state_dir, "ca.crt"),
                                         cert=crt, key=key), 0o600)
        return {"cert": crt, "key": key, "kubeconfig": kc}

    def info(self):
        return dict({"pid": os.getpid(), "host": self.host, "port": self.port, "control_port": self.control_port,
                     "server": self.server_url, "control_url": "http://127.0.0.1:%d" % self.control_port,
                     "state_dir": self.state_dir, "token": self.token, "rv": self.store.rv,
                     "server_version": self.server_version}, **self.files)

    # -- object helpers ------------------------------------------------------------------------------

    @staticmethod
    def kind_for(obj=None, resource=None, group=None):
        if resource:
            for k in KINDS:
                if k.resource == resource and (group is None or k.group == group):
                    return k
            raise ControlError(404, "unknown resource %r" % resource)
        av, kd = obj.get("apiVersion", "v1"), obj.get("kind")
        for k in KINDS:
            if k.kind == kd and k.api_version == av:
                return k
        for k in KINDS:
            if k.kind == kd:
                return k
        raise ControlError(400, "unknown kind %r" % kd)

    def seed(self, obj, manager="emulator", status_manager=None):
        """Create or replace an object directly (bypasses auth, validation of transitions, faults)."""
        kind = self.kind_for(obj)
        c = Coercer()
        ext = c.run(deep(obj), kind.schema)
        if c.type_errors:
            raise ControlError(400, "; ".join(c.type_errors))
        new = kind.from_ext(ext)
        core = KIND_BY_STORAGE[kind.storage]
        new["kind"], new["apiVersion"] = core.kind, core.api_version
        new = core.normalize(new)
        md = new.setdefault("metadata", {})
        if not md.get("name"):
            raise ControlError(400, "metadata.name is required")
        if kind.namespaced:
            md.setdefault("namespace", "default")
        else:
            md.pop("namespace", None)
        with self.store.lock:
            if kind.namespaced and self.store.get("namespaces", "", md["namespace"]) is None:
                self.seed({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": md["namespace"]},
                           "status": {"phase": "Active"}})
            old = self.store.get(kind.storage, md.get("namespace"), md["name"])
            md.setdefault("uid", old["metadata"]["uid"] if old else str(uuid.uuid4()))
            md.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"] if old else now_time())
            md.pop("resourceVersion", None)
            md.pop("managedFields", None)
            if kind.storage in ("nodes", "pods") and "status" in new:
                main = {k: v for k, v in new.items() if k != "status"}
                entries = track_update([], manager, "", {}, main, core.kind)
                entries = track_update(entries, status_manager or manager, "status", main, new, core.kind)
            else:
                entries = track_update([], manager, "", {}, new, core.kind)
            return self.store.commit(kind.storage, new, managed=entries)

    def set_node_condition(self, node, ctype, status="True", reason="", message="", manager=
                           "machine-controller-manager", remove=False, heartbeat=False):
        kind = KIND_BY_GVR[("", "v1", "nodes")]
        with self.store.lock:
            cur = self.store.get("nodes", "", node)
            if cur is None:
                raise err_not_found("nodes", "", node)
            obj = deep(cur)
            conds = obj.setdefault("status", {}).setdefault("conditions", [])
            old = next((c for c in conds if c.get("type") == ctype), None)
            if remove:
                conds[:] = [c for c in conds if c.get("type") != ctype]
            else:
                same = old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
                    status, reason, message)
                new = {"type": ctype, "status": status}
                if heartbeat:
                    new["lastHeartbeatTime"] = now_time()
                elif old is not None and old.get("lastHeartbeatTime"):
                    new["lastHeartbeatTime"] = old["lastHeartbeatTime"]
                new["lastTransitionTime"] = old.get("lastTransitionTime") if same and old.get(
                    "lastTransitionTime") else now_time()
                new["reason"], new["message"] = reason, message
                if old is None:
                    conds.append(new)
                else:
                    conds[conds.index(old)] = new
            ctx = WriteCtx(None, "", {"fieldManager": manager}, control=True)
            return self.api.update(kind, "", node, "status", obj, ctx)[1]

    # -- control API ---------------------------------------------------------------------------------

    def control(self, method, path, params, body):
        body = body if body is not None else {}
        key = (method, path)
        h = CONTROL_ROUTES.get(key)
        if h is None:
            raise ControlError(404, "no control route %s %s" % (method, path))
        return h(self, params, body)
