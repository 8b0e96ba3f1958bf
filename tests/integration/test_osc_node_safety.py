#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issues 22 (item 2) and 23 with the real agent (lib/sandbox.py: the emulator, a real `systemd --user`, the
registry): the OSC never stops or loops the agent's own unit, its slices, the kubelet or containerd.

  1. A realistic OSC, first apply, gated kubelet 1.31.4 -> 1.32.1: gardener-node-agent.service (replaced) with
     its component config config-*.yaml and a token syncConfig, valitail.service (needs the synced token),
     containerd's config and a drop-in, kubelet.service with content, and the agent's own unit
     inplace-agent.service (an operator ships the agent with the OSC, as Gardener ships GNA). Before: the
     agent restarted itself in the middle of the list, resumed the same unit command, restarted again
     ("Stopped." right after switching the kubelet, every few seconds, start-limit-hit); no checksum, no
     Lease. Now: its own restart is the last item, marked done first, so the agent restarts exactly once and
     the next process finishes the OSC: checksum, update-result=successful, the new unit in effect.
  2. app.slice (the slice the agent, the kubelet and containerd run in; system.slice on a node) with
     `command: stop`; before: all three stopped, nothing on the Node;
  3. app.slice with one drop-in (default restart); before: all three in start-limit-hit;
  4. -.slice, system.slice, init.scope;
  5. what reaches them through dependencies, as systemd says or as the OSC's own unit texts will say:
     basic.target (the agent's Requires=), a unit with Conflicts=kubelet.service, a target the OSC makes
     the kubelet PartOf=, a unit whose RequiredBy= names the agent.
Each of 2-5 is HELD: UnitApplyFailed on the Node (inplace-agent/failure) and in the journal naming the unit
and why, nothing of that OSC written, the agent, kubelet and containerd running on (same PIDs), and the next
good OSC applied."""

import base64
import json
import os
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
GNA_UNIT = "gardener-node-agent.service"
CC_PATH = "/var/lib/gardener-node-agent/config-v1.120.0.yaml"
TOKEN_PATH = "/var/lib/valitail/auth-token"
LEASE = "gardener-node-agent-" + S.NODE
OWN_MARKER = "IPA_SHIPPED_BY_OSC=1"
LIFELINES = (S.AGENT_UNIT, S.KUBELET_UNIT, S.CONTAINERD_UNIT)
KUBELET = "1.32.1"
rounds = [0]                            # makes each good OSC differ from the one before


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), setup=lambda sb: sb.emu.seed_secret("gardener-valitail", namespace="kube-system",
                                                   data={"token": "valitail-token"}),
    versions=("1.31.4", KUBELET), broken_versions=(), kubelet_size=256 << 10, health_timeout="20s",
    agent_config={"osc": {"replacedUnits": [GNA_UNIT]}})


def indent(text, n):
    return "".join(" " * n + line + "\n" for line in text.splitlines())


def inline_file(path, data, mode=0o644):
    return ("  - path: %s\n    permissions: %d\n    content:\n      inline:\n        encoding: b64\n        data: %s\n"
            % (path, mode, base64.b64encode(data.encode()).decode()))


def unit(name, content=None, dropin=None, command=None, file_paths=()):
    text = "  - name: %s\n    enable: true\n" % name
    if command:
        text += "    command: %s\n" % command
    if content is not None:
        text += "    content: |\n" + indent(content, 6)
    if dropin is not None:
        text += "    dropIns:\n    - name: 50-osc.conf\n      content: |\n" + indent(dropin, 8)
    if file_paths:
        text += "    filePaths:\n" + "".join("    - %s\n" % p for p in file_paths)
    return text


def realistic_osc(extra_units="", extra_files="", kubelet_dropin=None):
    """Like Gardener's OSC for a worker: GNA (replaced) with its component config, valitail with token sync,
    containerd config + drop-in, kubelet (with `kubelet_dropin`), and the agent's own unit."""
    component_config = ("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n"
                        "apiServer:\n  server: %s\n  caFile: /var/lib/gardener-node-agent/cluster-ca.crt\n"
                        "controllers:\n  token:\n    syncConfigs:\n    - secretName: gardener-valitail\n"
                        "      path: %s\n" % (SB.emu.server, TOKEN_PATH))
    gna = ("[Unit]\nDescription=Gardener Node Agent\nAfter=network-online.target\n[Service]\nLimitMEMLOCK=infinity\n"
           "ExecStart=/opt/bin/gardener-node-agent --config-dir=/var/lib/gardener-node-agent\nRestart=always\n"
           "RestartSec=5\n[Install]\nWantedBy=multi-user.target")
    valitail = SB.um.service("/bin/sh -c 'test -s %s && exec sleep infinity'" % (SB.base + TOKEN_PATH),
                             service_extra="Restart=always\nRestartSec=5\n")
    own = SB.agent_unit_text() + "Environment=%s\n" % OWN_MARKER
    files = (inline_file(CC_PATH, component_config, 0o600) + inline_file("/var/lib/valitail/config/config", "x: 1\n")
             + inline_file(S.KUBELET_CONFIG_PATH, "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                           "kind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\n", 0o600)
             + ("  - path: %s\n    permissions: 493\n    content:\n      imageRef:\n        image: %s\n"
                "        filePathInImage: %s\n" % (S.KUBELET_OSC_PATH, SB.image_ref(KUBELET), S.FILE_IN_IMAGE))
             + extra_files)
    units = (unit(GNA_UNIT, gna, file_paths=(CC_PATH,))
             + unit("valitail.service", valitail, command="start", file_paths=("/var/lib/valitail/config/config",))
             + unit(S.CONTAINERD_UNIT, dropin="[Service]\nLimitNOFILE=65536")
             + unit(S.KUBELET_UNIT, SB.kubelet_unit_text(), kubelet_dropin,
                    file_paths=(S.KUBELET_OSC_PATH, S.KUBELET_CONFIG_PATH))
             + unit(S.AGENT_UNIT, own)
             + extra_units)
    return ("apiVersion: extensions.gardener.cloud/v1alpha1\nkind: OperatingSystemConfig\n"
            "metadata:\n  name: %s\n  namespace: kube-system\nspec:\n  type: gardenlinux\n  purpose: reconcile\n"
            "  inPlaceUpdates:\n    operatingSystemVersion: \"%s\"\n    kubelet: \"%s\"\n"
            "  criConfig:\n    name: containerd\n    containerd:\n      sandboxImage: registry.k8s.io/pause:3.10\n"
            "  files:\n%s  units:\n%s"
            "status:\n  inPlaceUpdates:\n    osUpdate:\n      command: %s\n      args:\n      - \"%s\"\n"
            % (S.SECRET, SB.osc["os_version"], KUBELET, files, units, SB.os_update_command, SB.osc["os_version"]))


def failure(node):
    text = S.annotation(node, S.FAILURE)
    return json.loads(text) if text else {}


def pids():
    return {u: SB.um.main_pid(u) for u in LIFELINES}


def all_running():
    return all(SB.um.active_state(u) == "active" for u in LIFELINES)


def rooted(path):
    return SB.base + path


class NodeSafety(unittest.TestCase):
    def wait_checksum(self, checksum, timeout=60):
        return SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, timeout,
                            "checksum/cloud-config-data %s" % checksum)

    def apply_good(self):
        """The next good OSC (a file more than the last) is applied; the failure goes away."""
        rounds[0] += 1
        path = "/etc/ipa-test/good-%d" % rounds[0]
        checksum = SB.publish_text(realistic_osc(extra_files=inline_file(path, "ok\n")))
        node = self.wait_checksum(checksum)
        with open(rooted(path)) as f:
            self.assertEqual(f.read(), "ok\n")
        SB.wait_node(lambda n: not failure(n), 30, "inplace-agent/failure cleared")
        return node

    def assert_held(self, extra_units, refused, why, kubelet_dropin=None):
        """An OSC with `extra_units` is held: UnitApplyFailed naming `refused` and `why` on the Node and in the
        journal, nothing of it written, the three lifelines running on; then the next good OSC applies."""
        before_pids, before_checksum = pids(), S.annotation(SB.node(), S.NODE_CHECKSUM)
        marker = "/etc/ipa-test/held-%d" % (rounds[0] + 1)
        checksum = SB.publish_text(realistic_osc(extra_units, inline_file(marker, "no\n"), kubelet_dropin))
        node = SB.wait_node(lambda n: refused in failure(n).get("message", ""), 30,
                            "UnitApplyFailed naming %s" % refused)
        f = failure(node)
        self.assertEqual(f.get("code"), "UnitApplyFailed", f)
        self.assertIn(why, f.get("message", ""))
        self.assertIn(refused, SB.agent_log())
        self.assertIn(why, SB.agent_log())
        self.assertEqual(S.annotation(node, S.NODE_CHECKSUM), before_checksum)
        self.assertNotEqual(S.annotation(node, S.NODE_CHECKSUM), checksum)
        self.assertFalse(os.path.exists(rooted(marker)), "a held OSC wrote its files")
        self.assertTrue(all_running(), {u: SB.um.active_state(u) for u in LIFELINES})
        self.assertEqual(pids(), before_pids, "a lifeline was stopped or restarted")
        self.apply_good()
        self.assertTrue(all_running())

    def test_1_realistic_osc_restarts_the_agent_once(self):
        log_before = len(SB.agent_log())
        checksum = SB.publish_text(realistic_osc())
        # valitail's ExecStartPre= needs the synced token (as on a node): synced as the OSC arrives.
        usermgr.wait_until(lambda: os.path.exists(rooted(TOKEN_PATH)), 30, "the valitail token synced")
        SB.mcm_candidate()
        SB.mcm_select()
        SB.mcm_ready_for_update()
        node = self.wait_checksum(checksum, 90)
        self.assertEqual(S.label(node, S.UPDATE_RESULT), "successful")
        self.assertIsNone(S.annotation(node, S.FAILURE))
        log = SB.agent_log()[log_before:]
        self.assertEqual(log.count("Starting inplace-agent"), 1, "the agent restarted more or less than once:\n" + log)
        self.assertEqual(log.count("restarting it now"), 1, log)
        self.assertIn("0 change(s) to apply (resuming the saved remaining work)", log)
        self.assertTrue(all_running(), {u: SB.um.active_state(u) for u in LIFELINES})
        self.assertIn(OWN_MARKER, SB.um.show(S.AGENT_UNIT, "Environment"), "the OSC's agent unit is not in effect")
        self.assertEqual(SB.kubelet_version(), "Kubernetes v" + KUBELET)
        with open(rooted(TOKEN_PATH)) as f:
            self.assertEqual(f.read(), "valitail-token")
        usermgr.wait_until(lambda: SB.um.active_state("valitail.service") == "active", 20, "valitail running")
        lease = SB.emu.get("leases", LEASE, namespace="kube-system", group="coordination.k8s.io")
        self.assertIsNotNone(lease, "no Lease")
        self.assertEqual(lease["spec"]["holderIdentity"], LEASE)
        # GNA's unit is the agent's to replace: never written.
        self.assertFalse(os.path.exists(os.path.join(SB.um.unit_dir, GNA_UNIT)))
        SB.mcm_observe_result()

    def test_2_slice_stop_is_held(self):
        self.assert_held(unit("app.slice", command="stop"), "app.slice",
                         "the slice contains inplace-agent.service (the agent's own unit), kubelet.service "
                         "(the kubelet), containerd.service (containerd)")

    def test_3_slice_dropin_is_held(self):
        self.assert_held(unit("app.slice", dropin="[Slice]\nCPUWeight=50"), "app.slice", "stopping or restarting it")
        self.assertFalse(os.path.exists(os.path.join(SB.um.unit_dir, "app.slice.d")), "the slice drop-in was written")

    def test_4_root_system_slice_and_init_scope_are_held(self):
        self.assert_held(unit("-.slice", dropin="[Slice]\nCPUWeight=50"), "-.slice", "the root slice contains every unit")
        self.assert_held(unit("system.slice", command="stop"), "system.slice", "the system's services")
        self.assert_held(unit("init.scope", command="stop"), "init.scope", "systemd's own scope")

    def test_5_dependencies_are_held(self):
        # systemd's view: every service of the user manager Requires=basic.target.
        self.assert_held(unit("basic.target", dropin="[Unit]\nDescription=x"), "basic.target",
                         "inplace-agent.service has Requires=basic.target")
        # The OSC's own texts: what a unit will declare once written.
        self.assert_held(unit("rival.service", SB.um.service("/bin/sleep infinity",
                                                             unit_extra="Conflicts=kubelet.service")),
                         "rival.service", "starting it stops kubelet.service (the kubelet)")
        # The OSC makes the kubelet PartOf= a new target and restarts that target.
        self.assert_held(unit("k8s.target", "[Unit]\nDescription=k8s"), "k8s.target",
                         "kubelet.service has PartOf=k8s.target", kubelet_dropin="[Unit]\nPartOf=k8s.target")
        self.assert_held(unit("helper.service", SB.um.service("/bin/sleep infinity") + "[Install]\n"
                              "RequiredBy=inplace-agent.service\n"), "helper.service",
                         "helper.service has RequiredBy=inplace-agent.service")
        self.assertFalse(os.path.exists(os.path.join(SB.um.unit_dir, "rival.service")))


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
