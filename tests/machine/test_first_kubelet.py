#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The machine tier, scenario 11: a fresh node whose first kubelet never gets healthy. There was no
kubelet before, so the way back is none: after kubelet.healthTimeout the agent removes the link at
/opt/bin/kubelet again (not left at the failed build), stops kubelet.service (which has no binary to
run any more), and the Node, registered by the failed kubelet, says KubeletUnhealthy and gets no
checksum. gardenlet's next OSC, the same version from a good image, is then applied like a first
one: pulled, switched, restarted, healthy, the checksum written. (Before, the link stayed at the
failed build, the next OSC of that version changed no kubelet, and its checksum was written over a
kubelet that still failed its /healthz.)
"""

import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lib"))
import harness  # noqa: E402
import itest  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import FAILURE, NODE_CHECKSUM, PROGRESS, annotation, annotation_json  # noqa: E402

H = None
NODE = "node-first-kubelet"
VERSION = "1.31.4"

# One version, a good and a broken build of it (the broken one's /healthz always fails); a new
# kubelet gets 10 s to become healthy (default 5 min).
setUpModule, tearDownModule = harness.module_fixture(globals(), NODE, versions=(VERSION,), broken_versions=(VERSION,),
                                                     config_extra={"kubelet": {"healthTimeout": "10s"}})


class FirstKubelet(unittest.TestCase):
    def test_1_failed_first_kubelet_goes_again(self):
        t, w, g = H.t, H.w, H.g
        t.step("scenario 11: a fresh node's first kubelet never gets healthy")
        m = H.new_machine()
        broken = w.publish(w.osc(VERSION, broken=True))
        H.boot()
        n = g.wait_node(lambda n: (annotation_json(n, PROGRESS) or {}).get("phase") == "RolledBack", 120,
                        "the first apply rolled back")
        failure = annotation_json(n, FAILURE)
        self.assertEqual(failure.get("code"), "KubeletUnhealthy", failure)
        self.assertNotIn("rolling back the kubelet failed", failure.get("message", ""))
        self.assertIsNone(annotation(n, NODE_CHECKSUM))
        self.assertFalse(os.path.lexists(m.path(world.KUBELET_PATH)), "the failed kubelet is still linked")
        self.assertIn(m.active_state(harness.KUBELET_UNIT), ("inactive", "failed"), "kubelet.service was not stopped")
        self.assertIn("Stopped %s." % harness.KUBELET_UNIT, H.agent_journal("-o", "cat"))
        self.assertIn("Switched %s to kubelet none (removed) (was %s)." % (world.KUBELET_PATH, VERSION),
                      H.agent_journal("-o", "cat"))
        t.ok("OSC %s… (a broken kubelet %s) rolled back to no kubelet: %s gone; %s" % (
            broken[:12], VERSION, world.KUBELET_PATH, failure["message"][:160]))

        fixed = w.publish(w.osc(VERSION))
        n = H.wait_checksum(fixed, 120)
        self.assertEqual(m.run(world.KUBELET_PATH, "--version").stdout.strip(), "Kubernetes v" + VERSION)
        m.wait_active(harness.KUBELET_UNIT, 30)
        world.wait_for(lambda: H.kubelet_healthz() == 200, 30, "the kubelet's /healthz")
        self.assertIsNone(annotation_json(n, FAILURE))
        t.ok("the next OSC %s… (a good build of %s) applied as a first one: pulled, switched, healthy, the "
             "checksum written" % (fixed[:12], VERSION))


if __name__ == "__main__":
    itest.main(missing=machine.missing_prerequisites())
