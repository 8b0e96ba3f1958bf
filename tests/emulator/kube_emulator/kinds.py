"""The kinds the emulator serves: their resources, versions, storage, field selectors and conversions.

Owns: Kind (resource, kind, group/version, namespaced, schema, selectable fields, subresources, short names,
conversion to and from its storage form), KINDS and the lookups by group/version/resource and by storage,
the list merge keys (strategic merge patch and server-side apply: conditions by type, finalizers as a set,
...), the core/v1 <-> events.k8s.io/v1 Event conversion (one storage), the per-kind normalisation (Secret
stringData, the Event fields core/v1 always serialises), the namespaces that always exist, and
``node_template``: the Node a kubelet registers (for ``--node`` and ``POST /node``).
Adding a kind: its schema in schema.py, its Kind here, its rules in validation.py.
Implements docs/kube-api.md §3.5, §5.4 and the resource list of §9.
"""

import base64
import hashlib
import uuid

from .schema import CSR_SCHEMA, EVENTV1_SCHEMA, EVENT_SCHEMA, LEASE_SCHEMA, NODE_SCHEMA, OPEN_SCHEMA, SECRET_SCHEMA
from .selectors import field_getter, fstr, get_path
from .util import now_time


PRIM = "$primitive"
COMMON_LIST_KEYS = {("metadata", "ownerReferences"): "uid", ("metadata", "finalizers"): PRIM}
LIST_KEYS = {
    "Node": {("status", "conditions"): "type", ("status", "addresses"): "type", ("spec", "podCIDRs"): PRIM},
    "Pod": {("spec", "containers"): "name", ("spec", "initContainers"): "name", ("spec", "volumes"): "name",
            ("status", "conditions"): "type", ("spec", "containers", "*", "env"): "name",
            ("spec", "containers", "*", "volumeMounts"): "mountPath", ("spec", "imagePullSecrets"): "name"},
}


def list_key(kind, spath):
    return COMMON_LIST_KEYS.get(spath) or LIST_KEYS.get(kind, {}).get(spath)


def event_core_to_v1(o):
    out = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": o.get("metadata", {}),
           "eventTime": o.get("eventTime")}
    if o.get("series"):
        out["series"] = {k: v for k, v in o["series"].items() if k in ("count", "lastObservedTime")}
    for src, dst in (("reportingComponent", "reportingController"), ("reportingInstance", "reportingInstance"),
                     ("action", "action"), ("reason", "reason")):
        if o.get(src):
            out[dst] = o[src]
    out["regarding"] = o.get("involvedObject") or {}
    if o.get("related"):
        out["related"] = o["related"]
    if o.get("message"):
        out["note"] = o["message"]
    if o.get("type"):
        out["type"] = o["type"]
    out["deprecatedSource"] = o.get("source") or {}
    out["deprecatedFirstTimestamp"] = o.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = o.get("lastTimestamp")
    if o.get("count"):
        out["deprecatedCount"] = o["count"]
    return out


def event_v1_to_core(o):
    out = {"kind": "Event", "apiVersion": "v1", "metadata": o.get("metadata", {})}
    m = {"regarding": "involvedObject", "note": "message", "deprecatedSource": "source",
         "deprecatedFirstTimestamp": "firstTimestamp", "deprecatedLastTimestamp": "lastTimestamp",
         "deprecatedCount": "count", "reportingController": "reportingComponent"}
    for k, v in o.items():
        if k in ("kind", "apiVersion", "metadata"):
            continue
        out[m.get(k, k)] = v
    return out


def normalize_event(o):
    """Fields core/v1 always serialises (not omitempty in api/core/v1/types.go)."""
    o.setdefault("involvedObject", {})
    o.setdefault("source", {})
    o.setdefault("firstTimestamp", None)
    o.setdefault("lastTimestamp", None)
    o.setdefault("eventTime", None)
    o.setdefault("reportingComponent", "")
    o.setdefault("reportingInstance", "")
    order = list(EVENT_SCHEMA)
    return {k: o[k] for k in sorted(o, key=lambda k: order.index(k) if k in order else 99)}


def normalize_secret(o):
    sd = o.pop("stringData", None) or {}
    if sd:
        data = dict(o.get("data") or {})
        for k, v in sd.items():
            data[k] = base64.b64encode(v.encode()).decode()
        o["data"] = dict(sorted(data.items()))
    o.setdefault("type", "Opaque")
    return o


class Kind:
    def __init__(self, resource, kind, group, version, namespaced, schema, fields, storage=None, subresources=(),
                 short=(), verbs=None, to_ext=None, from_ext=None, normalize=None):
        self.resource, self.kind, self.group, self.version = resource, kind, group, version
        self.namespaced, self.schema, self.fields = namespaced, schema, fields
        self.storage = storage or resource
        self.subresources, self.short = subresources, short
        self.verbs = verbs or ["create", "delete", "get", "list", "patch", "update", "watch"]
        self.to_ext = to_ext or (lambda o: o)
        self.from_ext = from_ext or (lambda o: o)
        self.normalize = normalize or (lambda o: o)

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    @property
    def list_kind(self):
        return self.kind + "List"


