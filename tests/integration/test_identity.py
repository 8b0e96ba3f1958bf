#!/usr/bin/env python3
"""The agent's own client certificate (docs/contract.md §9.6) against the API-server emulator, through the
identitydrv driver (tests/helpers/identitydrv.c: identity/ plus a long-lived probe client made from the
written kubeconfig, as the daemon uses it).

i01 bootstrap from nothing with a bootstrap kubeconfig (token), kubeconfig + PEM 0600, the probe
    authenticates as gardener.cloud:node-agent:machine:<m> with the new certificate;
i02 GNA's credentials (credentials/bootstrap-token + cluster-ca.crt + server) and its machine-name file;
i03 renewal before expiry with short-lived certificates: renewed with the current certificate (the CSR's
    requester is the agent, not the bootstrap token), in 70-90 % of the lifetime, the same probe client
    keeps working across it without one 401;
i04 401 -> re-bootstrap: the API server rejects the certificate once, a new one is bootstrapped;
i05 a denied CSR: BootstrapFailed naming the CSR, retried with backoff, the next CSR approved -> works;
i06 SIGUSR1 (what a CA rotation does) renews at once;
i07 a second SIGUSR1 while the first renewal's CSR is pending makes a new CSR, whose certificate is installed;
and in every test: the token secret, private keys and certificates appear nowhere in what the driver
printed (stdout, stderr with debug logging).
"""

import base64
import json
import os
import queue
import shutil
import signal
import ssl
import stat
import subprocess
import tempfile
import threading
import time

from lib import itest
from lib.itest import check, eq
from kubeemu import wait_for

DRV = os.environ.get("IDENTITYDRV", "")
TOKEN_ID, TOKEN_SECRET = "boot01", "s3cr3tt0k3n0v3ry"
TUNING = "csr-poll=200ms,csr-timeout=30s,identity-retry-base=500ms,identity-retry-cap=2s,cert-check=1s"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"


