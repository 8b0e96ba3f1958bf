"""The HTTPS API server: the listener, connections, and the request handler.

Owns: ApiServer (its own accept loop so the listener can refuse or blackhole connections (``POST /listen``),
TLS per connection with the configuration of the moment, closing idle, busy or watching connections
GOAWAY-like), ConnState (one connection), and ApiHandler: request parsing (the request info of
apiserver/pkg/endpoints/request), authentication, fault rules, authorization, content negotiation, the
answers' standard headers (Audit-Id, Cache-Control, APF flow schema and priority level, Warning: 299),
gzip, request bodies (chunked, 3 MiB limit), the non-resource paths (/version, /healthz, discovery,
OpenAPI) and the request log. Watches are served by watch.py's WatchStream, faults by faults.py's
FaultInjection, both mixed into ApiHandler.

Request log entry (GET /requests): seq, time, end, method, path, query, params, verb, user, groups, status,
content_type, accept, user_agent, audit_id, watch, fault, body (parsed JSON when <= 64 KiB), warnings,
retry_after, conn, tls.
Implements docs/kube-api.md §1, §3.7, §7.1-§7.2 and §9 items 1-2, 7, 12 and 43-45.
"""

import gzip
import hashlib
import json
import select
import socket
import ssl
import struct
import threading
import time
import traceback
import urllib.parse
import uuid

from .api import WriteCtx
from .auth import ANONYMOUS, bootstrap_token_identity, cert_identity
from .authz import RI, authorize
from .discovery import discovery_groups, discovery_resources, make_table, openapi_doc, openapi_gv_paths
from .errors import (ApiError, err_internal, err_method_not_allowed, err_no_route, err_unauthorized,
                     err_unsupported_media)
from .faults import ClientGone, FaultInjection, REQUEST_FAULTS
from .kinds import KINDS, KIND_BY_GVR
from .patch import PATCH_TYPES
from .protobuf import decode_protobuf_body, pb_field
from .selectors import selectors_for
from .util import QuietHandler, deep, is_true, jbytes
from .watch import WatchStream


MAX_BODY = 3 * 1024 * 1024          # kube-apiserver's default request body limit is ~3 MiB


class ConnState:
    _ids = iter(range(1, 1 << 62))

    def __init__(self, sock, addr):
        self.id = next(ConnState._ids)
        self.sock, self.addr = sock, addr
        self.busy = False
        self.watcher = None
        self.close_after = False
        self.stop_watch = None      # how a request that becomes a watch after a close must end
        self.requests = 0
        self.opened = time.time()
        self.tls_mode = None


APF_FLOW_SCHEMAS = {"system-node-high": "8d7c5e0a-1a8e-4b46-9a3e-4a4ef7b8c001",
                    "system-nodes": "8d7c5e0a-1a8e-4b46-9a3e-4a4ef7b8c002",
                    "global-default": "8d7c5e0a-1a8e-4b46-9a3e-4a4ef7b8c003",
                    "exempt": "8d7c5e0a-1a8e-4b46-9a3e-4a4ef7b8c004"}
APF_LEVELS = {"system-node-high": "5b0e3c1d-7a6f-4f0e-8f5e-2b9d6c1e0001",
              "system-nodes": "5b0e3c1d-7a6f-4f0e-8f5e-2b9d6c1e0002",
              "global-default": "5b0e3c1d-7a6f-4f0e-8f5e-2b9d6c1e0003",
              "exempt": "5b0e3c1d-7a6f-4f0e-8f5e-2b9d6c1e0004"}


