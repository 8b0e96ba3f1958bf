#!/usr/bin/env python3
"""Kubernetes API-server emulator for the inplace-agent integration tests.

Runs as a program (``python3 kube_emulator.py --state-dir DIR --port 0 ...``; ready when the ready file
appears, which holds the same JSON that is printed on stdout) or is imported (``Emulator(...).start()``).
Python 3 stdlib only; certificates are made with the ``openssl`` CLI. Behaviour follows
shared/reference/kube-api.md (section numbers below refer to it).

Transport limitation: the stdlib cannot speak HTTP/2, so the API port serves **HTTP/1.1 only** (ALPN selects
"http/1.1"), with keep-alive and ``Transfer-Encoding: chunked`` watch streams. HTTP/2-only behaviour (GOAWAY
frames, multiplexing, PING) is approximated by connection closes; see the ``close-connections`` route.

Command line
------------
--state-dir DIR (required)   --port N (0 = free port)   --control-port N   --bind 127.0.0.1
--server-host H        host written into the kubeconfigs (default --bind); added to the server cert SANs
--ready-file PATH      default DIR/ready
--token TOKEN[=USER[,GROUP...]]   repeatable; the first is the kubeconfig token. Default: one random token for
                       user "emulator-admin" in group system:masters. A bare TOKEN is an admin token.
--client-cert CN[,ORG...]  repeatable; the first writes client.crt/key + DIR/kubeconfig-cert
--server-cert good|wrong-ca|wrong-san|expired      --client-auth none|optional|required (default optional)
--san DNS:x|IP:y       extra server SANs       --node NAME   seed a kubelet-like Node (repeatable)
--seed FILE            JSON object or list to seed          --initial-rv N (default 100)
--server-version v1.32.4      --config KEY=VALUE (runtime config, below)      --debug-log FILE

State directory
---------------
ready (JSON: pid, port, control_port, server, control_url, token, ca, token_file, kubeconfig, ...), ca.crt,
token (the first token), kubeconfig (token), kubeconfig-tokenfile (tokenFile: DIR/token),
kubeconfig-cadata (certificate-authority-data), kubeconfig-cert (client cert, with --client-cert),
pki/ (CAs, server certs of every mode, minted client certs: pki/client-<name>.crt/.key).

Authentication and authorization
--------------------------------
* Client certificate signed by the emulator CA (CN -> user, O -> groups) wins; a cert from the emulator's
  "wrong" CA or an expired one gives 401 (like kube-apiserver, which checks certs in the authenticator). A cert
  from a completely foreign CA fails the TLS handshake.
* ``Authorization: Bearer`` with a known, unexpired token; anything else in Authorization -> 401
  ``{"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}``.
* Bootstrap tokens ``Bearer <id>.<secret>`` (kube-api.md §2): Secret kube-system/bootstrap-token-<id> of type
  bootstrap.kubernetes.io/token with matching token-secret, usage-bootstrap-authentication=true and no past
  expiration -> user system:bootstrap:<id>, groups system:bootstrappers (+ auth-extra-groups). Authorized like
  RBAC's system:node-bootstrapper: certificatesigningrequests create/get/list/watch, nothing else.
* No credentials -> system:anonymous: 403 for API paths (only /version, /healthz, /livez, /readyz allowed);
  401 instead with config anonymous_401=true.
* Group system:masters: everything. User system:node:<n> + group system:nodes: Node authorizer (§6.1; get only
  own node, list/watch need fieldSelector metadata.name=<n>; secrets only when a Pod with spec.nodeName=<n>
  references them; leases only kube-node-lease/<n>; events create/update/patch; pods list/watch need
  spec.nodeName=<n>) and NodeRestriction (§6.2: other node, taints, forbidden label keys -> 403).
  Group gardener.cloud:node-agents: the gardener node-agent authorizer table (§6.3; machine name = node name or
  the node labelled node.gardener.cloud/machine-name=<machine>); CSRs: create, get own (spec.username) only.
  Any other authenticated user: allowed.

Resources (one global resourceVersion counter, history window for watches)
-------------------------------------------------------------------------
nodes (+/status), namespaces (default, kube-system, kube-public, kube-node-lease exist), secrets, pods (+/status),
core/v1 events, events.k8s.io/v1 events (same storage), coordination.k8s.io/v1 leases,
certificates.k8s.io/v1 certificatesigningrequests (+/approval, /status; spec.username/groups set from the
requester; spec immutable; /approval changes only Approved/Denied, /status the rest and the certificate once;
validation of request/signerName/usages/expirationSeconds/conditions). Verbs get, list, watch
(also legacy /watch/ paths), create, update (PUT), patch, delete. Discovery (/api, /apis, ...), /version and a
minimal /openapi/v3 (so kubectl apply/patch leave validation to the server). Accept "as=Table" gets server-side
tables (kubectl). Items of lists omit kind/apiVersion; output is compact JSON + "\\n" with Go's HTML escaping.
LIST/GET/WATCH resourceVersion semantics, field/label selectors, 410/504, bookmarks, timeoutSeconds,
resourceVersionMatch/sendInitialEvents validation, PATCH (merge, strategic incl. $patch/$setElementOrder/
$retainKeys/$deleteFromPrimitiveList, JSON patch, apply with a simple managedFields model), Warning: 299 for
unknown fields, fieldValidation=Strict, label/annotation validation, event validation and TTL, MicroTime
parsing (exactly 6 fractional digits), no-op writes (same RV, no event) follow §3-§5/§8.
Apply bodies must be JSON (no YAML parser in the stdlib) -> otherwise 400.

Control API (plain HTTP/1.1 on 127.0.0.1:<control_port>, JSON in and out; no auth; never faulted)
---------------------------------------------------------------------------------------------------
GET  /healthz, /info                    -> {"ok":true} / the ready-file JSON (+ current rv)
GET  /config; POST /config {key: value} -> runtime config (keys below)
GET  /object?resource=R&name=N[&namespace=NS][&group=G]   -> stored object (events.k8s.io view with group)
GET  /objects?resource=R[&namespace=NS]                   -> list
PUT|POST /object[?manager=M&status_manager=M2]  body: object or list -> create/replace (ADDED/MODIFIED;
                                           missing namespaces are created; uid/creationTimestamp kept on replace)
DELETE /object?resource=R&name=N[&namespace=NS]           -> DELETED event
POST /node {name, labels, annotations, kubelet_version, os_image, address, unschedulable, taints, uid,
            conditions:[...], manager="kubelet", status_manager="kubelet"}  -> kubelet-registered-looking Node
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

Controllers kube-apiserver does not run but a cluster has (in the janitor thread, every 0.2 s): with
csr_sign=true approved kubernetes.io/kube-apiserver-client CSRs are signed by the emulator CA (so the
certificate authenticates here), lifetime min(spec.expirationSeconds, csr_signing_duration), notBefore backdated
by csr_backdate; bad usages -> Failed/SignerValidationFailure. With csr_auto_approve=true node-agent CSRs
(CN gardener.cloud:node-agent:machine:*) are approved or denied like gardener-resource-manager's csrapprover
does: a bootstrap token only while the machine has no Node yet, a renewal only by the same agent.

Fault rules (POST /faults). Matching: verbs are Kubernetes verbs (get, list, watch, create, update, patch,
delete; non-resource requests use get/post/...); path is a regex searched in the URL path; resource,
subresource, name, namespace, user are exact. A rule fires on matching requests after skipping `after` of
them, `count` times (-1 = forever), for `duration` seconds if set. The request log records the fault name.
Request faults (any verb):
  too-many-requests {retry_after=7 (None: no header), json=false, message}  APF-style text/plain 429
                    (json=true: Status with details.retryAfterSeconds)
  service-unavailable {message, retry_after}    503 ServiceUnavailable Status
  internal-error {message, retry_after}         500 InternalError Status
  forbidden {reason, message}                   403 in the authorizer's format
  unauthorized                                  401
  conflict                                      409 Conflict (optimistic-lock message)
  expired {message}                             410 Expired Status as a plain HTTP answer (list, watch start)
  not-found                                     404
  timeout {delay=0, message}                    504 Timeout after delay
  shutdown {retry_after=5}                      429 text/plain + Retry-After + Connection: close
  status {code, reason, message, plain, body, headers:[[k,v]], retry_after}   anything else
  close {delay=0, rst=false}                    close the connection without answering (FIN or RST)
  slow-headers {delay=5}                        answer late; >= config request_timeout -> 504 Timeout
  slow-drip {bytes=16, interval=0.2}            body written in small pieces
  every request fault also accepts params retry_after (header) and close (Connection: close)
Watch faults (only watch requests):
  watch-drop {after_events=1, rst=false}        after N object events close without the terminating chunk
  watch-truncate {after_events=0, rst=false}    after N events send half an event line, then drop
  watch-garbage {after_events=0, line="this is not json", unknown_type=false, type="UNKNOWN",
                 then=keep|close|drop}          a non-JSON line (or an event of unknown type)
  watch-expired {message}                       200, ERROR 410 Expired event, clean end
  watch-error {code=500, reason, message}       200, ERROR event with that Status, clean end
  watch-silent {duration, then=clean|drop}      headers, then nothing at all (no events, no bookmarks)
  watch-short                                   200 and an immediate clean end (zero events)
  watch-end {after_events=0}                    clean end after N events

Runtime config (--config KEY=VALUE or POST /config): bookmark_interval=60, bookmark_before_deadline=2,
history_max_events=10000, history_max_age=0 (unlimited), event_ttl=3600, watch_timeout_min=1800,
too_large_wait=3, request_timeout=60, anonymous_401=false, csr_auto_approve=false, csr_sign=true,
csr_signing_duration=31536000, csr_backdate=300, coalesce=true, coalesce_window=0, split_bytes=0,
split_delay=0.02, gzip_min_bytes=131072, apf_headers=true, log_bodies=true.

Request log entry: seq, time, end, method, path, query, params, verb, user, groups, status, content_type,
accept, user_agent, audit_id, watch, fault, body (parsed JSON when <= 64 KiB), warnings, retry_after, conn.
Watch log entry: seq, request_seq, path, query, user, start, end, end_reason (deadline, client-closed,
closed-by-emulator, error-410, fault-drop, ...), timeout, bookmarks, fault, events [[type, rv, time], ...].
History (GET /history): rv, floor (oldest RV a watch may resume from), events [{rv, type, resource, namespace,
name, time, object?}].
"""

