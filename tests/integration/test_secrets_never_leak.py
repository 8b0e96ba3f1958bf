#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16, secrets: an OSC file with content.secretRef is applied by the real agent (lib/sandbox.py, log
level debug) from a Secret holding a random marker; then a second OSC names a data key the Secret lacks
(the failure path). The marker -- raw or base64 as the API serves it -- must appear only in the target
file: never in the agent's output, the user manager's and units' logs, the Events, the Node (every stored
version), the request bodies the agent sent, or any file of the state directory (state.json,
last-computed-osc-changes.json; last-applied-osc.yaml holds the OSC, which for secretRef holds only the
reference)."""

import base64
import json
import os
import sys
import unittest
import uuid

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
SECRET_NAME = "ipa-secret-file"
TARGET = "/etc/ipa-secret/token"
MARKER = "ipa-marker-" + uuid.uuid4().hex
NEEDLES = (MARKER, base64.b64encode(MARKER.encode()).decode())


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10, log_level="debug")


def secret_ref_file(key):
    return ("  - path: %s\n    permissions: 384\n    content:\n      secretRef:\n        name: %s\n"
            "        dataKey: %s\n" % (TARGET, SECRET_NAME, key))


class SecretsNeverLeak(unittest.TestCase):
    def assert_nowhere(self, where, text):
        for n in NEEDLES:
            self.assertNotIn(n, text, "the Secret's value appears in %s" % where)

    def test_marker_only_in_the_target_file(self):
        SB.emu.seed_secret(SECRET_NAME, namespace=S.OSC_NAMESPACE, data={"token": MARKER})
        checksum = SB.publish_osc(extra_files=secret_ref_file("token"))
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the secretRef OSC applied")
        target = SB.path(TARGET.lstrip("/"))
        with open(target) as f:
            self.assertEqual(f.read(), MARKER)
        self.assertEqual(os.stat(target).st_mode & 0o7777, 0o600)

        # The failure path: a key the Secret does not have; its error is reported, naming no value.
        bad = SB.publish_osc(extra_files=secret_ref_file("missing"))
        usermgr.wait_until(lambda: "has no data key missing" in SB.agent_log(), 60, "the missing key reported")
        self.assertNotEqual(S.annotation(SB.node(), S.NODE_CHECKSUM), bad)

        self.assert_nowhere("the agent's output", SB.agent_log())
        for unit in (S.KUBELET_UNIT, S.CONTAINERD_UNIT):
            self.assert_nowhere("%s's log" % unit, SB.unit_log(unit))
        self.assert_nowhere("the user manager's log", SB.um.manager_log() or "")
        self.assert_nowhere("the Events", json.dumps(SB.events()))
        self.assert_nowhere("the Node", json.dumps(SB.node()))
        self.assert_nowhere("the Node's history", json.dumps(SB.node_history()))
        sent = [e for e in SB.emu.request_log() if e.get("method") in ("POST", "PUT", "PATCH")]
        self.assertTrue(sent, "no requests with a body in the emulator's log")
        self.assert_nowhere("a request the agent sent", json.dumps(sent))
        checked = []
        for d, _, names in os.walk(SB.state_dir):
            for name in names:
                p = os.path.join(d, name)
                if os.path.islink(p):
                    continue
                with open(p, "rb") as f:
                    data = f.read()
                for n in NEEDLES:
                    self.assertNotIn(n.encode(), data, "the Secret's value appears in %s" % p)
                checked.append(os.path.relpath(p, SB.state_dir))
        for must in ("state.json", "last-computed-osc-changes.json", "last-applied-osc.yaml"):
            self.assertIn(must, checked)
        with open(os.path.join(SB.state_dir, "last-applied-osc.yaml")) as f:
            self.assertIn("secretRef", f.read())
        print("marker found only in %s; checked the agent's output, units' and manager's logs, %d Events, "
              "the Node and its history, %d requests, state files %s" % (
                  target, len(SB.events()), len(sent), sorted(checked)), file=sys.stderr)


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
