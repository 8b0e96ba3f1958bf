"""The control API: how tests set up state, inject faults and read what the emulator saw.

Owns: ControlServer and ControlHandler (plain HTTP/1.1 on 127.0.0.1, JSON in and out, no auth, never
faulted) and CONTROL_ROUTES with one handler per route. Adding a route: a ``_c_<name>`` function and its line
in CONTROL_ROUTES and below.
Serves docs/kube-api.md §9 (its closing paragraph) and §10.

Control API (plain HTTP/1.1 on 127.0.0.1:<control_port>, JSON in and out; no auth; never faulted)
---------------------------------------------------------------------------------------------------
GET  /healthz, /info                    -> {"ok":true} / the ready-file JSON (+ current rv)
GET  /config; POST /config {key: value} -> runtime config (keys: config.py)
GET  /object?resource=R&name=N[&namespace=NS][&group=G]   -> stored object (events.k8s.io view with group)
GET  /objects?resource=R[&namespace=NS]                   -> list
PUT|POST /object[?manager=M&status_manager=M2]  body: object or list -> create/replace (ADDED/MODIFIED;
                                           missing namespaces are created; uid/creationTimestamp kept on replace)
DELETE /object?resource=R&name=N[&namespace=NS]           -> DELETED event
POST /node {name, labels, annotations, kubelet_version, os_image, address, unschedulable, taints, uid,
            conditions:[...], manager="kubelet", status_manager="kubelet"}  -> kubelet-registered-looking Node
POST /machine {name, node_template_labels}        -> the seed's Machine <name> (not an API object) for the
                                                     node-agent authorizer: its OSC Secret, Node or not
POST /secret {name, namespace="kube-system", data:{k: raw string}, labels, annotations, type, manager}
POST /patch {resource="nodes", name, namespace, subresource, type=merge|strategic|json|apply, patch,
             manager="emulator-control", force, field_validation, group} -> {"code","object","warnings"}
POST /node-condition {node, type, status="True", reason, message, manager="machine-controller-manager",
             remove=false, heartbeat=false} -> Node; MCM style: read, replace the condition by type (keeps
             lastTransitionTime if status/reason/message unchanged), PUT .../status (one MODIFIED event)
POST /node-labels {node, labels:{k: v|null}, annotations:{...}, unschedulable, taints,
             manager="machine-controller-manager"} -> merge patch
POST /batch [{"op": "patch"|"node-condition"|"node-labels"|"node"|"secret"|"object"|"delete", ...}] -> ops run
             under one store lock, so a watcher receives their events in one chunk
POST /faults {fault, verbs, path, resource, subresource, name, namespace, user, count=1, after=0, duration,
             params} (or a list) -> {"id","ids"};  GET /faults;  DELETE /faults[?id=N]
GET  /requests[?since=SEQ&path=REGEX&verb=V&user=U&method=M];  DELETE /requests
GET  /watches[?active=1&path=REGEX&since=SEQ];  GET /history[?since_rv=N&resource=R&objects=1]
GET  /connections[?since=SEQ]           -> {"active":[...], "tls":[handshake log], "mode"}
             (a handshake: time, peer, ok, error, mode=[cert, client_auth] it was offered)
GET  /tokens; POST /tokens {"add": {TOKEN: {user, groups, expires_in}}, "revoke": [TOKEN],
             "write_token_file": TOKEN}
POST /tls {cert: good|wrong-ca|wrong-san|expired, client_auth: none|optional|required, close_existing=true}
POST /client-cert {name, cn, orgs:[...], ca: good|wrong, expired=false} -> {"cert","key","kubeconfig"}
POST /listen {mode: normal|refuse|blackhole, seconds (auto-restore to normal), close_existing=true}
POST /close-connections {watches: clean|abrupt|keep, idle=true, busy=false}   (GOAWAY-like)
POST /rv {jump: K | reset: V, close_watches=true}  (jump: RV += K and history dropped -> old RVs get 410;
             reset: objects restamped to RVs <= V -> newer client RVs get 504 too-large)
POST /compact {rv}  (drop watch history up to rv, default all -> watches from older RVs get 410)
POST /expire-events {names:[...]}  (expire now, as the TTL would)
POST /csr {name, action: approve|deny|fail|sign, reason, message} -> the CSR (approve/deny through /approval,
             fail and sign through /status, as the real controllers do)

History (GET /history): rv, floor (oldest RV a watch may resume from), events [{rv, type, resource, namespace,
name, time, object?}].
Request and watch log entries: see apiserver.py and watch.py.
"""

