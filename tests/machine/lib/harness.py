# SPDX-License-Identifier: Apache-2.0
"""What every machine-tier test does around its scenarios: prepare the cached image and the .deb,
bring up the world, provision and boot a node, print the transcript, and show the machine's state
after a failing scenario. The scenarios themselves are in tests/machine/test_*.py, unittest modules
on tests/integration/lib/itest.py (its runner, skip and diagnostics after a failure):

    setUpModule, tearDownModule = harness.module_fixture(globals(), "node-fresh")   # the module's global H
    ...
    H.boot()                                   # provisioned like gardener-node-init left it, booted
    ...
    itest.main(missing=machine.missing_prerequisites())     # exit 77 when nspawn etc. are missing
"""

import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine  # noqa: E402   (first: puts tests/integration/lib on sys.path)
import itest  # noqa: E402
import transcript  # noqa: E402
import world  # noqa: E402
from gardener import (AGENT_CONDITION, NODE_CHECKSUM, PROGRESS, UNITS_CONDITION, annotation,  # noqa: E402,F401
                      annotation_json, condition, label)

AGENT_UNIT = "inplace-agent.service"
KUBELET_UNIT = "kubelet.service"
STATE = "/var/lib/inplace-agent"
CATALOG_IDS = os.path.join(machine.SRCDIR, "include", "update", "catalog-ids.h")


def message_ids():
    """{"UPDATE_PLANNED": "97e6...", ...} from include/update/catalog-ids.h."""
    with open(CATALOG_IDS) as f:
        return dict(re.findall(r'#define MESSAGE_ID_([A-Z0-9_]+)\s+"([0-9a-f]{32})"', f.read()))


def module_fixture(module_globals, node, **kw):
    """setUpModule and tearDownModule for a test module whose scenarios share one Harness, kept in
    the module's global H: `setUpModule, tearDownModule = harness.module_fixture(globals(), NODE)`.
    After a failing scenario the runner shows H.diagnostics()."""
    return itest.module_fixture(module_globals, "H", lambda: Harness(node, **kw), lambda h, failed: h.stop(),
                                diagnose=Harness.diagnostics)


class Harness:
    def __init__(self, node, versions=("1.31.4", "1.32.1"), broken_versions=(), config_extra=None, tuning=None,
                 kmsg=False, log_level=None):
        self.t = transcript.Transcript()
        self.t.step("prepare: the cached Debian 12 image, the .deb of this tree, apt-get install")
        self.layers = machine.prepare(log=self.t.say)
        self.t.say("image %s, .deb %s (prepare: %s)" % (
            os.path.basename(os.path.dirname(self.layers.image_root)), os.path.basename(self.layers.deb),
            ", ".join("%s %.1fs" % kv for kv in self.layers.timings.items())))
        self.config_extra, self.tuning, self.kmsg, self.log_level = config_extra, tuning, kmsg, log_level
        self.w = world.World(node, versions=versions, broken_versions=broken_versions, log=self.t.say)
        self.w.start()
        self.g = self.w.g
        self.m = None

    def new_machine(self):
        self.m = machine.Machine(self.layers, self.w.node, kmsg=self.kmsg)
        self.w.provision(self.m, self.config_extra, self.tuning, self.log_level)
        return self.m

    def boot(self):
        if self.m is None:
            self.new_machine()
        t0 = self.t.mark("boot")
        boot_id = self.m.boot()
        self.t.ok("booted %s (nspawn, systemd as PID 1) in %.1fs, boot id %s" % (
            self.w.node, self.t.mark("booted") - t0, boot_id))
        return boot_id

    def wait_certificate(self, timeout=60):
        """Until the agent holds its client certificate (bootstrapped by CSR)."""
        return world.wait_for(lambda: "client-certificate" in self.m.read(STATE + "/kubeconfig", ""), timeout,
                              "the agent's certificate")

    def node_up(self, osc_text):
        """A fresh machine with `osc_text` published (gardenlet writes the Secret before the machine
        boots), booted, bootstrapped, the OSC applied and the Node registered by the kubelet it
        started. Returns the machine."""
        m = self.new_machine()
        checksum = self.w.publish(osc_text)
        self.boot()
        self.wait_checksum(checksum, 120)
        return m

    def stop(self):
        t0 = time.monotonic()
        try:
            if self.m:
                self.m.stop()
        finally:
            t1 = time.monotonic()
            self.w.stop()
            self.t.say("stopped: the machine in %.1fs, the emulator and registry in %.1fs" % (
                t1 - t0, time.monotonic() - t1))

    # ---------------------------------------------------------------- queries

    def node(self):
        return self.g.node()

    def wait_checksum(self, checksum, timeout=120):
        return self.g.wait_node(lambda n: annotation(n, NODE_CHECKSUM) == checksum, timeout,
                                "checksum/cloud-config-data %s on the Node" % checksum[:12])

    def wait_phase(self, phase, timeout=60):
        return self.g.wait_phase(phase, timeout)

    def kubelet_healthz(self):
        return world.sandbox.http_status("http://127.0.0.1:%d/healthz" % self.w.healthz_port)

    def agent_journal(self, *args):
        return self.m.journal("-u", AGENT_UNIT, *args)

    def diagnostics(self):
        """What to look at when a scenario failed: the agent's journal tail and its status line."""
        if not self.m or not self.m.running():
            return
        try:
            self.t.block("journalctl -u inplace-agent -n 60", self.agent_journal("-n", "60"))
            self.t.block("systemctl status inplace-agent kubelet",
                         self.m.run("systemctl", "status", "--no-pager", "--lines=0", AGENT_UNIT, KUBELET_UNIT,
                                    check=False).stdout)
            n = self.node() or {}
            self.t.block("the Node's agent annotations", "\n".join(
                "%s=%s" % kv for kv in sorted((n.get("metadata", {}).get("annotations") or {}).items())
                if kv[0].startswith(("inplace-agent/", "checksum/", "node.machine", "node-agent"))))
        except Exception as e:          # diagnostics never hide the failure itself
            self.t.bad("diagnostics failed: %s" % e)
