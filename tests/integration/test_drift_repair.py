#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 26 item 2: drift is repaired, not only reported. The real agent in the sandbox (lib/sandbox.py:
emulator, a real `systemd --user`, registry) with osc.driftInterval 2s applies an OSC with a file
/etc/ipa-drift/app.conf that unit ipa-drift-app.service lists in filePaths, and a bystander unit; each unit
appends a line to its own file at every start, so restarts are counted. Then, in order:
  1. the file and ipa-drift-app.service's unit file deleted by hand: both restored within the interval,
     the unit restarted exactly once, the bystander not at all, one Warning Event OSCDriftRepaired naming
     both and what was done, nothing more in the rounds after; a secretRef file and an imageRef file
     deleted: fetched and linked again with their modes, the Secret's value nowhere else;
  2. the bystander disabled and stopped by hand: enabled and started again, once;
  3. osc.driftRepair: warn: the file deleted again is reported (OSCDriftDetected, "Nothing was touched")
     and stays deleted, no unit restarted; switched back to repair, the check at the agent's start
     restores it;
  4. while a gated in-place update waits for the drain nothing is repaired (nor checked); once the update
     is through, the next round repairs."""

import json
import os
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
INTERVAL = 2.0
APP_CONF = "/etc/ipa-drift/app.conf"
APP = "ipa-drift-app.service"
BYSTANDER = "ipa-drift-bystander.service"
TOKEN = "/etc/ipa-drift/token"             # a secretRef file
TOKEN_SECRET = "ipa-drift-token"
TOKEN_VALUE = "ipa-drift-secret-value-7f3a"
TOOL = "/opt/bin/ipa-drift-tool"            # an imageRef file (not the kubelet)
REPAIRED = "OSCDriftRepaired"
DETECTED = "OSCDriftDetected"


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=1 << 20, health_timeout="20s",
    log_level="debug", gardener_osc=True, agent_config={"osc": {"driftInterval": "%ds" % INTERVAL}})


def osc_text(eviction=S.DEFAULT_EVICTION):
    files = ("  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: %s\n"
             "  - path: %s\n    permissions: 384\n    content:\n      secretRef:\n        name: %s\n"
             "        dataKey: token\n"
             "  - path: %s\n    permissions: 493\n    content:\n      imageRef:\n        image: %s\n"
             "        filePathInImage: %s\n"
             % (APP_CONF, json.dumps("setting = 1\n"), TOKEN, TOKEN_SECRET, TOOL, SB.image_ref("1.31.4"),
                S.FILE_IN_IMAGE))
    units = ("  units:\n"
             "  - name: %s\n    enable: true\n    content: %s\n    filePaths:\n    - %s\n"
             "  - name: %s\n    enable: true\n    content: %s\n"
             % (APP, json.dumps(SB.counting_unit(APP, "drift test unit")), APP_CONF, BYSTANDER, json.dumps(SB.counting_unit(BYSTANDER, "drift test unit"))))
    return SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"), eviction=eviction,
                       extra_files=files).replace("  units:\n", units, 1)


def drift_events(reason):
    return [e for e in SB.events() if e.get("reason") == reason]


def rounds():
    """Drift rounds the agent finished (its debug line at the end of each)."""
    return SB.agent_log().count("Drift round done")


def wait_rounds(n, timeout=30):
    """Wait until n more rounds have run (each a full check after whatever happened before)."""
    target = rounds() + n
    usermgr.wait_until(lambda: rounds() >= target, timeout, "%d more drift rounds" % n)


def set_mode(mode):
    SB.agent_config_extra["osc"]["driftRepair"] = mode
    S.write_file(SB.config_path, SB.agent_config_text())
    SB.stop_agent()
    SB.start_agent()


class DriftRepair(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        SB.emu.seed_secret(TOKEN_SECRET, namespace=S.OSC_NAMESPACE, data={"token": TOKEN_VALUE})
        checksum = SB.publish_text(osc_text())
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the OSC applied")
        usermgr.wait_until(lambda: SB.starts(APP) == 1 and SB.starts(BYSTANDER) == 1, 20, "both units started")
        wait_rounds(1)
        assert not drift_events(REPAIRED) and not drift_events(DETECTED), SB.events()

    def test_1_file_and_unit_file_restored(self):
        unit_file = os.path.join(SB.um.unit_dir, APP)
        os.unlink(SB.rooted(APP_CONF))
        os.unlink(unit_file)
        t0 = time.monotonic()
        usermgr.wait_until(lambda: os.path.exists(SB.rooted(APP_CONF)) and os.path.exists(unit_file), 20,
                           "the file and the unit file restored")
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, INTERVAL * 1.1 + 3, "restored within the drift interval")
        self.assertEqual(S.read_text(SB.rooted(APP_CONF)), "setting = 1\n")
        self.assertEqual(os.stat(SB.rooted(APP_CONF)).st_mode & 0o7777, 0o644)
        self.assertEqual(S.read_text(unit_file), SB.counting_unit(APP, "drift test unit"))
        usermgr.wait_until(lambda: SB.starts(APP) == 2, 20, "the unit restarted")
        events = usermgr.wait_until(lambda: drift_events(REPAIRED), 20, "the %s Event" % REPAIRED)
        wait_rounds(2)
        self.assertEqual(SB.starts(APP), 2, "restarted exactly once")
        self.assertEqual(SB.starts(BYSTANDER), 1, "the bystander is not restarted")
        events = drift_events(REPAIRED)
        self.assertEqual(len(events), 1, events)
        e = events[0]
        self.assertEqual((e["type"], e.get("count", 1)), ("Warning", 1), e)
        msg = e["message"]
        self.assertIn("FileMissing %s" % APP_CONF, msg)
        self.assertIn("UnitFileMissing %s" % APP, msg)
        self.assertIn("Repaired: write file %s (0644)" % APP_CONF, msg)
        self.assertIn("restart unit %s" % APP, msg)
        self.assertNotIn(BYSTANDER, msg)
        self.assertEqual(SB.um.active_state(APP), "active")
        self.assertIn("Drift from %s: FileMissing: File %s is missing" % (
            os.path.join(SB.state_dir, "last-applied-osc.yaml"), APP_CONF), SB.agent_log())

    def test_1b_secret_and_image_files_restored(self):
        """A secretRef file is fetched from its Secret again, an imageRef file linked again from the
        agent's image store, each with its mode; the Secret's value appears nowhere but in its file."""
        before = len(drift_events(REPAIRED))
        os.unlink(SB.rooted(TOKEN))
        os.unlink(SB.rooted(TOOL))
        usermgr.wait_until(lambda: os.path.exists(SB.rooted(TOKEN)) and os.path.exists(SB.rooted(TOOL)), 20,
                           "the secretRef and imageRef files restored")
        self.assertEqual(S.read_text(SB.rooted(TOKEN)), TOKEN_VALUE)
        self.assertEqual(os.stat(SB.rooted(TOKEN)).st_mode & 0o7777, 0o600)
        with open(SB.rooted(TOOL), "rb") as f:
            self.assertEqual(f.read(), SB.images[("1.31.4", False)]["kubelet"])
        self.assertEqual(os.stat(SB.rooted(TOOL)).st_mode & 0o7777, 0o755)
        events = usermgr.wait_until(lambda: drift_events(REPAIRED)[before:], 20, "the Event")
        msg = events[0]["message"]
        self.assertIn("FileMissing %s" % TOKEN, msg)
        self.assertIn("FileMissing %s" % TOOL, msg)
        self.assertIn("pull file %s" % TOOL, msg)
        self.assertNotIn(APP, msg, "no unit lists them: nothing restarted")
        for where, text in (("the journal", SB.agent_log()), ("the Events", json.dumps(SB.events()))):
            self.assertNotIn(TOKEN_VALUE, text, "the Secret's value in %s" % where)

    def test_2_enablement_and_a_stopped_unit(self):
        before = SB.starts(BYSTANDER)
        # As `systemctl disable` does it (the sandbox's systemctl resolves unit files for the wrong
        # user directory): DisableUnitFiles, then a reload (systemd caches UnitFileState until then).
        SB.um.busctl("call", "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                     "org.freedesktop.systemd1.Manager", "DisableUnitFiles", "asb", "1", BYSTANDER, "false")
        SB.um.daemon_reload()
        self.assertEqual(SB.um.show(BYSTANDER, "UnitFileState"), "disabled")
        SB.systemctl("stop", BYSTANDER, check=True)
        usermgr.wait_until(lambda: SB.starts(BYSTANDER) == before + 1, 20, "the bystander started again")
        wait_rounds(2)
        self.assertEqual(SB.starts(BYSTANDER), before + 1)
        self.assertEqual(SB.um.show(BYSTANDER, "UnitFileState"), "enabled")
        self.assertEqual(SB.um.active_state(BYSTANDER), "active")
        msgs = [e["message"] for e in drift_events(REPAIRED) if BYSTANDER in e["message"]]
        self.assertEqual(len(msgs), 1, msgs)
        self.assertIn("UnitEnableMismatch %s" % BYSTANDER, msgs[0])
        self.assertIn("UnitInactive %s" % BYSTANDER, msgs[0])
        self.assertIn("restart unit %s" % BYSTANDER, msgs[0])

    def test_3_warn_touches_nothing(self):
        app = SB.starts(APP)
        set_mode("warn")
        os.unlink(SB.rooted(APP_CONF))
        events = usermgr.wait_until(lambda: drift_events(DETECTED), 20, "the %s Event" % DETECTED)
        wait_rounds(2)
        self.assertFalse(os.path.exists(SB.rooted(APP_CONF)), "warn restored the file")
        self.assertEqual(SB.starts(APP), app, "warn restarted the unit")
        msg = events[0]["message"]
        self.assertEqual(events[0]["type"], "Warning")
        self.assertIn("FileMissing %s" % APP_CONF, msg)
        self.assertIn("Nothing was touched (osc.driftRepair: warn)", msg)

        # Back to repair: the check at start repairs at once.
        set_mode("repair")
        usermgr.wait_until(lambda: os.path.exists(SB.rooted(APP_CONF)), 20, "the file restored at start")
        usermgr.wait_until(lambda: SB.starts(APP) == app + 1, 20, "the unit restarted")

    def test_4_nothing_while_waiting_for_drain(self):
        app = SB.starts(APP)
        checksum = SB.publish_text(osc_text(eviction="200Mi"))
        SB.mcm_candidate()
        SB.mcm_select()
        SB.wait_node(lambda n: S.progress_phase(n) == "WaitingForDrain", 60, "WaitingForDrain")
        os.unlink(SB.rooted(APP_CONF))
        postponed = SB.agent_log().count("Drift round postponed")
        usermgr.wait_until(lambda: SB.agent_log().count("Drift round postponed") >= postponed + 3, 30,
                           "postponed rounds")
        self.assertFalse(os.path.exists(SB.rooted(APP_CONF)), "repaired while waiting for the drain")
        self.assertEqual(SB.starts(APP), app)

        SB.mcm_ready_for_update()
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the update applied")
        usermgr.wait_until(lambda: os.path.exists(SB.rooted(APP_CONF)), 20, "the file restored after the update")
        usermgr.wait_until(lambda: SB.starts(APP) == app + 1, 20, "the unit restarted")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