class ApiHandler(FaultInjection, WatchStream, QuietHandler):
    timeout = 300
    conn_state = None

    def send_response(self, code, message=None):
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    # -- plumbing -------------------------------------------------------------------------------

    def _serve(self):
        emu = self.server.emu
        st = self.conn_state
        st.busy = True
        st.requests += 1
        self.emu, self.cfg = emu, emu.cfg
        self.audit = str(uuid.uuid4())
        self.ident, self.ri, self.drip, self.wfault = None, None, None, None
        self.extra_headers = []
        self.head_sent, self.warnings = False, []
        split = urllib.parse.urlsplit(self.path)
        self.req_path = split.path or "/"
        q = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        self.params = {k: v[0] for k, v in q.items()}
        self.entry = emu.reqlog.new(
            time=time.time(), end=None, method=self.command, path=self.req_path, query=split.query,
            params=self.params, verb=None, user=None, groups=None, status=None,
            content_type=self.headers.get("Content-Type"), accept=self.headers.get("Accept"),
            user_agent=self.headers.get("User-Agent"), audit_id=self.audit, watch=False, fault=None, body=None,
            warnings=None, retry_after=None, conn=st.id, tls=st.tls_mode)
        try:
            body = self._read_body()
            if body and self.cfg["log_bodies"] and len(body) <= 65536:
                try:
                    self.entry["body"] = json.loads(body)
                except ValueError:
                    self.entry["body"] = body.decode("utf-8", "replace")
            self._handle(body)
        except ApiError as e:
            if not self.head_sent:
                self._send_error(e)
            else:
                self.close_connection = True
        except ClientGone:
            self.close_connection = True
        except (OSError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:  # noqa: BLE001 - the emulator must answer like a server, not crash
            emu.debug("internal error: %s" % traceback.format_exc())
            if not self.head_sent:
                self._send_error(err_internal(str(e)))
            else:
                self.close_connection = True
        finally:
            self.entry["end"] = time.time()
            st.busy = False
            if st.close_after:
                self.close_connection = True

    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline(16)
                if len(data) > MAX_BODY:
                    self.close_connection = True
                    raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is %d" % MAX_BODY)
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.close_connection = True
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is %d" % MAX_BODY)
        return self.rfile.read(n) if n else b""

    def _std_headers(self, ctype):
        h = [("Audit-Id", self.audit), ("Cache-Control", "no-cache, private"), ("Content-Type", ctype)]
        if self.ident is not None and self.cfg["apf_headers"]:
            fs = "exempt" if "system:masters" in self.ident.groups else (
                "system-node-high" if "system:nodes" in self.ident.groups and self.ri and self.ri.resource in (
                    "nodes", "leases") else ("system-nodes" if "system:nodes" in self.ident.groups
                                             else "global-default"))
            h += [("X-Kubernetes-Pf-Flowschema-Uid", APF_FLOW_SCHEMAS[fs]),
                  ("X-Kubernetes-Pf-Prioritylevel-Uid", APF_LEVELS[fs])]
        for w in self.warnings:
            h.append(("Warning", '299 - "%s"' % w.replace("\\", "\\\\").replace('"', '\\"')))
        return h

    def _head(self, code, headers):
        self.send_response(code)
        for k, v in headers + self.extra_headers:
            self.send_header(k, v)
        self.end_headers()
        self.head_sent = True
        self.entry["status"] = code
        if self.warnings:
            self.entry["warnings"] = list(self.warnings)

    def _raw(self, data):
        if self.drip:
            n, interval = self.drip
            for i in range(0, len(data), n):
                if i:
                    time.sleep(interval)
                self.wfile.write(data[i:i + n])
        else:
            self.wfile.write(data)

    def _send_json(self, code, obj, extra=()):
        data = jbytes(obj)
        headers = self._std_headers("application/json")
        if len(data) >= self.cfg["gzip_min_bytes"] and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            data = gzip.compress(data)
            headers += [("Content-Encoding", "gzip"), ("Vary", "Accept-Encoding")]
        self._head(code, headers + list(extra) + [("Content-Length", str(len(data)))])
        if self.command != "HEAD":
            self._raw(data)

    def _send_error(self, e):
        extra = list(e.headers)
        ra = (e.det or {}).get("retryAfterSeconds")
        if ra and not any(k.lower() == "retry-after" for k, _ in extra):
            extra.append(("Retry-After", str(ra)))
        for k, v in extra:
            if k.lower() == "retry-after":
                self.entry["retry_after"] = v
        if e.plain is not None:
            data = e.plain.encode()
            headers = self._std_headers("text/plain; charset=utf-8") + [("X-Content-Type-Options", "nosniff")]
            self._head(e.code, headers + extra + [("Content-Length", str(len(data)))])
            self._raw(data)
        else:
            self._send_json(e.code, e.status(), extra)

    def _abort(self, rst=False):
        """Close the connection without a terminating chunk (FIN, or RST with rst=True)."""
        self.close_connection = True
        sock = self.connection
        try:
            if rst:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                for f in (self.rfile, self.wfile):
                    try:
                        f.close()
                    except (OSError, ValueError):
                        pass
                socket.socket.close(sock)
            else:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except (OSError, ValueError):
            pass

    def _client_gone(self):
        sock = self.connection
        try:
            r, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not r:
            return False
        try:
            sock.settimeout(0.0)
            return sock.recv(4096) == b""
        except ssl.SSLWantReadError:
            return False
        except (ssl.SSLError, OSError):
            return True
        finally:
            try:
                sock.settimeout(self.timeout)
            except OSError:
                pass

    # -- request processing ----------------------------------------------------------------------

    def _authenticate(self):
        try:
            cert = self.connection.getpeercert()
        except (ValueError, OSError):
            cert = None
        ci = cert_identity(cert) if cert else None
        if ci:
            return ci
        auth = self.headers.get("Authorization")
        if auth:
            parts = auth.split(" ", 1)
            if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1].strip():
                ident = self.emu.tokens.lookup(parts[1].strip()) or bootstrap_token_identity(self.emu,
                                                                                            parts[1].strip())
                if ident:
                    return ident
            raise err_unauthorized()
        if ci is False:
            raise err_unauthorized()
        return ANONYMOUS

    def _request_info(self, path):
        """Returns (RI, route_error)."""
        parts = [p for p in path.split("/") if p]
        method = self.command
        nonres = RI(path, {"GET": "get", "POST": "post", "PUT": "put", "PATCH": "patch",
                           "DELETE": "delete"}.get(method, method.lower()))
        if not parts or parts[0] not in ("api", "apis"):
            return nonres, None
        if parts[0] == "api":
            if len(parts) < 3:
                return nonres, None
            group, version, rest = "", parts[1], parts[2:]
        else:
            if len(parts) < 4:
                return nonres, None
            group, version, rest = parts[1], parts[2], parts[3:]
        watch_prefix = False
        if rest and rest[0] == "watch":
            watch_prefix, rest = True, rest[1:]
        ns = ""
        if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return nonres, err_no_route()
        kind = KIND_BY_GVR.get((group, version, rest[0]))
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if kind is None or (ns and not kind.namespaced) or (sub and sub not in kind.subresources):
            return nonres, err_no_route()
        if kind.namespaced and not ns and (name or method in ("POST",)):
            return nonres, err_no_route()
        if method == "GET":
            verb = ("watch" if watch_prefix else "get") if name else (
                "watch" if watch_prefix or ("watch" in self.params and is_true(self.params["watch"])) else "list")
        elif method == "POST":
            verb = "create" if not name else None
        elif method == "PUT":
            verb = "update" if name else None
        elif method == "PATCH":
            verb = "patch" if name else None
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        else:
            verb = None
        ri = RI(path, verb or method.lower(), kind, ns, name, sub)
        if verb is None or verb == "deletecollection":
            return ri, err_method_not_allowed()
        if verb == "watch" and name:
            self.params["fieldSelector"] = "metadata.name=" + name
            ri.name = ""
        return ri, None

    def _handle(self, body):
        emu = self.emu
        self.ident = ident = self._authenticate()
        self.entry["user"], self.entry["groups"] = ident.user, ident.groups
        ri, route_err = self._request_info(self.req_path)
        self.ri = ri
        self.entry["verb"] = ri.verb
        rule = emu.faults.take(ri, ident)
        if rule is not None:
            self.entry["fault"] = rule.fault
            if rule.fault in REQUEST_FAULTS:
                self._request_fault(rule, ri)
            else:
                self.wfault = rule
        if ident is ANONYMOUS and self.cfg["anonymous_401"]:
            raise err_unauthorized()
        freqs = []
        if ri.kind and ri.verb in ("list", "watch") and not route_err:
            freqs = selectors_for(ri.kind, self.params)[0]
        authorize(emu, ident, ri, freqs)
        if route_err:
            raise route_err
        if not ri.kind:
            return self._nonresource()
        accept = self.headers.get("Accept") or ""
        if accept and not any(t.split(";")[0].strip() in ("application/json", "*/*", "application/*", "")
                              for t in accept.split(",")):
            raise ApiError(406, "NotAcceptable", "only the following media types are accepted: application/json")
        kind, ns, name, sub = ri.kind, ri.namespace, ri.name, ri.subresource
        ctx = WriteCtx(ident, self.headers.get("User-Agent") or "", self.params)
        api = emu.api
        if ri.verb == "get":
            return self._send_object(200, kind, api.get(kind, ns, name, self.params))
        if ri.verb == "list":
            objs, rv = api.list(kind, ns, self.params)
            return self._send_list(kind, objs, rv)
        if ri.verb == "watch":
            return self._watch(kind, ns)
        if ri.verb in ("create", "update"):
            ct = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
            if ct == "application/vnd.kubernetes.protobuf" and body:
                decoded = decode_protobuf_body(body)
                if decoded is not None:
                    body, ct = decoded, "application/json"
            if ct not in ("application/json", ""):
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - "
                               "accepted media types include: application/json, application/yaml, "
                               "application/vnd.kubernetes.protobuf, application/cbor")
            if ri.verb == "create":
                code, obj = api.create(kind, ns, body, ctx)
            else:
                code, obj = api.update(kind, ns, name, sub, body, ctx)
            self.warnings = ctx.warnings
            return self._send_object(code, kind, obj)
        if ri.verb == "patch":
            ct = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if ct not in PATCH_TYPES:
                raise err_unsupported_media()
            code, obj = api.patch(kind, ns, name, sub, PATCH_TYPES[ct], body, ctx)
            self.warnings = ctx.warnings
            return self._send_object(code, kind, obj)
        if ri.verb == "delete":
            res = api.delete(kind, ns, name, body, ctx)
            if res.get("kind") == "Status":
                return self._send_json(200, res)
            return self._send_object(200, kind, res)
        raise err_method_not_allowed()

    def _nonresource(self):
        path = self.req_path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            data = b"ok"
            self._head(200, self._std_headers("text/plain; charset=utf-8") + [("X-Content-Type-Options", "nosniff"),
                                                                             ("Content-Length", "2")])
            return self._raw(data)
        if path == "/version":
            v = self.emu.server_version
            major, minor = v.lstrip("v").split(".")[:2]
            return self._send_json(200, {"major": major, "minor": minor, "gitVersion": v,
                                         "gitCommit": "0" * 40, "gitTreeState": "clean",
                                         "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23.6",
                                         "compiler": "gc", "platform": "linux/amd64"})
        if path == "/api":
            return self._send_json(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "%s:%d" % (self.emu.host, self.emu.port)}]})
        if path == "/api/v1":
            return self._send_json(200, discovery_resources("", "v1"))
        if path == "/apis":
            return self._send_json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": discovery_groups()})
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == "apis":
            g = next((g for g in discovery_groups() if g["name"] == parts[2]), None)
            if g:
                return self._send_json(200, dict({"kind": "APIGroup", "apiVersion": "v1"}, **g))
        if len(parts) == 4 and parts[1] == "apis" and any(k.group == parts[2] and k.version == parts[3]
                                                           for k in KINDS):
            return self._send_json(200, discovery_resources(parts[2], parts[3]))
        if path == "/openapi/v2":
            # Older kubectl (e.g. Debian's 1.20) insists on downloading it before apply; an empty document makes
            # it skip client-side validation for every kind, like for CRDs without a schema.
            if "protobuf" in (self.headers.get("Accept") or ""):
                info = pb_field(1, b"Kubernetes") + pb_field(2, self.emu.server_version.encode())
                data = pb_field(1, b"2.0") + pb_field(2, info)
                self._head(200, self._std_headers("application/octet-stream") + [("Content-Length", str(len(data)))])
                return self._raw(data)
            return self._send_json(200, {"swagger": "2.0", "info": {"title": "Kubernetes",
                                                                   "version": self.emu.server_version},
                                         "paths": {}, "definitions": {}})
        if path == "/openapi/v3":
            return self._send_json(200, {"paths": {gvp: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (
                gvp, hashlib.sha256(gvp.encode()).hexdigest()[:32].upper())} for gvp in openapi_gv_paths()}})
        if path.startswith("/openapi/v3/") and path[len("/openapi/v3/"):] in openapi_gv_paths():
            return self._send_json(200, openapi_doc(path[len("/openapi/v3/"):]))
        raise err_no_route()

    def _wants_table(self):
        return "as=Table" in (self.headers.get("Accept") or "")

    def _send_object(self, code, kind, obj):
        ext = kind.to_ext(deep(obj))
        if self._wants_table():
            ext = make_table(kind, [ext], obj["metadata"].get("resourceVersion", ""),
                             self.params.get("includeObject", "Metadata"))
        self._send_json(code, ext)

    def _send_list(self, kind, objs, rv):
        exts = [kind.to_ext(deep(o)) for o in objs]
        if self._wants_table():
            return self._send_json(200, make_table(kind, exts, str(rv), self.params.get("includeObject", "Metadata")))
        for e in exts:
            e.pop("kind", None)
            e.pop("apiVersion", None)
        self._send_json(200, {"kind": kind.list_kind, "apiVersion": kind.api_version,
                              "metadata": {"resourceVersion": str(rv)}, "items": exts})


