#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 23, findings 4 and 7, with the real agent (lib/sandbox.py): every OSC the agent refuses is HELD
and said so where an operator looks. One sandbox; after a first good OSC, each input below is published
as a new OSC and must end with
  - inplace-agent/failure code InvalidDesiredState whose message names the field (and a Warning Event
    with it, STATUS= with it, the journal with it);
  - checksum/cloud-config-data still the good OSC's; nothing of the bad OSC written (the file, the unit,
    the drop-in it names are absent), no request to another Secret (the API-server emulator's request
    log);
  - the agent still running (same PID);
and at the end the next good OSC is applied.
Inputs: a relative path, a path with "..", permissions "abc" and -1, content that is not base64, a NUL in
a path, a unit name and a drop-in name with '/', a 4 MiB osc.yaml, a secretRef named
"../../default/secrets/other" and "ipa-good?labelSelector=x", an imageRef with a dot segment, a token
sync secretName with "..", and an OSC Secret name from the Node label that is not a Secret name."""

import json
import os
import sys
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
PID = None
GOOD = None
OTHER = ("default", "other")            # a Secret the agent must never read
MARKER = "ipa-refused-marker"
HELLO = "/etc/ipa-refused/hello"


def prepare(sb):
    global PID, GOOD
    sb.emu.seed_secret(OTHER[1], namespace=OTHER[0], data={"token": MARKER})
    GOOD = sb.publish_osc(extra_files=inline_file(HELLO, "hello\n"))
    sb.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == GOOD, 60, "the first good OSC applied")
    PID = sb.um.main_pid(S.AGENT_UNIT)


setUpModule, tearDownModule = itest.sandbox_fixture(globals(), setup=prepare, versions=("1.31.4",),
                                                    broken_versions=(), kubelet_size=256 << 10)


def inline_file(path, data, mode=0o644):
    return ("  - path: %s\n    permissions: %s\n    content:\n      inline:\n        data: %s\n"
            % (path, mode, json.dumps(data)))


def secret_ref(path, name):
    return "  - path: %s\n    permissions: 384\n    content:\n      secretRef:\n        name: %s\n        dataKey: token\n" % (
        path, json.dumps(name))


def with_units(units):
    """The good OSC with more units (YAML list items) before the kubelet's."""
    return SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                       extra_files=inline_file(HELLO, "hello\n")).replace("  units:\n", "  units:\n" + units, 1)


def failure(node):
    text = S.annotation(node, S.FAILURE)
    return json.loads(text) if text else {}


def rooted(path):
    return SB.base + path