import argparse
import base64
import copy
import datetime
import gzip
import hashlib
import http.server
import json
import os
import random
import re
import select
import shutil
import socket
import socketserver
import ssl
import struct
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

from kube_emulator.auth import ANONYMOUS, Identity, Tokens, bootstrap_token_identity, cert_identity
from kube_emulator.authz import RI, authorize, node_agent_node, node_restriction
from kube_emulator.config import Config, DEFAULT_CONFIG, SERVER_VERSION
from kube_emulator.csr import csr_subject, csr_update_strategy
from kube_emulator.discovery import discovery_groups, discovery_resources, make_table, openapi_doc, openapi_gv_paths
from kube_emulator.errors import (ApiError, ControlError, FieldError, details, err_already_exists, err_bad_request,
                                  err_conflict, err_generic_422, err_internal, err_invalid, err_method_not_allowed,
                                  err_no_route, err_not_found, err_too_large_rv, err_unauthorized,
                                  err_unsupported_media, status_obj)
from kube_emulator.faults import ClientGone, FaultInjection, Faults, REQUEST_FAULTS
from kube_emulator.kinds import KINDS, KIND_BY_GVR, KIND_BY_STORAGE, KNOWN_NAMESPACES, node_template
from kube_emulator.patch import (JsonPatchError, MAX_JSON_PATCH_OPS, PATCH_TYPES, json_patch, merge_patch,
                                 strategic_merge_patch)
