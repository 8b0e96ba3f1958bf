#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 26, item 3 (gardener#15528): an OSC Secret the agent cannot read is said out loud. Upstream's
gardener-node-agent is silent when the Secret its Node label names does not exist. Against the real agent
in the sandbox (lib/sandbox.py), in order:

1. the Node label names a Secret that does not exist: within 30 s the Node has the condition
   OSCSecretAvailable False/OSCSecretNotFound and a Warning Event with the same reason, both naming the
   Secret and the label; STATUS= and the journal say what the agent waits for;
2. the Secret is created: the condition turns True (OSCSecretFound), a Normal Event says so, STATUS= no
   longer names it, and its OSC is applied (a file of it lands, the checksum annotation is its);
3. a Secret the agent may not read (403 from the authorizer): OSCSecretForbidden, and the message says
   "forbidden (HTTP 403)" with the server's reason, not "does not exist";
4. no label at all: OSCSecretNotNamed; the label back: True again.
"""

import json
import sys
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
CONDITION = "OSCSecretAvailable"
MISSING = "gardener-node-agent-missing"
FORBIDDEN = "gardener-node-agent-forbidden"
MARKER = "/etc/ipa-osc-secret/marker"


setUpModule, tearDownModule = itest.sandbox_fixture(
    globals(), versions=("1.31.4",), broken_versions=(), kubelet_size=256 << 10,
    agent_env={"INPLACE_AGENT_KUBE_TUNING": "forbidden-backoff=2s,backoff-cap=2s"})


def cond(node):
    return S.condition(node, CONDITION) or {}


def relabel(value):
    SB.emu.label_node(S.NODE, labels={S.SECRET_NAME_LABEL: value})


def events(reason):
    return [e for e in SB.events() if e.get("reason") == reason]


def status_text():
    return SB.um.show(S.AGENT_UNIT, "StatusText")


class OscSecret(unittest.TestCase):
    def wait_cond(self, status, reason, timeout=30):
        return SB.wait_node(lambda n: cond(n).get("status") == status and cond(n).get("reason") == reason,
                            timeout, "%s %s/%s" % (CONDITION, status, reason))

    def test_1_missing_secret_is_said_within_30s(self):
        # A Node that could always read its Secret has no such condition.
        self.assertEqual(cond(SB.node()), {})
        t0 = time.monotonic()
        relabel(MISSING)
        node = self.wait_cond("False", "OSCSecretNotFound")
        ev = usermgr.wait_until(lambda: events("OSCSecretNotFound"), 30 - (time.monotonic() - t0) + 1,
                                "the Warning Event")
        took = time.monotonic() - t0
        self.assertLessEqual(took, 30, "condition and Event after %.1fs" % took)
        msg = cond(node)["message"]
        self.assertEqual(msg, "OSC Secret kube-system/%s (named by the Node label %s) does not exist; waiting for "
                              "it to be created" % (MISSING, S.SECRET_NAME_LABEL))
        self.assertEqual(ev[0]["type"], "Warning")
        self.assertEqual(ev[0]["message"], msg)
        usermgr.wait_until(lambda: msg in status_text(), 10, "STATUS= naming the Secret")
        self.assertIn(msg, SB.agent_log())
        print("condition and Event %.1fs after the label" % took, file=sys.stderr)

    def test_2_secret_appears_clears_and_applies(self):
        text = SB.osc_yaml(SB.osc["kubelet"], SB.osc["os_version"], SB.osc["image"], extra_files=(
            "  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: %s\n"
            % (MARKER, json.dumps("secret appeared\n"))))
        checksum = S.sha256_hex(text.encode())
        SB.emu.seed_secret(MISSING, namespace=S.OSC_NAMESPACE, data={"osc.yaml": text},
                           annotations={S.SECRET_CHECKSUM: checksum})
        node = self.wait_cond("True", "OSCSecretFound")
        self.assertEqual(cond(node)["message"], "OSC Secret kube-system/%s (named by the Node label %s) is readable"
                         % (MISSING, S.SECRET_NAME_LABEL))
        usermgr.wait_until(lambda: events("OSCSecretFound"), 10, "the Normal Event")
        self.assertEqual(events("OSCSecretFound")[0]["type"], "Normal")
        SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "the Secret's OSC applied")
        with open(SB.base + MARKER) as f:
            self.assertEqual(f.read(), "secret appeared\n")
        usermgr.wait_until(lambda: MISSING not in status_text(), 10, "STATUS= without the Secret")

    def test_3_forbidden_is_not_not_found(self):
        rule = SB.emu.inject("forbidden", resource="secrets", verbs=["list"], count=-1)
        try:
            relabel(FORBIDDEN)
            node = self.wait_cond("False", "OSCSecretForbidden")
        finally:
            SB.emu.clear_faults(rule)
        msg = cond(node)["message"]
        self.assertTrue(msg.startswith("OSC Secret kube-system/%s (named by the Node label %s) may not be read: "
                                       "forbidden (HTTP 403): secrets " % (FORBIDDEN, S.SECRET_NAME_LABEL)), msg)
        self.assertIn("is forbidden", msg)
        self.assertNotIn("does not exist", msg)
        usermgr.wait_until(lambda: any(e["message"] == msg for e in events("OSCSecretForbidden")), 10,
                           "the Warning Event")
        # Once it may be read, it is still missing: said as such.
        self.wait_cond("False", "OSCSecretNotFound")

    def test_4_no_label(self):
        SB.emu.label_node(S.NODE, labels={S.SECRET_NAME_LABEL: None})
        node = self.wait_cond("False", "OSCSecretNotNamed")
        self.assertIn("the Node has no label %s" % S.SECRET_NAME_LABEL, cond(node)["message"])
        relabel(S.SECRET)
        self.wait_cond("True", "OSCSecretFound")


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
