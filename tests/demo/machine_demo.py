#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The demo's story inside a booted Debian 12 machine (`tests/demo/run-demo --machine`): the .deb
installed with apt into the machine tier's cached image (tests/machine/lib/machine.py), booted
under systemd-nspawn with systemd as PID 1, and the real `systemctl` and `journalctl` output.

    tests/demo/machine_demo.py [--failure] [--non-interactive] [--summary-json FILE] [--keep]

The script plays gardener-node-init (the files it leaves on a new machine), gardenlet (the OSC
Secret) and machine-controller-manager (candidate, selected, drain, ReadyForUpdate), all against the
API-server emulator and a TLS registry on the host's 127.0.0.1 (the machine shares the host's
network). It shows:
    kubectl │  `kubectl get node -w` against the emulator
    node    │  what changed on the Node (the agent's progress, plan and failure annotations, labels)
    journal │  `journalctl -f -u inplace-agent -u kubelet` inside the machine
and, between the steps, `systemctl status`, `journalctl -x`, `journalctl -o verbose` and
`inplace-agent status` run inside the machine. The first run builds the image (about 80 s) and the
.deb; later runs take about a minute.

--failure publishes a kubelet 1.32.1 whose /healthz fails: the agent rolls back to 1.31.4 and reports
update-result=failed. Exit status 0 only when the Node ends in the right state and the machine is
gone again.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "machine", "lib"))
sys.path.insert(0, HERE)
import demo  # noqa: E402
import harness  # noqa: E402
import machine  # noqa: E402
import world  # noqa: E402
from gardener import (FAILED_REASON, FAILURE, K8S_VERSION, NODE_CHECKSUM, PLAN, PROGRESS, UPDATE_RESULT,  # noqa: E402
                      annotation, annotation_json, label)

NODE = "demo-machine"
FROM, TO = demo.FROM, demo.TO


class Live:
    """`kubectl get node -w`, the Node's history and `journalctl -f` inside the machine, printed as
    they come; stop() ends every process it started (by PID)."""

    def __init__(self, w, m, con):
        self.w, self.m, self.con = w, m, con
        self.procs, self.threads = [], []
        self.stopping = threading.Event()

    def start(self):
        home = os.path.join(self.w.dir, "kubectl-home")
        kubectl = ["kubectl", "--kubeconfig", self.w.emu.kubeconfig, "--cache-dir", os.path.join(home, "cache"),
                   "get", "nodes", "--field-selector", "metadata.name=" + NODE, "-w", "-o", "custom-columns=" + demo.KUBECTL_COLUMNS]
        journal = ["nsenter", "-t", str(self.m.pid1), "-m", "-u", "-i", "-n", "-p", "-C", "-r", "-w", "--",
                   "journalctl", "-f", "-n", "0", "-o", "short", "--no-hostname", "-u", harness.AGENT_UNIT,
                   "-u", harness.KUBELET_UNIT]
        for argv, prefix in ((kubectl, "kubectl"), (journal, "journal")):
            # Its own process group: nsenter forks journalctl into the machine's PID namespace, and
            # stop() must end that child too, not only nsenter.
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 text=True, bufsize=1, env=dict(os.environ, HOME=home, SYSTEMD_COLORS="0"),
                                 start_new_session=True)
            self.procs.append(p)
            self.thread(lambda p=p, prefix=prefix: [self.con.line(prefix, ln.rstrip("\n")) for ln in p.stdout])
        self.thread(self.node_loop)

    def thread(self, fn):
        t = threading.Thread(target=fn, daemon=True)
        t.start()
        self.threads.append(t)

    def node_loop(self):
        rv, prev = 0, None
        while not self.stopping.is_set():
            try:
                events = self.w.g.node_history(since_rv=rv)
            except Exception:               # the emulator is going away
                return
            for e in events:
                rv = max(rv, e["rv"])
                if e.get("object") is None:
                    continue
                view = demo.node_view(e["object"])
                if prev is not None:
                    for text in demo.describe_changes(prev, view):
                        self.con.line("node", text, "35")
                prev = view
            self.stopping.wait(0.2)

    def stop(self):
        self.stopping.set()
        for p in self.procs:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)       # the group we made for it: nsenter and its child
                except ProcessLookupError:
                    break
                try:
                    p.wait(3)
                    break
                except subprocess.TimeoutExpired:
                    continue
        for t in self.threads:
            t.join(2)