from kube_emulator.protobuf import decode_protobuf_body, pb_field
from kube_emulator.schema import Coercer, GO_JSON_TYPES
from kube_emulator.selectors import selectors_for
from kube_emulator.ssa import entries_equal, entries_from_rendered, ssa_apply, track_update
from kube_emulator.store import Store
from kube_emulator.tls import CertFactory, TlsConfig
from kube_emulator.util import (Log, deep, go_quote, is_true, jbytes, jdump, json_equal, now_micro, now_time, utcnow,
                                write_atomic)
from kube_emulator.validation import parse_rv, validate_kind, validate_list_options
from kube_emulator.watch import WatchStream, Watcher


MAX_BODY = 3 * 1024 * 1024          # kube-apiserver's default request body limit is ~3 MiB


# ---------------------------------------------------------------------------------------------
# Authentication, authorization (Node authorizer, gardener node-agent authorizer), NodeRestriction
# ---------------------------------------------------------------------------------------------


def node_agent_csr_decision(emu, csr):
    """gardener-resource-manager's csrapprover for node-agent CSRs (CN gardener.cloud:node-agent:machine:<m>):
    ("approve"|"deny"|None, message). A bootstrap token is denied once the machine's Node exists (the agent is
    bootstrapped already); the agent itself may renew (username == CN); anyone else is denied."""
    spec = csr.get("spec") or {}
    try:
        subj = csr_subject(base64.b64decode(spec.get("request") or ""))
    except ValueError:
        return None, ""
    if not subj or not subj[0].startswith("gardener.cloud:node-agent:machine:"):
        return None, "not a CSR for gardener-node-agent"
    user, machine = spec.get("username", ""), subj[0].rsplit(":", 1)[-1]
    if user.startswith("system:bootstrap:"):
        if node_agent_node(emu, Identity(subj[0], [], "csr")) is not None:
            return "deny", ("Denying gardener-node-agent certificate CSR (Cannot use bootstrap token since "
                            "gardener-node-agent for machine %s is already bootstrapped)" % go_quote(machine))
    elif user.startswith("gardener.cloud:node-agent:machine:"):
        if user != subj[0]:
            return "deny", "Denying gardener-node-agent certificate CSR (username and commonName do not match)"
    else:
        return "deny", "Denying gardener-node-agent certificate CSR (username %s is not allowed)" % go_quote(user)
    return "approve", "Approving gardener-node-agent certificate CSR (all checks passed)"


# ---------------------------------------------------------------------------------------------
# API semantics (independent of HTTP; also used by the control API)
# ---------------------------------------------------------------------------------------------

_GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


class WriteCtx:
    def __init__(self, ident=None, user_agent="", params=None, control=False):
        self.ident, self.user_agent, self.params, self.control = ident, user_agent, params or {}, control
        self.warnings = []

    def manager(self, default="unknown"):
        fm = self.params.get("fieldManager")
        if fm:
            return fm
        ua = (self.user_agent or "").split("/")[0]
        ua = "".join(c for c in ua if c.isprintable())[:128]
        return ua or default


