"""The schemas of the served kinds and the walk that holds an incoming object against them.

Owns: the field tables of Node, Event (core/v1 and events.k8s.io/v1), Lease, Secret, CSR and the open kinds
(Namespace, Pod), and Coercer: it prunes unknown fields (for the ``Warning: 299`` / ``fieldValidation=Strict``
answers), checks JSON types like Go's decoder (its "cannot unmarshal" messages), and normalises times, maps and
Quantities as the server would re-encode them (Go struct order, sorted maps).
Implements docs/kube-api.md §1 (JSON facts) and §9 items 35 (unknown fields) and 42 (MicroTime).
"""

import base64

from .util import fmt_micro, fmt_time, parse_time


STR, BOOL, INT, TIME, MICRO, MAPSTR, QTY, ANY, B64 = "string", "bool", "int64", "Time", "MicroTime", \
    "map[string]string", "Quantity", "any", "[]byte"
DROP = object()


def LIST(s):
    return ("list", s)


def MAP(s):
    return ("map", s)


META = {"name": STR, "generateName": STR, "namespace": STR, "selfLink": STR, "uid": STR, "resourceVersion": STR,
        "generation": INT, "creationTimestamp": TIME, "deletionTimestamp": TIME, "deletionGracePeriodSeconds": INT,
        "labels": MAPSTR, "annotations": MAPSTR,
        "ownerReferences": LIST({"apiVersion": STR, "kind": STR, "name": STR, "uid": STR, "controller": BOOL,
                                 "blockOwnerDeletion": BOOL}),
        "finalizers": LIST(STR), "managedFields": ANY}
OBJREF = {"kind": STR, "namespace": STR, "name": STR, "uid": STR, "apiVersion": STR, "resourceVersion": STR,
          "fieldPath": STR}
TYPEMETA = {"kind": STR, "apiVersion": STR, "metadata": META}
NODE_SCHEMA = dict(TYPEMETA, spec={
    "podCIDR": STR, "podCIDRs": LIST(STR), "providerID": STR, "unschedulable": BOOL,
    "taints": LIST({"key": STR, "value": STR, "effect": STR, "timeAdded": TIME}), "configSource": ANY,
    "externalID": STR}, status={
    "capacity": MAP(QTY), "allocatable": MAP(QTY), "phase": STR,
    "conditions": LIST({"type": STR, "status": STR, "lastHeartbeatTime": TIME, "lastTransitionTime": TIME,
                        "reason": STR, "message": STR}),
    "addresses": LIST({"type": STR, "address": STR}), "daemonEndpoints": {"kubeletEndpoint": {"Port": INT}},
    "nodeInfo": {"machineID": STR, "systemUUID": STR, "bootID": STR, "kernelVersion": STR, "osImage": STR,
                 "containerRuntimeVersion": STR, "kubeletVersion": STR, "kubeProxyVersion": STR,
                 "operatingSystem": STR, "architecture": STR, "swap": ANY},
    "images": LIST({"names": LIST(STR), "sizeBytes": INT}), "volumesInUse": LIST(STR),
    "volumesAttached": LIST({"name": STR, "devicePath": STR}), "config": ANY, "runtimeHandlers": ANY,
    "features": ANY, "declaredFeatures": ANY})
EVENT_SCHEMA = dict(TYPEMETA, involvedObject=OBJREF, reason=STR, message=STR,
                    source={"component": STR, "host": STR}, firstTimestamp=TIME, lastTimestamp=TIME, count=INT,
                    type=STR, eventTime=MICRO, series={"count": INT, "lastObservedTime": MICRO, "state": STR},
                    action=STR, related=OBJREF, reportingComponent=STR, reportingInstance=STR)
EVENTV1_SCHEMA = dict(TYPEMETA, eventTime=MICRO, series={"count": INT, "lastObservedTime": MICRO},
                      reportingController=STR, reportingInstance=STR, action=STR, reason=STR, regarding=OBJREF,
                      related=OBJREF, note=STR, type=STR, deprecatedSource={"component": STR, "host": STR},
                      deprecatedFirstTimestamp=TIME, deprecatedLastTimestamp=TIME, deprecatedCount=INT)
