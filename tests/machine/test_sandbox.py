#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, scenario 6: inplace-agent.service's sandbox, enforced by a real PID 1, against
the paths Gardener's producers write (tests/data/producer-paths.tsv: the core components, the
gardenlinux / ubuntu / coreos / suse-chost extensions, the provider webhooks such as provider-gcp's
/etc/default/instance_configs.cfg, the registry-cache CA bundles, the token syncs).

  1. a fresh node whose image brought a kubelet binary (the stand-in 1.31.4 at /opt/bin/kubelet,
     no unit for it yet) gets an OSC with kubelet 1.32.1 that also names a path outside what the
     unit opens: the apply fails with FileApplyFailed naming that path on the Node, no temporary
     file is left, no checksum is written, and the kubelet is left as it was: 1.31.4 at binaryPath,
     no kubelet.service started, the rollback does not fail on the unit nobody wrote ("Unit
     kubelet.service not found", found on a booted node), and the health check says once that the
     unit is not installed instead of restarting it every grace time;
  2. the same OSC without that path is applied whole: every producer file is on disk with its mode,
     the token syncs write their tokens, the checksum is on the Node;
  3. `systemd-analyze security inplace-agent` inside the booted image (reported, and bounded);
  4. an OSC naming the agent's own binary and a drop-in of its own unit (only a node with
     osc.rootDirectory / can reach them) is refused whole with FileApplyFailed naming each, nothing
     of it written, the agent the same process, the next good OSC applied.
