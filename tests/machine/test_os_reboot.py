#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, scenario 3: an OS update with a real reboot. The OS extension's command (an OSC
file, like Garden Linux's /opt/gardener/bin/inplace-update.sh) rewrites /etc/os-release the way
provider-local's does (`sed -i` on PRETTY_NAME, in the agent's sandbox) and calls `reboot`; systemd
takes the machine down (nspawn exits with 133) and the harness boots the same tree again: a new boot
id, units started from their install state. The agent resumes the persisted transaction, sees the
new version, and reports update-result=successful exactly once; the OS marker annotation goes.
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import world  # noqa: E402
from gardener import FAILED_REASON, UPDATE_RESULT, UPDATING_OS, annotation, label  # noqa: E402

H = None
NODE = "node-reboot"
FROM, TO = "12", "12.1"
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


setUpModule, tearDownModule = harness.module_fixture(globals(), NODE)


def osc(version):
    return H.w.osc("1.31.4", os_version=version, os_command=[world.OS_UPDATE_SCRIPT, version],
                   files=[world.inline(world.OS_UPDATE_SCRIPT, COMMAND, 0o755)])


class OsReboot(unittest.TestCase):
    @harness.scenario
    def test_3_os_update_with_reboot(self):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
