"""Server-side apply and managedFields: a simple field-ownership model.

Owns: the field sets of an object (leaf paths in FieldsV1 notation: f:, k:{...}, v:...), ManagedEntry (one
manager's operation, subresource and fields, rendered as a managedFields entry), ownership after an ordinary
write (``track_update``: the writer owns what it changed, others lose it), and apply (``ssa_apply``: merge the
applied configuration, drop fields the manager stopped applying, 409 FieldManagerConflict unless forced).
Implements docs/kube-api.md §4.2 (apply) and §9 item 31.
"""

import collections
import json

from .errors import ApiError, details, err_bad_request
from .kinds import PRIM, list_key
from .schema import DROP
from .util import deep, go_quote, jdump, json_equal, now_time


_TRACKED_META = ("labels", "annotations", "ownerReferences", "finalizers")


def fieldset(obj, kind, spath=(), fpath=(), out=None):
    out = set() if out is None else out
    if not isinstance(obj, dict):
        return out
    for k, v in obj.items():
        if not spath and k in ("apiVersion", "kind"):
            continue
        if spath == ("metadata",) and k not in _TRACKED_META:
            continue
        if v is None:
            continue
        fp, sp = fpath + ("f:" + k,), spath + (k,)
        if isinstance(v, dict) and v:
            fieldset(v, kind, sp, fp, out)
        elif isinstance(v, list):
            key = list_key(kind, sp)
            if key == PRIM:
                for x in v:
                    out.add(fp + ("v:" + jdump(x),))
            elif key:
                for x in v:
                    if isinstance(x, dict) and key in x:
                        kp = fp + ("k:" + jdump({key: x[key]}),)
                        out.add(kp + (".",))
                        fieldset(x, kind, sp + ("*",), kp, out)
            else:
                out.add(fp)
        else:
            out.add(fp)
    return out


def value_at(obj, fpath):
    cur = obj
    for comp in fpath:
        if comp == ".":
            continue
        if comp.startswith("f:"):
            if not isinstance(cur, dict) or comp[2:] not in cur:
                return False, None
            cur = cur[comp[2:]]
        elif comp.startswith("k:"):
            want = json.loads(comp[2:])
            if not isinstance(cur, list):
                return False, None
            cur = next((x for x in cur if isinstance(x, dict) and all(json_equal(x.get(a), b)
                                                                      for a, b in want.items())), DROP)
            if cur is DROP:
                return False, None
        elif comp.startswith("v:"):
            want = json.loads(comp[2:])
            if not isinstance(cur, list) or not any(json_equal(x, want) for x in cur):
                return False, None
            cur = want
    return True, cur


def remove_at(obj, fpath):
    """Remove the field (or list element) a path points at; missing parents are fine."""
    if not fpath:
        return
    last = fpath[-1]
    if last == ".":
        fpath, last = fpath[:-1], fpath[-2]
        found, parent = value_at(obj, fpath[:-1])
        if found and isinstance(parent, list):
            want = json.loads(last[2:])
            parent[:] = [x for x in parent if not (isinstance(x, dict) and all(json_equal(x.get(a), b)
                                                                             for a, b in want.items()))]
        return
    found, parent = value_at(obj, fpath[:-1])
    if not found:
        return
    if last.startswith("f:") and isinstance(parent, dict):
        parent.pop(last[2:], None)
    elif last.startswith("v:") and isinstance(parent, list):
        want = json.loads(last[2:])
        parent[:] = [x for x in parent if not json_equal(x, want)]


def apply_merge(target, cfg, kind, spath=()):
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in cfg.items():
        sp = spath + (k,)
        if v is None:
            continue
        if isinstance(v, dict):
            result[k] = apply_merge(result.get(k) if isinstance(result.get(k), dict) else None, v, kind, sp)
        elif isinstance(v, list):
            key = list_key(kind, sp)
            if key == PRIM:
                cur = list(result.get(k) or [])
                cur += [x for x in v if not any(json_equal(x, y) for y in cur)]
                result[k] = cur
            elif key:
                cur = list(result.get(k) or [])
                for x in v:
                    if not isinstance(x, dict) or key not in x:
                        raise err_bad_request("associative list with keys has an element that omits key field "
                                              "%s" % go_quote(key))
                    i = next((i for i, y in enumerate(cur) if isinstance(y, dict) and json_equal(y.get(key), x[key])),
                             None)
                    if i is None:
                        cur.append(apply_merge(None, x, kind, sp + ("*",)))
                    else:
                        cur[i] = apply_merge(cur[i], x, kind, sp + ("*",))
                result[k] = cur
            else:
                result[k] = deep(v)
        else:
            result[k] = v
    return result


def pretty_fpath(fpath):
    s = ""
    for c in fpath:
        if c == ".":
            continue
        if c.startswith("f:"):
            s += "." + c[2:]
        elif c.startswith("k:"):
            s += "[" + ",".join("%s=%s" % (a, jdump(b)) for a, b in json.loads(c[2:]).items()) + "]"
        elif c.startswith("v:"):
            s += "[=%s]" % c[2:]
    return s


def fields_v1(paths):
    tree = {}
    for p in sorted(paths):
        cur = tree
        for c in p:
            cur = cur.setdefault(c, {})
    return tree


