"""Validation of what a client sends: object metadata, per-kind rules, and LIST/WATCH options.

Owns: apimachinery's name and label rules (qualified names, label values, DNS-1123 subdomains, path segment
names) with their exact messages, ObjectMeta validation (names, labels, annotations and their size limit),
the Event rules of core/v1 and events.k8s.io/v1, the Lease and Node taint rules, the dispatch per kind
(``validate_kind``; CSRs in csr.py), and the query's resourceVersion and ListOptions (resourceVersionMatch,
sendInitialEvents).
Implements docs/kube-api.md §4.5, §5.1, §5.4 and §9 items 21, 32, 37, 40 and 42.
"""

import re

from .csr import validate_csr
from .errors import FieldError, err_bad_request, err_invalid
from .util import go_quote


_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_RE = re.compile("^" + _QNAME_FMT + "$")
_QNAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
              "alphanumeric character")
_LVALUE_FMT = "(" + _QNAME_FMT + ")?"
_LVALUE_RE = re.compile("^" + _LVALUE_FMT + "$")
_LVALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
               "must start and end with an alphanumeric character")
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUB_FMT = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1123_SUB_RE = re.compile("^" + _DNS1123_SUB_FMT + "$")
_DNS1123_SUB_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                    "and must start and end with an alphanumeric character")


def regex_error(msg, fmt, *examples):
    s = msg + " (e.g. "
    for i, e in enumerate(examples):
        if i:
            s += " or "
        s += "'" + e + "', "
    return s + "regex used for validation is '" + fmt + "')"


def is_dns1123_subdomain(v):
    errs = []
    if len(v) > 253:
        errs.append("must be no more than 253 characters")
    if not _DNS1123_SUB_RE.match(v):
        errs.append(regex_error(_DNS1123_SUB_MSG, _DNS1123_SUB_FMT, "example.com"))
    return errs


