"""The controllers a cluster runs that kube-apiserver itself does not: the CSR approver and signer.

Owns: ``csr_controllers`` (the janitor's pass over pending CSRs), ``csr_action`` (approve, deny, fail or sign
as those controllers do it: read, modify, PUT through /approval or /status; also ``POST /csr``), the
approver's decision (``node_agent_csr_decision``) and the signer (``csr_sign``).
Implements the CSR flow of docs/kube-api.md §6.3.

Controllers kube-apiserver does not run but a cluster has (in the janitor thread, every 0.2 s): with
csr_sign=true approved kubernetes.io/kube-apiserver-client CSRs are signed by the emulator CA (so the
certificate authenticates here), lifetime min(spec.expirationSeconds, csr_signing_duration), notBefore backdated
by csr_backdate; bad usages -> Failed/SignerValidationFailure. With csr_auto_approve=true node-agent CSRs
(CN gardener.cloud:node-agent:machine:*) are approved or denied like gardener-resource-manager's csrapprover
does: a bootstrap token only while the machine has no Node yet, a renewal only by the same agent.
"""

import base64
import datetime
import os
import tempfile

from .api import WriteCtx
from .auth import Identity
from .authz import node_agent_node
from .csr import csr_subject
from .errors import err_not_found
from .kinds import KIND_BY_STORAGE
from .util import deep, go_quote, now_time, utcnow


def node_agent_csr_decision(emu, csr):
    """gardener-resource-manager's csrapprover for node-agent CSRs (CN gardener.cloud:node-agent:machine:<m>):
    ("approve"|"deny"|None, message). A bootstrap token is denied once the machine's Node exists (the agent is
    bootstrapped already); the agent itself may renew (username == CN); anyone else is denied."""
    spec = csr.get("spec") or {}
    try:
        subj = csr_subject(base64.b64decode(spec.get("request") or ""))
    except ValueError:
        return None, ""
    if not subj or not subj[0].startswith("gardener.cloud:node-agent:machine:"):
        return None, "not a CSR for gardener-node-agent"
    user, machine = spec.get("username", ""), subj[0].rsplit(":", 1)[-1]
    if user.startswith("system:bootstrap:"):
        if node_agent_node(emu, Identity(subj[0], [], "csr")) is not None:
            return "deny", ("Denying gardener-node-agent certificate CSR (Cannot use bootstrap token since "
                            "gardener-node-agent for machine %s is already bootstrapped)" % go_quote(machine))
    elif user.startswith("gardener.cloud:node-agent:machine:"):
        if user != subj[0]:
            return "deny", "Denying gardener-node-agent certificate CSR (username and commonName do not match)"
    else:
        return "deny", "Denying gardener-node-agent certificate CSR (username %s is not allowed)" % go_quote(user)
    return "approve", "Approving gardener-node-agent certificate CSR (all checks passed)"


def csr_controllers(emu):
    """One pass of the approver and the signer over the CSRs (the janitor runs it every 0.2 s)."""
    for csr in emu.store.list("certificatesigningrequests"):
        conds = {c.get("type") for c in (csr.get("status") or {}).get("conditions") or []
                 if c.get("status") == "True"}
        if conds & {"Denied", "Failed"} or (csr.get("status") or {}).get("certificate"):
            continue
        if "Approved" not in conds and emu.cfg["csr_auto_approve"]:
            decision, message = node_agent_csr_decision(emu, csr)
            if decision:
                csr_action(emu, csr["metadata"]["name"], decision,
                           "RequestApproved" if decision == "approve" else "RequestDenied", message)
        elif "Approved" in conds and emu.cfg["csr_sign"] and \
                (csr.get("spec") or {}).get("signerName") == "kubernetes.io/kube-apiserver-client":
            csr_action(emu, csr["metadata"]["name"], "sign")


def csr_action(emu, name, action, reason="", message=""):
    """approve/deny/fail (a condition through /approval or /status) or sign (the certificate through
    /status), as the controllers do it: read, modify, PUT. Returns the stored CSR."""
    kind = KIND_BY_STORAGE["certificatesigningrequests"]
    csr = emu.store.get(kind.storage, "", name)
    if csr is None:
        raise err_not_found(kind.resource, kind.group, name)
    csr = deep(csr)
    st = csr.setdefault("status", {})
    now = now_time()
    if action in ("approve", "deny", "fail"):
        ctype = {"approve": "Approved", "deny": "Denied", "fail": "Failed"}[action]
        st.setdefault("conditions", []).append({
            "type": ctype, "status": "True", "reason": reason or {"approve": "EmulatorApprove", "deny":
                                                                  "EmulatorDeny", "fail": "EmulatorFail"}[action],
            "message": message or "set through the emulator's control API", "lastUpdateTime": now,
            "lastTransitionTime": now})
        sub, user = ("status" if action == "fail" else "approval"), "emulator-control"
    elif action == "sign":
        pem, err = csr_sign(emu, csr)
        if pem is None:
            st.setdefault("conditions", []).append({
                "type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": err,
                "lastUpdateTime": now, "lastTransitionTime": now})
        else:
            st["certificate"] = base64.b64encode(pem).decode()
        sub, user = "status", "system:kube-controller-manager"
    else:
        raise ValueError("unknown CSR action %r" % action)
    ctx = WriteCtx(Identity(user, ["system:authenticated"], "control"), params={}, control=True)
    return emu.api.update(kind, "", name, sub, csr, ctx)[1]


def csr_sign(emu, csr):
    """The kubernetes.io/kube-apiserver-client signer: client auth only, no CA, lifetime
    min(expirationSeconds, csr_signing_duration), notBefore backdated. Returns (PEM, None) or (None, why)."""
    spec = csr.get("spec") or {}
    usages = set(spec.get("usages") or [])
    if "client auth" not in usages or usages - {"digital signature", "key encipherment", "client auth"}:
        return None, "invalid usage for client certificate: %s" % ", ".join(sorted(usages))
    ttl = int(emu.cfg["csr_signing_duration"])
    if spec.get("expirationSeconds"):
        ttl = min(ttl, int(spec["expirationSeconds"]))
    back = min(int(emu.cfg["csr_backdate"]), ttl)
    now = utcnow()
    fmt = lambda dt: dt.strftime("%Y%m%d%H%M%SZ")
    with emu.certs.lock, tempfile.TemporaryDirectory(dir=emu.certs.dir) as tmp:
        req, out, ext = (os.path.join(tmp, n) for n in ("req.pem", "cert.pem", "ext.cnf"))
        with open(req, "wb") as f:
            f.write(base64.b64decode(spec.get("request") or ""))
        with open(ext, "w") as f:
            f.write("[leaf]\nbasicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature,"
                    "keyEncipherment\nextendedKeyUsage = clientAuth\nauthorityKeyIdentifier = keyid\n")
        ca_crt, ca_key = emu.certs.ca("good")
        try:
            emu.certs._openssl("ca", "-batch", "-config", emu.certs.cnf, "-cert", ca_crt, "-keyfile", ca_key,
                               "-in", req, "-out", out, "-notext", "-extfile", ext, "-extensions", "leaf",
                               "-startdate", fmt(now - datetime.timedelta(seconds=back)),
                               "-enddate", fmt(now + datetime.timedelta(seconds=ttl - back)))
        except RuntimeError as e:
            return None, str(e)
        with open(out, "rb") as f:
            return f.read(), None
