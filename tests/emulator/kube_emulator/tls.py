"""Certificates and the TLS server side of the API port.

Owns: CertFactory (the emulator's CA, a second "wrong" CA, server certificates of every mode and client
certificates, made with the ``openssl`` CLI in DIR/pki) and TlsConfig (the server's TLS contexts: TLS >= 1.2,
ALPN http/1.1, the server certificate mode good|wrong-ca|wrong-san|expired and the client-certificate mode
none|optional|required, switchable at runtime through ``POST /tls``). Client certificates are verified at
the TLS layer against both emulator CAs; which one is acceptable is decided in auth.py.
Implements docs/kube-api.md §2.4 and §9 items 1, 2 and 4; §10 fault 11.
"""

import os
import ssl
import subprocess
import threading
import uuid


_OPENSSL_CNF = """\
[req]
distinguished_name = dn
prompt = no
[dn]
CN = placeholder
[v3_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign,digitalSignature
subjectKeyIdentifier = hash
[ca]
default_ca = ca_default
[ca_default]
database = %(dir)s/index.txt
new_certs_dir = %(dir)s/issued
serial = %(dir)s/serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
[policy_any]
commonName = supplied
organizationName = optional
"""


class CertFactory:
    GOOD_CA = "kube-emulator-ca"
    WRONG_CA = "kube-emulator-wrong-ca"

    def __init__(self, directory, sans):
        self.dir = directory
        self.sans = sans
        self.lock = threading.RLock()
        os.makedirs(os.path.join(directory, "issued"), exist_ok=True)
        self.cnf = os.path.join(directory, "openssl.cnf")
        with open(self.cnf, "w") as f:
            f.write(_OPENSSL_CNF % {"dir": directory})
        for fn, content in (("index.txt", ""), ("serial", "1000\n")):
            p = os.path.join(directory, fn)
            if not os.path.exists(p):
                with open(p, "w") as f:
                    f.write(content)
        self._cache = {}

    def _openssl(self, *args):
        r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.dir)
        if r.returncode != 0:
            raise RuntimeError("openssl %s failed: %s" % (args[0], r.stderr.decode(errors="replace")))

    def _path(self, name):
        return os.path.join(self.dir, name)

    def ca(self, which="good"):
        with self.lock:
            if ("ca", which) in self._cache:
                return self._cache[("ca", which)]
            cn = self.GOOD_CA if which == "good" else self.WRONG_CA
            crt, key = self._path("%s-ca.crt" % which), self._path("%s-ca.key" % which)
            self._openssl("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                          "-nodes", "-keyout", key, "-out", crt, "-days", "3650", "-subj", "/CN=" + cn,
                          "-config", self.cnf, "-extensions", "v3_ca")
            self._cache[("ca", which)] = (crt, key)
            return crt, key

    def leaf(self, name, cn, orgs=(), sans=None, usage="serverAuth", ca="good", expired=False):
        with self.lock:
            if ("leaf", name) in self._cache:
                return self._cache[("leaf", name)]
            ca_crt, ca_key = self.ca(ca)
            crt, key, csr, ext = (self._path(name + ".crt"), self._path(name + ".key"), self._path(name + ".csr"),
                                  self._path(name + ".ext"))
            subj = "/CN=" + cn.replace("/", "\\/") + "".join("/O=" + o.replace("/", "\\/") for o in orgs)
            self._openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                          "-keyout", key, "-out", csr, "-subj", subj, "-config", self.cnf)
            lines = ["[leaf]", "basicConstraints = critical,CA:FALSE",
                     "keyUsage = critical,digitalSignature,keyEncipherment",
                     "extendedKeyUsage = " + usage, "subjectKeyIdentifier = hash",
                     "authorityKeyIdentifier = keyid"]
            if sans:
                lines.append("subjectAltName = " + ",".join(sans))
            with open(ext, "w") as f:
                f.write("\n".join(lines) + "\n")
            if expired:
                self._openssl("ca", "-batch", "-config", self.cnf, "-cert", ca_crt, "-keyfile", ca_key, "-in", csr,
                              "-out", crt, "-startdate", "20200101000000Z", "-enddate", "20200102000000Z",
                              "-extfile", ext, "-extensions", "leaf", "-notext", "-subj", subj)
            else:
                self._openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-set_serial",
                              "0x" + uuid.uuid4().hex[:16], "-days", "825", "-out", crt, "-extfile", ext,
                              "-extensions", "leaf")
            os.chmod(key, 0o600)
            self._cache[("leaf", name)] = (crt, key)
            return crt, key

    def server(self, mode):
        if mode == "good":
            return self.leaf("server", "kube-apiserver", sans=self.sans)
        if mode == "wrong-ca":
            return self.leaf("server-wrong-ca", "kube-apiserver", sans=self.sans, ca="wrong")
        if mode == "wrong-san":
            return self.leaf("server-wrong-san", "kube-apiserver", sans=["DNS:wrong.example.invalid",
                                                                          "IP:192.0.2.1"])
        if mode == "expired":
            return self.leaf("server-expired", "kube-apiserver", sans=self.sans, expired=True)
        raise ValueError("unknown server certificate mode %r" % mode)


class TlsConfig:
    MODES = ("good", "wrong-ca", "wrong-san", "expired")
    CLIENT_MODES = ("none", "optional", "required")

    def __init__(self, certs, mode="good", client_mode="optional"):
        self.certs = certs
        self.lock = threading.Lock()
        self.mode, self.client_mode = mode, client_mode
        self._contexts = {}
        self.context()

    def set(self, mode=None, client_mode=None):
        if mode is not None and mode not in self.MODES:
            raise ValueError("cert must be one of %s" % ", ".join(self.MODES))
        if client_mode is not None and client_mode not in self.CLIENT_MODES:
            raise ValueError("client_auth must be one of %s" % ", ".join(self.CLIENT_MODES))
        with self.lock:
            self.mode = mode or self.mode
            self.client_mode = client_mode or self.client_mode
        self.context()

    def context(self):
        return self.current()[1]

    def current(self):
        """(mode, client_mode) and its context, taken together: a connection's requests are logged with the
        configuration its handshake used, so a test can tell a request sent before a switch from one after."""
        with self.lock:
            k = (self.mode, self.client_mode)
            if k in self._contexts:
                return k, self._contexts[k]
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.minimum_version = ssl.TLSVersion.TLSv1_2
            crt, key = self.certs.server(self.mode)
            ctx.load_cert_chain(crt, key)
            ctx.set_alpn_protocols(["http/1.1"])       # no HTTP/2 in the stdlib
            if self.client_mode != "none":
                # kube-apiserver requests but verifies client certs in the authenticator (401, not a TLS
                # failure); trusting both emulator CAs at the TLS layer lets us do the same for them.
                ctx.verify_mode = ssl.CERT_REQUIRED if self.client_mode == "required" else ssl.CERT_OPTIONAL
                ctx.load_verify_locations(self.certs.ca("good")[0])
                ctx.load_verify_locations(self.certs.ca("wrong")[0])
                ctx.verify_flags |= 0x200000                 # X509_V_FLAG_NO_CHECK_TIME: expiry checked later
            self._contexts[k] = ctx
            return k, ctx
