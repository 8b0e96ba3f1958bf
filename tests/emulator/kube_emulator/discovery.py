"""What kubectl asks for around the verbs: discovery, OpenAPI, and server-side tables.

Owns: the APIResourceList / APIGroupList documents built from KINDS, a minimal OpenAPI v3 (PATCH and PUT
advertising fieldValidation, so kubectl leaves validation to the server), and the ``Accept: ...;as=Table``
tables with kubectl's columns for Nodes, CSRs, Leases, Events and Secrets (ages as kubectl prints them).
Beyond docs/kube-api.md §9: the discovery and server-side tables for kubectl of its closing paragraph.
"""

from .config import SERVER_VERSION
from .kinds import KINDS
from .util import human_age, human_age_secs


_COL_DESC = {"Name": "Name must be unique within a namespace. Is required when creating resources, although some "
                     "resources may allow a client to request the generation of an appropriate name "
                     "automatically. Name is primarily intended for creation idempotence and configuration "
                     "definition. Cannot be updated. More info: "
                     "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
             "Age": "CreationTimestamp is a timestamp representing the server time when this object was created."}


def _col(name, ctype="string", fmt="", priority=0, desc=None):
    return {"name": name, "type": ctype, "format": fmt, "description": desc or _COL_DESC.get(name, name),
            "priority": priority}


def _node_row(o):
    st, md = o.get("status") or {}, o.get("metadata") or {}
    ready = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    status = "Unknown" if ready is None else ("Ready" if ready.get("status") == "True" else "NotReady")
    if (o.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(k.split("/", 1)[1] for k in (md.get("labels") or {})
                   if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1])
    if (md.get("labels") or {}).get("kubernetes.io/role"):
        roles.append(md["labels"]["kubernetes.io/role"])
    addrs = st.get("addresses") or []
    ip = lambda t: ",".join(a.get("address", "") for a in addrs if a.get("type") == t) or "<none>"
    ni = st.get("nodeInfo") or {}
    return [md.get("name", ""), status, ",".join(roles) or "<none>", human_age(md.get("creationTimestamp")),
            ni.get("kubeletVersion", ""), ip("InternalIP"), ip("ExternalIP"), ni.get("osImage") or "<unknown>",
            ni.get("kernelVersion") or "<unknown>", ni.get("containerRuntimeVersion") or "<unknown>"]


def csr_condition(o):
    """kubectl's CONDITION column: Approved/Denied/Failed conditions, then Issued once a certificate is there."""
    st = o.get("status") or {}
    conds = [c.get("type", "") for c in st.get("conditions") or [] if c.get("status", "True") == "True"]
    conds = [c for c in ("Approved", "Denied", "Failed") if c in conds]
    if st.get("certificate"):
        conds.append("Issued")
    return ",".join(conds) or "Pending"


def _csr_row(o):
    spec = o.get("spec") or {}
    secs = spec.get("expirationSeconds")
    return [o["metadata"]["name"], human_age(o["metadata"].get("creationTimestamp")), spec.get("signerName", ""),
            spec.get("username", ""), human_age_secs(secs) if secs else "<none>", csr_condition(o)]


TABLES = {
    "CertificateSigningRequest": ([_col("Name", fmt="name"), _col("Age"), _col("SignerName"), _col("Requestor"),
                                   _col("RequestedDuration"), _col("Condition")], _csr_row),
    "Node": ([_col("Name", fmt="name"), _col("Status"), _col("Roles"), _col("Age"), _col("Version"),
              _col("Internal-IP", priority=1), _col("External-IP", priority=1), _col("OS-Image", priority=1),
              _col("Kernel-Version", priority=1), _col("Container-Runtime", priority=1)], _node_row),
    "Lease": ([_col("Name", fmt="name"), _col("Holder"), _col("Age")],
              lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""),
                         human_age(o["metadata"].get("creationTimestamp"))]),
    "Event": ([_col("Last Seen"), _col("Type"), _col("Reason"), _col("Object"), _col("Message")],
              lambda o: [human_age(o.get("lastTimestamp") or o.get("eventTime") or
                                   o["metadata"].get("creationTimestamp")), o.get("type", ""), o.get("reason", ""),
                         "%s/%s" % ((o.get("involvedObject") or {}).get("kind", "").lower(),
                                    (o.get("involvedObject") or {}).get("name", "")), o.get("message", "")]),
    "Secret": ([_col("Name", fmt="name"), _col("Type"), _col("Data", "integer"), _col("Age")],
               lambda o: [o["metadata"]["name"], o.get("type", ""), len(o.get("data") or {}),
                          human_age(o["metadata"].get("creationTimestamp"))]),
}


def make_table(kind, objs, rv, include_object):
    cols, rowf = TABLES.get(kind.kind, ([_col("Name", fmt="name"), _col("Age")],
                                        lambda o: [o["metadata"].get("name", ""),
                                                   human_age(o["metadata"].get("creationTimestamp"))]))
    rows = []
    for o in objs:
        row = {"cells": rowf(o)}
        if include_object == "Object":
            row["object"] = o
        elif include_object != "None":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": o.get("metadata", {})}
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": cols, "rows": rows}


def discovery_resources(group, version):
    res = []
    for k in KINDS:
        if k.group != group or k.version != version:
            continue
        r = {"name": k.resource, "singularName": k.kind.lower(), "namespaced": k.namespaced, "kind": k.kind,
             "verbs": k.verbs}
        if k.short:
            r["shortNames"] = list(k.short)
        res.append(r)
        for sub in k.subresources:
            res.append({"name": k.resource + "/" + sub, "singularName": "", "namespaced": k.namespaced,
                        "kind": k.kind, "verbs": ["get", "patch", "update"]})
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "%s/%s" % (group, version) if group
            else version, "resources": res}


def openapi_gv_paths():
    return sorted({"apis/%s/%s" % (k.group, k.version) if k.group else "api/%s" % k.version for k in KINDS})


def openapi_doc(gvpath):
    """Just enough OpenAPI v3 for kubectl: PATCH operations advertising fieldValidation, so kubectl leaves
    validation to the server instead of needing full schemas."""
    paths = {}
    for k in KINDS:
        if gvpath != ("apis/%s/%s" % (k.group, k.version) if k.group else "api/%s" % k.version):
            continue
        base = "/" + gvpath + ("/namespaces/{namespace}/" if k.namespaced else "/") + k.resource + "/{name}"
        gvk = {"group": k.group, "version": k.version, "kind": k.kind}
        params = [{"name": n, "in": "query", "schema": {"type": "string"}} for n in
                  ("dryRun", "fieldManager", "fieldValidation", "force")]
        paths[base] = {"patch": {"operationId": "patch" + k.kind, "x-kubernetes-group-version-kind": gvk,
                                 "x-kubernetes-action": "patch", "parameters": params, "responses": {}},
                       "put": {"operationId": "replace" + k.kind, "x-kubernetes-group-version-kind": gvk,
                               "x-kubernetes-action": "put", "parameters": params[:3], "responses": {}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": SERVER_VERSION}, "paths": paths,
            "components": {"schemas": {}}}


def discovery_groups():
    groups = []
    for g in sorted({k.group for k in KINDS if k.group}):
        gv = {"groupVersion": g + "/v1", "version": "v1"}
        groups.append({"name": g, "versions": [gv], "preferredVersion": gv})
    return groups
