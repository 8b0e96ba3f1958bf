"""The CertificateSigningRequest object's own rules (certificates.k8s.io/v1), as its registry enforces them.

Owns: reading a PKCS#10 request's subject (with its self-signature verified, by ``openssl req``), the allowed
key usages, the CSR validation (request, signerName, usages, expirationSeconds, conditions), and the update
strategies of the main resource, ``/approval`` and ``/status`` (spec immutable, approval conditions only
through /approval, the certificate set once through /status). The approver and signer that act on CSRs are
in controllers.py.
Implements the CSR part of docs/kube-api.md §6.3.
"""

import base64
import subprocess

from .errors import FieldError
from .util import deep


def csr_subject(pem):
    """(CN, [O...]) of a PEM PKCS#10 request whose self-signature verifies, else None (openssl req parses it)."""
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        return None
    r = subprocess.run(["openssl", "req", "-noout", "-verify", "-subject", "-nameopt", "sep_multiline,sname"],
                       input=pem, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        return None
    fields = [ln.strip().split("=", 1) for ln in r.stdout.decode(errors="replace").splitlines()[1:] if "=" in ln]
    return (next((v for k, v in fields if k == "CN"), ""), [v for k, v in fields if k == "O"])


CSR_USAGES = {"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
              "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any", "server auth",
              "client auth", "code signing", "email protection", "s/mime", "ipsec end system", "ipsec tunnel",
              "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"}


def validate_csr(obj, create):
    """pkg/apis/certificates/validation (reduced): request, signerName, usages, expirationSeconds, conditions."""
    errs, spec, st = [], obj.get("spec") or {}, obj.get("status") or {}
    if create:
        try:
            pem = base64.b64decode(spec.get("request") or "")
        except ValueError:
            pem = b""
        if csr_subject(pem) is None:
            errs.append(FieldError("Invalid", "spec.request", "[]byte{...}",
                                   "PEM block type must be CERTIFICATE REQUEST"))
        if not spec.get("signerName"):
            errs.append(FieldError("Required", "spec.signerName", None, ""))
        if not spec.get("usages"):
            errs.append(FieldError("Required", "spec.usages", None, ""))
        for i, u in enumerate(spec.get("usages") or []):
            if u not in CSR_USAGES:
                errs.append(FieldError("NotSupported", "spec.usages[%d]" % i, u, sorted(CSR_USAGES)))
        if spec.get("expirationSeconds") is not None and spec["expirationSeconds"] < 600:
            errs.append(FieldError("Invalid", "spec.expirationSeconds", spec["expirationSeconds"],
                                   "may not specify a duration less than 600 seconds (10 minutes)"))
    seen = set()
    for i, c in enumerate(st.get("conditions") or []):
        t = c.get("type", "")
        if not t:
            errs.append(FieldError("Required", "status.conditions[%d].type" % i, None, ""))
        if t in seen and t in ("Approved", "Denied", "Failed"):
            errs.append(FieldError("Duplicate", "status.conditions[%d].type" % i, t))
        seen.add(t)
        if c.get("status") not in ("True", "False", "Unknown"):
            errs.append(FieldError("NotSupported", "status.conditions[%d].status" % i, c.get("status", ""),
                                   ["False", "True", "Unknown"]))
        elif t in ("Approved", "Denied") and c["status"] != "True":
            errs.append(FieldError("NotSupported", "status.conditions[%d].status" % i, c["status"], ["True"]))
    if {"Approved", "Denied"} <= seen:
        errs.append(FieldError("Invalid", "status.conditions", "Approved",
                               "Approved and Denied conditions are mutually exclusive"))
    if st.get("certificate") and "Approved" not in seen:
        errs.append(FieldError("Invalid", "status.certificate", "",
                               "certificate may only be set when the request is approved"))
    return errs


def csr_update_strategy(sub, old, new):
    """The CSR's registry strategies: spec is immutable; the main resource changes metadata only, /approval only
    the Approved/Denied conditions, /status everything else in status (and the certificate, once)."""
    new["spec"] = deep(old.get("spec") or {})
    ost, nst = old.get("status") or {}, new.get("status") or {}
    approval = lambda c: c.get("type") in ("Approved", "Denied")
    oc, nc = ost.get("conditions") or [], nst.get("conditions") or []
    if sub == "approval":
        st = dict(deep(ost), conditions=[c for c in oc if not approval(c)] + [c for c in nc if approval(c)])
    elif sub == "status":
        st = dict(deep(nst), conditions=[c for c in oc if approval(c)] + [c for c in nc if not approval(c)])
        if ost.get("certificate"):
            st["certificate"] = ost["certificate"]
    else:
        st = deep(ost)
    if not st.get("conditions"):
        st.pop("conditions", None)
    new["status"] = st
    if not st:
        new.pop("status")
