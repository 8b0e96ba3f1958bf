"""The patch engines: JSON merge patch, strategic merge patch and JSON patch, and the content types naming them.

Owns: PATCH_TYPES (Content-Type -> engine; ``apply`` is in ssa.py), RFC 7386 merge patch, strategic merge
patch with the list merge keys of kinds.py and the directives $patch (replace, delete), $setElementOrder,
$retainKeys and $deleteFromPrimitiveList, RFC 6902 JSON patch (~0/~1 escapes, test, move/copy) and the limit
on its number of operations. Errors are raised as Kubernetes answers them (400, or JsonPatchError -> 422).
Implements docs/kube-api.md §4.1-§4.2 and §9 items 25-28.
"""

import re

from .errors import err_bad_request
from .kinds import PRIM, list_key
from .schema import GO_JSON_TYPES
from .util import deep, jdump, json_equal


PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
               "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply",
               "application/apply-patch+cbor": "apply"}


MAX_JSON_PATCH_OPS = 10000


def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return deep(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _strip_directives(v):
    if isinstance(v, dict):
        return {k: _strip_directives(x) for k, x in v.items() if not k.startswith("$") and x is not None}
    if isinstance(v, list):
        return [_strip_directives(x) for x in v]
    return v


def strategic_merge_patch(target, patch, kind):
    if not isinstance(patch, dict):
        raise err_bad_request("json: cannot unmarshal %s into Go value of type map[string]interface {}" %
                              GO_JSON_TYPES.get(type(patch), "value"))
    r = _smp_map(target, patch, kind, ())
    return r if r is not None else {}


def _smp_map(target, patch, kind, path):
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives({k: v for k, v in patch.items() if k != "$patch"})
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    orders = {}
    for k, v in patch.items():
        if k in ("$patch", "$retainKeys"):
            continue
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(result.get(f), list) and isinstance(v, list):
                result[f] = [x for x in result[f] if not any(json_equal(x, y) for y in v)]
            continue
        sub = path + (k,)
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            cur = result.get(k)
            r = _smp_map(cur if isinstance(cur, dict) else None, v, kind, sub)
            if r is None:
                result.pop(k, None)
            else:
                result[k] = r
        elif isinstance(v, list):
            key = list_key(kind, sub)
            if key is None:
                result[k] = [_strip_directives(x) for x in v]
            elif key == PRIM:
                cur = list(result.get(k) or [])
                for x in v:
                    if not any(json_equal(x, y) for y in cur):
                        cur.append(x)
                result[k] = cur
            else:
                result[k] = _smp_list(result.get(k), v, key, kind, sub)
        else:
            result[k] = v
    if isinstance(patch.get("$retainKeys"), list):
        keep = set(patch["$retainKeys"])
        result = {k: v for k, v in result.items() if k in keep}
    for f, order in orders.items():
        if isinstance(result.get(f), list) and isinstance(order, list):
            key = list_key(kind, path + (f,))
            ident = (lambda x: x.get(key) if isinstance(x, dict) else x) if key not in (None, PRIM) else (lambda x: x)
            wanted = [(o.get(key) if isinstance(o, dict) and key not in (None, PRIM) else o) for o in order]
            first = [x for w in wanted for x in result[f] if json_equal(ident(x), w)]
            rest = [x for x in result[f] if not any(x is y for y in first)]
            result[f] = first + rest
    return result


def _smp_list(target, patch, key, kind, path):
    cur = list(target) if isinstance(target, list) else []
    if any(isinstance(e, dict) and e.get("$patch") == "replace" for e in patch):
        return [_strip_directives(e) for e in patch if not (isinstance(e, dict) and e.get("$patch") == "replace")]
    for e in patch:
        if not isinstance(e, dict):
            raise err_bad_request("unable to find api field in struct for the list element %s" % jdump(e))
        if key not in e:
            raise err_bad_request("map: %s does not contain declared merge key: %s" % (jdump(e), key))
        idxs = [i for i, x in enumerate(cur) if isinstance(x, dict) and json_equal(x.get(key), e[key])]
        if e.get("$patch") == "delete":
            cur = [x for i, x in enumerate(cur) if i not in idxs]
            continue
        if idxs:
            cur[idxs[0]] = _smp_map(cur[idxs[0]], e, kind, path + ("*",))
        else:
            cur.append(_smp_map(None, e, kind, path + ("*",)))
    return cur


class JsonPatchError(Exception):
    pass


def _jp_tokens(path):
    if not isinstance(path, str):
        raise JsonPatchError("path is not a string")
    if path == "":
        return []
    if not path.startswith("/"):
        raise JsonPatchError("invalid path %r" % path)
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _jp_index(tok, n, allow_end):
    if allow_end and tok == "-":
        return n
    if not re.match(r"^(0|[1-9][0-9]*)$", tok):
        raise JsonPatchError("invalid array index %r" % tok)
    i = int(tok)
    if i > n or (i == n and not allow_end):
        raise JsonPatchError("index out of range")
    return i


def _jp_parent(doc, toks):
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise JsonPatchError("doc is missing path")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_jp_index(t, len(cur), False)]
        else:
            raise JsonPatchError("doc is missing path")
    return cur


def _jp_get(doc, toks):
    if not toks:
        return doc
    parent = _jp_parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise JsonPatchError("doc is missing key")
        return parent[t]
    if isinstance(parent, list):
        return parent[_jp_index(t, len(parent), False)]
    raise JsonPatchError("doc is missing path")


def _jp_add(doc, toks, value):
    if not toks:
        return value
    parent = _jp_parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        parent[t] = value
    elif isinstance(parent, list):
        parent.insert(_jp_index(t, len(parent), True), value)
    else:
        raise JsonPatchError("doc is missing path")
    return doc


def _jp_remove(doc, toks):
    if not toks:
        raise JsonPatchError("cannot remove the whole document")
    parent = _jp_parent(doc, toks)
    t = toks[-1]
    if isinstance(parent, dict):
        if t not in parent:
            raise JsonPatchError("Unable to remove nonexistent key")
        return parent.pop(t)
    if isinstance(parent, list):
        return parent.pop(_jp_index(t, len(parent), False))
    raise JsonPatchError("doc is missing path")


def json_patch(doc, ops):
    doc = deep(doc)
    for op in ops:
        if not isinstance(op, dict):
            raise JsonPatchError("operation is not an object")
        kind = op.get("op")
        toks = _jp_tokens(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise JsonPatchError("missing value")
        if kind == "add":
            doc = _jp_add(doc, toks, deep(op["value"]))
        elif kind == "remove":
            _jp_remove(doc, toks)
        elif kind == "replace":
            if toks:
                _jp_get(doc, toks)          # must exist
                _jp_remove(doc, toks)
            doc = _jp_add(doc, toks, deep(op["value"]))
        elif kind in ("move", "copy"):
            ftoks = _jp_tokens(op.get("from"))
            if kind == "move" and toks[:len(ftoks)] == ftoks and len(toks) > len(ftoks):
                raise JsonPatchError("move into own child")
            value = deep(_jp_get(doc, ftoks))
            if kind == "move":
                _jp_remove(doc, ftoks)
            doc = _jp_add(doc, toks, value)
        elif kind == "test":
            try:
                cur = _jp_get(doc, toks)
            except JsonPatchError:
                if op["value"] is None:
                    continue
                raise
            if not json_equal(cur, op["value"]):
                raise JsonPatchError("testing value %s failed" % op.get("path"))
        else:
            raise JsonPatchError("Unexpected kind: %s" % kind)
    return doc
