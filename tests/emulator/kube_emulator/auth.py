"""Authentication: who a request is.

Owns: Identity (user, groups, how it authenticated), the anonymous identity, the static token table
(add, revoke, expiry), bootstrap tokens (Secrets kube-system/bootstrap-token-<id>), and client certificates
(the emulator CA's only, within their validity).
Implements docs/kube-api.md §2.3, §2.5 and §9 items 3-6; §10 fault 12.

* Client certificate signed by the emulator CA (CN -> user, O -> groups) wins; a cert from the emulator's
  "wrong" CA or an expired one gives 401 (like kube-apiserver, which checks certs in the authenticator). A cert
  from a completely foreign CA fails the TLS handshake.
* ``Authorization: Bearer`` with a known, unexpired token; anything else in Authorization -> 401
  ``{"kind":"Status",...,"message":"Unauthorized","reason":"Unauthorized","code":401}``.
* Bootstrap tokens ``Bearer <id>.<secret>`` (docs/kube-api.md §2): Secret kube-system/bootstrap-token-<id> of type
  bootstrap.kubernetes.io/token with matching token-secret, usage-bootstrap-authentication=true and no past
  expiration -> user system:bootstrap:<id>, groups system:bootstrappers (+ auth-extra-groups). Authorized like
  RBAC's system:node-bootstrapper: certificatesigningrequests create/get/list/watch, nothing else.
* No credentials -> system:anonymous: 403 for API paths (only /version, /healthz, /livez, /readyz allowed);
  401 instead with config anonymous_401=true.
"""

import base64
import re
import ssl
import threading
import time

from .tls import CertFactory
from .util import parse_time, utcnow


class Identity:
    def __init__(self, user, groups, via):
        self.user, self.groups, self.via = user, list(groups), via

    def node_name(self):
        if self.user.startswith("system:node:") and "system:nodes" in self.groups:
            return self.user[len("system:node:"):]
        return None


ANONYMOUS = Identity("system:anonymous", ["system:unauthenticated"], "anonymous")


class Tokens:
    def __init__(self):
        self.lock = threading.Lock()
        self.table = {}

    def add(self, token, user, groups=(), expires_in=None):
        groups = list(groups)
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        with self.lock:
            self.table[token] = {"user": user, "groups": groups,
                                 "expires": time.time() + expires_in if expires_in else None}

    def revoke(self, token):
        with self.lock:
            return self.table.pop(token, None) is not None

    def lookup(self, token):
        with self.lock:
            t = self.table.get(token)
            if not t or (t["expires"] and t["expires"] <= time.time()):
                return None
            return Identity(t["user"], t["groups"], "token")

    def dump(self):
        with self.lock:
            return {k: dict(v) for k, v in self.table.items()}


BOOTSTRAP_TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")


def bootstrap_token_identity(emu, token):
    """The bootstrap-token authenticator (k8s plugin/pkg/auth/authenticator/token/bootstrap): `<id>.<secret>`
    matches Secret kube-system/bootstrap-token-<id> of type bootstrap.kubernetes.io/token with the same
    token-secret, usage-bootstrap-authentication=true and no past expiration -> user system:bootstrap:<id>,
    groups system:bootstrappers + auth-extra-groups. Anything else: None (401)."""
    m = BOOTSTRAP_TOKEN.match(token)
    if not m:
        return None
    sec = emu.store.get("secrets", "kube-system", "bootstrap-token-" + m.group(1))
    if not sec or sec.get("type") != "bootstrap.kubernetes.io/token" or sec["metadata"].get("deletionTimestamp"):
        return None
    data = {k: base64.b64decode(v).decode(errors="replace") for k, v in (sec.get("data") or {}).items()}
    if data.get("token-id") != m.group(1) or data.get("token-secret") != m.group(2):
        return None
    if data.get("usage-bootstrap-authentication") != "true":
        return None
    if data.get("expiration"):
        try:
            if parse_time(data["expiration"]) <= utcnow():
                return None
        except ValueError:
            return None
    extra = [g.strip() for g in data.get("auth-extra-groups", "").split(",")
             if g.strip().startswith("system:bootstrappers:")]
    return Identity("system:bootstrap:" + m.group(1), ["system:bootstrappers"] + extra + ["system:authenticated"],
                    "bootstrap-token")


def cert_identity(cert):
    """Map a verified peer certificate to an Identity (None if not acceptable -> 401)."""
    if not cert:
        return None
    subj = [x for rdn in cert.get("subject", ()) for x in rdn]
    issuer = [x for rdn in cert.get("issuer", ()) for x in rdn]
    cn = next((v for k, v in subj if k == "commonName"), "")
    orgs = [v for k, v in subj if k == "organizationName"]
    if next((v for k, v in issuer if k == "commonName"), "") != CertFactory.GOOD_CA:
        return False
    try:
        if ssl.cert_time_to_seconds(cert["notAfter"]) < time.time() or \
                ssl.cert_time_to_seconds(cert["notBefore"]) > time.time():
            return False
    except (KeyError, ValueError):
        return False
    return Identity(cn, orgs + ["system:authenticated"], "x509")