class Driver:
    """identitydrv as a child process; its stdout JSON lines in a queue, stderr to a file."""

    def __init__(self, emu, work, node, bootstrap=True, gna_server=None, extra_args=()):
        self.work, self.emu = work, emu
        self.kubeconfig = os.path.join(work, "state", "kubeconfig")
        self.bootstrap = os.path.join(work, "state", "bootstrap-kubeconfig")
        self.gna = os.path.join(work, "root", "var", "lib", "gardener-node-agent")
        os.makedirs(os.path.join(self.gna, "credentials"), exist_ok=True)
        os.makedirs(os.path.dirname(self.kubeconfig), exist_ok=True)
        if bootstrap:
            with open(self.bootstrap, "w") as f:
                f.write(bootstrap_kubeconfig_text(emu))
        args = [DRV, "--kubeconfig", self.kubeconfig, "--bootstrap-kubeconfig", self.bootstrap,
                "--gna-dir", self.gna, "--node", node, "--probe-interval", "200ms"]
        if gna_server:
            args += ["--gna-server", gna_server]
        args += list(extra_args)
        self.stderr_path = os.path.join(work, "driver.log")
        self.stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=dict(os.environ, INPLACE_AGENT_KUBE_TUNING=TUNING))
        self.lines, self.q = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.q.put(line.decode())
        self.q.put(None)

    def next(self, pred, timeout, what):
        """The next event for which pred(event) holds (others are kept in self.lines)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("no %s within %ss; events: %s" % (what, timeout, self.lines[-8:]))
            try:
                line = self.q.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError("identitydrv exited (%s) waiting for %s" % (self.proc.poll(), what))
            ev = json.loads(line)
            self.lines.append(ev)
            if pred(ev):
                return ev

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()

    def output(self):
        with open(self.stderr_path, errors="replace") as f:
            return json.dumps(self.lines) + "\n" + f.read()

    def pem(self):
        with open(os.path.join(os.path.dirname(self.kubeconfig), "node-agent-client.pem")) as f:
            return f.read()


def secrets_of(drv):
    """Everything that must never be printed: the token secret, key and certificate bodies."""
    return [TOKEN_SECRET] + secrets_of_pem(os.path.join(os.path.dirname(drv.kubeconfig), "node-agent-client.pem"))


def assert_no_leak(drv, csrs_seen=()):
    text = drv.output()
    for s in secrets_of(drv):
        check(s not in text, "secret material %r... printed by the driver", s[:12])
    check("PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text, "PEM printed by the driver")


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def cert_subject_dates(pem):
    r = subprocess.run(["openssl", "x509", "-noout", "-subject", "-startdate", "-enddate", "-serial",
                        "-nameopt", "RFC2253"], input=pem.encode(), stdout=subprocess.PIPE, check=True)
    return dict(ln.split("=", 1) for ln in r.stdout.decode().splitlines())


def not_after(pem):
    return ssl.cert_time_to_seconds(cert_subject_dates(pem)["notAfter"])


def subject(pem):
    return set(cert_subject_dates(pem)["subject"].split(","))


def csr_cn(csr):
    r = subprocess.run(["openssl", "req", "-noout", "-subject", "-nameopt", "RFC2253"],
                       input=base64.b64decode(csr["spec"]["request"]), stdout=subprocess.PIPE, check=True)
    return r.stdout.decode().strip().split("CN=", 1)[-1].split(",")[0]


def csrs(emu):
    return emu.list("certificatesigningrequests", group="certificates.k8s.io")


def with_driver(emu, node, fn, setup=None, **kw):
    """fn(emu, drv) against a fresh driver; setup(work) may prepare files and return extra arguments."""
    work = tempfile.mkdtemp(prefix="identity-")
    drv = Driver(emu, work, node, extra_args=setup(work) if setup else (), **kw)
    try:
        fn(emu, drv)
        assert_no_leak(drv)
    except Exception:
        print("identitydrv stderr (tail):\n" + drv.output()[-3000:], flush=True)
        raise
    finally:
        drv.stop()
        shutil.rmtree(work, ignore_errors=True)


def bootstrap_kubeconfig_text(emu):
    return ("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n"
            "    certificate-authority: %s\nusers:\n- name: u\n  user:\n    token: %s.%s\n"
            "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
            % (emu.server, emu.ca, TOKEN_ID, TOKEN_SECRET))


def daemon(emu, node, bootstrap=True):
    """The real agent with no kubeconfig: <state>/kubeconfig missing, <state>/bootstrap-kubeconfig there."""
    import agentrun
    a = agentrun.Agent(emu, node, kubeconfig="/nonexistent-placeholder", start=False,
                       tuning={"csr-poll": "200ms", "identity-retry-base": "500ms", "identity-retry-cap": "2s"})
    kc = os.path.join(a.state_dir, "kubeconfig")
    with open(a.config_path) as f:
        text = f.read().replace("/nonexistent-placeholder", kc)
    with open(a.config_path, "w") as f:
        f.write(text)
    a.kubeconfig = kc
    if bootstrap:
        with open(os.path.join(a.state_dir, "bootstrap-kubeconfig"), "w") as f:
            f.write(bootstrap_kubeconfig_text(emu))
    return a.start()


def assert_nothing_leaked(emu, a):
    """The journal (log), STATUS=, the Node, every Event and every state file other than the credentials
    themselves hold no token secret, key or certificate material."""
    own = {"kubeconfig", "bootstrap-kubeconfig", "node-agent-client.pem"}
    parts = [a.log(), "\n".join(a.notify.statuses()), json.dumps(emu.list("nodes")),
             json.dumps(emu.list("events")), json.dumps(emu.list("events", group="events.k8s.io"))]
    for dirpath, _, names in os.walk(a.state_dir):
        for n in names:
            if n not in own:
                with open(os.path.join(dirpath, n), errors="replace") as f:
                    parts.append(f.read())
    text = "\n".join(parts)
    for secret in [TOKEN_SECRET] + secrets_of_pem(os.path.join(a.state_dir, "node-agent-client.pem")):
        check(secret not in text, "secret material %s... emitted by the agent", secret[:8])
    check("PRIVATE KEY" not in text, "a private key emitted by the agent")


def secrets_of_pem(path):
    try:
        with open(path) as f:
            pem = f.read()
    except OSError:
        return []
    out = []
    for block in pem.split("-----END")[:-1]:
        body = "".join(block.split("-----")[-1].split())
        out += [body[i:i + 40] for i in range(0, len(body) - 40, 200)]
    return out


setUpModule, tearDownModule = itest.emulator_fixture(globals(), config={"csr_auto_approve": True},
                                                     setup=lambda emu: emu.seed_bootstrap_token(TOKEN_ID, TOKEN_SECRET))


class Identity(itest.EmulatorTest):
    def test_i01_bootstrap_from_nothing(self):
        emu = self.emu

        def body(emu, drv):
            eq(drv.next(lambda e: e["event"] == "start", 10, "start")["usable"], False, "nothing usable at start")
            drv.next(lambda e: e["event"] == "changed", 20, "certificate")
            eq((mode(drv.kubeconfig), mode(os.path.join(os.path.dirname(drv.kubeconfig), "node-agent-client.pem"))),
               (0o600, 0o600), "modes")
            eq(subject(drv.pem()), {"CN=gardener.cloud:node-agent:machine:m1", "O=gardener.cloud:node-agents"},
               "subject")
            drv.next(lambda e: e["event"] == "probe" and e["status"] == 200, 10, "probe with the new certificate")
            users = {e["user"] for e in emu.request_log(path=r"^/api/v1/nodes$")}
            eq(users, {"gardener.cloud:node-agent:machine:m1"}, "probe identity")
            created = [c for c in csrs(emu) if c["spec"]["username"] == "system:bootstrap:" + TOKEN_ID]
            check(created and all(c["metadata"]["name"].startswith("node-agent-csr-") for c in created), "CSR names")
            spec = created[-1]["spec"]
            eq((spec["signerName"], spec["usages"][-1], spec["expirationSeconds"]),
               ("kubernetes.io/kube-apiserver-client", "client auth", 720 * 3600), "CSR spec")
        with_driver(emu, "m1", body)

    def test_i02_gna_credentials_and_machine_name(self):
        emu = self.emu
        work = tempfile.mkdtemp(prefix="identity-")
        gna = os.path.join(work, "root", "var", "lib", "gardener-node-agent")
        os.makedirs(os.path.join(gna, "credentials"))
        with open(os.path.join(gna, "credentials", "bootstrap-token"), "w") as f:
            f.write("%s.%s\n" % (TOKEN_ID, TOKEN_SECRET))
        shutil.copyfile(emu.ca, os.path.join(gna, "cluster-ca.crt"))
        with open(os.path.join(gna, "machine-name"), "w") as f:
            f.write("machine-2\n")
        drv = Driver(emu, work, "node-2", bootstrap=False, gna_server=emu.server)
        try:
            drv.next(lambda e: e["event"] == "changed", 20, "certificate")
            eq(subject(drv.pem()), {"CN=gardener.cloud:node-agent:machine:machine-2", "O=gardener.cloud:node-agents"},
               "machine-name wins")
            with open(drv.kubeconfig) as f:
                kc = json.load(f)
            eq(kc["clusters"][0]["cluster"]["certificate-authority"], os.path.join(gna, "cluster-ca.crt"),
               "the kubeconfig keeps following cluster-ca.crt (CA rotation updates it)")
            assert_no_leak(drv)
        finally:
            drv.stop()
            shutil.rmtree(work, ignore_errors=True)

    def test_i03_renewal_before_expiry(self):
        emu = self.emu
        emu.config(csr_signing_duration=12, csr_backdate=0)

        def body(emu, drv):
            drv.next(lambda e: e["event"] == "changed", 20, "first certificate")
            first = cert_subject_dates(drv.pem())
            t0 = time.time()
            drv.next(lambda e: e["event"] == "changed", 20, "renewal")
            elapsed = time.time() - t0
            second = cert_subject_dates(drv.pem())
            check(first["serial"] != second["serial"], "a new certificate")
            # 70-90 % of 12 s = 8.4-10.8 s after notBefore; we saw the first certificate a little after notBefore
            # and the second one a CSR round trip after the renewal moment.
            print("    renewed %.2f s after the first certificate (lifetime 12 s)" % elapsed)
            check(7.9 <= elapsed <= 11.6, "renewed at %.1fs of a 12s lifetime (70-90 %% = 8.4-10.8 s)", elapsed)
            renewal = [c for c in csrs(emu) if c["spec"]["username"] == "gardener.cloud:node-agent:machine:m3"]
            check(renewal, "the renewal CSR was made with the current certificate")
            # The long-lived probe client outlives the first certificate's expiry without a 401.
            wait_for(lambda: time.time() > t0 + 12 + 1.5, 20, "past the first certificate's expiry")
            probes = [e for e in drv.lines if e["event"] == "probe"]
            check(probes and all(e["status"] == 200 for e in probes), "every probe 200: %s",
                  sorted({e["status"] for e in probes}))
        try:
            with_driver(emu, "m3", body)
        finally:
            emu.config(csr_signing_duration=31536000, csr_backdate=300)

    def test_i04_unauthorized_rebootstraps(self):
        emu = self.emu

        def body(emu, drv):
            drv.next(lambda e: e["event"] == "changed", 20, "first certificate")
            first = cert_subject_dates(drv.pem())["serial"]
            emu.inject("unauthorized", path=r"^/api/v1/nodes$", user="gardener.cloud:node-agent:machine:m4", count=1)
            drv.next(lambda e: e["event"] == "probe" and e["status"] == 401, 10, "401")
            drv.next(lambda e: e["event"] == "changed", 20, "re-bootstrapped certificate")
            check(cert_subject_dates(drv.pem())["serial"] != first, "a new certificate")
            boot = [c for c in csrs(emu) if c["spec"]["username"] == "system:bootstrap:" + TOKEN_ID and
                    csr_cn(c) == "gardener.cloud:node-agent:machine:m4"]
            eq(len(boot), 2, "bootstrapped twice with the token (not renewed with the rejected certificate)")
            drv.next(lambda e: e["event"] == "probe" and e["status"] == 200, 10, "probe works again")
        with_driver(emu, "m4", body)

    def test_i05_denied_then_retried(self):
        emu = self.emu
        emu.config(csr_auto_approve=False)

        def body(emu, drv):
            wait_for(lambda: any(c["spec"]["username"].startswith("system:bootstrap:") and not c.get("status")
                                 for c in csrs(emu)), 10, "pending CSR")
            pending = [c for c in csrs(emu) if not c.get("status")][0]["metadata"]["name"]
            emu.csr(pending, "deny", "NotToday", "denied by the test")
            ev = drv.next(lambda e: e["event"] == "failed", 10, "failure")
            eq(ev["failure"], "BootstrapFailed", "code")
            check(pending in ev["status"] and "is denied" in ev["status"] and "NotToday" in ev["status"],
                  "status names the CSR and the reason: %s", ev["status"])
            wait_for(lambda: any(not c.get("status") for c in csrs(emu)), 10, "a retried CSR")
            retried = [c for c in csrs(emu) if not c.get("status")][0]["metadata"]["name"]
            check(retried != pending, "a new key, a new CSR")
            emu.csr(retried, "approve")
            drv.next(lambda e: e["event"] == "changed", 20, "certificate after the retry")
            check(drv.proc.poll() is None, "stays up")
        try:
            with_driver(emu, "m5", body)
        finally:
            emu.config(csr_auto_approve=True)

    def test_i06_renew_on_request(self):
        emu = self.emu

        def body(emu, drv):
            drv.next(lambda e: e["event"] == "changed", 20, "first certificate")
            first = cert_subject_dates(drv.pem())["serial"]
            drv.proc.send_signal(signal.SIGUSR1)
            drv.next(lambda e: e["event"] == "changed", 20, "renewed certificate")
            check(cert_subject_dates(drv.pem())["serial"] != first, "a new certificate")
        with_driver(emu, "m6", body)

    def test_i07_renew_again_while_requesting(self):
        """A renewal asked for while one is in flight (a CA rotation during a scheduled renewal) makes a new CSR:
        the certificate installed is the one requested after the second call, not the earlier one."""
        emu = self.emu

        def pending(drv_user):
            return [c for c in csrs(emu) if c["spec"]["username"] == drv_user and not c.get("status")]

        def body(emu, drv):
            user = "gardener.cloud:node-agent:machine:m7"
            drv.next(lambda e: e["event"] == "changed", 20, "first certificate")
            emu.config(csr_auto_approve=False)
            drv.proc.send_signal(signal.SIGUSR1)
            first = wait_for(lambda: pending(user), 20, "the first renewal's CSR")[0]["metadata"]["name"]
            drv.proc.send_signal(signal.SIGUSR1)
            second = wait_for(lambda: [c for c in pending(user) if c["metadata"]["name"] != first], 20,
                              "a second CSR for the second renewal")[0]["metadata"]["name"]
            emu.csr(first, "approve")
            emu.csr(second, "approve")
            drv.next(lambda e: e["event"] == "changed", 20, "renewed certificate")
            issued = wait_for(lambda: (emu.get("certificatesigningrequests", second, group="certificates.k8s.io")
                                       .get("status") or {}).get("certificate"), 10, "the second certificate")
            eq(cert_subject_dates(drv.pem())["serial"], cert_subject_dates(base64.b64decode(issued).decode())["serial"],
               "the certificate of the second request")
        try:
            with_driver(emu, "m7", body)
        finally:
            emu.config(csr_auto_approve=True)

    def test_t01_token_sync(self):
        emu = self.emu
        tokens = {"gardener-valitail": "valitail-token-AAA", "gardener-opentelemetry-collector": "otel-token-BBB"}
        paths = {"gardener-valitail": "/var/lib/valitail/auth-token", "gardener-opentelemetry-collector": "/var/lib/otel/token"}
        for name, tok in tokens.items():
            emu.seed_secret(name, data={"token": tok})
        files = {}

        def setup(work):
            root, cfg = os.path.join(work, "root"), os.path.join(work, "gna-config.yaml")
            with open(cfg, "w") as f:
                f.write("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"
                        "controllers:\n  token:\n    syncConfigs:\n" +
                        "".join("    - secretName: %s\n      path: %s\n" % kv for kv in paths.items()))
            files.update({n: root + p for n, p in paths.items()})
            return ["--token-config", cfg, "--root", root]

        def content(name):
            try:
                with open(files[name]) as f:
                    return f.read()
            except OSError:
                return None

        def body(emu, drv):
            for name, tok in tokens.items():
                wait_for(lambda: content(name) == tok, 20, "token of %s on start" % name)
                eq(mode(files[name]), 0o640, "mode of " + files[name])
            since = emu.request_log()[-1]["seq"]
            tokens["gardener-valitail"] = "valitail-token-CCC"
            emu.seed_secret("gardener-valitail", data={"token": tokens["gardener-valitail"]})
            wait_for(lambda: content("gardener-valitail") == tokens["gardener-valitail"], 10, "token after a change")
            gets = [e for e in emu.request_log(since=since, path="/secrets/") if e["verb"] == "get"]
            eq(gets, [], "a change arrives through the field-selected watch, no polling")
            watches = [e for e in emu.request_log(path="/secrets$") if e["verb"] == "watch"]
            check(watches and all("metadata.name" in e["query"] for e in watches), "field-selected watches")
            # Service-account-key rotation: every token re-read and rewritten.
            for name in tokens:
                os.unlink(files[name])
            drv.proc.send_signal(signal.SIGUSR2)
            for name, tok in tokens.items():
                wait_for(lambda: content(name) == tok, 10, "resynced token of %s" % name)
            gets = [e for e in emu.request_log(since=since, path="/secrets/") if e["verb"] == "get"]
            eq(sorted(e["path"].rsplit("/", 1)[-1] for e in gets), sorted(tokens), "one GET per Secret on resync")
            text = drv.output()
            for tok in list(tokens.values()) + ["valitail-token-AAA"]:
                check(tok not in text, "token %s... printed", tok[:8])
        with_driver(emu, "t1", body, setup=setup)


# After Identity (unittest orders classes by name): i01 counts every LIST of Nodes since the emulator
# started, and the agents here make their own.
class IdentityInTheDaemon(itest.EmulatorTest):
    def test_d01_daemon_bootstraps_from_nothing(self):
        emu = self.emu
        with daemon(emu, "d1") as a:
            wait_for(lambda: os.path.exists(a.kubeconfig), 20, "the agent's kubeconfig")
            eq(mode(a.kubeconfig), 0o600, "kubeconfig mode")
            wait_for(lambda: any(e["user"] == "gardener.cloud:node-agent:machine:d1"
                                 for e in emu.request_log(path=r"^/api/v1/nodes$")), 20,
                     "LIST of the node as node-agent")
            emu.seed_node("d1")
            a.wait_view(lambda v: v.get("present"), 20, "the node in the agent's view")
            assert_nothing_leaked(emu, a)

    def test_d02_daemon_401_rebootstraps_without_restart(self):
        emu = self.emu
        emu.config(csr_auto_approve=False)
        try:
            with daemon(emu, "d2") as a:
                first = wait_for(lambda: [c for c in csrs(emu) if "d2" in csr_cn(c) and not c.get("status")], 20,
                                 "first CSR")[0]["metadata"]["name"]
                emu.csr(first, "approve")
                wait_for(lambda: os.path.exists(a.kubeconfig), 20, "the agent's kubeconfig")
                emu.seed_node("d2")
                a.wait_view(lambda v: v.get("present"), 20, "the node in the agent's view")
                pid = a.proc.pid
                emu.inject("unauthorized", path=r"^/api/v1/nodes", user="gardener.cloud:node-agent:machine:d2",
                           count=1)
                emu.close_connections(watches="abrupt")
                second = wait_for(lambda: [c for c in csrs(emu) if "d2" in csr_cn(c) and not c.get("status")], 20,
                                  "a new bootstrap CSR after the 401")[0]
                eq(second["spec"]["username"], "system:bootstrap:" + TOKEN_ID, "bootstrapped with the token")
                emu.csr(second["metadata"]["name"], "approve")
                a.wait_log("Client credentials changed on disk", 20)
                eq(a.proc.pid, pid, "same process")
                check(a.alive(), "alive")
        finally:
            emu.config(csr_auto_approve=True)

    def test_d03_daemon_without_bootstrap_credential_says_so(self):
        emu = self.emu
        with daemon(emu, "d3", bootstrap=False) as a:
            wait_for(lambda: any("BootstrapFailed" in s and "no bootstrap credential" in s
                                 for s in a.notify.statuses()), 20, "STATUS= with BootstrapFailed")
            a.wait_ready()
            check(a.alive(), "the agent stays up")

    def test_d04_daemon_renews_before_expiry(self):
        emu = self.emu
        emu.config(csr_signing_duration=12, csr_backdate=0)
        try:
            with daemon(emu, "d4") as a:
                wait_for(lambda: os.path.exists(a.kubeconfig), 20, "the agent's kubeconfig")
                emu.seed_node("d4")
                a.wait_view(lambda v: v.get("present"), 20, "the node in the agent's view")
                pid, since = a.proc.pid, emu.request_log()[-1]["seq"]
                wait_for(lambda: [c for c in csrs(emu)
                                  if c["spec"]["username"] == "gardener.cloud:node-agent:machine:d4"
                                  and (c.get("status") or {}).get("certificate")], 20,
                         "renewal with the current certificate")
                a.wait_log("Client credentials changed on disk", 10)
                # Past the first certificate's end: the agent keeps talking to the API server with the new one.
                first = [c for c in csrs(emu) if c["spec"]["username"] == "system:bootstrap:" + TOKEN_ID and
                         csr_cn(c).endswith(":d4")][0]
                end = not_after(base64.b64decode(first["status"]["certificate"]).decode())
                wait_for(lambda: time.time() > end + 1, 20, "the first certificate's expiry")
                emu.label_node("d4", {"after-renewal": "yes"})
                a.wait_label("after-renewal", "yes", 15)
                eq([e["status"] for e in emu.request_log(since=since) if e["status"] == 401], [], "no 401")
                eq(a.proc.pid, pid, "same process")
                assert_nothing_leaked(emu, a)
        finally:
            emu.config(csr_signing_duration=31536000, csr_backdate=300)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("IDENTITYDRV", "AGENT"))
