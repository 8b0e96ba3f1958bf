#!/usr/bin/env python3
"""The emulator's CertificateSigningRequests and bootstrap tokens behave like a real cluster's.

A bootstrap token (Secret kube-system/bootstrap-token-<id>) creates a CSR with the real kubectl, an admin
approves it with `kubectl certificate approve`, the emulated kube-controller-manager signer issues a
certificate from the emulator CA, and that certificate then authenticates as the gardener node-agent. Also:
`kubectl certificate deny`, what a bootstrap token may not do, the node-agent authorizer's "own CSR only",
validation (bad request PEM, Approved+Denied), the signing duration, the emulated gardener-resource-manager
auto-approver, and a field-selected CSR watch that sees the certificate arrive. Exits 77 without kubectl.
"""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from lib import itest
from lib.itest import check, eq
import kubeemu
from kubeemu import wait_for

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")
TOKEN_ID, TOKEN_SECRET = "abcdef", "0123456789abcdef"
BOOTSTRAP_TOKEN = TOKEN_ID + "." + TOKEN_SECRET
AGENT_CN = "gardener.cloud:node-agent:machine:n1"
AGENT_O = "gardener.cloud:node-agents"
EMU = ENV = WORK = None     # the module's emulator (itest.emulator_fixture), kubectl's environment


def kubectl(*args, ok=True, kubeconfig=None, stdin=None):
    r = subprocess.run([KUBECTL] + list(args), env=dict(ENV, KUBECONFIG=kubeconfig or EMU.kubeconfig),
                       input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    out, err = r.stdout.decode(), r.stderr.decode()
    if ok and r.returncode != 0:
        raise AssertionError("kubectl %s failed (%d): %s" % (" ".join(args), r.returncode, err))
    if not ok and r.returncode == 0:
        raise AssertionError("kubectl %s unexpectedly succeeded: %s" % (" ".join(args), out))
    return out, err


def openssl(*args, stdin=None):
    r = subprocess.run(["openssl"] + list(args), input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise AssertionError("openssl %s: %s" % (args[0], r.stderr.decode()))
    return r.stdout


def make_csr(name, cn=AGENT_CN, orgs=(AGENT_O,)):
    """A fresh EC P-256 key and PKCS#10 request; returns (key path, PEM bytes)."""
    key = os.path.join(WORK, name + ".key")
    subj = "/CN=" + cn + "".join("/O=" + o for o in orgs)
    pem = openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", key, "-subj", subj)
    return key, pem


def csr_object(name, pem, usages=("digital signature", "key encipherment", "client auth"), seconds=None):
    spec = {"request": base64.b64encode(pem).decode(), "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": list(usages), "username": "someone-else", "groups": ["system:masters"]}
    if seconds:
        spec["expirationSeconds"] = seconds
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name}, "spec": spec}


def bootstrap_kubeconfig():
    path = os.path.join(WORK, "bootstrap-kubeconfig")
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n"
                "    certificate-authority: %s\nusers:\n- name: u\n  user:\n    token: %s\ncontexts:\n- name: x\n"
                "  context:\n    cluster: c\n    user: u\ncurrent-context: x\n" % (EMU.server, EMU.ca, BOOTSTRAP_TOKEN))
    return path


def stored_csr(name):
    return EMU.get("certificatesigningrequests", name, group="certificates.k8s.io")


def issued(name, timeout=10):
    wait_for(lambda: (stored_csr(name).get("status") or {}).get("certificate"), timeout, "certificate of " + name)
    return base64.b64decode(stored_csr(name)["status"]["certificate"])


def prepare(emu):
    """kubectl's own HOME and cache (the keys and requests go there too), a bootstrap token."""
    global ENV, WORK
    WORK = tempfile.mkdtemp(prefix="emu-csr-")
    unittest.addModuleCleanup(shutil.rmtree, WORK, ignore_errors=True)
    ENV = dict(os.environ, HOME=WORK, KUBECACHEDIR=os.path.join(WORK, "cache"))
    ENV.pop("KUBECONFIG", None)
    emu.seed_bootstrap_token(TOKEN_ID, TOKEN_SECRET)


setUpModule, tearDownModule = itest.emulator_fixture(globals(), setup=prepare, nodes=["n1", "n2"],
                                                     tokens=["csr-admin-token"])