class ApiServer:
    """Own accept loop so the listener can be closed/reopened (refuse) or stop answering (blackhole)."""

    def __init__(self, emu, host, port):
        self.emu, self.host, self.port = emu, host, port
        self.lock = threading.RLock()
        self.lsock = None
        self.mode = "normal"
        self.parked = []
        self.conns = {}
        self.close_gen = 0          # counts closes of idle connections: a handshake one overlapped is closed too
        self.stopping = False
        self.timer = None
        self._open()
        self.port = self.lsock.getsockname()[1]
        self.thread = threading.Thread(target=self._loop, name="api-accept", daemon=True)

    def _open(self):
        fam = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = socket.socket(fam, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 5
        while True:
            try:
                s.bind((self.host, self.port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        # A fleet of agents connects at once (a thousand in bench/run's fleet): a short accept queue
        # overflows, and the kernel drops the excess handshakes, which then wait for SYN retransmits
        # (1, 3, 7, 15 s ...). The kernel caps this at net.core.somaxconn.
        s.listen(4096)
        self.lsock = s

    def start(self):
        self.thread.start()

    def _loop(self):
        while not self.stopping:
            s = self.lsock
            if s is None:
                time.sleep(0.05)
                continue
            try:
                r, _, _ = select.select([s], [], [], 0.2)
                if not r:
                    continue
                c, addr = s.accept()
            except (OSError, ValueError):
                continue
            if self.mode == "blackhole":
                with self.lock:
                    self.parked.append(c)
                continue
            threading.Thread(target=self._conn, args=(c, addr), name="api-conn", daemon=True).start()

    def _conn(self, raw, addr):
        emu = self.emu
        raw.settimeout(10)
        # Go's net package enables TCP_NODELAY on every TCP connection, kube-apiserver included. Without it,
        # the headers and the body of a response (two writes here) meet the client's delayed ACK and every
        # answer is ~40 ms late.
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        # headers and body are separate writes; without NODELAY, Nagle + delayed ACK add ~40 ms per response
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.lock:
            gen = self.close_gen
        tls_mode, ctx = emu.tls.current()
        try:
            tls = ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as e:
            emu.tlslog.new(time=time.time(), peer="%s:%s" % addr[:2], ok=False, error=str(e), mode=list(tls_mode))
            try:
                raw.close()
            except OSError:
                pass
            return
        try:
            cert = tls.getpeercert() or {}
        except (ValueError, OSError):
            cert = {}
        subj = dict(x for rdn in cert.get("subject", ()) for x in rdn)
        emu.tlslog.new(time=time.time(), peer="%s:%s" % addr[:2], ok=True, error=None, mode=list(tls_mode),
                       version=tls.version(), alpn=tls.selected_alpn_protocol(), client_cn=subj.get("commonName"))
        tls.settimeout(ApiHandler.timeout)
        st = ConnState(tls, addr)
        st.tls_mode = list(tls_mode)
        with self.lock:
            self.conns[st.id] = st
            # A close that came during the handshake did not see this connection; it was meant for it.
            missed = self.close_gen != gen
        try:
            if missed:
                return
            handler = ApiHandler.__new__(ApiHandler)
            handler.conn_state = st
            handler.__init__(tls, addr, self)
        except (OSError, ssl.SSLError, ValueError):
            pass
        finally:
            with self.lock:
                self.conns.pop(st.id, None)
            try:
                tls.close()
            except OSError:
                pass

    def set_mode(self, mode, seconds=None, close_existing=True):
        if mode not in ("normal", "refuse", "blackhole"):
            raise ValueError("mode must be normal, refuse or blackhole")
        with self.lock:
            if self.timer:
                self.timer.cancel()
                self.timer = None
            if mode == "refuse" and self.lsock is not None:
                try:
                    # shutdown() stops a listening socket at once (Linux), even while the accept
                    # thread still polls it; close() alone would leave it listening until then.
                    self.lsock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.lsock.close()
                self.lsock = None
            elif mode != "refuse" and self.lsock is None:
                self._open()
            if mode != "blackhole":
                for c in self.parked:
                    try:
                        c.close()
                    except OSError:
                        pass
                self.parked = []
            self.mode = mode
            if seconds:
                self.timer = threading.Timer(float(seconds), self.set_mode, args=("normal", None, False))
                self.timer.daemon = True
                self.timer.start()
        if close_existing and mode != "normal":
            self.close_connections(watches="abrupt", idle=True, busy=True)

    def close_connections(self, watches="clean", idle=True, busy=False):
        n = 0
        with self.lock:
            if idle:
                self.close_gen += 1
            conns = list(self.conns.values())
        for st in conns:
            w = st.watcher
            if w is not None:
                if watches != "keep":
                    st.close_after = True
                    w.stop(watches)
                    n += 1
            elif st.busy:
                st.close_after = True
                # A request being read now may turn into a watch: it ends as the open ones do. The
                # watch checks stop_watch once it is registered; whichever side comes second stops it.
                if watches != "keep":
                    st.stop_watch = watches
                    w = st.watcher
                    if w is not None:
                        w.stop(watches)
                if busy:
                    n += 1
            elif idle:
                try:
                    socket.socket.shutdown(st.sock, socket.SHUT_RDWR)
                    n += 1
                except OSError:
                    pass
        return n

    def stop(self):
        self.stopping = True
        with self.lock:
            if self.timer:
                self.timer.cancel()
            if self.lsock is not None:
                self.lsock.close()
                self.lsock = None
        self.close_connections(watches="abrupt", idle=True, busy=True)
