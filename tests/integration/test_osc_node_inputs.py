#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 32: the node-safety inputs that test_osc_apply.py proves through tests/helpers/oscapply, once
more through the real agent (lib/sandbox.py: the emulator, a real `systemd --user`, the registry) with
the OSC gardenlet writes (lib/gardener_osc.py), the bad item added to it. After a first good OSC, each
bad OSC also carries a new good file listed BEFORE the bad item, and must end with
  - the error on the Node (inplace-agent/failure naming the input, a Warning Event with it) and in the
    journal;
  - nothing of it half-installed: checksum/cloud-config-data still the good OSC's, the good file before
    the bad item not written, what the bad item names untouched; the agent the same process;
and the next good OSC applied. Inputs:
  1. permissions 4096 (a bit above the permission bits): InvalidDesiredState "permissions out of range";
     the next OSC's permissions 2541 (04755) and 4095 (07777) are written as 0755 and 0777;
  2. a file whose parent directory below the root is a symlink to a directory outside the root (where a
     victim file lives): FileApplyFailed naming the path before anything of the OSC is written (the
     good file before it was written, then the OSC failed at the bad item), the victim untouched;
  3. a path with a trailing slash: InvalidDesiredState naming it, no directory left behind;
  4. a unit of the OSC that the admin masked (its unit file a symlink to /dev/null) while the OSC adds
     a drop-in to it and changes the script its filePaths list (a write, an enable and a restart of the
     same unit): the unit left masked and stopped, the rest of the OSC written, the Node saying
     OSCUnitsNotRunning naming the unit once (its checksum stays), the journal naming the mask in ONE
     line with all it left out (it was a line for each item); unmasked, the next OSC starts it."""

import json
import os
import shutil
import tempfile
import unittest

from lib import itest
import gardener_osc
import sandbox
import usermgr

S = sandbox
SB = None
PID = None
GOOD = None
HELLO = "/etc/ipa-inputs/hello"
BEFORE = "/etc/ipa-inputs/before-%d"    # a good new file ahead of the bad item (per test): never written
ROUND, ROUNDS = "/etc/ipa-inputs/round", [0]
MASKED = "sshd-ensurer.service"         # gardener_osc.sshdensurer(): content, command start, filePaths
MASKED_SCRIPT = "/var/lib/sshd-ensurer/run.sh"


def prepare(sb):
    global PID, GOOD
    GOOD = sb.publish_osc(extra_files=inline_file(HELLO, "hello\n"))
    sb.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == GOOD, 90, "the first good OSC applied")
    PID = sb.um.main_pid(S.AGENT_UNIT)


setUpModule, tearDownModule = itest.sandbox_fixture(globals(), setup=prepare, versions=("1.31.4",),
                                                    broken_versions=(), kubelet_size=256 << 10, gardener_osc=True)


def inline_file(path, data, mode=0o644):
    return ("  - path: %s\n    permissions: %d\n    content:\n      inline:\n        data: %s\n"
            % (path, mode, json.dumps(data)))


def gardener_osc_with(extra_files="", extension_units=""):
    """The Gardener OSC of the sandbox with `extra_files` after spec.files (HELLO first) and
    `extension_units` first in status.extensionUnits."""
    text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                       extra_files=inline_file(HELLO, "hello\n") + extra_files)
    return text.replace("  extensionUnits:\n", "  extensionUnits:\n" + extension_units, 1)


def failure(node):
    text = S.annotation(node, S.FAILURE)
    return json.loads(text) if text else {}


def rooted(path):
    return SB.base + path


def read(path):
    with open(path) as f:
        return f.read()


def mode(path):
    return os.stat(path).st_mode & 0o7777


class OscNodeInputs(unittest.TestCase):
    def setUp(self):
        self.before = BEFORE % int(self.id().split("test_")[1].split("_")[0])

    def assert_held(self, needle, code, absent=()):
        """The bad OSC is held: inplace-agent/failure `code` naming `needle` (code None: STATUS= naming
        it, the OSC retried), a Warning Event and the journal with it; the good checksum stays, the good
        file before the bad item and `absent` are not written, the agent ran on."""
        if code:
            n = SB.wait_node(lambda n: needle in failure(n).get("message", ""), 60,
                             "inplace-agent/failure naming " + needle)
            self.assertEqual(failure(n).get("code"), code, failure(n))
        else:
            usermgr.wait_until(lambda: needle in SB.um.show(S.AGENT_UNIT, "StatusText"), 60, "STATUS= naming " + needle)
            n = SB.node()
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), GOOD, "the checksum moved")
        usermgr.wait_until(lambda: any(e.get("type") == "Warning" and needle in e.get("message", "")
                                       for e in SB.events()), 10, "a Warning Event naming " + needle)
        usermgr.wait_until(lambda: needle in SB.agent_log(), 10, "the journal naming " + needle)
        for p in (self.before,) + tuple(absent):
            self.assertFalse(os.path.lexists(rooted(p)), "%s: %s was written" % (needle, p))
        self.assertEqual(SB.um.main_pid(S.AGENT_UNIT), PID, "the agent restarted")

    def wait_applied(self, checksum):
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "OSC %s applied" % checksum)
        SB.wait_node(lambda n: not failure(n), 30, "inplace-agent/failure cleared")

    def apply_good(self, extra_files=""):
        """The next good OSC (a file that differs from the last one's, so that it is new) applied."""
        global GOOD
        ROUNDS[0] += 1
        GOOD = SB.publish_text(gardener_osc_with(inline_file(ROUND, "%d\n" % ROUNDS[0]) + extra_files))
        self.wait_applied(GOOD)

    def test_1_permission_bits(self):
        SB.publish_text(gardener_osc_with(inline_file(self.before, "b\n") + inline_file("/etc/ipa-inputs/mode", "m", 4096)))
        self.assert_held('file "/etc/ipa-inputs/mode": permissions out of range', "InvalidDesiredState",
                         absent=["/etc/ipa-inputs/mode"])
        # Only the permission bits are the OSC's: no setuid, setgid or sticky bit.
        self.apply_good(inline_file("/etc/ipa-inputs/suid", "s", 2541) + inline_file("/etc/ipa-inputs/all", "a", 4095))
        self.assertEqual(mode(rooted("/etc/ipa-inputs/suid")), 0o755)
        self.assertEqual(mode(rooted("/etc/ipa-inputs/all")), 0o777)
        self.apply_good()
        self.assertFalse(os.path.exists(rooted("/etc/ipa-inputs/suid")))

    def test_2_symlinked_parent_directory(self):
        outside = tempfile.mkdtemp(prefix="ipa-outside-root-")     # not below osc.rootDirectory
        self.addCleanup(shutil.rmtree, outside)
        self.assertFalse(os.path.realpath(outside).startswith(os.path.realpath(SB.base) + "/"))
        victim = os.path.join(outside, "victim")
        with open(victim, "w") as f:
            f.write("keep")
        os.chmod(victim, 0o640)
        link = rooted("/etc/ipa-inputs/link")
        os.symlink(outside, link)
        self.addCleanup(os.unlink, link)
        bad = "/etc/ipa-inputs/link/victim"
        checksum = SB.publish_text(gardener_osc_with(inline_file(self.before, "b\n") + inline_file(bad, "evil", 0o777)))
        # Below the root the link dangles: nothing can be written through it, and it may be fixed on the
        # node, so the OSC is tried again with back-off.
        self.assert_held("%s: its directory cannot be resolved below osc.rootDirectory (No such file or directory)"
                         % bad, None)
        self.assertTrue(any(e.get("reason") == "OSCChangesNotComputed" and bad in e.get("message", "")
                            for e in SB.events()))
        self.assertEqual(sorted(os.listdir(outside)), ["victim"])
        self.assertEqual(read(victim), "keep")
        self.assertEqual(mode(victim), 0o640)

        # The link's target made below the root (as in a chroot): the same OSC applies by itself, there.
        os.makedirs(rooted(outside))
        self.wait_applied(checksum)
        self.assertEqual(read(rooted(self.before)), "b\n")
        self.assertEqual(read(rooted(victim)), "evil")
        self.assertEqual(read(victim), "keep")
        self.assertEqual(mode(victim), 0o640)
        self.apply_good()
        self.assertFalse(os.path.exists(rooted(victim)))

    def test_3_trailing_slash(self):
        SB.publish_text(gardener_osc_with(inline_file(self.before, "b\n") + inline_file("/etc/ipa-inputs/dir/", "x")))
        self.assert_held('file "/etc/ipa-inputs/dir/": path must be absolute without . or .. or a trailing slash',
                         "InvalidDesiredState", absent=["/etc/ipa-inputs/dir"])
        self.apply_good()

    def test_4_masked_unit_named_once(self):
        unit = os.path.join(SB.um.unit_dir, MASKED)
        SB.um.systemctl("stop", MASKED)
        os.unlink(unit)
        os.symlink("/dev/null", unit)
        SB.um.daemon_reload()
        self.assertEqual(SB.um.show(MASKED, "LoadState"), "masked")
        log_before = len(SB.agent_log())
        # The OS extension adds a drop-in to the unit, and the script its filePaths list changes: the
        # unit is written and enabled, then restarted.
        dropin = ("  - name: %s\n    dropIns:\n    - name: 50-ipa-inputs.conf\n      content: \"[Service]\\n"
                  "Environment=IPA_INPUTS=1\"\n" % MASKED)
        old_script = gardener_osc.script("sshdensurer/templates/scripts/disable-sshd.tpl.sh", gardener_osc.SLEEP)
        script = gardener_osc.script("sshdensurer, changed", gardener_osc.SLEEP)
        good = gardener_osc_with(extension_units=dropin)
        text = good.replace(json.dumps(gardener_osc.b64(old_script)), json.dumps(gardener_osc.b64(script)), 1)
        self.assertNotEqual(text, good, "the script is not in the OSC")
        SB.publish_text(text)
        # Written, the mask left as it is; the Node says the OSC's unit does not run, and why.
        n = SB.wait_node(lambda n: MASKED + " (masked)" in failure(n).get("message", ""), 60,
                         "inplace-agent/failure naming the masked unit")
        self.assertEqual(failure(n).get("code"), "OSCUnitsNotRunning", failure(n))
        self.assertEqual(failure(n)["message"].count(MASKED), 1, failure(n))
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), GOOD)
        self.assertEqual(read(rooted(MASKED_SCRIPT)), script)
        self.assertEqual(os.readlink(unit), "/dev/null")
        self.assertEqual(SB.um.active_state(MASKED), "inactive")
        events = usermgr.wait_until(lambda: [e for e in SB.events() if e.get("type") == "Warning"
                                             and MASKED in e.get("message", "")], 10, "a Warning Event naming " + MASKED)
        for e in events:
            self.assertEqual(e["message"].count(MASKED), 1, e)
        # The journal names what the OSC left masked once, with all it left out (it was a line for each
        # of the unit's items).
        log = SB.agent_log()[log_before:]
        lines = [line for line in log.splitlines() if unit in line]
        self.assertEqual(len(lines), 1, "\n".join(lines))
        self.assertIn("left masked (a symlink to /dev/null), unmask for the OSC to manage it: %s (not written or "
                      "enabled, not restarted)." % unit, lines[0])
        self.assertEqual(SB.um.main_pid(S.AGENT_UNIT), PID, "the agent restarted")

        # Unmasked: the next OSC writes, enables and starts it.
        os.unlink(unit)
        SB.um.daemon_reload()
        self.apply_good()
        usermgr.wait_until(lambda: SB.um.active_state(MASKED) == "active", 20, MASKED + " running")
        self.assertFalse(os.path.islink(unit))


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