LEASE_SCHEMA = dict(TYPEMETA, spec={"holderIdentity": STR, "leaseDurationSeconds": INT, "acquireTime": MICRO,
                                    "renewTime": MICRO, "leaseTransitions": INT, "strategy": STR,
                                    "preferredHolder": STR})
SECRET_SCHEMA = dict(TYPEMETA, data=MAP(B64), stringData=MAPSTR, type=STR, immutable=BOOL)
CSR_CONDITION = {"type": STR, "status": STR, "reason": STR, "message": STR, "lastUpdateTime": TIME,
                 "lastTransitionTime": TIME}
CSR_SCHEMA = dict(TYPEMETA, spec={"request": B64, "signerName": STR, "expirationSeconds": INT, "usages": LIST(STR),
                                  "username": STR, "uid": STR, "groups": LIST(STR), "extra": ANY},
                  status={"conditions": LIST(CSR_CONDITION), "certificate": B64})
OPEN_SCHEMA = dict(TYPEMETA, spec=ANY, status=ANY)

GO_JSON_TYPES = {str: "string", bool: "bool", int: "number", float: "number", list: "array", dict: "object"}


class Coercer:
    """Walks an object against a schema: prunes unknown fields, checks JSON types, normalises times."""

    def __init__(self):
        self.unknown = []
        self.type_errors = []

    def _type_err(self, path, value, want):
        self.type_errors.append("json: cannot unmarshal %s into Go struct field .%s of type %s" %
                                (GO_JSON_TYPES.get(type(value), "value"), path, want))
        return DROP

    def run(self, value, schema, path=""):
        if value is None:
            return DROP
        if schema == ANY:
            return value
        if isinstance(schema, dict):
            if not isinstance(value, dict):
                return self._type_err(path, value, "object")
            out = {}
            for k in value:
                if k not in schema:
                    self.unknown.append(path + "." + k if path else k)
            for k in schema:          # Go encodes struct fields in declaration order
                if k in value:
                    r = self.run(value[k], schema[k], path + "." + k if path else k)
                    if r is not DROP:
                        out[k] = r
            return out
        if isinstance(schema, tuple) and schema[0] == "list":
            if not isinstance(value, list):
                return self._type_err(path, value, "[]")
            out = []
            for i, v in enumerate(value):
                r = self.run(v, schema[1], "%s[%d]" % (path, i))
                if r is not DROP:
                    out.append(r)
            return out
        if isinstance(schema, tuple) and schema[0] == "map":
            if not isinstance(value, dict):
                return self._type_err(path, value, "map")
            out = {}
            for k in sorted(value):   # Go encodes maps with sorted keys
                r = self.run(value[k], schema[1], path + "." + k)
                if r is not DROP:
                    out[k] = r
            return out
        if schema == MAPSTR:
            if not isinstance(value, dict):
                return self._type_err(path, value, "map[string]string")
            out = {}
            for k, v in sorted(value.items()):
                if v is None:
                    continue
                if not isinstance(v, str):
                    self._type_err(path, v, "string")
                    continue
                out[k] = v
            return out
        if schema == STR:
            return value if isinstance(value, str) else self._type_err(path, value, "string")
        if schema == BOOL:
            return value if isinstance(value, bool) else self._type_err(path, value, "bool")
        if schema == INT:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return self._type_err(path, value, "int64")
            if isinstance(value, float):
                if value != int(value):
                    return self._type_err(path, value, "int64")
                return int(value)
            return value
        if schema == QTY:
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                return self._type_err(path, value, "resource.Quantity")
            return str(value)
        if schema == B64:
            if not isinstance(value, str):
                return self._type_err(path, value, "[]byte")
            try:
                base64.b64decode(value, validate=True)
            except ValueError:
                self.type_errors.append("illegal base64 data at %s" % path)
                return DROP
            return value
        if schema in (TIME, MICRO):
            try:
                dt = parse_time(value, micro=(schema == MICRO))
            except ValueError as e:
                self.type_errors.append(str(e))
                return DROP
            return fmt_micro(dt) if schema == MICRO else fmt_time(dt)
        return value