class EmulatorCsr(itest.EmulatorTest):
    def test_c01_bootstrap_create_approve_issue_authenticate(self):
        key, pem = make_csr("c01")
        out, _ = kubectl("create", "-f", "-", kubeconfig=bootstrap_kubeconfig(),
                         stdin=json.dumps(csr_object("node-agent-csr-c01", pem)).encode())
        check("node-agent-csr-c01 created" in out, "create output: %r", out)
        spec = stored_csr("node-agent-csr-c01")["spec"]
        eq((spec["username"], spec["groups"]), ("system:bootstrap:" + TOKEN_ID,
                                                ["system:bootstrappers", "system:authenticated"]),
           "requester comes from authentication, not from the body")
        out, _ = kubectl("get", "csr")
        lines = [ln.split() for ln in out.splitlines()]
        eq(lines[0], ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"], "header")
        row = next(ln for ln in lines if ln[0] == "node-agent-csr-c01")
        eq((row[2], row[3], row[4], row[5]), ("kubernetes.io/kube-apiserver-client", "system:bootstrap:" + TOKEN_ID,
                                              "<none>", "Pending"), "pending row")
        out, _ = kubectl("certificate", "approve", "node-agent-csr-c01")
        check("approved" in out, "approve output: %r", out)
        check(any(e["path"].endswith("/node-agent-csr-c01/approval") and e["method"] == "PUT"
                  for e in EMU.request_log(path="certificatesigningrequests")), "kubectl used the approval subresource")
        cert = issued("node-agent-csr-c01")
        out, _ = kubectl("get", "csr", "node-agent-csr-c01")
        eq(out.splitlines()[1].split()[-1], "Approved,Issued", "condition column")
        crt = os.path.join(WORK, "c01.crt")
        with open(crt, "wb") as f:
            f.write(cert)
        subj = openssl("x509", "-in", crt, "-noout", "-subject", "-nameopt", "RFC2253").decode()
        check("CN=" + AGENT_CN in subj and "O=" + AGENT_O in subj, "subject: %s", subj)
        openssl("verify", "-CAfile", EMU.ca, "-purpose", "sslclient", crt)
        st, _, body = EMU.https_json("GET", "/api/v1/nodes/n1", token=None, cert=crt, key=key)
        eq(st, 200, "the issued certificate authenticates as the node-agent (%s)" % body)
        st, _, _ = EMU.https_json("GET", "/api/v1/nodes/n2", token=None, cert=crt, key=key)
        eq(st, 403, "node-agent authorizer: another node")
        st, _, _ = EMU.https_json("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests/node-agent-csr-c01",
                                  token=None, cert=crt, key=key)
        eq(st, 403, "node-agent may not read the bootstrap user's CSR")

    def test_c02_deny(self):
        _, pem = make_csr("c02")
        kubectl("create", "-f", "-", kubeconfig=bootstrap_kubeconfig(),
                stdin=json.dumps(csr_object("node-agent-csr-c02", pem)).encode())
        out, _ = kubectl("certificate", "deny", "node-agent-csr-c02")
        check("denied" in out, "deny output: %r", out)
        EMU.config(csr_auto_approve=True)
        try:
            out, _ = kubectl("get", "csr", "node-agent-csr-c02")
            eq(out.splitlines()[1].split()[-1], "Denied", "condition column")
            st = stored_csr("node-agent-csr-c02")["status"]
            check("certificate" not in st, "a denied CSR is never signed")
            st, _, body = EMU.https_json("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/"
                                         "node-agent-csr-c02/approval", dict(stored_csr("node-agent-csr-c02"), status={
                                             "conditions": [{"type": "Approved", "status": "True"},
                                                            {"type": "Denied", "status": "True"}]}))
            eq((st, body["reason"]), (422, "Invalid"), "Approved and Denied together")
        finally:
            EMU.config(csr_auto_approve=False)

    def test_c03_bootstrap_token_limits(self):
        st, _, _ = EMU.https_json("GET", "/api/v1/nodes", token=BOOTSTRAP_TOKEN)
        eq(st, 403, "a bootstrap token may not list nodes")
        st, _, _ = EMU.https_json("GET", "/api/v1/namespaces/kube-system/secrets/bootstrap-token-" + TOKEN_ID,
                                  token=BOOTSTRAP_TOKEN)
        eq(st, 403, "nor read secrets")
        st, _, _ = EMU.https_json("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                  token=BOOTSTRAP_TOKEN)
        eq(st, 200, "list CSRs (system:node-bootstrapper)")
        st, _, body = EMU.https_json("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                     token=TOKEN_ID + ".ffffffffffffffff")
        eq((st, body["reason"]), (401, "Unauthorized"), "wrong secret")
        EMU.seed_bootstrap_token("expire", "0123456789abcdef", expiration="2020-01-01T00:00:00Z")
        st, _, _ = EMU.https_json("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                  token="expire.0123456789abcdef")
        eq(st, 401, "expired bootstrap token")
        _, pem = make_csr("c03")
        st, _, _ = EMU.https_json("PUT", "/apis/certificates.k8s.io/v1/certificatesigningrequests/x/approval",
                                  csr_object("x", pem), token=BOOTSTRAP_TOKEN)
        eq(st, 403, "a bootstrap token cannot approve")

    def test_c04_validation(self):
        st, _, body = EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                     csr_object("bad", b"not a pem"), token=BOOTSTRAP_TOKEN)
        eq((st, body["reason"]), (422, "Invalid"), "bad request PEM")
        check(body["details"]["causes"][0]["field"] == "spec.request", "cause: %s", body)
        _, pem = make_csr("c04")
        st, _, body = EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                     csr_object("short", pem, seconds=60), token=BOOTSTRAP_TOKEN)
        eq((st, body["details"]["causes"][0]["field"]), (422, "spec.expirationSeconds"), "expirationSeconds < 600")

    def test_c05_signing_duration_autoapprove_and_watch(self):
        EMU.config(csr_auto_approve=True, csr_signing_duration=90, csr_backdate=0)
        try:
            _, pem = make_csr("c05", cn="gardener.cloud:node-agent:machine:m5")
            stream = kubeemu.RawStream(EMU, "/apis/certificates.k8s.io/v1/certificatesigningrequests?watch=1&"
                                       "fieldSelector=metadata.name%3Dnode-agent-csr-c05", token=BOOTSTRAP_TOKEN)
            try:
                st, _, body = EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                                             csr_object("node-agent-csr-c05", pem, seconds=3600), token=BOOTSTRAP_TOKEN)
                eq(st, 201, "create (%s)" % body)
                seen = []
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and not (seen and seen[-1][1]):
                    ev = stream.next_event(timeout=deadline - time.monotonic())
                    seen.append((ev["type"], (ev["object"].get("status") or {}).get("certificate")))
                eq(seen[0][0], "ADDED", "first event")
                check(seen[-1][1], "the watch delivered the certificate: %s", [s[0] for s in seen])
            finally:
                stream.close()
            crt = os.path.join(WORK, "c05.crt")
            with open(crt, "wb") as f:
                f.write(base64.b64decode(seen[-1][1]))
            dates = dict(ln.split("=", 1) for ln in openssl("x509", "-in", crt, "-noout", "-startdate",
                                                              "-enddate").decode().splitlines())
            parse = lambda s: time.mktime(time.strptime(s.replace(" GMT", ""), "%b %d %H:%M:%S %Y"))
            eq(parse(dates["notAfter"]) - parse(dates["notBefore"]), 90, "lifetime = min(expirationSeconds, duration)")
            reasons = [c["reason"] for c in stored_csr("node-agent-csr-c05")["status"]["conditions"]]
            eq(reasons, ["RequestApproved"], "auto-approved")
            _, pem = make_csr("c05b", cn="system:node:n1", orgs=("system:nodes",))
            EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                           csr_object("other-c05", pem), token=BOOTSTRAP_TOKEN)
            _, pem = make_csr("c05c")          # machine n1 has a Node: a bootstrap token must not get it
            EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                           csr_object("node-agent-csr-c05c", pem), token=BOOTSTRAP_TOKEN)
            wait_for(lambda: (stored_csr("node-agent-csr-c05c").get("status") or {}).get("conditions"), 10, "decision")
            c = stored_csr("node-agent-csr-c05c")["status"]["conditions"]
            eq([(x["type"], x["reason"]) for x in c], [("Denied", "RequestDenied")], "bootstrap token after the Node")
            check("already bootstrapped" in c[0]["message"], "message: %s", c[0]["message"])
            # the approver has looked at every CSR once since other-c05 was created
            check("status" not in stored_csr("other-c05") or not stored_csr("other-c05")["status"].get("conditions"),
                  "the auto-approver leaves non-node-agent CSRs alone")
        finally:
            EMU.config(csr_auto_approve=False, csr_signing_duration=31536000, csr_backdate=300)

    def test_c06_control_api_fail(self):
        _, pem = make_csr("c06")
        EMU.https_json("POST", "/apis/certificates.k8s.io/v1/certificatesigningrequests",
                       csr_object("node-agent-csr-c06", pem, usages=("client auth", "server auth")), token=BOOTSTRAP_TOKEN)
        EMU.csr("node-agent-csr-c06", "approve")
        wait_for(lambda: any(c["type"] == "Failed" for c in stored_csr("node-agent-csr-c06")["status"]["conditions"]),
                 10, "signer rejects server auth")
        out, _ = kubectl("get", "csr", "node-agent-csr-c06")
        eq(out.splitlines()[1].split()[-1], "Approved,Failed", "condition column")


if __name__ == "__main__":
    itest.main(missing=[] if KUBECTL else ["kubectl"])
