#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 14 with the real agent in the sandbox (lib/sandbox.py: emulator, registry, systemd --user with a
stand-in kubelet.service and its /healthz): the agent bootstraps its own client certificate from a bootstrap
token (no kubeconfig at start), the OSC carries GNA's component config (a gardener-node-agent.service in
osc.replacedUnits lists /var/lib/gardener-node-agent/config.yaml) with two token syncConfigs.

  1. token sync: both Secrets' tokens written 0640 below osc.rootDirectory; a changed Secret rewritten
     through the watch (no GET of the Secret: no polling);
  2. CA rotation in place, end to end: gated (nothing before ReadyForUpdate), then the agent's certificate
     renewed (a CSR made with the current certificate), the kubelet re-bootstrapped (kubeconfig-bootstrap
     with default-cluster/default-auth, kubeconfig-real and pki/ removed, kubelet.service restarted, the
     stand-in kubelet bootstrapping from it and healthy), update-result=successful, and
     checksum/cloud-config-data only after all that, kubeconfig-bootstrap removed with it;
  3. service-account-key rotation: every synced token rewritten (the files are made stale first; the
     Secrets do not change, so only the rotation's resync can rewrite them);
  4. SIGKILL of the agent in the middle of a CA rotation (once kubeconfig-bootstrap is on disk): it resumes
     at the persisted step and succeeds;
  5. SIGKILL in the middle of a service-account-key rotation (a token Secret's GET held by the emulator):
     it resumes and succeeds;
  6. a CA rotation together with an OS update (gardener PR #15704): the rotation is done before the OS
     command runs; the command fails, the operator retries, the second run exits 0 and the node reboots
     (simulated: new boot id, the new os-release) into the new version: successful, and the rotation ran
     once across both attempts and the reboot (one renewal CSR, one re-bootstrap);
and after every test: no token, key or certificate bytes in the agent's output, the Node, the Events or
the state files."""

import base64
import glob
import hashlib
import json
import os
import secrets
import shutil
import stat
import tempfile
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
WORK = None
TOKEN_ID, TOKEN_SECRET = "crot01", "r0t4t10ns3cr3t01"
GNA_UNIT = "gardener-node-agent.service"
CC_PATH = "/var/lib/gardener-node-agent/config.yaml"
# The node-agent authorizer (emulator) lets gardener-node-agent read exactly these token Secrets.
TOKENS = [("gardener-valitail", "/var/lib/valitail/auth-token"),
          ("gardener-opentelemetry-collector", "/var/lib/otelcol/auth-token")]
PKI_MARKER = "K1" + secrets.token_hex(16)     # stands for the kubelet's client key bytes
tokens = {}                                    # secret name -> current token
rotation = {"ca": None, "sa": None}
extra_files = {}                               # path -> inline data, more files of the next publish()


def kubeconfig_path():
    return os.path.join(WORK, "kubeconfig")


def agent_pem():
    with open(os.path.join(WORK, "node-agent-client.pem")) as f:
        return f.read()


def pem_bodies(pem):
    """The base64 lines of every PEM block: what must never be printed."""
    return [ln for ln in pem.splitlines() if ln and not ln.startswith("-----") and len(ln) >= 40]


def serial():
    import subprocess
    r = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=agent_pem().encode(),
                       stdout=subprocess.PIPE, check=True)
    return r.stdout.decode().strip()


def kubelet_dir(*parts):
    return SB.path("var", "lib", "kubelet", *parts)


KUBELET_PEM = ("-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n"
               "-----BEGIN EC PRIVATE KEY-----\n%s\n-----END EC PRIVATE KEY-----\n" % (PKI_MARKER * 2, PKI_MARKER * 3))


def provision_kubelet_credentials():
    """The kubelet as after its own TLS bootstrap: kubeconfig-real + pki/kubelet-client-current.pem."""
    SB.provision_kubelet_credentials(KUBELET_PEM)


def seed_tokens(changed=()):
    for name, _ in TOKENS:
        if name not in tokens or name in changed:
            tokens[name] = "tok-" + secrets.token_hex(24)
        SB.emu.seed_secret(name, namespace="kube-system", data={"token": tokens[name]})


def component_config():
    syncs = "".join("      - {secretName: %s, path: %s}\n" % t for t in TOKENS)
    return ("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"
            "apiServer:\n  server: %s\n  caFile: /var/lib/gardener-node-agent/cluster-ca.crt\n"
            "controllers:\n  token:\n    syncConfigs:\n%s" % (SB.emu.server, syncs))


def publish():
    """The sandbox's OSC plus GNA's unit and component config and the rotation times; returns the checksum."""
    o = SB.osc
    text = SB.osc_yaml(o["kubelet"], o["os_version"], o["image"])
    rot = ""
    if rotation["ca"] or rotation["sa"]:
        rot = "    credentialsRotation:\n"
        if rotation["ca"]:
            rot += "      certificateAuthorities:\n        lastInitiationTime: \"%s\"\n" % rotation["ca"]
        if rotation["sa"]:
            rot += "      serviceAccountKey:\n        lastInitiationTime: \"%s\"\n" % rotation["sa"]
    text = text.replace("  files:\n", rot + "  files:\n  - path: %s\n    permissions: 384\n    content:\n"
                        "      inline:\n        encoding: b64\n        data: %s\n"
                        % (CC_PATH, base64.b64encode(component_config().encode()).decode())
                        + "".join("  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: %s\n"
                                  % (p, json.dumps(d)) for p, d in extra_files.items()), 1)
    text = text.replace("  units:\n", "  units:\n  - name: %s\n    enable: true\n    content: |\n"
                        "      [Service]\n      ExecStart=/opt/bin/gardener-node-agent\n    filePaths:\n    - %s\n"
                        % (GNA_UNIT, CC_PATH), 1)
    checksum = S.sha256_hex(text.encode())
    SB.emu.seed_secret(S.SECRET, namespace=S.OSC_NAMESPACE, data={"osc.yaml": text},
                       labels={"gardener.cloud/role": "operating-system-config", "worker.gardener.cloud/pool": S.POOL},
                       annotations={S.SECRET_CHECKSUM: checksum})
    return checksum


def mcm_update():
    """MCM's in-place rollout for one node up to ReadyForUpdate (fresh labels each time)."""
    SB.emu.label_node(S.NODE, labels={S.UPDATE_RESULT: None, S.CANDIDATE: None, S.SELECTED: None})
    SB.mcm_candidate()
    SB.mcm_select()


def token_file(name):
    return SB.base + dict(TOKENS)[name]


def read(path):
    return S.read_text(path)


def tokens_on_disk():
    return all(read(token_file(n)) == t for n, t in tokens.items())


def resumes():
    return SB.agent_log().count("Resuming the credentials rotation")


def kubelet_starts():
    return SB.unit_log(S.KUBELET_UNIT).count("runs kubelet v")


def assert_no_leak(tc):
    """Nothing secret in what the agent emitted or stored."""
    secret_bits = list(tokens.values()) + [TOKEN_SECRET, PKI_MARKER] + pem_bodies(agent_pem())
    places = {"agent output": SB.agent_log(), "Node": json.dumps(SB.node()), "Events": json.dumps(SB.events())}
    for p in glob.glob(os.path.join(SB.state_dir, "*.json")):
        places[p] = read(p) or ""
    for what, text in places.items():
        for s in secret_bits:
            tc.assertNotIn(s, text, "secret bytes %r... in %s" % (s[:10], what))
        tc.assertNotIn("PRIVATE KEY", text, "a private key in %s" % what)


def provision(sb):
    sb.emu.config(csr_auto_approve=True)
    sb.emu.seed_bootstrap_token(TOKEN_ID, TOKEN_SECRET)
    # Only what Gardener provisions for gardener-node-agent (docs/contract.md §9.6), below the OSC root: the
    # bootstrap token, the cluster CA and GNA's component config naming the server. No
    # bootstrapKubeconfig exists.
    gna = sb.base + "/var/lib/gardener-node-agent"
    os.makedirs(os.path.join(gna, "credentials"), exist_ok=True)
    with open(os.path.join(gna, "credentials", "bootstrap-token"), "w") as f:
        f.write("%s.%s" % (TOKEN_ID, TOKEN_SECRET))
    shutil.copyfile(sb.emu.ca, os.path.join(gna, "cluster-ca.crt"))
    with open(os.path.join(gna, "config-v1.120.0.yaml"), "w") as f:
        f.write("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"
                "apiServer:\n  server: %s\n" % sb.emu.server)
    provision_kubelet_credentials()
    seed_tokens()
    # As on a new machine: the agent bootstraps before the kubelet registered the Node (the CSR
    # approver denies a bootstrap token once the machine's Node exists).
    sb.emu.delete("nodes", S.NODE)
    sb.start_agent()
    usermgr.wait_until(lambda: os.path.exists(os.path.join(WORK, "node-agent-client.pem")), 30,
                       "the agent's own client certificate")
    # The node was set up with this OSC already (checksum on the Node): the baseline, no rotation.
    checksum = publish()
    sb._seed_node()
    sb.emu.label_node(S.NODE, annotations={S.NODE_CHECKSUM: checksum})


def setUpModule():
    global WORK
    WORK = tempfile.mkdtemp(prefix="ipa-credentials-")      # the agent's own credentials, outside the OSC root
    unittest.addModuleCleanup(shutil.rmtree, WORK, ignore_errors=True)
    set_up, tear_down = itest.sandbox_fixture(
        globals(), setup=provision, versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
        start_agent=False, log_level="debug", kubelet_bootstrap=True, fake_boot_id=True,
        agent_config={"kubeconfig": kubeconfig_path(),
                      "bootstrapKubeconfig": os.path.join(WORK, "bootstrap-kubeconfig"),
                      "osc": {"replacedUnits": [GNA_UNIT]}, "lease": {"enabled": False}},
        agent_env={"INPLACE_AGENT_KUBE_TUNING": "csr-poll=200ms,identity-retry-base=500ms,identity-retry-cap=2s"})
    unittest.addModuleCleanup(tear_down)
    set_up()


class Credentials(unittest.TestCase):
    def tearDown(self):
        assert_no_leak(self)

    def rotate(self, ca=None, sa=None, during=None):
        """Publish a rotation, take the node through MCM's gate; returns (checksum, node, serial before)."""
        before = serial()
        if ca:
            rotation["ca"] = ca
        if sa:
            rotation["sa"] = sa
        checksum = publish()
        mcm_update()
        SB.wait_node(lambda n: "credentialsRotation" in (S.annotation(n, S.PLAN) or ""), 30, "the plan")
        # Gated: nothing rotated while the node waits for the drain.
        self.assertEqual(serial(), before)
        if ca:
            self.assertTrue(os.path.exists(kubelet_dir("kubeconfig-real")))
        starts = kubelet_starts()
        SB.mcm_ready_for_update()
        if during:
            during()
        node = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 90, "the rotation's checksum")
        self.assertEqual(S.label(node, S.UPDATE_RESULT), "successful")
        self.assertEqual(S.progress_phase(node), "Succeeded")
        self.assertIsNone(S.annotation(node, S.FAILURE))
        if ca:
            self.assertGreater(kubelet_starts(), starts, "kubelet.service restarted")
        SB.mcm_observe_result()
        return checksum, node, before

    def assert_ca_rotated(self, before, checksum):
        self.assertNotEqual(serial(), before, "the agent's certificate was renewed")
        # The kubelet re-bootstrapped from the kubeconfig-bootstrap the agent wrote: its cluster is GNA's
        # API server and CA file, its credential the kubelet's PEM of before; then, with the checksum,
        # kubeconfig-bootstrap was removed (upstream's reconcile end).
        self.assertFalse(os.path.exists(kubelet_dir("kubeconfig-bootstrap")), "kubeconfig-bootstrap left behind")
        used = "credentialSHA256=\"%s\"" % hashlib.sha256(KUBELET_PEM.encode()).hexdigest()
        self.assertIn(used, SB.unit_log(S.KUBELET_UNIT), "the kubelet bootstrapped with its previous certificate")
        real = json.loads(read(kubelet_dir("kubeconfig-real")))
        self.assertEqual(real["clusters"], [{"name": "default-cluster", "cluster": {
            "certificate-authority": "/var/lib/gardener-node-agent/cluster-ca.crt", "server": SB.emu.server}}])
        self.assertNotIn(PKI_MARKER, read(kubelet_dir("pki", "kubelet-client-current.pem")), "pki/ renewed")
        SB.wait_kubelet_healthy(10)
        # The renewal's CSR was made with the current certificate, and before the checksum was set.
        user = "gardener.cloud:node-agent:machine:" + S.NODE
        csrs = [c for c in SB.emu.list("certificatesigningrequests", group="certificates.k8s.io")
                if c["spec"]["username"] == user]
        self.assertTrue(csrs, "a renewal CSR by %s" % user)
        csr_rv = max(int(c["metadata"]["resourceVersion"]) for c in csrs)
        hist = SB.node_history()
        first = min(int(e["rv"]) for e in hist
                    if S.annotation(e["object"], S.NODE_CHECKSUM) == checksum)
        self.assertLess(csr_rv, first, "checksum/cloud-config-data only after the renewal")
        ok = min(int(e["rv"]) for e in hist if S.label(e["object"], S.UPDATE_RESULT) == "successful")
        self.assertLessEqual(ok, first, "checksum only after update-result=successful")

    def test_1_token_sync(self):
        usermgr.wait_until(tokens_on_disk, 30, "both tokens written")
        for name, _ in TOKENS:
            self.assertEqual(stat.S_IMODE(os.stat(token_file(name)).st_mode), 0o640)
        path = "/api/v1/namespaces/kube-system/secrets/gardener-valitail"
        seed_tokens(changed=("gardener-valitail",))
        usermgr.wait_until(tokens_on_disk, 10, "the changed token rewritten")
        gets = [r for r in SB.emu.request_log(path="^%s$" % path) if r.get("verb") == "get"]
        self.assertEqual(gets, [], "the Secret is watched, never polled")
        self.assertTrue(SB.emu.watches(active=True, path="^/api/v1/namespaces/kube-system/secrets"),
                        "a watch on the token Secrets")

    def test_1a_token_resync_for_a_removed_file(self):
        """Issue 30 item 1, upstream It "should trigger token resync for configs whose path matches a deleted
        file": an OSC wrote a file at one sync config's path and one at a path no config names; the next OSC
        drops both; the token file is written again right after its removal by a GET of that one Secret, and
        nothing else is read (before, only the 12 h period would have written it)."""
        name, path = TOKENS[0]
        other = TOKENS[1][0]
        secret_path = "^/api/v1/namespaces/kube-system/secrets/%s$"

        def gets(n):
            return len([r for r in SB.emu.request_log(path=secret_path % n) if r.get("verb") == "get"])

        extra_files.update({path: "placeholder", "/etc/ipa-no-token": "x"})
        checksum = publish()
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the OSC with the files")
        self.assertEqual(read(token_file(name)), "placeholder", "the OSC's content (the Secret did not change)")
        before = {n: gets(n) for n, _ in TOKENS}
        extra_files.clear()
        checksum = publish()
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the OSC without them")
        self.assertFalse(os.path.exists(SB.base + "/etc/ipa-no-token"))
        usermgr.wait_until(lambda: read(token_file(name)) == tokens[name], 10, "the removed token file written again")
        self.assertEqual(stat.S_IMODE(os.stat(token_file(name)).st_mode), 0o640)
        self.assertEqual(gets(name) - before[name], 1, "one GET of the matching Secret")
        self.assertEqual(gets(other), before[other], "no GET of the other config's Secret")
        self.assertIn("re-reading Secret %s for its token" % name, SB.agent_log())
        self.assertNotIn("re-reading Secret %s" % other, SB.agent_log())

    def test_2_ca_rotation(self):
        checksum, node, before = self.rotate(ca="2026-11-23T10:00:00Z")
        # docs/contract.md §9.6: the first complete OSC apply retires GNA's bootstrap token.
        self.assertFalse(os.path.exists(SB.base + "/var/lib/gardener-node-agent/credentials/bootstrap-token"))
        self.assertIn("Removed gardener-node-agent's bootstrap token", SB.agent_log())
        self.assert_ca_rotated(before, checksum)
        log = SB.agent_log()
        self.assertIn("Rotating credentials in place: certificate authorities.", log)
        self.assertNotIn("UnsupportedRotation", json.dumps(node))

    def test_3_sa_rotation(self):
        usermgr.wait_until(tokens_on_disk, 30, "tokens in place")
        for name, _ in TOKENS:          # stale files; the Secrets stay as they are
            S.write_file(token_file(name), "stale", 0o640)
        self.rotate(sa="2026-11-23T11:00:00Z")
        self.assertTrue(tokens_on_disk(), "every synced token rewritten by the rotation")
        self.assertIn("Service-account-key rotation: every token re-synced.", SB.agent_log())

    def test_4_kill_during_ca_rotation(self):
        provision_kubelet_credentials()
        pid, resumed = SB.um.main_pid(S.AGENT_UNIT), resumes()

        def kill_after_bootstrap_written():
            usermgr.wait_until(lambda: os.path.exists(kubelet_dir("kubeconfig-bootstrap")), 60,
                               "kubeconfig-bootstrap written", interval=0.002)
            SB.um.systemctl("kill", "-s", "KILL", S.AGENT_UNIT)
            usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 30, "the agent restarted")
            SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))

        checksum, node, before = self.rotate(ca="2026-11-23T12:00:00Z", during=kill_after_bootstrap_written)
        self.assert_ca_rotated(before, checksum)
        self.assertGreater(resumes(), resumed, "the restarted agent resumed the persisted rotation")

    def test_5_kill_during_sa_rotation(self):
        """The resync's GET of one token Secret is held 3 s by the emulator; the agent is killed while it
        is in flight, resumes the rotation and succeeds with every token in place."""
        usermgr.wait_until(tokens_on_disk, 30, "tokens in place")
        pid, resumed = SB.um.main_pid(S.AGENT_UNIT), resumes()
        SB.emu.inject("slow-headers", verbs=["get"], path="^/api/v1/namespaces/kube-system/secrets/gardener-valitail$",
                      count=1, params={"delay": 3})

        def kill_during_resync():
            # A count-1 rule leaves the list when it fires: the GET is being held now.
            usermgr.wait_until(lambda: not SB.emu.faults(), 60, "the resync's GET in flight", interval=0.01)
            SB.um.systemctl("kill", "-s", "KILL", S.AGENT_UNIT)
            usermgr.wait_until(lambda: SB.um.main_pid(S.AGENT_UNIT) not in (0, pid), 30, "the agent restarted")
            SB._pids_seen.add(SB.um.main_pid(S.AGENT_UNIT))

        try:
            self.rotate(sa="2026-11-23T13:00:00Z", during=kill_during_resync)
        finally:
            SB.emu.clear_faults()
        self.assertTrue(tokens_on_disk())
        self.assertGreater(resumes(), resumed, "the restarted agent resumed the persisted rotation")

    def test_6_rotation_before_os_update(self):
        new_os = "1877.1"
        runs = SB.path("os-runs")
        # The OS command notes whether the kubelet was already re-bootstrapped when it ran; the first run
        # fails for good, the second exits 0 and leaves the reboot to come (the OS is still old).
        S.write_file(SB.os_update_command, "#!/bin/sh\n"
                     "if [ -e '%(boot)s' ]; then r=yes; else r=no; fi\n"
                     "echo \"$1 rotated=$r\" >> '%(runs)s'\n"
                     "if [ $(wc -l < '%(runs)s') -eq 1 ]; then echo 'system failure'; exit 1; fi\n"
                     % {"boot": kubelet_dir("kubeconfig-bootstrap"), "runs": runs}, 0o755)
        provision_kubelet_credentials()
        user = "gardener.cloud:node-agent:machine:" + S.NODE
        csrs_before = [c["metadata"]["name"] for c in SB.emu.list("certificatesigningrequests", group="certificates.k8s.io")
                       if c["spec"]["username"] == user]
        rotating = SB.agent_log().count("Rotating credentials in place")
        before = serial()
        rotation["ca"] = "2026-11-23T14:00:00Z"
        SB.osc["os_version"] = new_os
        checksum = publish()
        mcm_update()
        SB.wait_node(lambda n: "credentialsRotation" in (S.annotation(n, S.PLAN) or ""), 30, "the plan")
        SB.mcm_ready_for_update()
        node = SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "failed", 60, "the failed OS update")
        self.assertIn("system failure", S.annotation(node, S.FAILED_REASON))
        self.assertNotEqual(serial(), before, "the agent's certificate was renewed before the OS update")

        # The operator retries (upstream's procedure: ReadyForUpdate again).
        SB.mcm_observe_result()
        SB.mcm_ready_for_update(drain=False)
        SB.wait_node(lambda n: S.progress_phase(n) == "Rebooting", 60, "the second attempt waiting for the reboot")
        SB.simulate_reboot(new_os)
        node = SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the update's checksum")
        self.assertEqual(S.label(node, S.UPDATE_RESULT), "successful")
        with open(runs) as f:
            self.assertEqual(f.read().split("\n")[:2], ["%s rotated=yes" % new_os] * 2,
                             "the OS command ran before the rotation")
        csrs = [c["metadata"]["name"] for c in SB.emu.list("certificatesigningrequests", group="certificates.k8s.io")
                if c["spec"]["username"] == user and c["metadata"]["name"] not in csrs_before]
        self.assertEqual(len(csrs), 1, "renewal CSRs of this rotation: %s" % csrs)
        self.assertEqual(SB.agent_log().count("Rotating credentials in place") - rotating, 1,
                         "the rotation ran again for the retry")
        self.assert_ca_rotated(before, checksum)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(), failfast=True)