"""

import json
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import itest  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import FAILURE, NODE_CHECKSUM, PROGRESS, annotation, annotation_json  # noqa: E402
from producers import producer_paths  # noqa: E402

H = None
NODE = "node-sandbox"
# Outside every producer's paths, and outside the unit's writable directories (/usr is the OS).
FORBIDDEN = "/usr/local/lib/inplace-agent-machine/forbidden.conf"
MAX_EXPOSURE = 3.5      # as .ci/packages.sh's offline check


# The health check's grace time short enough to see it meet the missing kubelet unit.
setUpModule, tearDownModule = harness.module_fixture(globals(), NODE,
                                                     tuning={"health-check": "2s", "health-grace": "4s"})


def concrete(path):
    """A producer path with its <placeholders> filled in."""
    return (path.replace("<gardener version>", "v1.120.0").replace("<upstream>", "docker.io")
            .replace("<host>", "mirror.gcr.io").replace("<volume>", "kubeconfig").replace("<item>", "ca.crt")
            .replace("<drop-in>", "60-machine-test"))


def producer_files():
    """(path, mode, content) of every producer file as an OSC file, but for those world.osc() has
    with their real content (the kubelet, its config and CA, GNA's files, the kernel settings, ...)."""
    own = {f["path"] for f in json.loads(H.w.osc())["spec"]["files"]}
    out = []
    for path, kind, producer, source in producer_paths():
        path = concrete(path)
        if kind != "file" or path in own:
            continue
        mode = 0o755 if path.endswith(".sh") or path.startswith("/opt/bin/") else 0o644
        content = "# %s for %s (%s)\n" % (path, producer, source)
        if path == "/var/lib/kubelet/extra_args":
            content = "KUBELET_EXTRA_ARGS=--v=2\n"
        out.append((path, mode, content))
    return out


def token_syncs():
    """(Secret, path) for every token path. The Secrets are the two gardener-resource-manager's
    node-agent authorizer lets a worker's agent read (the emulator enforces it); the self-hosted
    shoots' shoot-access tokens borrow them, only their paths matter here."""
    secrets = ("gardener-valitail", "gardener-opentelemetry-collector")
    paths = [concrete(p) for p, kind, _, _ in producer_paths() if kind == "token"]
    return [(secrets[i % 2], p) for i, p in enumerate(paths)]


def producer_units():
    """A unit as provider-gcp adds it (enabled, started; its agent is /bin/true here: the image has
    no Google guest agent). Units of other OSes (Flatcar's update-engine) have no unit here to act on."""
    return [{"name": "google-guest-agent.service", "enable": True, "command": "start",
             "content": "[Unit]\nDescription=Google Compute Engine Guest Agent\n[Service]\nType=oneshot\n"
                        "ExecStart=/bin/true\nRemainAfterExit=yes\n[Install]\nWantedBy=multi-user.target\n"}]


def osc(extra_files=(), kubelet="1.32.1"):
    files = [world.inline(p, c, mode) for p, mode, c in producer_files()] + list(extra_files)
    return H.w.osc(kubelet, files=files, units=producer_units(), token_syncs=token_syncs())


def temp_files(m):
    """Temporary files of atomic writes (.<name>.tmp) left anywhere the agent writes."""
    out = m.run("find", "/etc", "/opt", "/var/lib", "/var/bin", "-xdev", "-name", ".*.tmp", check=False).stdout
    return [ln for ln in out.splitlines() if ln]


class Sandbox(unittest.TestCase):
    def test_1_outside_the_sandbox_fails_cleanly(self):
        t, w = H.t, H.w
        t.step("scenario 6: the sandbox, enforced; an OSC with every producer's paths and one the unit does not open")
        for name in {name for name, _ in token_syncs()}:
            w.emu.seed_secret(name, data={"token": "token-of-" + name})
        m = H.new_machine()
        m.write(world.KUBELET_PATH, world.sandbox.stand_in_kubelet("1.31.4", size=4096), 0o755)
        H.boot()
        H.wait_certificate()
        world.wait_for(lambda: m.run("readlink", world.KUBELET_PATH, check=False).stdout.strip(), 30,
                       "the agent to adopt the image's kubelet")
        checksum = w.publish(osc([world.inline(FORBIDDEN, "no producer writes /usr\n")], kubelet="1.32.1"))
        w.seed_node()
        t.say("published OSC %s…: kubelet 1.32.1, %d producer files, %d token syncs, and %s" % (
            checksum[:12], len(producer_files()), len(token_syncs()), FORBIDDEN))
        n = H.g.wait_node(lambda n: (annotation_json(n, FAILURE) or {}).get("code") == "FileApplyFailed", 120,
                          "FileApplyFailed on the Node")
        failure = annotation_json(n, FAILURE)
        t.ok("inplace-agent/failure: %s" % json.dumps(failure))
        self.assertIn(FORBIDDEN, failure.get("message", ""))
        self.assertIn("Read-only file system", failure.get("message", ""))
        self.assertNotEqual(annotation(n, NODE_CHECKSUM), checksum)
        world.wait_for(lambda: [e for e in H.g.events() if FORBIDDEN in (e.get("message") or e.get("note") or "")],
                       30, "an Event naming %s" % FORBIDDEN)
        self.assertIn(FORBIDDEN, H.agent_journal())
        # Nothing half-written: the refused file is not there, no temporary file anywhere.
        self.assertIsNone(m.read(FORBIDDEN))
        self.assertEqual(temp_files(m), [])
        # The kubelet as it was before this OSC: the image's 1.31.4 at binaryPath, not running (no
        # unit yet), the rollback done without restarting the unit nobody wrote.
        n = H.g.wait_node(lambda n: (annotation_json(n, PROGRESS) or {}).get("phase") == "RolledBack", 60,
                          "the rolled-back transaction")
        self.assertNotIn("rolling back the kubelet failed", annotation_json(n, FAILURE).get("message", ""))
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.31.4")
        self.assertNotEqual(m.active_state(harness.KUBELET_UNIT), "active")
        # The health check meets the missing unit: said once, never "Restarting kubelet.service failed".
        world.wait_for(lambda: "kubelet.service is not installed (" in H.agent_journal(), 60,
                       "the health check to find no kubelet unit")
        # Watched over the apply's retry (with back-off): it rolls back the same way, and the health
        # check retries the restart quietly every 4 s meanwhile.
        H.g.wait_node(lambda n: (annotation_json(n, FAILURE) or {}).get("attempt", 0) >= 2, 120,
                      "the apply's retry")
        journal = H.agent_journal()
        self.assertEqual(journal.count("not installed (Unit kubelet.service not found.); not restarting it"), 1,
                         journal[-3000:])
        self.assertNotIn("Restarting kubelet.service failed", journal)
        self.assertNotRegex(journal, r"rolling back the kubelet failed")
        t.block("journalctl -u inplace-agent | grep -e %s -e kubelet" % FORBIDDEN,
                "\n".join(ln for ln in journal.splitlines() if FORBIDDEN in ln or "kubelet" in ln.lower()))

    def test_2_every_producer_path_applied(self):
        t, w, m = H.t, H.w, H.m
        checksum = w.publish(osc())
        t.say("published OSC %s… without %s" % (checksum[:12], FORBIDDEN))
        H.wait_checksum(checksum, 180)
        t.ok("checksum/cloud-config-data %s… on the Node" % checksum[:12])
        wrong = []
        for path, mode, content in producer_files():
            st = m.run("stat", "-c", "%a", path, check=False).stdout.strip()
            if m.read(path) != content or st != "%o" % mode:
                wrong.append("%s: mode %s, content %r" % (path, st or "-", (m.read(path) or "")[:40]))
        self.assertEqual(wrong, [])
        for name, path in token_syncs():
            world.wait_for(lambda: m.read(path) == "token-of-" + name, 30, "the token sync to write " + path)
        self.assertEqual(temp_files(m), [])
        self.assertIsNone(m.read(FORBIDDEN))
        t.ok("%d producer files with their modes, %d synced tokens: %s" % (
            len(producer_files()), len(token_syncs()), ", ".join(p for _, p in token_syncs())))
        m.wait_active(harness.KUBELET_UNIT, 30)
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v1.32.1")
        self.assertEqual(m.active_state("google-guest-agent.service"), "active")
        t.command(m, "ls", "-l", "/etc/ntp.conf", "/etc/default/instance_configs.cfg", "/etc/modprobe.d/sctp.conf",
                  "/etc/containerd/certs.d/ca-bundle.pem", "/etc/kubernetes/admin-token")

    def test_3_systemd_analyze_security(self):
        t, m = H.t, H.m
        out = t.command(m, "systemd-analyze", "security", "--no-pager", harness.AGENT_UNIT)
        found = re.search(r"Overall exposure level for inplace-agent.service: ([0-9.]+)", out)
        self.assertTrue(found, out[-500:])
        exposure = float(found.group(1))
        t.ok("systemd-analyze security inplace-agent inside the booted image: %.1f (limit %.1f)" % (
            exposure, MAX_EXPOSURE))
        self.assertLessEqual(exposure, MAX_EXPOSURE)

    def test_4_own_binary_and_unit_refused(self):
        t, w, m = H.t, H.w, H.m
        binary, drop_in = "/usr/sbin/inplace-agent", "/etc/systemd/system/inplace-agent.service.d/99-osc.conf"
        marker = "/etc/inplace-agent-machine/own-files-marker"
        before = m.run("sha256sum", binary).stdout.split()[0]
        pid = m.run("systemctl", "show", "-P", "MainPID", harness.AGENT_UNIT).stdout.strip()
        checksum = w.publish(osc([world.inline(marker, "m\n"), world.inline(binary, "#!/bin/sh\nexit 0\n", 0o755),
                                  world.inline(drop_in, "[Service]\nExecStart=\nExecStart=/bin/true\n")]))
        n = H.g.wait_node(lambda n: binary in (annotation_json(n, FAILURE) or {}).get("message", ""), 120,
                          "FileApplyFailed naming %s" % binary)
        failure = annotation_json(n, FAILURE)
        self.assertEqual(failure.get("code"), "FileApplyFailed", failure)
        self.assertIn("the agent's binary", failure["message"])
        self.assertNotEqual(annotation(n, NODE_CHECKSUM), checksum)
        self.assertEqual(m.run("sha256sum", binary).stdout.split()[0], before)
        self.assertIsNone(m.read(drop_in))
        self.assertIsNone(m.read(marker), "the refused OSC wrote a file")
        self.assertEqual(m.run("systemctl", "show", "-P", "MainPID", harness.AGENT_UNIT).stdout.strip(), pid)
        t.ok("refused whole: %s" % failure["message"][:200])
        good = w.publish(osc([world.inline(marker, "m\n")]))
        H.wait_checksum(good, 120)
        self.assertEqual(m.read(marker), "m\n")
        t.ok("the next OSC %s… without them applied" % good[:12])


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