import base64
import copy
import http.server
import json
import re
import socketserver
import traceback
import urllib.parse

from .api import WriteCtx
from .controllers import csr_action
from .errors import ApiError, ControlError
from .kinds import node_template
from .util import QuietHandler, deep, write_atomic


class ControlHandler(QuietHandler):
    def _serve(self):
        emu = self.server.emu
        split = urllib.parse.urlsplit(self.path)
        params = {k: v[0] for k, v in urllib.parse.parse_qs(split.query, keep_blank_values=True).items()}
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
            code, result = emu.control(self.command, split.path.rstrip("/") or "/", params, body)
        except ControlError as e:
            code, result = e.code, {"error": str(e)}
        except ApiError as e:
            code, result = e.code, {"error": e.message, "status": e.status()}
        except (KeyError, ValueError, TypeError, re.error) as e:
            code, result = 400, {"error": "%s: %s" % (type(e).__name__, e)}
        except Exception as e:  # noqa: BLE001
            emu.debug("control error: %s" % traceback.format_exc())
            code, result = 500, {"error": "%s: %s" % (type(e).__name__, e)}
        data = (json.dumps(result) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ControlServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, emu, host, port):
        self.emu = emu
        super().__init__((host, port), ControlHandler)


def _c_object(emu, params, body):
    res = params.get("resource")
    kind = emu.kind_for(resource=res, group=params.get("group"))
    obj = emu.store.get(kind.storage, params.get("namespace", ""), params["name"])
    if obj is None:
        raise ControlError(404, "%s %s not found" % (res, params["name"]))
    return 200, kind.to_ext(deep(obj))


def _c_objects(emu, params, body):
    kind = emu.kind_for(resource=params.get("resource"), group=params.get("group"))
    return 200, [kind.to_ext(deep(o)) for o in emu.store.list(kind.storage, params.get("namespace") or None)]


def _c_put_object(emu, params, body):
    objs = body if isinstance(body, list) else [body]
    out = [emu.seed(o, params.get("manager", "emulator"), params.get("status_manager")) for o in objs]
    return 200, (out if isinstance(body, list) else out[0])


def _c_delete_object(emu, params, body):
    kind = emu.kind_for(resource=params.get("resource"), group=params.get("group"))
    last = emu.store.delete(kind.storage, params.get("namespace", ""), params["name"])
    if last is None:
        raise ControlError(404, "not found")
    return 200, last


def _c_node(emu, params, body):
    obj = node_template(body["name"], body.get("labels"), body.get("annotations"),
                        body.get("kubelet_version", "v1.31.4"), body.get("os_image", "Garden Linux 1592.6"),
                        body.get("address"))
    if body.get("unschedulable"):
        obj["spec"]["unschedulable"] = True
    if body.get("taints"):
        obj["spec"]["taints"] = body["taints"]
    if body.get("uid"):
        obj["metadata"]["uid"] = body["uid"]
    for c in body.get("conditions") or []:
        obj["status"]["conditions"] = [x for x in obj["status"]["conditions"] if x["type"] != c["type"]] + [c]
    return 200, emu.seed(obj, body.get("manager", "kubelet"), body.get("status_manager", "kubelet"))


def _c_machine(emu, params, body):
    emu.machines[body["name"]] = dict(body.get("node_template_labels") or {})
    return 200, {"name": body["name"], "node_template_labels": emu.machines[body["name"]]}


def _c_secret(emu, params, body):
    data = {k: base64.b64encode(v.encode() if isinstance(v, str) else bytes(v)).decode()
            for k, v in (body.get("data") or {}).items()}
    obj = {"kind": "Secret", "apiVersion": "v1",
           "metadata": {"name": body["name"], "namespace": body.get("namespace", "kube-system"),
                        "labels": body.get("labels") or {}, "annotations": body.get("annotations") or {}},
           "data": data, "type": body.get("type", "Opaque")}
    return 200, emu.seed(obj, body.get("manager", "gardenlet"))