class Api:
    def __init__(self, emu):
        self.emu = emu
        self.store = emu.store

    # -- reads ------------------------------------------------------------------------------

    def _not_older_than(self, n):
        if n > self.store.rv and not self.store.wait_for_rv(n, self.emu.cfg["too_large_wait"]):
            raise err_too_large_rv(n, self.store.rv)

    def get(self, kind, ns, name, params):
        rvp = params.get("resourceVersion", "")
        if rvp not in ("", "0"):
            self._not_older_than(parse_rv(rvp))
        obj = self.store.get(kind.storage, ns, name)
        if obj is None:
            raise err_not_found(kind.resource, kind.group, name)
        return obj

    def list(self, kind, ns, params):
        validate_list_options(params, False)
        freqs, lreqs = selectors_for(kind, params)
        rvp, match = params.get("resourceVersion", ""), params.get("resourceVersionMatch", "")
        try:
            limit = int(params.get("limit") or 0)
        except ValueError:
            raise err_bad_request("invalid limit") from None
        w = Watcher(kind, ns, freqs, lreqs)
        if rvp in ("", "0"):
            with self.store.lock:
                objs, rv = self.store.list(kind.storage, ns), self.store.rv
        else:
            n = parse_rv(rvp)
            self._not_older_than(n)
            with self.store.lock:
                if match == "Exact" or (match == "" and limit > 0):
                    objs = [o for o in self.store.state_at(kind.storage, n)
                            if not ns or o["metadata"].get("namespace") == ns]
                    rv = n
                else:
                    objs, rv = self.store.list(kind.storage, ns), self.store.rv
        return [o for o in objs if w.match(o)], rv

    # -- write pipeline ---------------------------------------------------------------------------

    def _coerce(self, kind, ext, ctx, is_patch, patch_text=""):
        c = Coercer()
        out = c.run(ext, kind.schema)
        fv = ctx.params.get("fieldValidation", "") or "Warn"
        if fv not in ("Ignore", "Warn", "Strict"):
            raise err_bad_request('fieldValidation must be one of "Ignore", "Warn", or "Strict"')
        if c.type_errors:
            if is_patch:
                raise ApiError(422, "Invalid", ' "" is invalid: patch: Invalid value: %s: %s' % (
                    go_quote(patch_text), c.type_errors[0]), details(causes=[{
                        "reason": "FieldValueInvalid", "message": "Invalid value: %s: %s" % (
                            go_quote(patch_text), c.type_errors[0]), "field": "patch"}]))
            raise err_bad_request(c.type_errors[0])
        if c.unknown and fv == "Strict":
            text = ", ".join('unknown field "%s"' % u for u in c.unknown)
            if is_patch == "apply":
                raise err_bad_request("failed to create typed patch object (%s, Kind=%s): %s" % (
                    "/" + kind.api_version if not kind.group else kind.api_version, kind.kind,
                    "; ".join(".%s: field not declared in schema" % u for u in c.unknown)))
            if is_patch:
                raise ApiError(422, "Invalid", ' "" is invalid: patch: Invalid value: %s: strict decoding error: %s'
                               % (go_quote(patch_text), text), details(causes=[{
                                   "reason": "FieldValueInvalid", "message": "strict decoding error: " + text,
                                   "field": "patch"}]))
            raise err_bad_request("strict decoding error: " + text)
        if c.unknown and fv == "Warn":
            ctx.warnings += ['unknown field "%s"' % u for u in c.unknown]
        return out

    def _strategy(self, kind, sub, old, new):
        if old is not None:
            md, omd = new.setdefault("metadata", {}), old["metadata"]
            for k in ("uid", "creationTimestamp", "deletionTimestamp", "generateName"):
                if k in omd:
                    md[k] = omd[k]
                else:
                    md.pop(k, None)
            md.pop("managedFields", None)
            if kind.storage == "certificatesigningrequests":
                csr_update_strategy(sub, old, new)
            elif kind.storage in ("nodes", "pods", "namespaces"):
                if sub == "status":
                    if "spec" in old:
                        new["spec"] = deep(old["spec"])
                    else:
                        new.pop("spec", None)
                else:
                    if "status" in old:
                        new["status"] = deep(old["status"])
                    else:
                        new.pop("status", None)
        new["kind"] = KIND_BY_STORAGE[kind.storage].kind
        new["apiVersion"] = KIND_BY_STORAGE[kind.storage].api_version
        return new

    def _commit_write(self, kind, sub, old, new, ctx, entries, op):
        """Common tail: validation, admission, no-op detection, commit. Returns (code, stored_obj)."""
        new = KIND_BY_STORAGE[kind.storage].normalize(new)
        md = new["metadata"]
        errs = validate_kind(kind, new, op == "create", kind.group)
        if old is not None and (new["metadata"].get("uid") != old["metadata"].get("uid")):
            errs.append(FieldError("Invalid", "metadata.uid", md.get("uid", ""), "field is immutable"))
        if errs:
            raise err_invalid(KIND_BY_STORAGE[kind.storage].kind, kind.group, md.get("name", ""), errs)
        if not ctx.control:
            node_restriction(ctx.ident, kind, op, md.get("namespace", ""), md.get("name", ""), old, new)
        if old is not None:
            a, b = deep(old), deep(new)
            for o in (a, b):
                o["metadata"].pop("resourceVersion", None)
                o["metadata"].pop("managedFields", None)
            old_entries = self.store.managed.get(Store.key(kind.storage, md.get("namespace"), md["name"]), [])
            if json_equal(a, b) and entries_equal(old_entries, entries):
                return 200, old                         # no-op: same RV, no watch event
        if is_true(ctx.params.get("dryRun")) or ctx.params.get("dryRun") == "All":
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"] if old else ""
            return (201 if old is None else 200), new
        stored = self.store.commit(kind.storage, new, managed=entries)
        return (201 if old is None else 200), stored

    def _parse_body(self, body):
        try:
            obj = json.loads(body or b"null")
        except ValueError as e:
            raise err_bad_request("error decoding request body: %s" % e) from None
        if not isinstance(obj, dict):
            raise err_bad_request("the body of the request was not a JSON object")
        return obj

    def _check_gvk(self, kind, obj):
        if obj.get("kind") and obj["kind"] != kind.kind:
            raise err_bad_request("the kind in the request body (%s) does not match the kind expected by the "
                                  "endpoint (%s)" % (obj["kind"], kind.kind))
        if obj.get("apiVersion") and obj["apiVersion"] != kind.api_version:
            raise err_bad_request("the API version in the data (%s) does not match the expected API version (%s)"
                                  % (obj["apiVersion"], kind.api_version))

    def create(self, kind, ns, body, ctx):
        obj = body if isinstance(body, dict) else self._parse_body(body)
        self._check_gvk(kind, obj)
        ext = self._coerce(kind, obj, ctx, False)
        new = kind.from_ext(ext)
        md = new.setdefault("metadata", {})
        if kind.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise err_bad_request("the namespace of the provided object does not match the namespace sent on "
                                      "the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        with self.store.lock:
            if kind.namespaced and self.store.get("namespaces", "", ns) is None:
                raise err_not_found("namespaces", "", ns)
            if not md.get("name") and md.get("generateName"):
                md["name"] = md["generateName"] + "".join(random.choice(_GENERATE_CHARS) for _ in range(5))
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_time()
            md.pop("resourceVersion", None)
            md.pop("managedFields", None)
            new = self._strategy(kind, "", None, new)
            if kind.storage == "certificatesigningrequests":
                # The requester is whoever authenticated, never what the body claims; status starts empty.
                new["spec"] = dict(new.get("spec") or {}, username=ctx.ident.user, uid="",
                                   groups=list(ctx.ident.groups))
                new["spec"].pop("extra", None)
                new.pop("status", None)
            if md.get("name") and self.store.get(kind.storage, ns, md["name"]) is not None:
                raise err_already_exists(kind.resource, kind.group, md["name"])
            entries = track_update([], ctx.manager(), "", {}, new, kind.kind)
            return self._commit_write(kind, "", None, new, ctx, entries, "create")

    def update(self, kind, ns, name, sub, body, ctx):
        obj = body if isinstance(body, dict) else self._parse_body(body)
        self._check_gvk(kind, obj)
        ext = self._coerce(kind, obj, ctx, False)
        new = kind.from_ext(ext)
        md = new.setdefault("metadata", {})
        if md.get("name") != name:
            raise err_bad_request("the name of the object (%s) does not match the name on the URL (%s)" %
                                  (md.get("name", ""), name))
        if kind.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise err_bad_request("the namespace of the provided object does not match the namespace sent on "
                                      "the request")
            md["namespace"] = ns
        with self.store.lock:
            old = self.store.get(kind.storage, ns, name)
            if old is None:
                raise err_not_found(kind.resource, kind.group, name)
            if md.get("resourceVersion") and md["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise err_conflict(kind.resource, kind.group, name)
            md.setdefault("uid", old["metadata"].get("uid"))
            sent_mf = md.get("managedFields")
            new = self._strategy(kind, sub, old, new)
            key = Store.key(kind.storage, ns, name)
            if sent_mf is not None and not json_equal(sent_mf, old["metadata"].get("managedFields")):
                entries = entries_from_rendered(sent_mf)
            else:
                entries = track_update(self.store.managed.get(key, []), ctx.manager(), sub, old, new, kind.kind)
            return self._commit_write(kind, sub, old, new, ctx, entries, "update")

    def patch(self, kind, ns, name, sub, ptype, body, ctx):
        params = ctx.params
        fm = params.get("fieldManager")
        errs = []
        if ptype == "apply" and not fm:
            errs.append(FieldError("Required", "fieldManager", detail="is required for apply patch"))
        if fm is not None and len(fm) > 128:
            errs.append(FieldError("TooLong", "fieldManager", "", 128))
        if "force" in params and ptype != "apply":
            errs.append(FieldError("Forbidden", "force", detail="may not be specified for non-apply patch"))
        if errs:
            raise err_invalid("PatchOptions", "meta.k8s.io", "", errs)
        text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else jdump(body)
        if isinstance(body, (bytes, bytearray)):
            try:
                patch = json.loads(body)
            except ValueError as e:
                if ptype == "apply":
                    raise err_bad_request("error decoding YAML: the emulator accepts JSON apply bodies only (%s)"
                                          % e) from None
                raise err_bad_request("error decoding patch: %s" % e) from None
        else:
            patch = body
        if ptype == "json":
            if not isinstance(patch, list):
                raise err_bad_request("json: cannot unmarshal %s into Go value of type jsonpatch.Patch" %
                                      GO_JSON_TYPES.get(type(patch), "value"))
            if len(patch) > MAX_JSON_PATCH_OPS:
                raise ApiError(413, "RequestEntityTooLarge", "The request is too large: the allowed number of "
                               "operations in a json patch is %d, but found %d" % (MAX_JSON_PATCH_OPS, len(patch)))
        elif not isinstance(patch, dict):
            raise err_bad_request("json: cannot unmarshal %s into Go value of type map[string]interface {}" %
                                  GO_JSON_TYPES.get(type(patch), "value"))
        with self.store.lock:
            old = self.store.get(kind.storage, ns, name)
            key = Store.key(kind.storage, ns, name)
            entries = self.store.managed.get(key, [])
            if ptype == "apply":
                for f in ("apiVersion", "kind"):
                    if not patch.get(f):
                        raise err_bad_request("Object '%s' is missing in '%s'" % (
                            "Kind" if f == "kind" else "apiVersion", text[:200]))
                self._check_gvk(kind, patch)
                pmd = patch.get("metadata") or {}
                if pmd.get("name") != name:
                    raise err_bad_request("the name of the object (%s) does not match the name on the URL (%s)" %
                                          ((pmd.get("name") or ""), name))
                cfg = self._coerce(kind, patch, ctx, "apply", text)
                if old is None:
                    base_ext = {"metadata": dict({"name": name}, **({"namespace": ns} if kind.namespaced else {}))}
                else:
                    base_ext = kind.to_ext(deep(old))
                new_ext, entries = ssa_apply(base_ext, cfg, entries, fm, sub, is_true(params.get("force")),
                                             kind.kind, kind.api_version)
                new = kind.from_ext(new_ext)
                if old is None:
                    nmd = new.setdefault("metadata", {})
                    if kind.namespaced:
                        nmd["namespace"] = ns
                        if self.store.get("namespaces", "", ns) is None:
                            raise err_not_found("namespaces", "", ns)
                    nmd["uid"] = str(uuid.uuid4())
                    nmd["creationTimestamp"] = now_time()
                    new = self._strategy(kind, "", None, new)
                    return self._commit_write(kind, sub, None, new, ctx, entries, "create")
                new = self._strategy(kind, sub, old, new)
                return self._commit_write(kind, sub, old, new, ctx, entries, "update")
            if old is None:
                raise err_not_found(kind.resource, kind.group, name)
            cur_ext = kind.to_ext(deep(old))
            if ptype == "json":
                try:
                    patched = json_patch(cur_ext, patch)
                except (JsonPatchError, IndexError, KeyError, TypeError):
                    raise err_generic_422() from None
                if not isinstance(patched, dict):
                    raise err_generic_422()
            elif ptype == "merge":
                patched = merge_patch(cur_ext, patch)
            else:
                patched = strategic_merge_patch(cur_ext, patch, kind.kind)
            prv = (patched.get("metadata") or {}).get("resourceVersion")
            if prv and prv != old["metadata"]["resourceVersion"]:
                raise err_conflict(kind.resource, kind.group, name)
            pmd = patched.get("metadata") or {}
            if pmd.get("name") != name:
                raise err_bad_request("the name of the object (%s) does not match the name on the URL (%s)" %
                                      (pmd.get("name") or "", name))
            if kind.namespaced and pmd.get("namespace") != ns:
                raise err_bad_request("the namespace of the provided object does not match the namespace sent on "
                                      "the request")
            new = kind.from_ext(self._coerce(kind, patched, ctx, True, text))
            new = self._strategy(kind, sub, old, new)
            # uid is immutable: a patch that changes it fails validation (422), one that drops it is ignored
            new["metadata"]["uid"] = pmd.get("uid") or old["metadata"].get("uid")
            if "managedFields" in pmd and not json_equal(pmd["managedFields"], old["metadata"].get("managedFields")):
                entries = entries_from_rendered(pmd["managedFields"])
            else:
                entries = track_update(entries, ctx.manager(), sub, old, new, kind.kind)
            return self._commit_write(kind, sub, old, new, ctx, entries, "update")

    def delete(self, kind, ns, name, body, ctx):
        opts = {}
        if body:
            try:
                opts = json.loads(body) or {}
            except ValueError:
                raise err_bad_request("error decoding DeleteOptions") from None
        with self.store.lock:
            old = self.store.get(kind.storage, ns, name)
            if old is None:
                raise err_not_found(kind.resource, kind.group, name)
            pre = (opts or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"].get("uid"):
                raise err_conflict(kind.resource, kind.group, name,
                                   "Precondition failed: UID in precondition: %s, UID in object meta: %s" %
                                   (pre["uid"], old["metadata"].get("uid")))
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise err_conflict(kind.resource, kind.group, name,
                                   "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in "
                                   "object meta: %s" % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            if is_true(ctx.params.get("dryRun")) or ctx.params.get("dryRun") == "All":
                last = old
            else:
                last = self.store.delete(kind.storage, ns, name)
        if kind.storage == "pods":
            last = deep(last)
            last["metadata"]["deletionTimestamp"] = now_time()
            return last
        return status_obj(200, "", "", details(name=name, group=kind.group, kind=kind.resource,
                                                 uid=old["metadata"].get("uid")), status="Success")


# ---------------------------------------------------------------------------------------------
# HTTPS API server (HTTP/1.1 keep-alive, chunked watch streams)
# ---------------------------------------------------------------------------------------------


class ConnState:
    _ids = iter(range(1, 1 << 62))

    def __init__(self, sock, addr):
        self.id = next(ConnState._ids)
        self.sock, self.addr = sock, addr
        self.busy = False
        self.watcher = None
        self.close_after = False
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


class ApiHandler(FaultInjection, WatchStream, http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 300
    conn_state = None

    def log_message(self, fmt, *args):
        pass

    def send_response(self, code, message=None):
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def do_GET(self):
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

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
        try:
            tls_mode, ctx = emu.tls.current()
            tls = ctx.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as e:
            emu.tlslog.new(time=time.time(), peer="%s:%s" % addr[:2], ok=False, error=str(e))
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
        emu.tlslog.new(time=time.time(), peer="%s:%s" % addr[:2], ok=True, error=None,
                       version=tls.version(), alpn=tls.selected_alpn_protocol(), client_cn=subj.get("commonName"))
        tls.settimeout(ApiHandler.timeout)
        st = ConnState(tls, addr)
        st.tls_mode = list(tls_mode)
        with self.lock:
            self.conns[st.id] = st
        try:
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
            conns = list(self.conns.values())
        for st in conns:
            if st.watcher is not None:
                if watches != "keep":
                    st.close_after = True
                    st.watcher.stop(watches)
                    n += 1
            elif st.busy:
                st.close_after = True
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


# ---------------------------------------------------------------------------------------------
# Control API (plain HTTP on a separate loopback port)
# ---------------------------------------------------------------------------------------------


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self._serve()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

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


# ---------------------------------------------------------------------------------------------
# The emulator
# ---------------------------------------------------------------------------------------------


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
                self.csr_controllers()
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

    # -- certificate signing requests (the controllers kube-apiserver itself does not run) ------------------

    def csr_controllers(self):
        for csr in self.store.list("certificatesigningrequests"):
            conds = {c.get("type") for c in (csr.get("status") or {}).get("conditions") or []
                     if c.get("status") == "True"}
            if conds & {"Denied", "Failed"} or (csr.get("status") or {}).get("certificate"):
                continue
            if "Approved" not in conds and self.cfg["csr_auto_approve"]:
                decision, message = node_agent_csr_decision(self, csr)
                if decision:
                    self.csr_action(csr["metadata"]["name"], decision,
                                    "RequestApproved" if decision == "approve" else "RequestDenied", message)
            elif "Approved" in conds and self.cfg["csr_sign"] and \
                    (csr.get("spec") or {}).get("signerName") == "kubernetes.io/kube-apiserver-client":
                self.csr_action(csr["metadata"]["name"], "sign")

    def csr_action(self, name, action, reason="", message=""):
        """approve/deny/fail (a condition through /approval or /status) or sign (the certificate through
        /status), as the controllers do it: read, modify, PUT. Returns the stored CSR."""
        kind = KIND_BY_STORAGE["certificatesigningrequests"]
        csr = self.store.get(kind.storage, "", name)
        if csr is None:
            raise err_not_found(kind.resource, kind.group, name)
        csr = deep(csr)
        st = csr.setdefault("status", {})
        now = now_time()
        if action in ("approve", "deny", "fail"):
            ctype = {"approve": "Approved", "deny": "Denied", "fail": "Failed"}[action]
            st.setdefault("conditions", []).append({
                "type": ctype, "status": "True", "reason": reason or {"approve": "EmulatorApprove", "deny":
                                                                      "EmulatorDeny", "fail": "EmulatorFail"}[action],
                "message": message or "set through the emulator's control API", "lastUpdateTime": now,
                "lastTransitionTime": now})
            sub, user = ("status" if action == "fail" else "approval"), "emulator-control"
        elif action == "sign":
            pem, err = self.csr_sign(csr)
            if pem is None:
                st.setdefault("conditions", []).append({
                    "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": err,
                    "lastUpdateTime": now, "lastTransitionTime": now})
            else:
                st["certificate"] = base64.b64encode(pem).decode()
            sub, user = "status", "system:kube-controller-manager"
        else:
            raise ValueError("unknown CSR action %r" % action)
        ctx = WriteCtx(Identity(user, ["system:authenticated"], "control"), params={}, control=True)
        return self.api.update(kind, "", name, sub, csr, ctx)[1]

    def csr_sign(self, csr):
        """The kubernetes.io/kube-apiserver-client signer: client auth only, no CA, lifetime
        min(expirationSeconds, csr_signing_duration), notBefore backdated. Returns (PEM, None) or (None, why)."""
        spec = csr.get("spec") or {}
        usages = set(spec.get("usages") or [])
        if "client auth" not in usages or usages - {"digital signature", "key encipherment", "client auth"}:
            return None, "invalid usage for client certificate: %s" % ", ".join(sorted(usages))
        ttl = int(self.cfg["csr_signing_duration"])
        if spec.get("expirationSeconds"):
            ttl = min(ttl, int(spec["expirationSeconds"]))
        back = min(int(self.cfg["csr_backdate"]), ttl)
        now = utcnow()
        fmt = lambda dt: dt.strftime("%Y%m%d%H%M%SZ")
        with self.certs.lock, tempfile.TemporaryDirectory(dir=self.certs.dir) as tmp:
            req, out, ext = (os.path.join(tmp, n) for n in ("req.pem", "cert.pem", "ext.cnf"))
            with open(req, "wb") as f:
                f.write(base64.b64decode(spec.get("request") or ""))
            with open(ext, "w") as f:
                f.write("[leaf]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature,"
                        "keyEncipherment\nextendedKeyUsage = clientAuth\nauthorityKeyIdentifier = keyid\n")
            ca_crt, ca_key = self.certs.ca("good")
            try:
                self.certs._openssl("ca", "-batch", "-config", self.certs.cnf, "-cert", ca_crt, "-keyfile", ca_key,
                                    "-in", req, "-out", out, "-notext", "-extfile", ext, "-extensions", "leaf",
                                    "-startdate", fmt(now - datetime.timedelta(seconds=back)),
                                    "-enddate", fmt(now + datetime.timedelta(seconds=ttl - back)))
            except RuntimeError as e:
                return None, str(e)
            with open(out, "rb") as f:
                return f.read(), None

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
    return 200, emu.csr_action(body["name"], body["action"], body.get("reason", ""), body.get("message", ""))


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
    ("POST", "/node"): _c_node, ("POST", "/secret"): _c_secret, ("POST", "/patch"): _c_patch,
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


# ---------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------


def parse_token_arg(s):
    """TOKEN[=USER[,GROUP...]]"""
    tok, _, rest = s.partition("=")
    if not rest:
        return tok, "emulator-admin", ["system:masters"]
    parts = rest.split(",")
    return tok, parts[0], parts[1:]


def parse_cert_arg(s):
    """CN[,ORG...]"""
    parts = s.split(",")
    return parts[0], parts[1:]


def main(argv=None):
    ap = argparse.ArgumentParser(description="Kubernetes API-server emulator for integration tests")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--control-port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("--server-host", default=None, help="host written into kubeconfigs (default: --bind)")
    ap.add_argument("--ready-file", default=None)
    ap.add_argument("--token", action="append", default=[], help="TOKEN[=USER[,GROUP...]]; first one is used in "
                    "the kubeconfig (default: random admin token)")
    ap.add_argument("--client-cert", action="append", default=[], help="CN[,ORG...]: also write client "
                    "cert/key and kubeconfig-cert (first one)")
    ap.add_argument("--server-cert", default="good", choices=TlsConfig.MODES)
    ap.add_argument("--client-auth", default="optional", choices=TlsConfig.CLIENT_MODES)
    ap.add_argument("--san", action="append", default=[], help="extra subjectAltName, e.g. DNS:foo or IP:10.96.0.1")
    ap.add_argument("--node", action="append", default=[], help="seed a kubelet-like Node with this name")
    ap.add_argument("--seed", action="append", default=[], help="JSON file with an object or a list of objects")
    ap.add_argument("--initial-rv", type=int, default=100)
    ap.add_argument("--server-version", default=SERVER_VERSION)
    ap.add_argument("--config", action="append", default=[], help="KEY=VALUE (see DEFAULT_CONFIG)")
    ap.add_argument("--debug-log", default=None)
    a = ap.parse_args(argv)
    cfg = {}
    for kv in a.config:
        k, _, v = kv.partition("=")
        cfg[k] = v if DEFAULT_CONFIG.get(k) is not True and DEFAULT_CONFIG.get(k) is not False else \
            v.lower() in ("1", "true", "yes")
    emu = Emulator(a.state_dir, a.bind, a.port, a.control_port, a.server_host,
                   [parse_token_arg(t) for t in a.token], [parse_cert_arg(c) for c in a.client_cert],
                   a.server_cert, a.client_auth, cfg, a.initial_rv, a.server_version, a.san, a.debug_log,
                   a.ready_file)
    for n in a.node:
        emu.seed(node_template(n), "kubelet", "kubelet")
    for path in a.seed:
        with open(path) as f:
            data = json.load(f)
        for o in data if isinstance(data, list) else [data]:
            emu.seed(o)
    import signal
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    emu.start()
    print(json.dumps(emu.info()), flush=True)
    stop.wait()
    emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