class ManagedEntry:
    def __init__(self, manager, operation, subresource, api_version="v1", paths=None, stamp=None):
        self.manager, self.operation, self.subresource = manager, operation, subresource
        self.api_version = api_version
        self.paths = set(paths or ())
        self.time = stamp or now_time()

    def ident(self):
        return (self.manager, self.operation, self.subresource)

    def pretty(self):
        if self.operation == "Apply":
            return go_quote(self.manager)
        return "%s using %s" % (go_quote(self.manager), self.api_version)

    def render(self):
        r = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version,
             "time": self.time, "fieldsType": "FieldsV1", "fieldsV1": fields_v1(self.paths)}
        if self.subresource:
            r["subresource"] = self.subresource
        return r


def clone_entries(entries):
    return [ManagedEntry(e.manager, e.operation, e.subresource, e.api_version, e.paths, e.time) for e in entries]


def entries_equal(a, b):
    return [(e.ident(), e.paths) for e in a] == [(e.ident(), e.paths) for e in b]


def paths_from_fields_v1(tree, prefix=()):
    out = set()
    for k, sub in (tree or {}).items():
        if k == ".":
            out.add(prefix + (".",))
        elif not sub:
            out.add(prefix + (k,))
        else:
            out |= paths_from_fields_v1(sub, prefix + (k,))
    return out


def entries_from_rendered(mf):
    """managedFields written by a client (kubectl's client-side-apply upgrade, or [{}] to reset)."""
    entries = []
    for m in mf or []:
        if not isinstance(m, dict) or not m.get("manager"):
            continue
        entries.append(ManagedEntry(m["manager"], m.get("operation", "Update"), m.get("subresource", ""),
                                    m.get("apiVersion", "v1"), paths_from_fields_v1(m.get("fieldsV1")),
                                    m.get("time")))
    return [e for e in entries if e.paths]


def track_update(entries, manager, subresource, old, new, kind, api_version="v1"):
    """Ownership after a non-apply write: the writer owns what it changed, others lose it."""
    entries = clone_entries(entries)
    ofs, nfs = fieldset(old or {}, kind), fieldset(new, kind)
    changed = set()
    for p in nfs:
        if p not in ofs:
            changed.add(p)
        elif p[-1] != ".":
            if not json_equal(value_at(old, p)[1], value_at(new, p)[1]):
                changed.add(p)
    removed = ofs - nfs
    if not changed and not removed:
        return entries
    mine = next((e for e in entries if e.ident() == (manager, "Update", subresource)), None)
    for e in entries:
        e.paths -= removed
        if e is not mine:
            e.paths -= changed
    if changed:
        if mine is None:
            mine = ManagedEntry(manager, "Update", subresource, api_version)
            entries.append(mine)
        mine.paths |= changed
        mine.time = now_time()
    return [e for e in entries if e.paths]


def ssa_apply(current, cfg, entries, manager, subresource, force, kind, api_version="v1"):
    """Returns (new_object, new_entries) or raises 409 FieldManagerConflict."""
    entries = clone_entries(entries)
    applied = fieldset(cfg, kind)
    if subresource == "status":
        applied = {p for p in applied if p[0] in ("f:status", "f:metadata")}
    elif kind in ("Node", "Pod"):
        applied = {p for p in applied if p[0] != "f:status"}
    me = ("%s" % manager, "Apply", subresource)
    conflicts = []
    for e in entries:
        if e.ident() == me:
            continue
        for p in sorted(e.paths & applied):
            if p[-1] == ".":
                continue
            fc, vc = value_at(current, p)
            _, va = value_at(cfg, p)
            if not fc or not json_equal(vc, va):
                conflicts.append((e, p))
    if conflicts and not force:
        by = collections.OrderedDict()
        for e, p in conflicts:
            by.setdefault(e.pretty(), []).append(pretty_fpath(p))
        parts = []
        for who, ps in by.items():
            if len(ps) == 1:
                parts.append("conflict with %s: %s" % (who, ps[0]))
            else:
                parts.append("conflicts with %s:\n%s" % (who, "\n".join("- " + x for x in ps)))
        msg = "Apply failed with %d conflict%s: %s" % (len(conflicts), "" if len(conflicts) == 1 else "s",
                                                      "\n".join(parts))
        raise ApiError(409, "Conflict", msg, details(causes=[
            {"reason": "FieldManagerConflict", "message": "conflict with %s" % e.pretty(), "field": pretty_fpath(p)}
            for e, p in conflicts]))
    for e, p in conflicts:
        e.paths.discard(p)
    mine = next((e for e in entries if e.ident() == me), None)
    prev_owned = set(mine.paths) if mine else set()
    others = set()
    for e in entries:
        if e is not mine:
            others |= e.paths
    new = deep(current)
    # Whole list elements first (their key fields are needed to find them), then deepest fields first.
    for p in sorted(prev_owned - applied - others, key=lambda p: (p[-1] != ".", -len(p))):
        remove_at(new, p)
    scoped = deep(cfg)
    for k in ("kind", "apiVersion"):
        scoped.pop(k, None)
    new = apply_merge(new, scoped, kind)
    if mine is None:
        mine = ManagedEntry(manager, "Apply", subresource, api_version)
        entries.append(mine)
    if mine.paths != applied:
        mine.time = now_time()
    mine.paths = set(applied)
    return new, [e for e in entries if e.paths]