META_FIELDS = {"metadata.name": field_getter("metadata.name"), "metadata.namespace": field_getter("metadata.namespace")}
EVENT_FIELDS = dict(META_FIELDS, **{
    "involvedObject.%s" % f: field_getter("involvedObject." + f)
    for f in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")})
EVENT_FIELDS.update({"reason": field_getter("reason"), "reportingComponent": field_getter("reportingComponent"),
                     "source": field_getter("source.component"), "type": field_getter("type")})
POD_FIELDS = dict(META_FIELDS, **{f: field_getter(f) for f in (
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
    "status.phase", "status.podIP", "status.nominatedNodeName")})

KINDS = [
    Kind("nodes", "Node", "", "v1", False, NODE_SCHEMA,
         dict(META_FIELDS, **{"spec.unschedulable": lambda o: fstr(bool(get_path(o, "spec.unschedulable")))}),
         subresources=("status",), short=("no",)),
    Kind("namespaces", "Namespace", "", "v1", False, OPEN_SCHEMA,
         dict(META_FIELDS, **{"status.phase": field_getter("status.phase")}), short=("ns",)),
    Kind("secrets", "Secret", "", "v1", True, SECRET_SCHEMA, dict(META_FIELDS, type=field_getter("type")),
         normalize=normalize_secret),
    Kind("pods", "Pod", "", "v1", True, OPEN_SCHEMA, POD_FIELDS, subresources=("status",), short=("po",)),
    Kind("events", "Event", "", "v1", True, EVENT_SCHEMA, EVENT_FIELDS, short=("ev",), normalize=normalize_event),
    Kind("events", "Event", "events.k8s.io", "v1", True, EVENTV1_SCHEMA, EVENT_FIELDS, short=("ev",),
         to_ext=event_core_to_v1, from_ext=event_v1_to_core, normalize=normalize_event),
    Kind("leases", "Lease", "coordination.k8s.io", "v1", True, LEASE_SCHEMA, META_FIELDS),
    Kind("certificatesigningrequests", "CertificateSigningRequest", "certificates.k8s.io", "v1", False, CSR_SCHEMA,
         dict(META_FIELDS, **{"spec.signerName": field_getter("spec.signerName")}),
         subresources=("approval", "status"), short=("csr",)),
]
KIND_BY_GVR = {(k.group, k.version, k.resource): k for k in KINDS}
KIND_BY_STORAGE = {}
for _k in KINDS:
    KIND_BY_STORAGE.setdefault(_k.storage, _k)      # the first (core) definition is the storage form
KNOWN_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def node_template(name, labels=None, annotations=None, kubelet_version="v1.31.4", os_image="Garden Linux 1592.6",
                  address=None):
    now = now_time()
    lab = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
           "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
           "node.kubernetes.io/instance-type": "m5.large"}
    lab.update(labels or {})
    ann = {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    ann.update(annotations or {})
    h = int(hashlib.sha256(name.encode()).hexdigest()[:6], 16)
    addr = address or "10.%d.%d.%d" % (h >> 16 & 255, h >> 8 & 255, max(1, h & 255))
    res = {"cpu": "2", "ephemeral-storage": "20134592Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
           "memory": "8029416Ki", "pods": "110"}

    def cond(t, s, reason, msg):
        return {"type": t, "status": s, "lastHeartbeatTime": now, "lastTransitionTime": now, "reason": reason,
                "message": msg}
    return {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "labels": lab, "annotations": ann},
            "spec": {"podCIDR": "100.96.%d.0/24" % (h & 255), "podCIDRs": ["100.96.%d.0/24" % (h & 255)],
                     "providerID": "emulator:///%s" % name},
            "status": {"capacity": res, "allocatable": dict(res, memory="7927016Ki"),
                       "conditions": [
                           cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                                "kubelet has sufficient memory available"),
                           cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                           cond("PIDPressure", "False", "KubeletHasSufficientPID",
                                "kubelet has sufficient PID available"),
                           cond("Ready", "True", "KubeletReady", "kubelet is posting ready status")],
                       "addresses": [{"type": "InternalIP", "address": addr}, {"type": "Hostname", "address": name}],
                       "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                       "nodeInfo": {"machineID": hashlib.md5(name.encode()).hexdigest(),
                                    "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
                                    "bootID": str(uuid.uuid4()), "kernelVersion": "6.6.62-cloud-amd64",
                                    "osImage": os_image, "containerRuntimeVersion": "containerd://1.7.24",
                                    "kubeletVersion": kubelet_version, "kubeProxyVersion": "",
                                    "operatingSystem": "linux", "architecture": "amd64"}}}