def is_qualified_name(v):
    errs = []
    parts = v.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix)]
    else:
        return ["a qualified name " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc") +
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QNAME_RE.match(name):
        errs.append("name part " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(v):
    errs = []
    if len(v) > 63:
        errs.append("must be no more than 63 characters")
    if not _LVALUE_RE.match(v):
        errs.append(regex_error(_LVALUE_MSG, _LVALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_path_segment_name(v):
    """apimachinery path.IsValidPathSegmentName: what a CSR name must be (ValidateCertificateRequestName accepts
    any name that fits in a URL path segment; upstream's digested names have '_' and capitals)."""
    if v in (".", ".."):
        return ['may not be "%s"' % v]
    return ['may not contain "%s"' % c for c in ("/", "%") if c in v]


def validate_object_meta(obj, namespaced, create, name_rule=None):
    errs = []
    md = obj.get("metadata") or {}
    name = md.get("name", "")
    if create and not name and not md.get("generateName"):
        errs.append(FieldError("Required", "metadata.name", detail="name or generateName is required"))
    elif name:
        errs += [FieldError("Invalid", "metadata.name", name, m) for m in (name_rule or is_dns1123_subdomain)(name)]
    for k, v in (md.get("labels") or {}).items():
        errs += [FieldError("Invalid", "metadata.labels", k, m) for m in is_qualified_name(k)]
        errs += [FieldError("Invalid", "metadata.labels", v, m) for m in is_label_value(v)]
    total = 0
    for k, v in (md.get("annotations") or {}).items():
        errs += [FieldError("Invalid", "metadata.annotations", k, m) for m in is_qualified_name(k.lower())]
        total += len(k) + len(v)
    if total > 256 * 1024:
        errs.append(FieldError("TooLong", "metadata.annotations", "", 256 * 1024))
    return errs


def parse_rv(s):
    try:
        n = int(s)
        if n < 0:
            raise ValueError
        return n
    except ValueError:
        raise err_bad_request("invalid resource version: %s" % go_quote(s)) from None


def validate_list_options(params, watch):
    errs = []
    match, rv = params.get("resourceVersionMatch", ""), params.get("resourceVersion", "")
    cont, sie = params.get("continue", ""), params.get("sendInitialEvents")
    F = FieldError
    if watch:
        if sie is not None and match != "NotOlderThan":
            errs.append(F("Forbidden", "resourceVersionMatch",
                          detail="sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
        if match:
            if sie is None:
                errs.append(F("Forbidden", "resourceVersionMatch", detail="resourceVersionMatch is forbidden for "
                                                                         "watch unless sendInitialEvents is provided"))
            if match != "NotOlderThan":
                errs.append(F("NotSupported", "resourceVersionMatch", match, ["NotOlderThan"]))
            if cont:
                errs.append(F("Forbidden", "resourceVersionMatch",
                              detail="resourceVersionMatch is forbidden when continue is provided"))
    else:
        if match:
            if not rv:
                errs.append(F("Forbidden", "resourceVersionMatch",
                              detail="resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if cont:
                errs.append(F("Forbidden", "resourceVersionMatch",
                              detail="resourceVersionMatch is forbidden when continue is provided"))
            if match not in ("Exact", "NotOlderThan"):
                errs.append(F("NotSupported", "resourceVersionMatch", match, ["Exact", "NotOlderThan", ""]))
            if match == "Exact" and rv == "0":
                errs.append(F("Forbidden", "resourceVersionMatch",
                              detail='resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if sie is not None:
            errs.append(F("Forbidden", "sendInitialEvents", detail="sendInitialEvents is forbidden for list"))
    if errs:
        raise err_invalid("ListOptions", "meta.k8s.io", "", errs)


def validate_event(ev, request_group, create):
    """k8s pkg/apis/core/validation/events.go (legacyValidateEvent + strict events.k8s.io/v1 checks)."""
    errs = []
    F = FieldError
    ns = (ev.get("metadata") or {}).get("namespace", "")
    inv = ev.get("involvedObject") or {}
    rc_field = "reportingComponent" if request_group == "" else "reportingController"
    if not ev.get("eventTime"):
        if not inv.get("namespace"):
            if ns not in ("", "default"):
                errs.append(F("Invalid", "involvedObject.namespace", inv.get("namespace", ""),
                              "does not match event.namespace"))
        elif ns != inv.get("namespace"):
            errs.append(F("Invalid", "involvedObject.namespace", inv.get("namespace", ""),
                          "does not match event.namespace"))
    else:
        if not inv.get("namespace") and ns not in ("default", "kube-system"):
            errs.append(F("Invalid", "involvedObject.namespace", inv.get("namespace", ""),
                          "does not match event.namespace"))
        rc = ev.get("reportingComponent", "")
        if not rc:
            errs.append(F("Required", rc_field))
        else:
            errs += [F("Invalid", rc_field, rc, m) for m in is_qualified_name(rc)]
        if not ev.get("reportingInstance"):
            errs.append(F("Required", "reportingInstance"))
        elif len(ev["reportingInstance"]) > 128:
            errs.append(F("Invalid", "reportingInstance", "", "can have at most 128 characters"))
        for f in ("action", "reason"):
            if not ev.get(f):
                errs.append(F("Required", f))
            elif len(ev[f]) > 128:
                errs.append(F("Invalid", f, "", "can have at most 128 characters"))
        if len(ev.get("message") or "") > 1024:
            errs.append(F("Invalid", "message", "", "can have at most 1024 characters"))
    if ns:
        errs += [F("Invalid", "namespace", ns, m) for m in is_dns1123_subdomain(ns)]
    if request_group == "events.k8s.io" and create:
        series = ev.get("series")
        if series:
            if (series.get("count") or 0) < 2:
                errs.append(F("Invalid", "series.count", "", "should be at least 2"))
            if not series.get("lastObservedTime"):
                errs.append(F("Required", "series.lastObservedTime"))
        if not ev.get("eventTime"):
            errs.append(F("Required", "eventTime"))
        if ev.get("type") not in ("Normal", "Warning"):
            errs.append(F("Invalid", "type", "", "has invalid value: %s" % (ev.get("type") or "")))
        if ev.get("firstTimestamp"):
            errs.append(F("Invalid", "firstTimestamp", "", "needs to be unset"))
        if ev.get("lastTimestamp"):
            errs.append(F("Invalid", "lastTimestamp", "", "needs to be unset"))
        if ev.get("count"):
            errs.append(F("Invalid", "count", "", "needs to be unset"))
        src = ev.get("source") or {}
        if src.get("component") or src.get("host"):
            errs.append(F("Invalid", "source", "", "needs to be unset"))
    return errs


def validate_kind(kind, obj, create, request_group):
    errs = validate_object_meta(obj, kind.namespaced, create, is_path_segment_name
                                if kind.storage == "certificatesigningrequests" else None)
    if kind.storage == "certificatesigningrequests":
        errs += validate_csr(obj, create)
    elif kind.storage == "events":
        errs += validate_event(obj, request_group, create)
    elif kind.storage == "leases":
        spec = obj.get("spec") or {}
        if "leaseDurationSeconds" in spec and spec["leaseDurationSeconds"] <= 0:
            errs.append(FieldError("Invalid", "spec.leaseDurationSeconds", spec["leaseDurationSeconds"],
                                   "must be greater than 0"))
        if spec.get("leaseTransitions", 0) < 0:
            errs.append(FieldError("Invalid", "spec.leaseTransitions", spec["leaseTransitions"],
                                   "must be greater than or equal to 0"))
    elif kind.storage == "nodes":
        for i, t in enumerate((obj.get("spec") or {}).get("taints") or []):
            if t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                errs.append(FieldError("NotSupported", "spec.taints[%d].effect" % i, t.get("effect", ""),
                                       ["NoExecute", "NoSchedule", "PreferNoSchedule"]))
            errs += [FieldError("Invalid", "spec.taints[%d].key" % i, t.get("key", ""), m)
                     for m in is_qualified_name(t.get("key", ""))]
    return errs
