#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 2: a start/stop cycle of the real daemon under valgrind frees everything. The agent talks to
the API-server emulator (Node watch, Lease, OSC Secret watch, the update engine's first decision) and
runs the drift check of a last-applied OSC (its repair fails: there is no systemd), then gets SIGTERM; valgrind must report no definite or
indirect leaks and no memory errors, and the agent must exit 0."""

import os
import shutil
import signal
import subprocess
import tempfile
import unittest

from lib import itest
import kubeemu

AGENT = os.environ.get("AGENT", "")


@unittest.skipUnless(shutil.which("valgrind"), "valgrind is not installed")
@unittest.skipIf(os.environ.get("AGENT_SANITIZE", "none") not in ("", "none"),
                 "the agent is built with sanitizers, which do not run under valgrind (ASan checks leaks there)")
class Valgrind(unittest.TestCase):
    def test_start_stop_cycle_is_clean(self):
        work = tempfile.mkdtemp(prefix="ipa-valgrind-")
        emu = kubeemu.start(nodes=["vg-node"])
        try:
            emu.label_node("vg-node", labels={"worker.gardener.cloud/gardener-node-agent-secret-name": "osc"})
            emu.seed_secret("osc", data={"osc.yaml": "spec: {}\n"}, annotations={"checksum/data-script": "abc"})
            state = os.path.join(work, "state")
            # A last-applied OSC whose file is missing: the drift check runs, its repair fails without
            # systemd, and it emits an Event.
            os.makedirs(state)
            with open(os.path.join(state, "last-applied-osc.yaml"), "w") as f:
                f.write("spec:\n  files:\n  - path: /nonexistent-ipa-drift\n    content:\n      inline:\n"
                        "        data: x\n  units:\n  - name: a.service\n    enable: true\n")
            osrel = os.path.join(work, "os-release")
            with open(osrel, "w") as f:
                f.write('PRETTY_NAME="Test Linux 1.2.3"\n')
            cfg = os.path.join(work, "config.yaml")
            with open(cfg, "w") as f:
                f.write("nodeName: vg-node\nkubeconfig: %s\nstateDirectory: %s\nosRelease: %s\n"
                        "kubelet: {binaryPath: %s/kubelet}\nlease: {duration: 8s}\n"
                        % (emu.kubeconfig, state, osrel, work))
            log = os.path.join(work, "valgrind.log")
            env = dict(os.environ, INPLACE_AGENT_DEBUG_NODE_VIEW="1", DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent")
            proc = subprocess.Popen(
                ["valgrind", "--quiet", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                 "--errors-for-leak-kinds=definite,indirect", "--error-exitcode=99", "--log-file=" + log,
                 AGENT, "run", "--config", cfg, "--log-level", "debug"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
            try:
                # Wait until the agent has seen its Node, renewed its Lease and watched the Secret.
                def busy():
                    reqs = emu.request_log()
                    paths = [r["path"] for r in reqs]
                    return (any("/leases/" in p for p in paths) and any("/secrets" in p for p in paths)
                            and os.path.exists(os.path.join(state, "node-view.json"))
                            and any(e.get("reason") == "OSCDriftRepairFailed" for e in emu.list("events") or []))
                kubeemu.wait_for(busy, timeout=60, what="agent talking to the emulator under valgrind")
                proc.send_signal(signal.SIGTERM)
                _, err = proc.communicate(timeout=60)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            with open(log) as f:
                report = f.read()
            self.assertEqual(proc.returncode, 0, "exit %s\nvalgrind:\n%s\nagent:\n%s"
                             % (proc.returncode, report, err.decode(errors="replace")[-4000:]))
            self.assertNotIn("definitely lost", report, report)
            self.assertNotIn("Invalid read", report, report)
            self.assertNotIn("Invalid write", report, report)
        finally:
            emu.stop()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
