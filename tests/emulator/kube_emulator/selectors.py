"""Field and label selectors: parsing, matching, and the field getters kinds declare.

Owns: the fieldSelector grammar (=, ==, != with escapes) and the labelSelector grammar (=, !=, in, notin,
exists, !), label matching, ``field_getter`` (a dotted path as the string the field selector compares), and
``selectors_for`` (a request's selectors, refusing fields the kind does not support with 400).
Implements docs/kube-api.md §3.2 and §9 items 10, 20 and 39.
"""

import re

from .errors import err_bad_request


def _split_unescaped(s, sep):
    parts, cur, i = [], "", 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur += s[i:i + 2]
            i += 2
            continue
        if c == sep:
            parts.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    parts.append(cur)
    return parts


def _unescape(v):
    out, i = "", 0
    while i < len(v):
        if v[i] == "\\" and i + 1 < len(v):
            out += v[i + 1]
            i += 2
        else:
            out += v[i]
            i += 1
    return out


def parse_field_selector(s):
    """Returns [(key, op, value)]; op in '=', '!='. Raises ApiError 400 on syntax errors."""
    reqs = []
    if not s:
        return reqs
    for term in _split_unescaped(s, ","):
        if not term:
            continue
        found = None
        i = 0
        while i < len(term) and found is None:
            if term[i] == "\\":
                i += 2
                continue
            for op in ("!=", "==", "="):
                if term.startswith(op, i):
                    found = (i, op)
                    break
            i += 1
        if found is None:
            raise err_bad_request('invalid field selector: invalid selector: \'%s\'; can\'t understand \'%s\''
                                  % (s, term))
        idx, op = found
        key = term[:idx].strip()
        reqs.append((key, "!=" if op == "!=" else "=", _unescape(term[idx + len(op):])))
    return reqs


_LABEL_TERM_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(==|=|!=|\s+in\s+|\s+notin\s+)\s*(.*?))?\s*$")


def parse_label_selector(s):
    """Returns [(key, op, values)] with op in '=', '!=', 'in', 'notin', 'exists', '!'."""
    if not s:
        return []
    terms, depth, cur = [], 0, ""
    for c in s:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            terms.append(cur)
            cur = ""
        else:
            cur += c
    terms.append(cur)
    reqs = []
    for t in terms:
        if not t.strip():
            continue
        m = _LABEL_TERM_RE.match(t)
        if not m:
            raise err_bad_request("unable to parse requirement: invalid label selector: %s" % t)
        neg, key, op, val = m.groups()
        if neg:
            reqs.append((key, "!", []))
        elif op is None:
            reqs.append((key, "exists", []))
        else:
            op = op.strip()
            if op in ("in", "notin"):
                vals = [v.strip() for v in val.strip().lstrip("(").rstrip(")").split(",")]
                reqs.append((key, op, vals))
            else:
                reqs.append((key, "!=" if op == "!=" else "=", [val.strip()]))
    return reqs


def label_match(labels, reqs):
    labels = labels or {}
    for key, op, vals in reqs:
        has = key in labels
        v = labels.get(key)
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
        if op == "=" and (not has or v != vals[0]):
            return False
        if op == "!=" and has and v == vals[0]:
            return False
        if op == "in" and (not has or v not in vals):
            return False
        if op == "notin" and has and v in vals:
            return False
    return True


def get_path(obj, dotted):
    cur = obj
    for p in dotted.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def fstr(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def field_getter(dotted):
    return lambda o: fstr(get_path(o, dotted))


def selectors_for(kind, params):
    freqs = parse_field_selector(params.get("fieldSelector", ""))
    for key, op, val in freqs:
        if key not in kind.fields:
            raise err_bad_request("field label not supported: %s" % key)
    return freqs, parse_label_selector(params.get("labelSelector", ""))
