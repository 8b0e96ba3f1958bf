#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 29 items 1 and 4, in the sandbox (lib/sandbox.py: the emulator, a real `systemd --user`, the
registry): an OSC that carries gardener-node-agent.service the way gardenlet writes it (the unit with
filePaths, its binary /opt/bin/gardener-node-agent as an imageRef file, its config below
/var/lib/gardener-node-agent) beside a unit of its own and a file it lists.

  1. After the first apply, one OSC file and one unit file deleted by hand and the agent restarted: the
     check at start finds both and restores both (the unit restarted once); nothing of gardener-node-agent's
     is a finding, pulled, written or restarted. On main the whole repair failed ("Repair failed:
     gardener-node-agent.service: the agent runs in place of this unit") and nothing was restored.
  2. gardener-node-agent.service running beside the agent (its unit file put back and started, as an /etc
     reset or os-gardenlinux #379's boot hook does on a node handed over from gardener-node-agent): the agent
     stops it within a round, says so (journal, one ReplacedUnitStopped Event), and a start by anyone after
     that, even of a rewritten unit file, does not run it (the drop-in in the runtime unit directory)."""

import json
import os
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
APP = "ipa-gl-app.service"
APP_CONF = "/etc/ipa-gl/app.conf"
GNA = S.GNA_UNIT
GNA_BIN = "/opt/bin/gardener-node-agent"
GNA_CONFIG = S.GNA_CONFIG
DROP_IN = "50-inplace-agent-replaced.conf"

setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=1 << 20, health_timeout="20s",
    log_level="debug", agent_env={"INPLACE_AGENT_KUBE_TUNING": "units-check=1s"})


def gna_unit_text():
    """gardener-node-agent's unit as it would run: a stand-in that stays active and counts its starts."""
    return SB.counting_unit(GNA, "replaced-units test unit")


def osc_text():
    files = ("  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: %s\n"
             "  - path: %s\n    permissions: 493\n    content:\n      imageRef:\n"
             "        image: %s/gardener-node-agent:v1.120.0\n        filePathInImage: /gardener-node-agent\n"
             "  - path: %s\n    permissions: 384\n    content:\n      inline:\n        data: %s\n"
             % (APP_CONF, json.dumps("setting = 1\n"), GNA_BIN, SB.reg.host, GNA_CONFIG,
                json.dumps("apiVersion: nodeagent.config.gardener.cloud/v1alpha1\nkind: NodeAgentConfiguration\n")))
    units = ("  units:\n"
             "  - name: %s\n    enable: true\n    command: start\n    content: %s\n    filePaths:\n    - %s\n"
             "  - name: %s\n    enable: true\n    content: %s\n    filePaths:\n    - %s\n    - %s\n"
             % (APP, json.dumps(SB.counting_unit(APP, "replaced-units test unit")), APP_CONF, GNA, json.dumps(gna_unit_text()), GNA_CONFIG, GNA_BIN))
    return SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                       extra_files=files).replace("  units:\n", units, 1)


def events(reason):
    return [e for e in SB.events() if e.get("reason") == reason]


def gna_active():
    return SB.systemctl("is-active", GNA).stdout.strip()


class ReplacedUnits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        checksum = SB.publish_text(osc_text())
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the OSC applied")
        usermgr.wait_until(lambda: SB.starts(APP) == 1, 20, "the OSC's unit started")

    def test_1_drift_with_gardener_node_agent_in_the_osc(self):
        unit_file = os.path.join(SB.um.unit_dir, APP)
        self.assertFalse(os.path.exists(SB.rooted(GNA_BIN)), "the replaced unit's binary was pulled")
        self.assertFalse(os.path.exists(os.path.join(SB.um.unit_dir, GNA)), "the replaced unit was written")
        SB.stop_agent()
        os.unlink(SB.rooted(APP_CONF))
        os.unlink(unit_file)
        before = len(events("OSCDriftRepaired"))
        SB.start_agent()
        ev = usermgr.wait_until(lambda: events("OSCDriftRepaired")[before:], 30, "the OSCDriftRepaired Event")
        self.assertEqual(S.read_text(SB.rooted(APP_CONF)), "setting = 1\n")
        self.assertEqual(S.read_text(unit_file), SB.counting_unit(APP, "replaced-units test unit"))
        usermgr.wait_until(lambda: SB.starts(APP) == 2, 20, "the unit restarted")
        msg = ev[0]["message"]
        for name in ("FileMissing " + APP_CONF, "UnitFileMissing " + APP):
            self.assertIn(name, msg)
        for gna in (GNA_BIN, GNA_CONFIG, GNA):
            self.assertNotIn(gna, msg)
        self.assertNotIn("Repair failed", msg)
        self.assertFalse(events("OSCDriftRepairFailed"), events("OSCDriftRepairFailed"))
        self.assertFalse(os.path.exists(SB.rooted(GNA_BIN)), "the replaced unit's binary was pulled")
        self.assertEqual(SB.starts(GNA), 0)

    def test_2_gardener_node_agent_never_beside_the_agent(self):
        drop_in = os.path.join(SB.um.runtime_unit_dir, GNA + ".d", DROP_IN)
        usermgr.wait_until(lambda: os.path.exists(drop_in), 20, "the runtime drop-in")
        self.assertIn("ConditionPathExists=!%s" % drop_in, S.read_text(drop_in))
        # A boot: /run is empty, and an /etc reset or the boot hook put its unit file back, which
        # started before the agent.
        SB.stop_agent()
        os.unlink(drop_in)
        SB.um.write_unit(GNA, gna_unit_text())
        SB.um.daemon_reload()
        SB.systemctl("start", GNA, check=True)
        self.assertEqual(gna_active(), "active")
        before = len(events("ReplacedUnitStopped"))
        SB.start_agent()
        ev = usermgr.wait_until(lambda: events("ReplacedUnitStopped")[before:], 30, "the ReplacedUnitStopped Event")
        self.assertEqual(gna_active(), "inactive")
        self.assertIn("%s was running beside the agent" % GNA, ev[0]["message"])
        self.assertIn("%s was running beside the agent" % GNA, SB.agent_log())
        gna_starts = SB.starts(GNA)
        # A hook that rewrites its unit file and starts it: the condition holds it back.
        SB.um.write_unit(GNA, gna_unit_text() + "# rewritten by a boot hook\n")
        SB.um.daemon_reload()
        SB.systemctl("start", GNA)
        self.assertEqual(gna_active(), "inactive")
        self.assertEqual(SB.starts(GNA), gna_starts, "gardener-node-agent.service ran")
        self.assertIn("ConditionPathExists", SB.systemctl("show", GNA, "-p", "ConditionResult",
                                                          "-p", "Conditions").stdout + S.read_text(drop_in))
        self.assertEqual(SB.systemctl("show", GNA, "-p", "ConditionResult").stdout.strip(), "ConditionResult=no")
        self.assertEqual(len(events("ReplacedUnitStopped")[before:]), 1, "said more than once")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