def _c_patch(emu, params, body):
    kind = emu.kind_for(resource=body.get("resource", "nodes"), group=body.get("group"))
    p = {"fieldManager": body.get("manager", "emulator-control")}
    if body.get("force"):
        p["force"] = "true"
    if body.get("field_validation"):
        p["fieldValidation"] = body["field_validation"]
    ptype = body.get("type", "merge")
    if ptype not in ("merge", "strategic", "json", "apply"):
        raise ControlError(400, "type must be merge, strategic, json or apply")
    ctx = WriteCtx(None, "", p, control=True)
    code, obj = emu.api.patch(kind, body.get("namespace", ""), body["name"], body.get("subresource", ""), ptype,
                              body["patch"], ctx)
    return 200, {"code": code, "object": kind.to_ext(deep(obj)), "warnings": ctx.warnings}


def _c_node_condition(emu, params, body):
    return 200, emu.set_node_condition(body["node"], body["type"], body.get("status", "True"),
                                       body.get("reason", ""), body.get("message", ""),
                                       body.get("manager", "machine-controller-manager"), bool(body.get("remove")),
                                       bool(body.get("heartbeat")))


def _c_node_labels(emu, params, body):
    md = {}
    if "labels" in body:
        md["labels"] = body["labels"]
    if "annotations" in body:
        md["annotations"] = body["annotations"]
    patch = {"metadata": md}
    if "unschedulable" in body:
        patch["spec"] = {"unschedulable": body["unschedulable"]}
    if "taints" in body:
        patch.setdefault("spec", {})["taints"] = body["taints"]
    return _c_patch(emu, params, {"resource": "nodes", "name": body["node"], "type": "merge", "patch": patch,
                                  "manager": body.get("manager", "machine-controller-manager")})


def _c_batch(emu, params, body):
    results = []
    with emu.store.lock:
        for op in body:
            o = dict(op)
            which = o.pop("op")
            if which == "object":
                results.append(_c_put_object(emu, {"manager": o.pop("manager", "emulator")}, o["object"])[1])
            elif which in ("patch", "node-condition", "node-labels", "node", "secret"):
                results.append({"patch": _c_patch, "node-condition": _c_node_condition,
                                "node-labels": _c_node_labels, "node": _c_node, "secret": _c_secret}[which](
                    emu, {}, o)[1])
            elif which == "delete":
                results.append(_c_delete_object(emu, o, {})[1])
            else:
                raise ControlError(400, "unknown batch op %r" % which)
    return 200, results


def _c_faults_add(emu, params, body):
    specs = body if isinstance(body, list) else [body]
    ids = [emu.faults.add(s).id for s in specs]
    return 200, {"ids": ids, "id": ids[0] if ids else None}


def _c_faults_delete(emu, params, body):
    emu.faults.clear(int(params["id"]) if params.get("id") else None)
    return 200, {"ok": True}


def _c_requests(emu, params, body):
    out = emu.reqlog.since(int(params.get("since", 0)))
    if params.get("path"):
        rx = re.compile(params["path"])
        out = [e for e in out if rx.search(e["path"])]
    for k in ("verb", "user", "method"):
        if params.get(k):
            out = [e for e in out if e.get(k) == params[k]]
    return 200, out


def _c_watches(emu, params, body):
    out = emu.watchlog.since(int(params.get("since", 0)))
    if params.get("active"):
        out = [w for w in out if w["end"] is None]
    if params.get("path"):
        rx = re.compile(params["path"])
        out = [w for w in out if rx.search(w["path"])]
    return 200, out


def _c_history(emu, params, body):
    since = int(params.get("since_rv", 0))
    with emu.store.lock:
        evs = [e for e in emu.store.history if e.rv > since and (not params.get("resource") or
                                                                  e.storage == params["resource"])]
        out = [{"rv": e.rv, "type": e.type, "resource": e.storage, "namespace": e.key[1], "name": e.key[2],
                "time": e.time, "object": e.obj if params.get("objects") else None} for e in evs]
        return 200, {"rv": emu.store.rv, "floor": emu.store.floor, "events": copy.deepcopy(out)}


def _c_tokens(emu, params, body):
    for tok, spec in (body.get("add") or {}).items():
        emu.tokens.add(tok, spec["user"], spec.get("groups", []), spec.get("expires_in"))
    revoked = [t for t in body.get("revoke") or [] if emu.tokens.revoke(t)]
    if body.get("write_token_file"):
        write_atomic(emu.files["token_file"], body["write_token_file"] + "\n", 0o600)
    return 200, {"revoked": revoked, "tokens": emu.tokens.dump()}


