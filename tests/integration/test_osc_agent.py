#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 13 acceptance with the real agent (lib/sandbox.py: the emulator, a real `systemd --user`, the
registry): the whole OSC is applied, and checksum/cloud-config-data is a promise. One sandbox, in order:
  1. a new file (mode 0644): written below osc.rootDirectory at once (no MCM gate), then the checksum,
     the OSCApplied Event, last-applied-osc.yaml = the OSC; no update-result label;
  2. an imageRef file that is not the kubelet: pulled from the registry, verified, installed with its
     mode; then an OSC the agent cannot apply (containerd plugin values TOML cannot hold):
     UnsupportedChange naming the field on the Node and in the journal, the old checksum stays;
  3. a unit whose restart fails: UnitApplyFailed naming the unit, the old checksum stays; the fixed OSC
     then applies;
  4. a kubelet config change (evictionHard, an in-place trigger) with a kubelet drop-in: nothing while
     MCM has not opened the gate, the plan lists the OSC's items, then after ReadyForUpdate the config
     and the drop-in are written, the kubelet restarted once, update-result=successful, the checksum;
  5. handover from gardener-node-agent: only GNA's last-applied-osc.yaml exists; a new OSC applies only
     its diff (a file deleted by hand that both OSCs list is no part of it: the drift check at start
     restores it against GNA's last-applied OSC);
  6. containerd registries with readinessProbe (docs/node-protocol.md §6.4 steps 9 and 17): a TLS mirror whose CA comes
     with the OSC is probed against that CA and written; a mirror nobody serves yet holds back only its
     own hosts.toml and the checksum, not the OSC's files and units; it is written once it answers;
  7. files inside the agent's state and configuration directories (issue 23): FileApplyFailed naming
     the path on the Node and in the journal, nothing of that OSC written, the next good OSC applied;
  8. a newer OSC ends the readiness probe of a dead mirror in an older one at once (issue 23)."""

import http.server
import json
import os
import shutil
import threading
import unittest

from lib import itest
import registry
import sandbox
import usermgr

S = sandbox
SB = None
HELLO = "/etc/ipa-test/hello"


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=1 << 20, health_timeout="20s",
    gardener_osc=True)


def inline_file(path, data, mode=0o644):
    return ("  - path: %s\n    permissions: %d\n    content:\n      inline:\n        data: %s\n"
            % (path, mode, json.dumps(data)))


def rooted(path):
    return SB.base + path


def read(path):
    with open(path) as f:
        return f.read()


def failure(node):
    text = S.annotation(node, S.FAILURE)
    return json.loads(text) if text else {}


def kubelet_starts():
    return SB.unit_log(S.KUBELET_UNIT).count("runs kubelet v")


def last_applied():
    return read(os.path.join(SB.state_dir, "last-applied-osc.yaml"))


class OscAgent(unittest.TestCase):
    def wait_checksum(self, checksum, timeout=60):
        return SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, timeout,
                            "checksum/cloud-config-data %s" % checksum)

    def wait_failure(self, code, timeout=60):
        return SB.wait_node(lambda n: failure(n).get("code") == code, timeout, "inplace-agent/failure %s" % code)

    def test_1_file_applied_at_once(self):
        checksum = SB.publish_osc(extra_files=inline_file(HELLO, "hello\n"))
        n = self.wait_checksum(checksum)
        self.assertEqual(read(rooted(HELLO)), "hello\n")
        self.assertEqual(os.stat(rooted(HELLO)).st_mode & 0o7777, 0o644)
        self.assertEqual(os.stat(rooted(S.KUBELET_CONFIG_PATH)).st_mode & 0o7777, 0o600)
        self.assertIn("memory.available: 100Mi", read(rooted(S.KUBELET_CONFIG_PATH)))
        self.assertEqual(last_applied(), SB.osc["yaml"])
        self.assertIsNone(S.label(n, S.UPDATE_RESULT))
        usermgr.wait_until(lambda: any(e.get("reason") == "OSCApplied" for e in SB.events()), 10, "OSCApplied")
        # The promise: no history entry ever showed this checksum before the file was there. The
        # agent's journal orders the two: the commit line comes before the checksum patch.
        log = SB.agent_log()
        self.assertIn("Applied every change of OSC %s" % checksum, log)

    def test_2_image_file_then_unsupported_change(self):
        tool = rooted("/opt/bin/other-tool")
        extra = inline_file(HELLO, "hello\n") + ("  - path: /opt/bin/other-tool\n    permissions: 493\n    content:\n"
                                                 "      imageRef:\n        image: %s\n        filePathInImage: %s\n"
                                                 % (SB.image_ref("1.31.4"), S.FILE_IN_IMAGE))
        checksum = SB.publish_osc(extra_files=extra)
        self.wait_checksum(checksum)
        with open(tool, "rb") as f:
            self.assertEqual(f.read(), SB.images[("1.31.4", False)]["kubelet"])
        self.assertEqual(os.stat(tool).st_mode & 0o7777, 0o755)
        self.assertIn("Installed /opt/bin/other-tool from", SB.agent_log())

        cri = ("  criConfig:\n    name: containerd\n    containerd:\n      plugins:\n      - path: [x]\n"
               "        values: {foo: [1, null]}\n")
        text = SB.osc["yaml"].replace("  units:\n", cri + "  units:\n", 1)
        SB.publish_text(text)
        n = self.wait_failure("UnsupportedChange")
        self.assertIn("spec.criConfig.containerd.plugins[0].values.foo[1]", failure(n).get("message", ""))
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), checksum)
        self.assertIn("UnsupportedChange", SB.agent_log())

    def test_3_unit_failure_then_fixed(self):
        before = S.annotation(SB.node(), S.NODE_CHECKSUM)
        marker = SB.path("flaky-ok")
        unit = ("  units:\n  - name: ipa-flaky.service\n    enable: true\n    command: restart\n    content: |\n"
                "      [Service]\n      Type=oneshot\n      RemainAfterExit=yes\n      ExecStart=/usr/bin/test -e %s\n"
                % marker)
        text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                           extra_files=inline_file(HELLO, "hello\n")).replace("  units:\n", unit, 1)
        SB.publish_text(text)
        n = self.wait_failure("UnitApplyFailed")
        self.assertIn("ipa-flaky.service", failure(n).get("message", ""))
        self.assertEqual(failure(n).get("class"), "retriable")
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), before)
        self.assertTrue(os.path.exists(os.path.join(SB.um.unit_dir, "ipa-flaky.service")))

        # Fixed (the unit's precondition met) and published again as a new OSC: applied.
        with open(marker, "w"):
            pass
        checksum = SB.publish_text(text.replace("RemainAfterExit=yes", "RemainAfterExit=true"))
        self.wait_checksum(checksum)
        self.assertEqual(SB.um.active_state("ipa-flaky.service"), "active")

    def test_4_kubelet_config_behind_the_gate(self):
        config = rooted(S.KUBELET_CONFIG_PATH)
        dropin = os.path.join(SB.um.unit_dir, S.KUBELET_UNIT + ".d", "50-sandbox.conf")
        starts = kubelet_starts()
        before = S.annotation(SB.node(), S.NODE_CHECKSUM)
        checksum = SB.publish_osc(eviction="200Mi", dropin="[Service]\nEnvironment=IPA_SANDBOX_DROPIN=1",
                                  extra_files=inline_file(HELLO, "hello\n"))
        usermgr.wait_until(lambda: "in-place changes wait for ReadyForUpdate" in SB.agent_log(), 30,
                           "the agent seeing the in-place change")
        # The decision is taken (STATUS= says what it waits for), and nothing was applied for it.
        usermgr.wait_until(lambda: "candidate-for-update" in SB.um.show(S.AGENT_UNIT, "StatusText"), 30,
                           "the agent waiting for candidate-for-update")
        self.assertIn("memory.available: 100Mi", read(config), "applied before the gate opened")
        self.assertFalse(os.path.exists(dropin))
        self.assertEqual(S.annotation(SB.node(), S.NODE_CHECKSUM), before)

        SB.mcm_candidate()
        # (Earlier transactions left their plans: wait for this one's.)
        n = SB.wait_node(lambda n: "kubeletConfig" in (S.annotation(n, S.PLAN) or ""), 30, "the plan")
        plan = json.loads(S.annotation(n, S.PLAN))
        osc = [p for p in plan if p.get("action") == "applyOSC"]
        self.assertEqual(len(osc), 1, plan)
        self.assertIn("kubeletConfig", osc[0]["changes"]["inPlace"])
        self.assertIn(S.KUBELET_CONFIG_PATH, json.dumps(osc[0]["changes"]["items"]))
        self.assertIn("memory.available: 100Mi", read(config))

        SB.mcm_select()
        SB.mcm_ready_for_update()
        SB.wait_node(lambda n: S.label(n, S.UPDATE_RESULT) == "successful", 60, "update-result=successful")
        self.wait_checksum(checksum)        # a patch of its own, after the result
        self.assertIn("memory.available: 200Mi", read(config))
        self.assertIn("IPA_SANDBOX_DROPIN=1", read(dropin))
        self.assertEqual(kubelet_starts(), starts + 1, "the kubelet is restarted exactly once")
        self.assertEqual(last_applied(), SB.osc["yaml"])

    def test_5_handover_from_gna(self):
        SB.stop_agent()
        gna = rooted("/var/lib/gardener-node-agent/last-applied-osc.yaml")
        os.makedirs(os.path.dirname(gna), exist_ok=True)
        shutil.move(os.path.join(SB.state_dir, "last-applied-osc.yaml"), gna)
        os.unlink(rooted(HELLO))            # in both OSCs: not part of the diff, so not written again
        checksum = SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-test/new", "x"))
        SB.start_agent()
        self.wait_checksum(checksum)
        self.assertEqual(read(rooted("/etc/ipa-test/new")), "x")
        # The diff is the new file alone...
        self.assertIn("OSC %s: 1 change(s) to apply (diffed against gardener-node-agent's last-applied OSC)"
                      % checksum, SB.agent_log())
        # ...and the file deleted by hand is drift from GNA's last-applied OSC: restored by the check at
        # start (issue 26 item 2), which runs before the first decision.
        self.assertEqual(read(rooted(HELLO)), "hello\n")
        repaired = [e["message"] for e in SB.events() if e.get("reason") == "OSCDriftRepaired"]
        self.assertTrue(any("FileMissing %s" % HELLO in m for m in repaired), repaired)
        self.assertEqual(last_applied(), SB.osc["yaml"])


    def test_6_registry_probed_before_its_hosts_toml(self):
        class NotFound(http.server.BaseHTTPRequestHandler):
            def do_GET(self):                   # any answer means "reachable", as upstream
                self.send_error(404)

            def log_message(self, *args):
                pass

        port = registry.free_port()
        tls_hosts = rooted("/etc/containerd/certs.d/tls.example/hosts.toml")
        late_hosts = rooted("/etc/containerd/certs.d/late.example/hosts.toml")
        cri = ("  criConfig:\n    name: containerd\n    containerd:\n      sandboxImage: registry.k8s.io/pause:3.10\n"
               "      registries:\n"
               "      - upstream: tls.example\n        readinessProbe: true\n"
               "        hosts:\n        - url: https://%s\n          caCerts: [ca.crt]\n"
               "      - upstream: late.example\n        readinessProbe: true\n"
               "        hosts:\n        - url: http://127.0.0.1:%d\n" % (SB.reg.host, port))
        files = (inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-test/probe", "p\n") +
                 inline_file("/etc/containerd/certs.d/tls.example/ca.crt", read(SB.reg.ca_file)))
        text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                           extra_files=files).replace("  units:\n", cri + "  units:\n", 1)
        before = S.annotation(SB.node(), S.NODE_CHECKSUM)
        checksum = SB.publish_text(text)

        # The TLS mirror answers once its CA (an OSC file, relative to its certs.d directory) is used.
        usermgr.wait_until(lambda: os.path.exists(tls_hosts), 60, "tls.example's hosts.toml")
        self.assertIn('[host."https://%s"]' % SB.reg.host, read(tls_hosts))
        usermgr.wait_until(lambda: "Probing the 1 host(s) of registry upstream late.example" in SB.agent_log(), 30,
                           "the probe of late.example")
        self.assertEqual(read(rooted("/etc/ipa-test/probe")), "p\n", "the OSC's files wait for a probe")
        self.assertTrue(os.path.exists(rooted("/etc/containerd/config.toml")))
        self.assertFalse(os.path.exists(late_hosts))
        self.assertEqual(S.annotation(SB.node(), S.NODE_CHECKSUM), before, "checksum before every registry")

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), NotFound)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        try:
            self.wait_checksum(checksum, 30)
        finally:
            srv.shutdown()
            srv.server_close()
        self.assertIn('[host."http://127.0.0.1:%d"]' % port, read(late_hosts))
        self.assertIn("Registry host http://127.0.0.1:%d of upstream late.example answered" % port, SB.agent_log())


    def test_7_own_files_refused(self):
        # Issue 23, finding 6: an OSC file in the agent's state directory overwrote the verified kubelet
        # in the store. Refused before anything of that OSC is written, naming the path.
        stored = os.path.join(SB.state_dir, "kubelet", "1.31.4", "kubelet")
        with open(stored, "rb") as f:
            kubelet = f.read()
        config = read(SB.config_path)
        target = "/var/lib/inplace-agent/kubelet/1.31.4/kubelet"
        before = S.annotation(SB.node(), S.NODE_CHECKSUM)
        good = inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-test/own", "o\n")
        SB.publish_osc(extra_files=good + inline_file(target, "evil") + inline_file("/etc/inplace-agent/config.yaml", "x"))
        n = self.wait_failure("FileApplyFailed")
        self.assertIn("%s: inside the agent's state directory %s" % (target, SB.state_dir), failure(n).get("message"))
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), before)
        usermgr.wait_until(lambda: "%s: inside the agent's state directory" % target in SB.agent_log(), 10,
                           "the refusal in the journal")
        self.assertFalse(os.path.exists(rooted("/etc/ipa-test/own")), "the refused OSC wrote a file")
        with open(stored, "rb") as f:
            self.assertEqual(f.read(), kubelet)
        self.assertEqual(read(SB.config_path), config)
        for unit in (S.AGENT_UNIT, S.KUBELET_UNIT, S.CONTAINERD_UNIT):
            self.assertEqual(SB.um.active_state(unit), "active", unit)

        checksum = SB.publish_osc(extra_files=good)
        self.wait_checksum(checksum)
        self.assertEqual(read(rooted("/etc/ipa-test/own")), "o\n")


    def test_8_newer_osc_ends_a_readiness_probe(self):
        # Issue 23, finding 11: a mirror with readinessProbe on a dead host held a corrected OSC
        # published after it back for the probe's full 5 minutes.
        dead = registry.free_port()
        cri = ("  criConfig:\n    name: containerd\n    containerd:\n      sandboxImage: registry.k8s.io/pause:3.10\n"
               "      registries:\n      - upstream: dead.example\n        readinessProbe: true\n"
               "        hosts:\n        - url: http://127.0.0.1:%d\n" % dead)
        text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                           extra_files=inline_file(HELLO, "hello\n")).replace("  units:\n", cri + "  units:\n", 1)
        SB.publish_text(text)
        usermgr.wait_until(lambda: "Probing the 1 host(s) of registry upstream dead.example" in SB.agent_log(), 60,
                           "the probe of dead.example")

        checksum = SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-test/fixed", "f\n"))
        self.wait_checksum(checksum, 30)
        self.assertEqual(read(rooted("/etc/ipa-test/fixed")), "f\n")
        self.assertIn("readiness probe of http://127.0.0.1:%d abandoned: OSC %s supersedes this one" % (dead, checksum),
                      SB.agent_log())
        self.assertFalse(os.path.exists(rooted("/etc/containerd/certs.d/dead.example/hosts.toml")))


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
