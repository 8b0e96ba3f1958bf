"""The API semantics, independent of HTTP: get, list, create, update, patch, delete of any kind.

Owns: WriteCtx (who writes, their parameters, the warnings to return; the field manager from fieldManager or
the User-Agent), the read rules (resourceVersion "", "0", N: not older than N, Exact), and the write
pipeline: decode and coerce (schema.py), the registry strategies (uid, creationTimestamp kept; status and
spec each through their own endpoint; CSRs in csr.py), optimistic concurrency (409), patching (patch.py,
ssa.py), validation (validation.py), NodeRestriction (authz.py), no-op detection (same RV, no event), dry
runs, and the commit (store.py). The control API writes through it too, so what tests set up is checked
like what the agent sends.
Implements docs/kube-api.md §3.1-§3.3, §4, §5, §8 and §9 items 8-11, 21-22, 25-42.

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
"""

import json
import random
import uuid

from .authz import node_restriction
from .csr import csr_update_strategy
from .errors import (ApiError, FieldError, details, err_already_exists, err_bad_request, err_conflict, err_generic_422,
                     err_invalid, err_not_found, err_too_large_rv, status_obj)
from .kinds import KIND_BY_STORAGE
from .patch import JsonPatchError, MAX_JSON_PATCH_OPS, json_patch, merge_patch, strategic_merge_patch
from .schema import Coercer, GO_JSON_TYPES
from .selectors import selectors_for
from .ssa import entries_equal, entries_from_rendered, ssa_apply, track_update
from .store import Store
from .util import deep, go_quote, is_true, jdump, json_equal, now_time
from .validation import parse_rv, validate_kind, validate_list_options
from .watch import Watcher


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