class MachineDemo:
    def __init__(self, args):
        self.args, self.failure = args, args.failure
        self.t0 = time.monotonic()
        self.con = demo.Console(self.t0)
        self.interactive = sys.stdin.isatty() and not args.non_interactive
        self.w = self.m = self.live = None
        self.summary = {"mode": "machine-failure" if self.failure else "machine", "ok": False, "error": None,
                        "checks": []}

    def pause(self, what):
        if not self.interactive:
            return
        try:
            input("\n   ⏎  press Enter to %s (Ctrl-C to stop) " % what)
        except EOFError:
            self.interactive = False

    def step(self, n, title):
        self.con.step(n, 7, title)

    def show(self, *argv):
        r = self.m.run(*argv, check=False, timeout=60)
        self.con.block(" ".join(argv), (r.stdout + r.stderr).rstrip("\n") or "(no output)")
        return r.stdout

    def check(self, name, ok, detail=""):
        self.summary["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
        (self.con.ok if ok else self.con.bad)("%s%s" % (name, (": " + detail) if detail else ""))

    def run(self):
        try:
            self.story()
        except KeyboardInterrupt:
            self.summary["error"] = "interrupted"
        except Exception as e:
            self.summary["error"] = "%s: %s" % (type(e).__name__, e)
            self.con.bad(self.summary["error"])
            if self.m and self.m.running():
                self.show("journalctl", "--no-pager", "-n", "40", "-u", harness.AGENT_UNIT)
        finally:
            self.teardown()
        return self.finish()

    def story(self):
        self.step(1, "a Debian 12 machine with the .deb installed by apt, booted under systemd-nspawn")
        layers = machine.prepare(log=lambda m: self.con.say("  · " + m))
        self.con.say("  · image %s; %s" % (os.path.basename(os.path.dirname(layers.image_root)),
                                            os.path.basename(layers.deb)))
        self.w = world.World(NODE, broken_versions=(TO,) if self.failure else (),
                             log=lambda m: self.con.say("  · " + m))
        self.w.start()
        self.m = machine.Machine(layers, NODE, keep=self.args.keep)
        # As the sandbox demo: 20 s for a new kubelet to become healthy (default 5m), so --failure
        # rolls back within the demo's minute.
        self.w.provision(self.m, {"kubelet": {"healthTimeout": "20s"}})
        self.con.say("gardener-node-init's files are in place: bootstrap token, cluster-ca.crt, machine-name, "
                     "component config")
        self.m.boot()
        self.live = Live(self.w, self.m, self.con)
        self.live.start()
        world.wait_for(lambda: "client-certificate" in self.m.read(harness.STATE + "/kubeconfig", ""), 60,
                       "the agent's certificate")
        self.show("systemctl", "status", "--no-pager", "--lines=0", harness.AGENT_UNIT)

        self.pause("let gardenlet publish the OSC")
        self.step(2, "the first OSC, before any Node: the agent applies it whole, the kubelet %s runs under "
                     "systemd and registers the Node" % FROM)
        checksum = self.w.publish(self.w.osc(FROM))
        self.w.g.wait_node(lambda n: annotation(n, NODE_CHECKSUM) == checksum, 120, "the first apply")
        self.m.wait_active(harness.KUBELET_UNIT, 30)
        self.show("systemctl", "status", "--no-pager", "--lines=0", harness.KUBELET_UNIT, "containerd.service")

        self.pause("publish kubelet %s" % TO)
        self.step(3, "gardenlet: kubelet %s%s, evictionHard 150Mi, a kubelet drop-in; gated" % (
            TO, " (a BROKEN build)" if self.failure else ""))
        self.checksum = self.w.publish(self.w.osc(TO, eviction="150Mi", dropin=demo.DROPIN, broken=self.failure))
        world.wait_for(lambda: self.checksum in self.m.journal("-u", harness.AGENT_UNIT, "-o", "cat"), 60,
                       "the agent to see the OSC")

        self.pause("let MCM mark the node candidate-for-update")
        self.step(4, "MCM: candidate-for-update, then selected-for-update")
        self.w.g.mcm_candidate()
        self.w.g.wait_phase("Staged")
        self.w.g.mcm_select()
        self.w.g.wait_phase("WaitingForDrain")

        self.pause("let MCM drain the node and set ReadyForUpdate")
        self.step(5, "MCM: drain, ReadyForUpdate -> switch, restart, health check, result")
        self.w.g.mcm_drain()
        self.w.g.mcm_ready_for_update(drain=False)
        n = self.w.g.wait_node(lambda n: label(n, UPDATE_RESULT), 120, "update-result")
        self.con.ok("update-result=%s" % label(n, UPDATE_RESULT))
        if self.failure:
            self.w.g.wait_node(lambda n: (annotation_json(n, PROGRESS) or {}).get("phase") in ("Failed", "RolledBack"),
                               60, "the final phase")
            self.m.wait_active(harness.KUBELET_UNIT, 60)
        self.w.g.mcm_observe_result()

        self.pause("look at the machine")
        self.step(6, "what an operator sees on the machine")
        self.live.stop()
        tx = (annotation_json(self.w.g.node(), PROGRESS) or {}).get("transaction")
        self.show("systemctl", "status", "--no-pager", "--lines=0", harness.AGENT_UNIT, harness.KUBELET_UNIT)
        self.show(world.KUBELET_PATH, "--version")
        self.show("journalctl", "--no-pager", "-u", harness.AGENT_UNIT, "INPLACE_TRANSACTION=%s" % tx)
        ids = harness.message_ids()
        final = ids["UPDATE_ROLLED_BACK" if self.failure else "UPDATE_SUCCEEDED"]
        self.show("journalctl", "--no-pager", "-x", "-u", harness.AGENT_UNIT, "MESSAGE_ID=" + final)
        self.show("journalctl", "--no-pager", "-o", "verbose", "-u", harness.AGENT_UNIT, "MESSAGE_ID=" + final)
        self.show("inplace-agent", "status")
        self.verify()

    def verify(self):
        n = self.w.g.node()
        version = self.m.run(world.KUBELET_PATH, "--version", check=False).stdout.strip()
        healthy = harness.world.sandbox.http_status("http://127.0.0.1:%d/healthz" % self.w.healthz_port) == 200
        self.summary["node"] = {"labels": n["metadata"].get("labels"), "annotations": {
            k: v for k, v in (n["metadata"].get("annotations") or {}).items()
            if k.startswith(("node.machine.sapcloud.io/", "inplace-agent/", "checksum/"))}}
        if not self.failure:
            self.check("update-result=successful", label(n, UPDATE_RESULT) == "successful", label(n, UPDATE_RESULT))
            self.check("checksum/cloud-config-data is the OSC's", annotation(n, NODE_CHECKSUM) == self.checksum)
            self.check("%s=%s" % (K8S_VERSION, TO), label(n, K8S_VERSION) == TO, label(n, K8S_VERSION))
            self.check("kubelet --version says v%s" % TO, version == "Kubernetes v" + TO, version)
            self.check("kubelet config written: memory.available 150Mi",
                       "memory.available: 150Mi" in (self.m.read(world.KUBELET_CONFIG) or ""))
        else:
            failure = annotation_json(n, FAILURE) or {}
            self.check("update-result=failed", label(n, UPDATE_RESULT) == "failed", label(n, UPDATE_RESULT))
            self.check("the reason names the health check", demo.HEALTH_REASON in (annotation(n, FAILED_REASON) or ""),
                       annotation(n, FAILED_REASON))
            self.check("inplace-agent/failure code KubeletUnhealthy", failure.get("code") == "KubeletUnhealthy",
                       json.dumps(failure))
            self.check("kubelet %s restored" % FROM, version == "Kubernetes v" + FROM, version)
        self.check("kubelet.service active and healthy",
                   self.m.active_state(harness.KUBELET_UNIT) == "active" and healthy)
        self.check("the plan was published", annotation(n, PLAN) is not None)

    def teardown(self):
        self.step(7, "tear down")
        if self.live:
            self.live.stop()
        if self.m:
            self.m.stop()
        if self.w:
            self.w.stop()
        left = [ln for ln in subprocess.run(["pgrep", "-af", "systemd-nspawn"], capture_output=True,
                                            text=True).stdout.splitlines() if self.m and self.m.name in ln]
        self.check("the machine is gone", not left, "; ".join(left))

    def finish(self):
        s = self.summary
        s["wall_seconds"] = round(time.monotonic() - self.t0, 1)
        s["ok"] = s["error"] is None and bool(s["checks"]) and all(c["ok"] for c in s["checks"])
        self.con.line("summary", "%s: %s in %.1fs" % (s["mode"], "OK" if s["ok"] else "FAILED", s["wall_seconds"]),
                      "1;32" if s["ok"] else "1;31")
        return demo.end_summary(self.con, s, self.args.summary_json)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--failure", action="store_true", help="a broken kubelet 1.32.1: the agent rolls back")
    ap.add_argument("--non-interactive", action="store_true", help="never pause")
    ap.add_argument("--summary-json", metavar="FILE")
    ap.add_argument("--keep", action="store_true", help="keep the machine's overlay for a look afterwards")
    args, _ = ap.parse_known_args()
    missing = machine.missing_prerequisites()
    if missing:
        print("demo --machine: missing prerequisites: %s\n(tests/install-deps.sh installs them)" % ", ".join(missing),
              file=sys.stderr)
        return 1
    return MachineDemo(args).run()


if __name__ == "__main__":
    sys.exit(main())