def _c_tls(emu, params, body):
    emu.tls.set(body.get("cert"), body.get("client_auth"))
    n = 0
    if body.get("close_existing", True):
        n = emu.api_server.close_connections(watches="abrupt", idle=True, busy=False)
    return 200, {"cert": emu.tls.mode, "client_auth": emu.tls.client_mode, "closed": n}


def _c_client_cert(emu, params, body):
    return 200, emu.make_client_cert(body["name"], body["cn"], body.get("orgs", []), body.get("ca", "good"),
                                     bool(body.get("expired")))


def _c_csr(emu, params, body):
    return 200, csr_action(emu, body["name"], body["action"], body.get("reason", ""), body.get("message", ""))


def _c_listen(emu, params, body):
    emu.api_server.set_mode(body.get("mode", "normal"), body.get("seconds"), body.get("close_existing", True))
    return 200, {"mode": emu.api_server.mode}


def _c_close(emu, params, body):
    n = emu.api_server.close_connections(body.get("watches", "clean"), body.get("idle", True), body.get("busy", False))
    return 200, {"closed": n}


def _c_rv(emu, params, body):
    if "jump" in body:
        emu.store.jump(int(body["jump"]))
    elif "reset" in body:
        emu.store.reset(int(body["reset"]))
    else:
        raise ControlError(400, "need jump or reset")
    n = 0
    if body.get("close_watches", True):
        n = emu.api_server.close_connections(watches="clean", idle=False)
    return 200, {"rv": emu.store.rv, "floor": emu.store.floor, "closed_watches": n}


def _c_compact(emu, params, body):
    emu.store.compact(body.get("rv"))
    return 200, {"rv": emu.store.rv, "floor": emu.store.floor}


def _c_config(emu, params, body):
    if body:
        emu.cfg.update_from(body)
        emu.store.trim()
    return 200, dict(emu.cfg)


def _c_expire(emu, params, body):
    return 200, {"expired": emu.store.expire_due(force=True, names=body.get("names"))}


def _c_connections(emu, params, body):
    with emu.api_server.lock:
        active = [{"id": s.id, "peer": "%s:%s" % s.addr[:2], "busy": s.busy, "watch": s.watcher is not None,
                   "requests": s.requests, "opened": s.opened} for s in emu.api_server.conns.values()]
    return 200, {"active": active, "tls": emu.tlslog.since(int(params.get("since", 0))),
                 "mode": emu.api_server.mode}


CONTROL_ROUTES = {
    ("GET", "/healthz"): lambda emu, p, b: (200, {"ok": True}),
    ("GET", "/info"): lambda emu, p, b: (200, emu.info()),
    ("GET", "/config"): _c_config, ("POST", "/config"): _c_config,
    ("GET", "/object"): _c_object, ("PUT", "/object"): _c_put_object, ("POST", "/object"): _c_put_object,
    ("DELETE", "/object"): _c_delete_object, ("GET", "/objects"): _c_objects,
    ("POST", "/node"): _c_node, ("POST", "/machine"): _c_machine, ("POST", "/secret"): _c_secret,
    ("POST", "/patch"): _c_patch,
    ("POST", "/node-condition"): _c_node_condition, ("POST", "/node-labels"): _c_node_labels,
    ("POST", "/batch"): _c_batch,
    ("GET", "/faults"): lambda emu, p, b: (200, emu.faults.dump()), ("POST", "/faults"): _c_faults_add,
    ("DELETE", "/faults"): _c_faults_delete,
    ("GET", "/requests"): _c_requests, ("DELETE", "/requests"): lambda emu, p, b: (200, emu.reqlog.clear() or {}),
    ("GET", "/watches"): _c_watches, ("GET", "/history"): _c_history, ("GET", "/connections"): _c_connections,
    ("GET", "/tokens"): lambda emu, p, b: (200, emu.tokens.dump()), ("POST", "/tokens"): _c_tokens,
    ("POST", "/tls"): _c_tls, ("POST", "/client-cert"): _c_client_cert, ("POST", "/listen"): _c_listen,
    ("POST", "/close-connections"): _c_close, ("POST", "/rv"): _c_rv, ("POST", "/compact"): _c_compact,
    ("POST", "/expire-events"): _c_expire, ("POST", "/csr"): _c_csr,
}
