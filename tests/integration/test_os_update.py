#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 7 acceptance ("Update the operating system in place") against the real agent binary.

Every case runs in its own sandbox (lib/sandbox.py: API-server emulator, registry, user manager with
stand-in kubelet/containerd and the agent as a Type=notify unit) and drives the update like MCM does
(candidate -> selected -> ReadyForUpdate) with an OSC whose only change is the OS version. A reboot is
simulated as the issue says: the agent stops, os-release changes as the boot loader would have left it, the
agent starts again; in addition the boot id changes (Sandbox(fake_boot_id=True) bind-mounts a file over
/proc/sys/kernel/random/boot_id in the user manager's mount namespace), which is how the agent tells a reboot
from a mere restart.

Command backend (osUpdate.backend: command, OSC status.inPlaceUpdates.osUpdate.command = a script of ours
that appends to a count file on every run):
  * success without reboot (provider-local style): update-result=successful, marker set then removed;
  * exit 0, OS still old: phase Rebooting, no result; reboot into the target: successful, command ran once;
  * exit 0, then reboot into the OLD version: RolledBack, upstream's reason, OSRolledBack, marker kept;
  * "network problems" once: retried after upstream's fixed 30 s, successful on the 2nd run (this case
    starts first and is checked last, so its wait overlaps the others);
  * "system failure": terminal, failed with the reason, no retry;
  * hangs past osUpdate.timeout (5 s): its process group is killed, OSCommandTimeout;
  * 10 MB of output: reason capped, classification still sees the whole output, the agent keeps renewing
    its Lease, same PID, bounded memory;
  * minVersionForUpdate above the running OS: failed with the exact reason, the command never ran;
  * agent SIGKILLed while the command runs: after the restart the command is NOT run again, the update is
    reported failed (interrupted), Node annotations/labels consistent;
  * a node without any history (no state.json, no checksum/cloud-config-data on the Node: its disk wiped
    by a reinstall) drained for an OS update: the OS is compared anyway, the command runs, successful on
    the new OS (upstream marks such a node successful on the old OS: the report in
    fundament-oss/fundament#369), also when the OSC's files are applied already (nothing but the OS to do), and
    checksum/cloud-config-data is never written before the result; the same node whose marker says the attempt before the wipe came back on
    the old OS: RolledBack with upstream's reason naming both versions, the command never runs.
Image backend (osUpdate.backend: image, reboot: systemd): the OCI artifact's last layer (the UKI) is pulled,
verified, installed as <namePrefix>-<version>+3.efi, reboot.target started over D-Bus (a marker service);
after the simulated reboot into the new version: successful; into the old one: RolledBack.
"""

import json
import os
import sys
import time
import unittest
import uuid

from lib import itest
import sandbox
import usermgr

AGENT = sandbox.default_agent()
OLD = sandbox.DEFAULT_OS_VERSION            # 1592.6
NEW = "1877.1"
TIMEOUT = "5s"
RESULT_WAIT = 30
OS_IMAGE_REPO = "gardenlinux-uki"
NAME_PREFIX = "gardenlinux"

ROLLED_BACK_REASON = ('OS update might have failed and rolled back to the previous version. '
                      'Desired version: "%s", Current version: "%s"' % (NEW, OLD))

# A command script: counts its runs in $COUNT, then does what `body` says. Clean environment (PATH, LANG).
SCRIPT = """#!/bin/sh
echo "$$" >> '%(count)s'
version="$1"
set_os() {
    sed -i -E -e "s/^PRETTY_NAME=.*/PRETTY_NAME=\\"Garden Linux $version\\"/" \\
              -e "s/^VERSION_ID=.*/VERSION_ID=$version/" '%(os_release)s'
}
runs=$(wc -l < '%(count)s')
%(body)s
"""

measured = {}


def failure_code(node):
    f = sandbox.annotation_json(node, sandbox.FAILURE)
    return f.get("code") if isinstance(f, dict) else None


RETRY_TEST = "test_12_command_retriable_then_success"


class OsUpdate(unittest.TestCase):
    retry = None            # the retry case's sandbox, started early (see setUpClass)

    @classmethod
    def setUpClass(cls):
        # Upstream's retry interval is a fixed 30 s (no configuration shortens it): the retry case starts
        # first, in its own sandbox, and is checked last, so that its wait overlaps the other cases.
        early = cls(RETRY_TEST)
        early.setUp()
        early.start_retry_case()
        cls.retry = (early.sb, time.monotonic())

    @classmethod
    def tearDownClass(cls):
        if cls.retry:
            cls.retry[0].stop()
        print("measured: " + ", ".join("%s=%.1f" % kv for kv in sorted(measured.items())), file=sys.stderr)

    # ------------------------------------------------------------------ helpers

    def setUp(self):
        self.sb = None

    def tearDown(self):
        if self.sb:
            left = self.sb.stop()
            self.assertEqual(left, [], "processes left behind")

    def sandbox(self, os_update=None, start_agent=True):
        cfg = {"osUpdate": dict({"backend": "command", "timeout": TIMEOUT, "reboot": "none"}, **(os_update or {}))}
        self.sb = itest.start_sandbox(agent=AGENT, versions=("1.31.4",), broken_versions=(), kubelet_size=4096,
                                      fake_boot_id=True, start_agent=start_agent, agent_config=cfg, gardener_osc=True)
        return self.sb

    def path(self, name):
        return self.sb.path("os-test", name)

    def write_command(self, body):
        os.makedirs(self.sb.path("os-test"), exist_ok=True)
        sandbox.write_file(self.sb.os_update_command, SCRIPT % {"count": self.path("count"), "body": body,
                                                               "os_release": self.sb.os_release}, 0o755)

    def runs(self):
        try:
            with open(self.path("count")) as f:
                return [int(x) for x in f.read().split()]
        except OSError:
            return []

    def os_version(self):
        with open(self.sb.os_release) as f:
            for line in f:
                if line.startswith("VERSION_ID="):
                    return line.split("=", 1)[1].strip().strip('"')
        return None

    def request_update(self, version=NEW, min_version=None):
        """gardenlet publishes the OSC with the new OS version; MCM opens the gate."""
        self.sb.publish_osc(os_version=version, min_version=min_version)
        self.sb.mcm_candidate()
        self.sb.mcm_select()
        self.sb.mcm_ready_for_update()

    def wait_result(self, timeout=RESULT_WAIT):
        return self.sb.wait_node(lambda n: sandbox.label(n, sandbox.UPDATE_RESULT), timeout, "an update-result")

    def wait_phase(self, phase, timeout=RESULT_WAIT):
        return self.sb.wait_node(lambda n: sandbox.progress_phase(n) == phase, timeout, "phase " + phase)

    def marker_was_set(self, version=NEW):
        return any(sandbox.annotation(e.get("object"), sandbox.UPDATING_OS) == version
                   for e in self.sb.node_history())

    def assert_success(self, node):
        self.assertEqual(sandbox.label(node, sandbox.UPDATE_RESULT), "successful")
        # The checksum follows the result label (docs/node-protocol.md: Pods deleted, marked successful, then the checksum).
        checksum = self.sb.secret_checksum()
        node = self.sb.wait_node(lambda n: sandbox.annotation(n, sandbox.NODE_CHECKSUM) == checksum, 10,
                                 "checksum/cloud-config-data = the Secret's")
        self.assertEqual(sandbox.progress_phase(node), "Succeeded")
        self.assertIsNone(sandbox.annotation(node, sandbox.UPDATING_OS), "marker not removed")
        self.assertIsNone(sandbox.annotation(node, sandbox.FAILED_REASON))
        self.assertTrue(self.marker_was_set(), "the marker was never set before the OS change")

    def assert_failed(self, node, code, phase="Failed"):
        self.assertEqual(sandbox.label(node, sandbox.UPDATE_RESULT), "failed")
        self.assertEqual(failure_code(node), code)
        self.assertEqual(sandbox.progress_phase(node), phase)
        self.assertNotEqual(sandbox.annotation(node, sandbox.NODE_CHECKSUM), self.sb.secret_checksum())
        return sandbox.annotation(node, sandbox.FAILED_REASON) or ""

    def reach_rebooting(self):
        """The command exits 0 and leaves the OS alone: it is expected to reboot the node."""
        self.write_command('echo "update staged, rebooting"\nexit 0')
        self.request_update()
        node = self.wait_phase("Rebooting")
        self.assertIsNone(sandbox.label(node, sandbox.UPDATE_RESULT))
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW)
        self.assertEqual(len(self.runs()), 1)
        return node

    # ------------------------------------------------------------------ command backend

    def test_01_command_success_without_reboot(self):
        self.sandbox()
        self.write_command('set_os\necho "updated to $version, no reboot needed"\n'
                           'echo "gnutls-implicit-init=${GNUTLS_NO_IMPLICIT_INIT:-unset}"')
        self.request_update()
        node = self.wait_result()
        self.assert_success(node)
        self.assertEqual(self.os_version(), NEW)
        self.assertEqual(len(self.runs()), 1)
        self.assertIn("os-update: updated to %s, no reboot needed" % NEW, self.sb.agent_log())
        # The unit sets GNUTLS_NO_IMPLICIT_INIT=1 for the agent alone; the command must not inherit it.
        self.assertEqual(self.sb.agent_env.get("GNUTLS_NO_IMPLICIT_INIT"), "1")
        self.assertIn("os-update: gnutls-implicit-init=unset", self.sb.agent_log())

    def test_02_command_reboot_into_target(self):
        self.sandbox()
        self.reach_rebooting()
        boot = self.sb.boot_id()
        self.sb.simulate_reboot(NEW)
        self.assertNotEqual(self.sb.boot_id(), boot)
        node = self.wait_result()
        self.assert_success(node)
        self.assertEqual(len(self.runs()), 1, "the command ran again after the reboot")

    def test_03_command_reboot_into_old_version_rolls_back(self):
        self.sandbox()
        self.reach_rebooting()
        self.sb.simulate_reboot(OLD)
        node = self.wait_result()
        reason = self.assert_failed(node, "OSRolledBack", phase="RolledBack")
        self.assertEqual(reason, ROLLED_BACK_REASON)
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW, "marker must be kept")
        self.assertEqual(len(self.runs()), 1)

    def test_05_command_system_failure_is_terminal(self):
        self.sandbox()
        self.write_command('echo "disk check"\necho "fatal: system failure while writing the root fs"\nexit 3')
        self.request_update()
        node = self.wait_result()
        reason = self.assert_failed(node, "OSCommandFailed")
        self.assertIn("non-retriable error detected: exit status 3", reason)
        self.assertIn("system failure while writing the root fs", reason)
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW, "marker must be kept")
        self.assertEqual(len(self.runs()), 1)
        self.assertEqual(self.os_version(), OLD)

    def test_06_command_timeout_kills_process_group(self):
        self.sandbox()
        self.write_command("sleep 1000 &\necho $! > '%s'\necho working\nwait" % self.path("child"))
        self.request_update()
        node = self.wait_result()
        reason = self.assert_failed(node, "OSCommandTimeout")
        self.assertIn("timed out after 5s", reason)
        self.assertIn("signal: terminated", reason)
        with open(self.path("child")) as f:
            child = int(f.read())
        pids = self.runs() + [child]
        usermgr.wait_until(lambda: not any(sandbox.pid_alive(p) for p in pids), 5, "the command's processes to be gone")
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW)

    def test_07_command_output_flood(self):
        sb = self.sandbox()
        # "System Failure" only in the first line: the reason keeps the tail, classification sees all.
        self.write_command('echo "System Failure ahead"\nhead -c 10485760 /dev/urandom | base64\n'
                           'echo "last line"\nexit 1')
        pid = sb.um.main_pid(sandbox.AGENT_UNIT)
        lease_name = "gardener-node-agent-" + sandbox.NODE
        self.request_update()
        node = self.wait_result(timeout=60)
        reason = self.assert_failed(node, "OSCommandFailed")
        self.assertIn("non-retriable error detected: exit status 1", reason)
        self.assertTrue(reason.rstrip().endswith("last line"), reason[-200:])
        self.assertNotIn("System Failure ahead", reason)
        self.assertLess(len(reason), 128 << 10)
        # Healthy: same process, bounded memory, the Lease still renewed.
        self.assertEqual(sb.um.main_pid(sandbox.AGENT_UNIT), pid)
        self.assertEqual(sb.um.active_state(sandbox.AGENT_UNIT), "active")
        with open("/proc/%d/status" % pid) as f:
            rss_kib = int([x for x in f if x.startswith("VmRSS:")][0].split()[1])
        self.assertLess(rss_kib, 64 << 10, "agent RSS %d KiB after 10 MB of output" % rss_kib)
        renew = sb.emu.get("leases", lease_name, namespace="kube-system")["spec"]["renewTime"]
        usermgr.wait_until(lambda: sb.emu.get("leases", lease_name, namespace="kube-system")["spec"]["renewTime"]
                           != renew, 15, "the agent to renew its Lease")
        measured["flood_rss_kib"] = rss_kib

    def test_20_failure_output_tail_on_the_node(self):
        """gardener#15707: what reaches the Node of a failed command's output is its tail, bounded (20
        lines, 1 KiB), valid UTF-8, with no credential in it -- nor in the journal's copy of each line."""
        self.sandbox()
        secrets = ["ipa-bearer-" + uuid.uuid4().hex, "ipa-urlpw-" + uuid.uuid4().hex,
                   "ipa-password-" + uuid.uuid4().hex, "ipa-keybody-" + uuid.uuid4().hex]
        self.write_command(
            'i=1; while [ $i -le 40 ]; do echo "step $i"; i=$((i+1)); done\n'
            'echo "Authorization: Bearer %s"\n'
            'echo "GET https://builder:%s@mirror.example/os.img"\n'
            'echo "password=%s"\n'
            'echo "-----BEGIN RSA PRIVATE KEY-----"; echo "%s"; echo "-----END RSA PRIVATE KEY-----"\n'
            "printf 'bad byte \\377 here\\n'\n"
            'echo "fatal: system failure while writing the root fs"\nexit 3' % tuple(secrets))
        self.request_update()
        node = self.wait_result()
        reason = self.assert_failed(node, "OSCommandFailed")
        output = reason.split(", output: ", 1)[1]
        lines = output.rstrip("\n").split("\n")
        self.assertEqual(lines[0], "...", output)
        self.assertLessEqual(len(lines) - 1, 20, output)
        self.assertLessEqual(len(output.encode()), 1024 + 4, output)
        self.assertEqual(lines[-1], "fatal: system failure while writing the root fs")
        self.assertNotIn("step 1\n", output)
        self.assertIn("step 40", output)
        self.assertIn("Authorization: Bearer [redacted]", output)
        self.assertIn("GET https://[redacted]@mirror.example/os.img", output)
        self.assertIn("password=[redacted]", output)
        self.assertIn("[redacted private key]", output)
        self.assertIn("bad byte ? here", output)
        failure = sandbox.annotation_json(node, sandbox.FAILURE)
        self.assertIn(output, failure["message"])
        usermgr.wait_until(lambda: "system failure while writing the root fs" in json.dumps(self.sb.events()), 10,
                           "the failure's Event")
        events = json.dumps(self.sb.events())
        for where, text in (("the Node", json.dumps(self.sb.node())), ("the Node's history",
                            json.dumps(self.sb.node_history())), ("the Events", events),
                            ("the journal", self.sb.agent_log())):
            for secret in secrets:
                self.assertNotIn(secret, text, "a credential in %s" % where)
        self.assertIn("os-update: Authorization: Bearer [redacted]", self.sb.agent_log())

    def test_08_min_version_not_met(self):
        self.sandbox()
        self.write_command("touch '%s'\nset_os" % self.path("ran"))
        self.request_update(min_version="1600.0")
        node = self.wait_result()
        reason = self.assert_failed(node, "MinVersionNotMet")
        self.assertEqual(reason, "minVersionForUpdate 1600.0 is not met by the current OS version %s" % OLD)
        self.assertFalse(os.path.exists(self.path("ran")), "the command ran")
        self.assertEqual(self.runs(), [])
        self.assertEqual(self.os_version(), OLD)

    def test_09_agent_killed_while_command_runs(self):
        sb = self.sandbox({"timeout": "60s"})
        self.write_command("echo started\nexec sleep 1000")
        agent_pid = sb.um.main_pid(sandbox.AGENT_UNIT)
        self.request_update()
        usermgr.wait_until(lambda: self.runs(), 20, "the command to start")
        cmd_pid = self.runs()[0]
        sb.systemctl("kill", "-s", "KILL", sandbox.AGENT_UNIT, check=True)
        usermgr.wait_until(lambda: not sandbox.pid_alive(agent_pid) and not sandbox.pid_alive(cmd_pid), 10,
                           "the agent and its command to die")
        usermgr.wait_until(lambda: sb.um.main_pid(sandbox.AGENT_UNIT) not in (0, agent_pid)
                           and sb.um.active_state(sandbox.AGENT_UNIT) == "active", 15, "the agent to restart")
        node = self.wait_result()
        reason = self.assert_failed(node, "OSCommandFailed")
        self.assertIn("interrupted", reason)
        self.assertEqual(len(self.runs()), 1, "the command ran a second time")
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW)
        cond = sandbox.condition(node, sandbox.AGENT_CONDITION)
        self.assertIsNotNone(cond)
        # A further restart changes nothing: still one run, same verdict.
        sb.stop_agent()
        sb.start_agent()
        self.assertEqual(len(self.runs()), 1)
        node = sb.node()
        self.assertEqual(sandbox.label(node, sandbox.UPDATE_RESULT), "failed")
        self.assertEqual(failure_code(node), "OSCommandFailed")

    def start_retry_case(self):
        # A retry needs 30 s of budget left when it would start (after the 30 s delay): 70 s budget.
        self.sandbox({"timeout": "70s"})
        self.write_command('if [ "$runs" -lt 2 ]; then echo "fetching: temporary Network Problems"; exit 1; fi\n'
                           'set_os\necho "updated on run $runs"')
        self.request_update()

    def test_12_command_retriable_then_success(self):
        self.sb, t = self.retry
        OsUpdate.retry = None
        node = self.wait_result(timeout=60)
        measured["retry_case_since_request"] = time.monotonic() - t
        self.assertGreaterEqual(time.monotonic() - t, 29, "retried before upstream's 30 s interval")
        self.assert_success(node)
        runs = self.runs()
        self.assertEqual(len(runs), 2)
        self.assertIn("The OS update command reported network problems (attempt 1); retrying in 30s.",
                      self.sb.agent_log())
        self.assertIn("os-update: updated on run 2", self.sb.agent_log())

    def no_history_sandbox(self, annotations, osc_applied=False):
        """A node that remembers nothing: no state.json (the sandbox's state directory is new) and no
        checksum/cloud-config-data on the Node; MCM has drained it for the OS update. osc_applied: the
        OSC's files are applied already (its last-applied copy is the published one, its inline files,
        the OS extension's update script among them, on disk), only the update's record is gone."""
        sb = self.sandbox(start_agent=False)
        sb.emu.label_node(sandbox.NODE, annotations=dict({sandbox.NODE_CHECKSUM: None}, **annotations))
        self.write_command('set_os\necho "updated to $version"')
        self.request_update()
        if osc_applied:
            sandbox.write_file(os.path.join(sb.state_dir, "last-applied-osc.yaml"), sb.osc["yaml"], 0o600)
            sb.write_gardener_osc_files()
        sb.start_agent()
        return sb

    def assert_checksum_only_with_success(self):
        """The Secret's checksum is never on the Node without update-result=successful and the new OS."""
        checksum = self.sb.secret_checksum()
        for e in self.sb.node_history():
            o = e.get("object")
            if sandbox.annotation(o, sandbox.NODE_CHECKSUM) == checksum:
                self.assertEqual(sandbox.label(o, sandbox.UPDATE_RESULT), "successful",
                                 "checksum/cloud-config-data written without a result (rv %s)" % e["rv"])

    def test_13_no_history_os_compared(self):
        self.no_history_sandbox({})
        node = self.wait_result()
        self.assert_success(node)
        self.assertEqual(self.os_version(), NEW, "update-result=successful on the old OS")
        self.assertEqual(len(self.runs()), 1)
        self.assert_checksum_only_with_success()

    def test_14_no_history_came_back_old(self):
        self.no_history_sandbox({sandbox.UPDATING_OS: NEW})
        node = self.wait_result()
        reason = self.assert_failed(node, "OSRolledBack", phase="RolledBack")
        self.assertEqual(reason, ROLLED_BACK_REASON)
        self.assertEqual(self.runs(), [], "the command ran")
        self.assertEqual(self.os_version(), OLD)
        self.assert_checksum_only_with_success()

    def test_15_no_history_nothing_else_to_apply(self):
        self.no_history_sandbox({}, osc_applied=True)
        node = self.wait_result()
        self.assert_success(node)
        self.assertEqual(self.os_version(), NEW, "update-result=successful on the old OS")
        self.assertEqual(len(self.runs()), 1)

    # ------------------------------------------------------------------ image backend

    def image_sandbox(self):
        sb = self.sandbox(start_agent=False)
        # reboot.target of this manager only starts a service that leaves a marker.
        self.reboot_marker = sb.path("os-test", "reboot-requested")
        self.efi = sb.use_os_image_backend(OS_IMAGE_REPO, NAME_PREFIX, self.reboot_marker)
        # The OS image: an OCI artifact whose last layer is the UKI itself.
        self.uki = b"MZ" + os.urandom(256 << 10)
        sb.reg.push_image(OS_IMAGE_REPO, NEW, [(b"metadata layer", "gzip"), (self.uki, "gzip")])
        sb.start_agent()
        return sb

    def image_until_reboot(self):
        self.request_update()
        usermgr.wait_until(lambda: os.path.exists(self.reboot_marker), RESULT_WAIT, "the reboot request")
        node = self.wait_phase("Rebooting")
        self.assertIsNone(sandbox.label(node, sandbox.UPDATE_RESULT))
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW)
        entry = os.path.join(self.efi, "%s-%s+3.efi" % (NAME_PREFIX, NEW))
        self.assertEqual(os.listdir(self.efi), [os.path.basename(entry)])
        with open(entry, "rb") as f:
            self.assertEqual(f.read(), self.uki)
        self.assertEqual(self.os_version(), OLD)

    def test_10_image_success(self):
        sb = self.image_sandbox()
        self.image_until_reboot()
        sb.simulate_reboot(NEW)
        node = self.wait_result()
        self.assert_success(node)

    def test_11_image_rolled_back(self):
        sb = self.image_sandbox()
        self.image_until_reboot()
        sb.simulate_reboot(OLD)
        node = self.wait_result()
        reason = self.assert_failed(node, "OSRolledBack", phase="RolledBack")
        self.assertTrue(reason.startswith(ROLLED_BACK_REASON), reason)
        self.assertEqual(sandbox.annotation(node, sandbox.UPDATING_OS), NEW, "marker must be kept")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites(AGENT) + itest.programs("nsenter"))    # nsenter: a fake boot id
