"""The little protobuf the emulator speaks: a decoder for request bodies and an encoder for one document.

Owns: the ``k8s\\0`` envelope (runtime.Unknown) and a schema-driven decoder of CertificateSigningRequest
bodies (the typed clientset of ``kubectl certificate approve|deny`` sends protobuf; other kinds get 415), and
``pb_field`` (a length-delimited field, enough for the empty OpenAPI v2 document older kubectl wants).
Beyond docs/kube-api.md §9: what kubectl needs (the closing paragraph of §9).
"""

import base64
import datetime

from .errors import err_bad_request
from .util import UTC, fmt_time


def pb_field(num, payload):
    """Protobuf length-delimited field (enough for the tiny OpenAPI v2 document)."""
    n, varint = len(payload), b""
    while True:
        b = n & 0x7F
        n >>= 7
        varint += bytes([b | (0x80 if n else 0)])
        if not n:
            break
    return bytes([(num << 3) | 2]) + varint + payload


# Protobuf request bodies (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): "k8s\\0" + runtime.Unknown
# {typeMeta, raw}. Only CertificateSigningRequest is decoded: the typed clientset kubectl uses for `kubectl
# certificate approve|deny` sends protobuf and the real API server accepts it. Schemas: field number ->
# (json name, kind) with kind "s" string, "b" bytes (base64 in JSON), "i" integer, "t" Time, "S" repeated
# string, "m" map<string,string>, a dict for a message, or [dict] for a repeated message.
_PB_TIME = {1: ("seconds", "i"), 2: ("nanos", "i")}
_PB_META = {1: ("name", "s"), 2: ("generateName", "s"), 3: ("namespace", "s"), 5: ("uid", "s"),
            6: ("resourceVersion", "s"), 7: ("generation", "i"), 8: ("creationTimestamp", "t"),
            11: ("labels", "m"), 12: ("annotations", "m"), 14: ("finalizers", "S")}
_PB_CSR = {1: ("metadata", _PB_META),
           2: ("spec", {1: ("request", "b"), 2: ("username", "s"), 3: ("uid", "s"), 4: ("groups", "S"),
                        5: ("usages", "S"), 7: ("signerName", "s"), 8: ("expirationSeconds", "i")}),
           3: ("status", {1: ("conditions", [{1: ("type", "s"), 2: ("reason", "s"), 3: ("message", "s"),
                                               4: ("lastUpdateTime", "t"), 5: ("lastTransitionTime", "t"),
                                               6: ("status", "s")}]), 2: ("certificate", "b")})}
_PB_SCHEMAS = {"CertificateSigningRequest": _PB_CSR}


def _pb_fields(data):
    """Yields (field number, wire type, value) of one protobuf message."""
    i = 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(data):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            yield num, wt, varint()
        elif wt == 2:
            n = varint()
            yield num, wt, data[i:i + n]
            i += n
        elif wt in (1, 5):
            i += 8 if wt == 1 else 4
        else:
            raise ValueError("unsupported wire type %d" % wt)


def _pb_decode(data, schema):
    out = {}
    for num, wt, v in _pb_fields(data):
        if num not in schema:
            continue
        name, kind = schema[num]
        if kind == "s":
            out[name] = v.decode()
        elif kind == "b":
            out[name] = base64.b64encode(v).decode()
        elif kind == "i":
            out[name] = v - (1 << 64) if v >= 1 << 63 else v
        elif kind == "t":
            t = _pb_decode(v, _PB_TIME)
            out[name] = fmt_time(datetime.datetime.fromtimestamp(t.get("seconds", 0), UTC))
        elif kind == "S":
            out.setdefault(name, []).append(v.decode())
        elif kind == "m":
            kv = {n: x.decode() for n, _, x in _pb_fields(v)}
            out.setdefault(name, {})[kv.get(1, "")] = kv.get(2, "")
        elif isinstance(kind, list):
            out.setdefault(name, []).append(_pb_decode(v, kind[0]))
        else:
            out[name] = _pb_decode(v, kind)
    return out


def decode_protobuf_body(body):
    """A JSON object from a protobuf-encoded request body; None for kinds not decoded here (-> 415)."""
    if not body.startswith(b"k8s\x00"):
        raise err_bad_request("provided data does not appear to be a protobuf message, expected prefix "
                              "[107 56 115 0]")
    unknown = {num: v for num, _, v in _pb_fields(body[4:])}
    tm = {num: v.decode() for num, _, v in _pb_fields(unknown.get(1, b""))}
    api_version, kind = tm.get(1, ""), tm.get(2, "")
    if kind not in _PB_SCHEMAS:
        return None
    return dict(_pb_decode(unknown.get(2, b""), _PB_SCHEMAS[kind]), apiVersion=api_version, kind=kind)
