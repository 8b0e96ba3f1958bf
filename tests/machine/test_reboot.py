#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, real reboots of one node (`systemctl reboot` inside: nspawn exits with 133, the
harness boots the same tree again: a new boot id, units started from their install state):

  3. an OS update with a real reboot. The OS extension's command (an OSC file, like Garden Linux's
     /opt/gardener/bin/inplace-update.sh) rewrites /etc/os-release the way provider-local's does
     (`sed -i` on PRETTY_NAME, in the agent's sandbox) and calls `reboot`. The agent resumes the
     persisted transaction, sees the new version, and reports update-result=successful exactly
     once; the OS marker annotation goes.
  9. drift after a wipe of /etc and a real reboot (issue 26): an OSC with a file under /etc, a unit
     with a drop-in, enabled (WantedBy=multi-user.target) and listing that file in filePaths, the
     kubelet's unit and containerd's config; everything the OSC wrote under /etc is wiped while the
     machine is down (files, unit files, drop-ins, the .wants links, containerd's config.toml and
     hosts.toml; /etc/inplace-agent and the agent's own enablement stay, as a wipe-based OS image
     ships them); after the boot the agent's check at start restores it all: files with content and
     mode, units enabled and active, each affected unit started exactly once in this boot,
     containerd restarted onto its config.toml, one OSCDriftRepaired Event naming them, and the
     rounds after it find nothing.
 10. the kernel console with the API server unreachable at boot (gardener#15707): the unit's
     StandardOutput=kmsg is in force; the agent's "<3>" line with the reason reaches journald at
     priority err from its standard output, and journald forwards it to /dev/kmsg as
     "<27>inplace-agent[pid]: <reason>" (daemon.err); once the API server answers, the console says
     so and one NoAPIServerAccess Event names what blocked it. Not provable in a container: that
     the kernel takes the record into its ring buffer and prints it on the console (nspawn gives a
     container no /dev/kmsg; here it is a FIFO the host reads, lib/machine.py).

In nspawn the agent's sandbox (ProtectKernelTunables=, ProtectProc=invisible: a /proc of its own)
sees the kernel's boot id, not the one nspawn gives the container, so a container reboot does not
change the boot id the agent sees (a VM's would): the tests name the boot by journald's _BOOT_ID.
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
from gardener import FAILED_REASON, UPDATE_RESULT, UPDATING_OS, annotation, label  # noqa: E402

H = None
NODE = "node-reboot"
FROM, TO, NEXT, LAST, FAILING = "12", "12.1", "12.2", "12.3", "12.4"
GNA = "gardener-node-agent.service"
GNA_BIN = "/opt/bin/gardener-node-agent"
GNA_RAN = "/var/lib/gna-stand-in"
COMMAND = r'''#!/bin/sh
# The OS extension's in-place update command on the machine tier: provider-local's edit of
# os-release (what the node reports as its version afterwards), then a reboot, as Garden Linux's
# inplace-update.sh does after gardenlinux-update.
set -eu
version="$1"
case "$version" in *[!0-9.]*|"") echo "exit status 1: invalid arguments"; exit 1;; esac
sed -i -E "s/^PRETTY_NAME=\"[^\"]*\"/PRETTY_NAME=\"Machine Image Version $version (version overwritten for tests, check VERSION_ID for actual version)\"/" /etc/os-release
echo "exit status 0: success"
reboot
'''


# Scenario 9's drift: a file under /etc, a unit listing it in filePaths (with a drop-in, enabled),
# which counts its starts outside /etc.
APP = "machine-drift-app.service"
APP_CONF = "/etc/machine-drift/app.conf"
APP_DROPIN = "50-machine-drift.conf"
STARTS = "/var/lib/machine-drift/starts"
DRIFT_INTERVAL = 3
REPAIRED = "OSCDriftRepaired"
UNIT_DIR = "/etc/systemd/system"

# The drift check every few seconds, and its rounds in the journal (debug: "Drift round done"); the
# console route of scenario 10 needs the machine's /dev/kmsg (lib/machine.py).
setUpModule, tearDownModule = harness.module_fixture(
    globals(), NODE, config_extra={"osc": {"driftInterval": "%ds" % DRIFT_INTERVAL}}, kmsg=True, log_level="debug",
    tuning={"contact-event-min": "1s"})


def app_unit():
    return {"name": APP, "enable": True, "command": "start", "filePaths": [APP_CONF],
            "content": "[Unit]\nDescription=machine tier: drift app\n[Service]\n"
                       "ExecStartPre=/bin/sh -c 'mkdir -p %s && echo start >> %s/%s'\n"
                       "ExecStart=/bin/sleep infinity\n[Install]\nWantedBy=multi-user.target\n"
                       % (STARTS, STARTS, APP),
            "dropIns": [{"name": APP_DROPIN, "content": "[Service]\nEnvironment=MACHINE_DRIFT_DROPIN=1\n"}]}


def osc(version, drift=False):
    files = [world.inline(APP_CONF, "setting = 1\n", 0o640)] if drift else []
    return H.w.osc("1.31.4", os_version=version, os_script=COMMAND, files=files, units=[app_unit()] if drift else ())


def etc_paths(osc_text):
    """What the OSC makes the agent write under /etc: its files there, the unit files and drop-ins
    (its extensions' too), the .wants links of the units it enables, containerd's config.toml and
    each registry's hosts.toml."""
    o = json.loads(osc_text)
    paths = [f["path"] for f in o["spec"]["files"] if f["path"].startswith("/etc/")]
    for u in o["spec"]["units"] + o["status"].get("extensionUnits", []):
        if u["name"] in world.REPLACED_UNITS:
            continue
        if u.get("content"):
            paths.append("%s/%s" % (UNIT_DIR, u["name"]))
            if u.get("enable") is not False:       # no `enable` is enabled, as upstream
                paths += ["%s/%s.wants/%s" % (UNIT_DIR, target, u["name"])
                          for target in re.findall(r"^WantedBy=(.+)$", u["content"], re.M)]
        paths += ["%s/%s.d/%s" % (UNIT_DIR, u["name"], d["name"]) for d in u.get("dropIns", [])]
    containerd = o["spec"]["criConfig"]["containerd"]
    paths.append("/etc/containerd/config.toml")
    paths += ["/etc/containerd/certs.d/%s/hosts.toml" % r["upstream"] for r in containerd.get("registries", [])]
    return paths


def wipe(m, paths):
    """Removes `paths` below the machine's root (it is down) and the directories they leave empty."""
    for p in paths:
        os.unlink(m.path(p))
        d = os.path.dirname(p)
        while d != "/etc" and not os.listdir(m.path(d)):
            os.rmdir(m.path(d))
            d = os.path.dirname(d)


def finding(m, reason, subject):
    """This boot's journal lines "Drift from <path>: <reason>: <message naming subject>"."""
    return [e for e in boot_entries(m, harness.AGENT_UNIT)
            if e.get("MESSAGE", "").startswith("Drift from") and (reason + ": ") in e["MESSAGE"]
            and subject in e["MESSAGE"]]


def starts(m):
    return (m.read("%s/%s" % (STARTS, APP)) or "").count("start")


def drift_events():
    return [e for e in H.g.events() if e.get("reason") == REPAIRED]


def boot_entries(m, unit, **fields):
    """This boot's journal entries of `unit` (journalctl -b 0 -u)."""
    return [e for e in m.journal_json("-b", "0", "-u", unit) if all(e.get(k) == v for k, v in fields.items())]


class Reboot(unittest.TestCase):
    def test_1_os_update_with_reboot(self):
        t, w, g = H.t, H.w, H.g
        t.step("scenario 3: an OS update whose command reboots the machine")
        m = H.node_up(osc(FROM))
        m.wait_active(harness.KUBELET_UNIT, 30)
        t.ok("node up at OS %s (%s)" % (FROM, m.run("sh", "-c", ". /etc/os-release; echo $PRETTY_NAME").stdout.strip()))

        checksum = w.publish(osc(TO))
        rv = w.emu.current_rv()
        g.mcm_candidate()
        H.wait_phase("Staged")
        g.mcm_select()
        H.wait_phase("WaitingForDrain")
        boot1 = m.boot_id()
        t.say("MCM: ReadyForUpdate; the agent runs %s %s, which reboots the machine" % (world.OS_UPDATE_SCRIPT, TO))
        g.mcm_ready_for_update()
        status = m.wait_exit(120)
        self.assertEqual(status, 133, "nspawn exited with %s, not 133 (reboot)" % status)
        t.ok("the machine rebooted (systemd-nspawn exited with 133); booting the same tree again")
        boot2 = H.boot()
        self.assertNotEqual(boot1, boot2)

        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 120, "update-result after the reboot")
        self.assertEqual(label(n, UPDATE_RESULT), "successful", annotation(n, FAILED_REASON))
        n = H.wait_checksum(checksum, 30)
        g.wait_node(lambda n: annotation(n, UPDATING_OS) is None, 30, "the OS marker to go")
        t.ok("update-result=successful, checksum %s…, %s removed" % (checksum[:12], UPDATING_OS))
        results = [harness.label(e["object"], UPDATE_RESULT) for e in g.node_history(since_rv=rv) if e.get("object")]
        changes = [r for i, r in enumerate(results) if r and (i == 0 or results[i - 1] != r)]
        self.assertEqual(changes, ["successful"], "update-result over the Node's history: %s" % changes)
        self.assertIn("Machine Image Version %s" % TO, m.read("/etc/os-release"))
        m.wait_active(harness.KUBELET_UNIT, 30)
        t.command(m, "journalctl", "--no-pager", "-b", "-1", "-u", harness.AGENT_UNIT, "--grep", "os-update|Update ")
        t.command(m, "journalctl", "--no-pager", "-b", "0", "-u", harness.AGENT_UNIT, "--grep", "Update |Starting")
        g.mcm_observe_result()
        g.mcm_finish()

    def test_2_drift_after_a_wipe_and_a_reboot(self):
        t, w, m = H.t, H.w, H.m
        t.step("scenario 9: /etc wiped while the machine is down; after the reboot the agent restores the OSC")
        text = osc(TO, drift=True)
        checksum = w.publish(text)
        H.wait_checksum(checksum, 60)
        m.wait_active(APP, 30)
        world.wait_for(lambda: starts(m) == 1, 30, "%s's first start" % APP)
        paths = etc_paths(text)
        self.assertEqual([p for p in paths if not os.path.lexists(m.path(p))], [],
                         "a path the OSC should have written under /etc is not there")
        before_events, before_starts = len(drift_events()), starts(m)
        t.ok("OSC %s… applied: %s (0640), %s with drop-in %s, enabled and running" % (
            checksum[:12], APP_CONF, APP, APP_DROPIN))

        m.run("systemctl", "reboot", check=False)
        self.assertEqual(m.wait_exit(60), 133, "no reboot")
        wipe(m, paths)
        t.block("wiped while the machine was down (%d paths the OSC wrote under /etc)" % len(paths), "\n".join(paths))
        boot = H.boot().replace("-", "")

        events = world.wait_for(lambda: drift_events()[before_events:], 60, "the %s Event" % REPAIRED)
        for unit in (APP, harness.KUBELET_UNIT, "containerd.service"):
            m.wait_active(unit, 30)
        # The round that repaired and two after it, each done (the debug line ends a round).
        def rounds():
            return len(boot_entries(m, harness.AGENT_UNIT,
                                    MESSAGE="Drift round done against %s/last-applied-osc.yaml." % harness.STATE))
        done = rounds()
        world.wait_for(lambda: rounds() >= done + 2, DRIFT_INTERVAL * 4 + 10, "two drift rounds after the repair")

        checking = [e for e in boot_entries(m, harness.AGENT_UNIT)
                    if e.get("MESSAGE", "").startswith("Checking the node against the last-applied OSC at start")]
        self.assertEqual(len(checking), 1, checking)
        self.assertEqual(checking[0]["_BOOT_ID"], boot)
        t.ok("in boot %s: %s" % (boot, checking[0]["MESSAGE"]))

        # Files with content and mode, units and drop-ins, enablement, containerd's config.
        self.assertEqual([p for p in paths if not os.path.lexists(m.path(p))], [], "not restored")
        self.assertEqual(m.read(APP_CONF), "setting = 1\n")
        self.assertEqual(m.run("stat", "-c", "%a", APP_CONF).stdout.strip(), "640")
        self.assertEqual(m.read("%s/%s" % (UNIT_DIR, APP)), app_unit()["content"])
        self.assertIn("MACHINE_DRIFT_DROPIN=1", m.unit_property(APP, "Environment"))
        for unit in (APP, harness.KUBELET_UNIT):
            self.assertEqual(m.unit_property(unit, "UnitFileState"), "enabled", unit)
        self.assertIn('sandbox_image = "registry.k8s.io/pause:3.10"', m.read("/etc/containerd/config.toml", ""))
        self.assertIn("SystemdCgroup = true", m.run("containerd", "config", "dump").stdout)

        # Each affected unit started once in this boot (containerd at boot without its config, then
        # once more by the repair: its drop-in's limit is in force).
        self.assertEqual(starts(m), before_starts + 1, "%s's starts" % APP)
        kubelet_starts = [e for e in boot_entries(m, harness.KUBELET_UNIT) if "Kubelet version" in e.get("MESSAGE", "")]
        self.assertEqual(len(kubelet_starts), 1, "the kubelet's starts in this boot")
        containerd_starts = [e for e in boot_entries(m, "containerd.service")
                             if "containerd successfully booted" in e.get("MESSAGE", "")]
        self.assertEqual(len(containerd_starts), 2, "containerd's starts in this boot")
        self.assertEqual(m.unit_property("containerd.service", "LimitNOFILE"), "1048576")

        # One Event for the round, naming what drifted and what was done; nothing in the rounds after.
        events = drift_events()[before_events:]
        self.assertEqual(len(events), 1, events)
        msg = events[0]["message"]
        self.assertIn("Repaired: ", msg)
        # gardenlet's OSC drifts in more places than the Event lists (it says "+N more"): each finding
        # is a journal line of this boot.
        for reason, subject in (("FileMissing", APP_CONF), ("UnitFileMissing", APP),
                                ("UnitFileMissing", harness.KUBELET_UNIT),
                                ("FileMissing", "/etc/containerd/config.toml"), ("DropInMissing", "containerd.service")):
            self.assertTrue(finding(m, reason, subject), "no %s %s in this boot's journal" % (reason, subject))
        t.ok("one %s Event: %s" % (REPAIRED, msg[:600]))
        later = [e for e in boot_entries(m, harness.AGENT_UNIT) if e.get("MESSAGE", "").startswith("Drift from")]
        self.assertEqual(len({e["MESSAGE"] for e in later}), len(later), "a finding came back in a later round")
        t.ok("%s started once, the kubelet once, containerd once more onto its config.toml; %d rounds since "
             "found nothing" % (APP, rounds() - done))

    def test_3_kernel_console_without_the_api_server(self):
        t, w, g, m = H.t, H.w, H.g, H.m
        t.step("scenario 10: the API server unreachable at boot: the reason on the kernel console")
        self.assertEqual(m.unit_property(harness.AGENT_UNIT, "StandardOutput"), "kmsg")
        seen = len(m.kmsg_lines())
        before = [e for e in g.events() if e.get("reason") == "NoAPIServerAccess"]
        m.run("systemctl", "reboot", check=False)
        self.assertEqual(m.wait_exit(60), 133, "no reboot")
        refused = "cannot list node %s at %s: connection refused" % (NODE, w.emu.server)
        w.emu.listen("refuse")
        try:
            H.boot()
            entries = world.wait_for(lambda: [e for e in boot_entries(m, harness.AGENT_UNIT, _TRANSPORT="stdout")
                                              if refused in e.get("MESSAGE", "")], 60, "the console line in the journal")
            self.assertEqual((entries[0]["PRIORITY"], entries[0]["SYSLOG_IDENTIFIER"], entries[0]["MESSAGE"]),
                             ("3", "inplace-agent", refused))
            pid = entries[0]["_PID"]
            t.ok("journald got it from the agent's standard output at priority 3 (err): %s" % refused)
            kmsg = world.wait_for(lambda: [ln for ln in m.kmsg_lines()[seen:] if "inplace-agent[" in ln], 30,
                                  "the line on /dev/kmsg")
            self.assertEqual(kmsg, ["<27>inplace-agent[%s]: %s" % (pid, refused)])
            t.ok("journald forwarded it to /dev/kmsg: %s" % kmsg[0])
            # Out of reach for longer than contact-event-min (1 s): the retry after the first attempt
            # (each attempt a debug line; the reason is said once).
            attempt = "LIST /api/v1/nodes/%s failed: Connection refused" % NODE
            world.wait_for(lambda: len([e for e in boot_entries(m, harness.AGENT_UNIT)
                                        if e.get("MESSAGE", "").startswith(attempt)]) >= 2, 30,
                           "a second refused attempt")
        finally:
            w.emu.listen("normal")
        ev = world.wait_for(lambda: [e for e in g.events() if e.get("reason") == "NoAPIServerAccess"
                                     and e not in before], 60, "the NoAPIServerAccess Event")
        self.assertIn(refused, ev[0]["message"])
        kmsg = world.wait_for(lambda: [ln for ln in m.kmsg_lines()[seen:] if "inplace-agent[" in ln][1:], 30,
                              "the all-clear on /dev/kmsg")
        self.assertEqual(kmsg, ["<27>inplace-agent[%s]: reached the API server; the reason above no longer holds"
                                % pid])
        t.ok("contact: %s %s: %s; on /dev/kmsg: %s" % (ev[0]["type"], ev[0]["reason"], ev[0]["message"], kmsg[0]))

    def garden_linux_update(self, version, while_down=None):
        """Garden Linux's in-place OS update to `version`: the command reboots, the new version boots with
        the image's /etc (every path the OSC wrote there gone), `while_down(m, text)` does whatever else
        happens before the boot. Returns (the OSC's text, checksum, the Node's rv before, the wiped paths,
        the new boot's id)."""
        t, w, g, m = H.t, H.w, H.g, H.m
        text = osc(version, drift=True)
        checksum = w.publish(text)
        rv = w.emu.current_rv()
        g.mcm_candidate()
        H.wait_phase("Staged")
        g.mcm_select()
        H.wait_phase("WaitingForDrain")
        g.mcm_ready_for_update()
        self.assertEqual(m.wait_exit(120), 133, "no reboot")
        paths = [p for p in etc_paths(text) if os.path.lexists(m.path(p))]
        wipe(m, paths)
        t.block("the new version's /etc: %d paths the OSC wrote under /etc are gone" % len(paths), "\n".join(paths))
        if while_down:
            while_down(m, text)
        return text, checksum, rv, paths, H.boot().replace("-", "")

    def results_since(self, rv):
        results = [harness.label(e["object"], UPDATE_RESULT) for e in H.g.node_history(since_rv=rv) if e.get("object")]
        return [r for i, r in enumerate(results) if r and (i == 0 or results[i - 1] != r)]

    def assert_whole(self, m, paths):
        """Everything the reset took is back, the OSC's units run, gardener-node-agent does not."""
        self.assertEqual([p for p in paths if not os.path.lexists(m.path(p))], [], "not restored")
        self.assertEqual(m.read(APP_CONF), "setting = 1\n")
        for unit in (APP, harness.KUBELET_UNIT, "containerd.service"):
            m.wait_active(unit, 30)
        self.assertNotEqual(m.unit_property(GNA, "ActiveState"), "active")

    def test_4_garden_linux_os_update_resets_etc(self):
        t, g, m = H.t, H.g, H.m
        t.step("issue 29: Garden Linux's in-place OS update: the new version boots with the image's /etc")
        before_events = len(drift_events())
        text, checksum, rv, paths, boot = self.garden_linux_update(NEXT)

        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 180, "update-result after the reboot")
        self.assertEqual(label(n, UPDATE_RESULT), "successful", annotation(n, FAILED_REASON))
        H.wait_checksum(checksum, 30)
        self.assertEqual(self.results_since(rv), ["successful"], "update-result over the Node's history")
        self.assert_whole(m, paths)
        events = drift_events()[before_events:]
        self.assertEqual(len(events), 1, events)
        for subject in (APP, harness.KUBELET_UNIT):
            self.assertTrue(finding(m, "UnitFileMissing", subject), "no UnitFileMissing %s" % subject)
        self.assertFalse(finding(m, "", "gardener-node-agent"), "gardener-node-agent's files or unit a finding")
        self.assertNotIn("gardener-node-agent", events[0]["message"])
        # The repair came before the verification and the result, in this boot.
        lines = [e.get("MESSAGE", "") for e in boot_entries(m, harness.AGENT_UNIT)]
        repaired = [i for i, ln in enumerate(lines) if ln.startswith("Repairing the drift")]
        succeeded = [i for i, ln in enumerate(lines) if re.match(r"Update \S+: Succeeded", ln)]
        self.assertTrue(repaired and succeeded, (repaired, succeeded))
        self.assertLess(repaired[0], succeeded[0], "the result came before the node was restored")
        t.ok("in boot %s: restored (%s), then update-result=successful once" % (boot, events[0]["message"][:300]))
        g.mcm_observe_result()
        g.mcm_finish()

    def test_5_garden_linux_boot_hook_on_a_handed_over_node(self):
        t, g, m = H.t, H.g, H.m
        t.step("issue 29: the same update with os-gardenlinux #379's boot hook, on a node handed over from "
               "gardener-node-agent (its binary still in /opt/bin)")

        def hook(m, text):
            # gardener-node-agent's binary as on a handed-over node (a stand-in that says when it runs), its
            # state deleted (gardener#15704), and the hook: every OSC unit with content written and enabled
            # again, gardener-node-agent.service included.
            m.write(GNA_BIN, "#!/bin/sh\nmkdir -p %s && echo ran >> %s/ran\nexec sleep infinity\n" % (GNA_RAN, GNA_RAN),
                    0o755)
            state = m.path("/var/lib/gardener-node-agent/last-applied-osc.yaml")
            if os.path.lexists(state):
                os.unlink(state)
            o = json.loads(text)
            for u in o["spec"]["units"] + o["status"].get("extensionUnits", []):
                if not u.get("content"):
                    continue
                m.write("%s/%s" % (UNIT_DIR, u["name"]), u["content"])
                for target in re.findall(r"^WantedBy=(.+)$", u["content"], re.M):
                    link = m.path("%s/%s.wants/%s" % (UNIT_DIR, target, u["name"]))
                    os.makedirs(os.path.dirname(link), exist_ok=True)
                    if not os.path.lexists(link):
                        os.symlink("%s/%s" % (UNIT_DIR, u["name"]), link)

        text, checksum, rv, paths, boot = self.garden_linux_update(LAST, hook)
        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 180, "update-result after the reboot")
        self.assertEqual(label(n, UPDATE_RESULT), "successful", annotation(n, FAILED_REASON))
        H.wait_checksum(checksum, 30)
        self.assertEqual(self.results_since(rv), ["successful"], "update-result over the Node's history")
        self.assert_whole(m, paths)
        self.assertEqual(m.unit_property(GNA, "UnitFileState"), "enabled", "the hook's enablement")
        self.assertIsNone(m.read(GNA_RAN + "/ran"), "gardener-node-agent ran beside the agent")
        self.assertEqual(m.unit_property(GNA, "ConditionResult"), "no")
        t.ok("in boot %s: gardener-node-agent.service enabled by the hook but never ran (its condition); "
             "update-result=successful once" % boot)
        g.mcm_observe_result()
        g.mcm_finish()

    def test_6_garden_linux_unit_that_cannot_be_restored(self):
        t, g, m = H.t, H.g, H.m
        t.step("issue 29: a unit the repair cannot restore after the reset: update-result=failed naming it")

        def blocked(m, text):
            os.makedirs(m.path("%s/%s" % (UNIT_DIR, APP)))      # a directory where its unit file goes

        text, checksum, rv, paths, boot = self.garden_linux_update(FAILING, blocked)
        n = g.wait_node(lambda n: label(n, UPDATE_RESULT), 240, "update-result after the reboot")
        reason = annotation(n, FAILED_REASON) or ""
        self.assertEqual(label(n, UPDATE_RESULT), "failed", reason)
        self.assertIn(APP, reason)
        self.assertNotIn("successful", self.results_since(rv), "successful for a node that does not run its OSC")
        self.assertNotEqual(annotation(n, harness.NODE_CHECKSUM), checksum, "the checksum of an OSC not running")
        failure = json.loads(annotation(n, "inplace-agent/failure") or "{}")
        self.assertEqual(failure.get("code"), "OSCUnitsNotRunning", failure)
        t.ok("in boot %s: update-result=failed: %s" % (boot, reason[:300]))
        os.rmdir(m.path("%s/%s" % (UNIT_DIR, APP)))

if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