class OscRefused(unittest.TestCase):
    def assert_held(self, needle, absent=(), what=None):
        what = what or needle
        n = SB.wait_node(lambda n: needle in failure(n).get("message", ""), 30, "inplace-agent/failure naming %s" % what)
        self.assertEqual(failure(n).get("code"), "InvalidDesiredState", what)
        self.assertEqual(failure(n).get("class"), "terminal", what)
        self.assertEqual(S.annotation(n, S.NODE_CHECKSUM), GOOD, "%s: the checksum moved" % what)
        usermgr.wait_until(lambda: any(e.get("type") == "Warning" and needle in e.get("message", "")
                                       for e in SB.events()), 10, "a Warning Event naming %s" % what)
        usermgr.wait_until(lambda: needle in SB.um.show(S.AGENT_UNIT, "StatusText"), 10, "STATUS= naming %s" % what)
        self.assertIn(needle, SB.agent_log(), what)
        self.assertEqual(SB.um.main_pid(S.AGENT_UNIT), PID, "%s: the agent restarted" % what)
        for p in absent:
            self.assertFalse(os.path.lexists(p), "%s: %s was written" % (what, p))
        self.assert_no_foreign_request()

    def assert_no_foreign_request(self):
        for e in SB.emu.request_log():
            path, query = e.get("path", ""), e.get("query") or ""
            self.assertNotIn("/namespaces/%s/secrets" % OTHER[0], path, "a request for another Secret: %s" % path)
            self.assertNotIn("..", path, "a dot segment reached the API server: %s" % path)
            self.assertNotIn("labelSelector", query, "a query from a name: %s?%s" % (path, query))

    def test_01_relative_path(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("etc/ipa-refused/relative", "x"))
        self.assert_held('file "etc/ipa-refused/relative": path must be absolute',
                         absent=[rooted("/etc/ipa-refused/relative")])

    def test_02_dot_dot(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-refused/../ipa-escape", "x"))
        self.assert_held('file "/etc/ipa-refused/../ipa-escape": path must be absolute without . or ..',
                         absent=[rooted("/etc/ipa-escape")])

    def test_03_permissions_abc(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-refused/abc", "x", mode="abc"))
        self.assert_held("spec.files[3].permissions: expected an integer", absent=[rooted("/etc/ipa-refused/abc")])

    def test_04_permissions_minus_one(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file("/etc/ipa-refused/m1", "x", mode=-1))
        self.assert_held('file "/etc/ipa-refused/m1": permissions out of range', absent=[rooted("/etc/ipa-refused/m1")])

    def test_05_bad_base64(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") +
                       "  - path: /etc/ipa-refused/b64\n    content:\n      inline:\n        encoding: b64\n        data: '!!!!'\n")
        self.assert_held('file "/etc/ipa-refused/b64": content is not valid base64', absent=[rooted("/etc/ipa-refused/b64")])

    def test_06_nul_in_path(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + inline_file('"/etc/ipa-refused/nul\\0x"', "x"))
        self.assert_held("spec.files[3].path", absent=[rooted("/etc/ipa-refused/nul")], what="a NUL in a path")

    def test_07_unit_name_with_slash(self):
        SB.publish_text(with_units("  - name: ../ipa-evil.service\n    content: |\n      [Service]\n      ExecStart=/bin/true\n"))
        self.assert_held('spec.units[0]: invalid unit name "../ipa-evil.service"',
                         absent=[os.path.join(os.path.dirname(SB.um.unit_dir), "ipa-evil.service")])

    def test_08_dropin_name_with_slash(self):
        SB.publish_text(with_units("  - name: ipa-refused.service\n    content: |\n      [Service]\n      ExecStart=/bin/true\n"
                                   "    dropIns:\n    - name: ../../ipa-evil.conf\n      content: |\n        [Service]\n"))
        self.assert_held('unit "ipa-refused.service": invalid drop-in name "../../ipa-evil.conf"',
                         absent=[os.path.join(SB.um.unit_dir, "ipa-refused.service")])

    def test_09_four_mib_osc_yaml(self):
        text = with_units("") + "# " + "x" * (4 << 20) + "\n"
        SB.publish_text(text)
        self.assert_held("osc.yaml is larger than 3145728 bytes", what="a 4 MiB osc.yaml")

    def test_10_secret_ref_dot_segments(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") +
                       secret_ref("/etc/ipa-refused/token", "../../default/secrets/other"))
        self.assert_held('spec.files[3].content.secretRef.name: "../../default/secrets/other" is not a valid DNS-1123 '
                         'subdomain', absent=[rooted("/etc/ipa-refused/token")])

    def test_11_secret_ref_query(self):
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + secret_ref("/etc/ipa-refused/token", "ipa-good?labelSelector=x"))
        self.assert_held('spec.files[3].content.secretRef.name: "ipa-good?labelSelector=x"',
                         absent=[rooted("/etc/ipa-refused/token")])

    def test_12_image_ref_dot_segment(self):
        image = "%s/hyperkube/../hyperkube:v1.31.4" % SB.reg.host
        SB.publish_osc(extra_files=inline_file(HELLO, "hello\n") + (
            "  - path: /opt/bin/ipa-tool\n    permissions: 493\n    content:\n      imageRef:\n        image: %s\n"
            "        filePathInImage: %s\n" % (image, S.FILE_IN_IMAGE)))
        self.assert_held('file "/opt/bin/ipa-tool": content.imageRef.image "%s" is not a valid image reference: '
                         'the repository' % image, absent=[rooted("/opt/bin/ipa-tool")])

    def test_13_token_sync_secret_name(self):
        config = "controllers: {token: {syncConfigs: [{secretName: ../kube-proxy, path: /var/lib/ipa-refused/token}]}}"
        text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                           extra_files=inline_file(HELLO, "hello\n") +
                           inline_file("/var/lib/gardener-node-agent/config.yaml", config)).replace(
            "  units:\n", "  units:\n  - name: gardener-node-agent.service\n    filePaths:\n"
                          "    - /var/lib/gardener-node-agent/config.yaml\n", 1)
        SB.publish_text(text)
        self.assert_held('controllers.token.syncConfigs[0].secretName: "../kube-proxy"',
                         absent=[rooted("/var/lib/ipa-refused/token"), rooted("/var/lib/gardener-node-agent/config.yaml")])

    def test_14_secret_name_label(self):
        # A valid label value that is no Secret name (the API server checks label values, not names).
        SB.emu.label_node(S.NODE, labels={S.SECRET_NAME_LABEL: "Other_Secret"})
        try:
            self.assert_held('Node label %s: "Other_Secret" is not a valid DNS-1123 subdomain' % S.SECRET_NAME_LABEL)
            self.assertIn("Not watching an OSC Secret", SB.agent_log())
        finally:
            SB.emu.label_node(S.NODE, labels={S.SECRET_NAME_LABEL: S.SECRET})

    def test_15_next_good_osc_applied(self):
        checksum = SB.publish_osc(extra_files=inline_file(HELLO, "hello again\n"))
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the next good OSC applied")
        with open(rooted(HELLO)) as f:
            self.assertEqual(f.read(), "hello again\n")
        self.assertEqual(SB.um.main_pid(S.AGENT_UNIT), PID)
        self.assert_no_foreign_request()
        # The agent's GETs of Secrets were all of its own namespace, by name or collection.
        paths = sorted({e["path"] for e in SB.emu.request_log() if "/secrets" in e.get("path", "")})
        print("secret paths requested: %s" % paths, file=sys.stderr)
        for p in paths:
            self.assertTrue(p.startswith("/api/v1/namespaces/%s/secrets" % S.OSC_NAMESPACE), p)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
