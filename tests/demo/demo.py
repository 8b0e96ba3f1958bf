#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The first five minutes: one complete in-place kubelet update (1.31.4 -> 1.32.1) in a local sandbox made of
real parts (tests/integration/lib/sandbox.py), narrated live.

    tests/demo/demo.py [--failure] [--non-interactive] [--summary-json FILE] [--agent PATH]
                       [--log-level LEVEL] [--keep]

The script plays gardenlet (publishes the OSC Secret) and machine-controller-manager (candidate, selected,
drain, ReadyForUpdate, then reads the result), and shows what the agent does:
    kubectl │  `kubectl get node -w` against the API-server emulator (identical rows folded)
    node    │  what changed on the Node: the agent's progress/plan/failure annotations, labels, conditions
    agent   │  the agent's log (its stderr: journal-style lines with [tx=... phase=...])
    kubelet │  the stand-in kubelet's log (klog lines; restarts and health failures show here)
and ends with `kubectl describe node`, `systemctl --user status kubelet`, the transaction's journal lines
and a summary (phase durations, bytes pulled, versions).

--failure publishes a kubelet 1.32.1 build whose /healthz fails: the agent must roll back to 1.31.4 and
report update-result=failed with the reason on the Node.

Exit status 0 only when the final Node state is right (success: update-result=successful, checksum/
cloud-config-data equals the Secret's checksum/data-script, worker.gardener.cloud/kubernetes-version=1.32.1,
<binaryPath> --version says v1.32.1; failure: update-result=failed with the health reason, 1.31.4 restored,
running and healthy) and nothing is left running. 1 otherwise. Pauses between steps only when stdin is a
terminal and --non-interactive is not given.
"""

import argparse
import json
import os
import re
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration", "lib"))
import sandbox  # noqa: E402
from sandbox import (AGENT_CONDITION, CANDIDATE, FAILED_REASON, FAILURE, K8S_VERSION, KUBELET_UNIT,  # noqa: E402
                     MCM_CONDITION, NODE, NODE_CHECKSUM, PLAN, PROGRESS, SELECTED, UPDATE_RESULT, UPDATING_OS,
                     annotation, annotation_json, condition, label)

FROM, TO = "1.31.4", "1.32.1"
PHASE_ORDER = ["Idle", "Planned", "Staging", "Staged", "WaitingForDrain", "Applying", "Rebooting", "Verifying",
               "Succeeded", "Failed", "RolledBack"]
FINAL_PHASES = ("Succeeded", "Failed", "RolledBack")
HEALTH_REASON = "not healthy"           # upstream: "kubelet is not healthy after in-place update: ..."
KUBECTL_COLUMNS = ("NAME:.metadata.name,KUBELET:.status.nodeInfo.kubeletVersion,UNSCHEDULABLE:.spec.unschedulable,"
                   'INPLACEUPDATE:.status.conditions[?(@.type=="InPlaceUpdate")].reason,'
                   "RESULT:.metadata.labels.node\\.machine\\.sapcloud\\.io/update-result,"
                   'AGENT:.status.conditions[?(@.type=="InPlaceUpdateAgent")].reason')

# Budgets per wait (the whole demo must stay well under 3 minutes).
# The OSC's own change in the same update (issue 13): a kubelet config value and a unit drop-in.
EVICTION_TO = "150Mi"
DROPIN_NAME = "50-sandbox.conf"
DROPIN = "[Service]\nEnvironment=KUBELET_DEMO_DROPIN=1"
STAGE_TIMEOUT = 60
SELECT_TIMEOUT = 30
RESULT_TIMEOUT = 120


def read_or_none(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def phase_rank(phase):
    if phase in FINAL_PHASES:
        return len(PHASE_ORDER)
    return PHASE_ORDER.index(phase) if phase in PHASE_ORDER else -1


def mib(n):
    return "%.1f MiB" % (n / 1048576.0) if isinstance(n, (int, float)) else "?"


class Console:
    """Timestamped, prefixed output shared by the narrator and the watcher threads."""

    def __init__(self, t0):
        self.t0 = t0
        self.lock = threading.Lock()
        self.color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")

    def _c(self, code, s):
        return "\033[%sm%s\033[0m" % (code, s) if self.color else s

    def line(self, prefix, text, code=None):
        stamp = "[%6.1fs]" % (time.monotonic() - self.t0)
        with self.lock:
            for ln in (text.splitlines() or [""]):
                print("%s %s %s" % (stamp, self._c("2", prefix.ljust(8) + "│"), self._c(code, ln) if code else ln),
                      flush=True)

    def step(self, n, total, title):
        with self.lock:
            print("", flush=True)
        self.line("demo", "══ Step %d/%d: %s" % (n, total, title), "1;36")

    def say(self, text):
        self.line("demo", text, "36")

    def ok(self, text):
        self.line("demo", "✔ " + text, "32")

    def bad(self, text):
        self.line("demo", "✘ " + text, "31")

    def block(self, title, text):
        self.line("demo", "$ " + title, "1")
        self.line("", text.rstrip("\n"))


class Watchers:
    """Live views: kubectl get node -w, the Node's history, the agent's and the kubelet's logs."""

    def __init__(self, sb, con):
        self.sb, self.con = sb, con
        self.stop_event = threading.Event()
        self.threads = []
        self.kubectl = None
        self.last_row = None
        self.node_rv = 0                            # the Node history processed so far
        self.tail_pos = {}                          # log path -> bytes shown so far

    def start(self):
        argv = self.sb.kubectl_argv("get", "node", NODE, "-w", "-o", "custom-columns=" + KUBECTL_COLUMNS)
        self.kubectl = self.sb.spawn(argv, self._kubectl_line)
        for target in (self._node_loop,
                       lambda: self._tail(self.sb.um.log_path(sandbox.AGENT_UNIT), "agent", self._agent_code),
                       lambda: self._tail(self.sb.um.log_path(KUBELET_UNIT), "kubelet", None)):
            t = threading.Thread(target=target, daemon=True)
            t.start()
            self.threads.append(t)

    def sync(self, timeout=2.0):
        """Let the watchers catch up with what happened so far, so narration follows their lines."""
        if self.stop_event.is_set():
            return
        try:
            rv = self.sb.emu.current_rv()
            sandbox.usermgr.wait_until(lambda: self.node_rv >= rv, timeout, "the Node watcher")
            for path in list(self.tail_pos):
                size = os.path.getsize(path) if os.path.exists(path) else 0
                sandbox.usermgr.wait_until(lambda: self.tail_pos[path] >= size, timeout, "the log tail")
        except (TimeoutError, OSError):
            pass                                    # display only: never fail the demo over it

    def stop(self):
        self.stop_event.set()
        if self.kubectl:
            self.sb.kill_child(self.kubectl)
        for t in self.threads:
            t.join(2)

    def _kubectl_line(self, line):
        key = " ".join(line.split())
        if key == self.last_row:                    # progress-only patches give identical rows
            return
        self.last_row = key
        self.con.line("kubectl", line)

    @staticmethod
    def _agent_code(line):
        low = line.lower()
        if "warning" in low or "error" in low or "fail" in low or "roll" in low:
            return "33"
        return None

    def _tail(self, path, prefix, colorer):
        pos, buf = 0, b""
        self.tail_pos[path] = 0
        while True:
            stopping = self.stop_event.is_set()
            try:
                with open(path, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except FileNotFoundError:
                data = b""
            pos += len(data)
            buf += data
            *lines, buf = buf.split(b"\n")
            for ln in lines:
                s = ln.decode(errors="replace")
                self.con.line(prefix, s, colorer(s) if colorer else None)
            self.tail_pos[path] = pos - len(buf)
            if stopping:
                return
            self.stop_event.wait(0.1)

    def _node_loop(self):
        rv, prev = 0, None
        while True:
            stopping = self.stop_event.is_set()
            try:
                events = self.sb.node_history(since_rv=rv)
            except Exception:                       # the emulator is going away
                return
            if not events:
                try:
                    self.node_rv = max(self.node_rv, self.sb.emu.current_rv())
                except Exception:
                    return
            for e in events:
                rv = max(rv, e["rv"])
                if e.get("object") is None:
                    continue
                view = node_view(e["object"])
                if prev is not None:
                    for text in describe_changes(prev, view):
                        self.con.line("node", text, "35")
                prev = view
            self.node_rv = max(self.node_rv, rv)
            if stopping:
                return
            self.stop_event.wait(0.1)


def node_view(node):
    """The fields of a Node the demo narrates, as display strings."""
    v = {}
    for k in (CANDIDATE, SELECTED, UPDATE_RESULT, K8S_VERSION):
        v["label " + k] = label(node, k)
    for k in (FAILED_REASON, UPDATING_OS):
        v["annotation " + k] = annotation(node, k)
    cs = annotation(node, NODE_CHECKSUM)
    v["annotation " + NODE_CHECKSUM] = cs[:12] + "…" if cs else None
    p = annotation_json(node, PROGRESS)
    if isinstance(p, dict):
        s = "%s" % p.get("phase")
        if p.get("step"):
            s += " step=%s" % p["step"]
        if p.get("bytesTotal"):
            s += " %s/%s" % (mib(p.get("bytesDone") or 0), mib(p["bytesTotal"]))
        if p.get("percent") is not None:
            s += " %s%%" % p["percent"]
        v["annotation " + PROGRESS] = s
    else:
        v["annotation " + PROGRESS] = annotation(node, PROGRESS)
    v["annotation " + PLAN] = format_plan(annotation_json(node, PLAN)) or annotation(node, PLAN)
    f = annotation_json(node, FAILURE)
    v["annotation " + FAILURE] = ("%s (%s) at %s: %s" % (f.get("code"), f.get("class"), f.get("step"),
                                                         f.get("message")) if isinstance(f, dict)
                                  else annotation(node, FAILURE))
    for t in (MCM_CONDITION, AGENT_CONDITION):
        c = condition(node, t)
        v["condition " + t] = ("%s %s: %s" % (c.get("status"), c.get("reason"), c.get("message")) if c else None)
    v["spec.unschedulable"] = "true" if node.get("spec", {}).get("unschedulable") else None
    v["status.nodeInfo.kubeletVersion"] = node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion")
    return v


def describe_changes(old, new):
    out = []
    for k, v in new.items():
        if old.get(k) != v:
            out.append(("- %s" % k) if v is None else ("%s %s = %s" % ("~" if old.get(k) else "+", k, v)))
    return out


def format_plan(plan):
    if not isinstance(plan, list):
        return None
    parts = []
    for a in plan:
        if not isinstance(a, dict):
            continue
        act = a.get("action")
        if act in ("kubelet", "os"):
            parts.append("%s %s -> %s" % (act, a.get("from"), a.get("to")))
        elif act == "restart":
            parts.append("restart %s" % a.get("unit"))
        elif act == "blocked":
            parts.append("blocked: %s %s" % (a.get("code"), a.get("message")))
        elif act == "applyOSC":
            items = (a.get("changes") or {}).get("items") or []
            parts.append("OSC: " + "; ".join(i.get("description", "?") for i in items if isinstance(i, dict)))
        else:
            parts.append(str(act))
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ the demo

class Demo:
    def __init__(self, args):
        self.args = args
        self.failure = args.failure
        self.t0 = time.monotonic()
        self.con = Console(self.t0)
        self.sb = None
        self.watchers = None
        self.summary = {"mode": "failure" if self.failure else "success", "ok": False, "error": None,
                        "checks": [], "marks": {}}
        self.interactive = sys.stdin.isatty() and not args.non_interactive
        self.total_steps = 7

    # ---------------------------------------------------------------- helpers

    def mark(self, name):
        self.summary["marks"][name] = round(time.monotonic() - self.t0, 3)

    def settle(self):
        if self.watchers:
            self.watchers.sync()

    def header(self, n, title):
        self.settle()
        self.con.step(n, self.total_steps, title)

    def pause(self, what):
        if not self.interactive:
            return
        self.settle()
        try:
            input("\n   ⏎  press Enter to %s (Ctrl-C to stop) " % what)
        except EOFError:
            self.interactive = False

    def phase(self, node=None):
        return sandbox.progress_phase(node if node is not None else self.sb.node())

    def wait_phase(self, min_phase, timeout, what):
        """Wait until the agent's phase reaches min_phase (or a final phase). Returns the phase reached."""
        try:
            node = self.sb.wait_node(lambda n: phase_rank(self.phase(n)) >= phase_rank(min_phase), timeout, what)
            self.settle()
            return self.phase(node)
        except TimeoutError:
            raise DemoError("the agent did not reach %s within %ds (its phase: %s)" %
                            (what, timeout, self.phase() or "none: no %s annotation" % PROGRESS))

    def check(self, name, ok, detail=""):
        self.summary["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
        (self.con.ok if ok else self.con.bad)("%s%s" % (name, (": " + detail) if detail else ""))
        return ok

    # ---------------------------------------------------------------- steps

    def run(self):
        try:
            self.step_sandbox()
            self.step_publish()
            self.step_candidate()
            self.step_select()
            self.step_ready()
            self.step_inspect()
        except DemoError as e:
            self.summary["error"] = str(e)
            self.con.bad(str(e))
            self.diagnostics()
        except KeyboardInterrupt:
            self.summary["error"] = "interrupted"
            self.con.bad("interrupted")
        except Exception as e:                      # anything else: still stop the sandbox, report, exit 1
            self.summary["error"] = "%s: %s" % (type(e).__name__, e)
            self.con.bad(self.summary["error"])
            self.diagnostics()
        finally:
            self.teardown()
        return self.finish()

    def step_sandbox(self):
        self.header(1, "bring up the sandbox (emulator, registry, systemd, agent)")
        self.sb = sandbox.Sandbox(agent=self.args.agent, log_level=self.args.log_level, keep=self.args.keep,
                                  narrate=lambda m: self.con.say("  · " + m))
        self.sb.start()
        self.mark("sandbox_up")
        t = self.sb.timings
        self.summary["startup"] = {k: round(v, 3) for k, v in t.items()}
        self.con.ok("sandbox up in %.1fs (%s)" % (self.summary["marks"]["sandbox_up"],
                                                  ", ".join("%s %.2fs" % kv for kv in t.items())))
        self.con.say("base directory %s; agent config %s" % (self.sb.base, self.sb.config_path))
        self.watchers = Watchers(self.sb, self.con)
        self.watchers.start()
        self.con.block("kubectl get node -o wide", self.sb.kubectl("get", "node", "-o", "wide").stdout)
        self.con.block("systemctl --user status kubelet.service containerd.service inplace-agent.service",
                       self.sb.systemctl("status", "--lines=0", KUBELET_UNIT, sandbox.CONTAINERD_UNIT,
                                         sandbox.AGENT_UNIT).stdout)
        before = self.sb.kubelet_version()
        self.summary["kubelet_before"] = before
        self.con.block("%s --version" % self.sb.binary_path, before or "(does not run)")
        # docs/contract.md §8.2: the agent adopts the provisioned plain file into its store on its first start.
        try:
            sandbox.usermgr.wait_until(lambda: self.sb.kubelet_target(), 5, "adoption")
            self.con.ok("the agent adopted the provisioned kubelet: %s -> %s" % (self.sb.binary_path,
                                                                                  self.sb.kubelet_target()))
        except TimeoutError:
            self.con.say("the agent has not adopted %s within 5s (still a plain file); going on"
                         % self.sb.binary_path)

    def step_publish(self):
        self.pause("publish the new OSC (kubelet %s)" % TO)
        self.header(2, "gardenlet publishes the OSC: kubelet %s -> %s%s"
                      % (FROM, TO, " (a BROKEN build)" if self.failure else ""))
        self.publish_rv = self.sb.emu.current_rv()
        # With the kubelet: a kubelet config value (an in-place trigger of its own) and a unit drop-in,
        # applied in the same update, behind the same gate.
        checksum = self.sb.publish_osc(kubelet_version=TO, broken=self.failure, eviction=EVICTION_TO,
                                       dropin=DROPIN)
        self.mark("osc_published")
        self.summary["secret_checksum"] = checksum
        self.summary["image"] = self.sb.osc["image"]
        img = self.sb.images[(TO, self.failure)]
        self.summary["image_bytes"] = img["layer_bytes"]
        self.con.say("Secret kube-system/%s: kubelet image %s, checksum/data-script %s…"
                     % (sandbox.SECRET, self.sb.osc["image"], checksum[:12]))
        self.con.say("with it: kubelet config evictionHard memory.available %s -> %s, drop-in %s.d/%s"
                     % (sandbox.DEFAULT_EVICTION, EVICTION_TO, KUBELET_UNIT, DROPIN_NAME))
        self.con.say("a minor version change is gated: the agent waits for MCM before touching the node")

    def step_candidate(self):
        self.pause("let MCM mark the node candidate-for-update")
        self.header(3, "MCM: candidate-for-update -> the agent plans and pre-stages")
        self.sb.mcm_candidate()
        self.mark("candidate")
        ph = self.wait_phase("Staged", STAGE_TIMEOUT, "phase Staged")
        self.mark("staged")
        node = self.sb.node()
        self.con.ok("agent phase %s; plan: %s" % (ph, format_plan(annotation_json(node, PLAN)) or
                                                  annotation(node, PLAN)))
        stored = self.sb.store_versions()
        self.con.say("kubelet store %s: %s (binaryPath still -> %s)" % (
            os.path.join(self.sb.state_dir, "kubelet"), ", ".join(stored) or "empty", self.sb.kubelet_target()))

    def step_select(self):
        self.pause("let MCM select the node")
        self.header(4, "MCM: selected-for-update -> the agent waits for the drain")
        self.sb.mcm_select()
        self.mark("selected")
        ph = self.wait_phase("WaitingForDrain", SELECT_TIMEOUT, "phase WaitingForDrain")
        self.mark("waiting_for_drain")
        self.con.ok("agent phase %s" % ph)

    def step_ready(self):
        self.pause("let MCM drain the node and set ReadyForUpdate")
        self.header(5, "MCM: drain, ReadyForUpdate -> switch, restart, health check, result")
        self.sb.mcm_drain()
        self.sb.mcm_ready_for_update(drain=False)
        self.mark("ready_for_update")
        try:
            node = self.sb.wait_node(lambda n: label(n, UPDATE_RESULT), RESULT_TIMEOUT,
                                     "label " + UPDATE_RESULT)
        except TimeoutError:
            raise DemoError("no %s on the Node within %ds (agent phase: %s)" % (UPDATE_RESULT, RESULT_TIMEOUT,
                                                                                 self.phase()))
        self.mark("result")
        self.settle()
        result = label(node, UPDATE_RESULT)
        self.con.ok("%s=%s after %.1fs" % (UPDATE_RESULT, result, self.summary["marks"]["result"] -
                                          self.summary["marks"]["ready_for_update"]))
        if result == "failed":
            self.con.say("update-failed-reason: %s" % annotation(node, FAILED_REASON))
        # The agent writes its final phase with the result (§8.12); give the rollback's restart its moment.
        if self.failure:
            try:
                self.sb.wait_node(lambda n: self.phase(n) in FINAL_PHASES, 30, "a final phase")
                self.sb.wait_kubelet_healthy(30)
            except TimeoutError as e:
                self.con.bad(str(e))
        reason = self.sb.mcm_observe_result()
        self.con.say("MCM sees the label: condition %s -> %s" % (MCM_CONDITION, reason))

    def step_inspect(self):
        self.pause("look at the node")
        self.header(6, "what the node looks like now")
        self.watchers.stop()
        self.con.block("kubectl describe node %s" % NODE, self.sb.kubectl("describe", "node", NODE).stdout)
        self.con.block("systemctl --user status kubelet.service",
                       self.sb.systemctl("status", "--lines=0", KUBELET_UNIT).stdout)
        self.con.block("%s --version" % self.sb.binary_path, self.sb.kubelet_version() or "(does not run)")
        self.con.block("readlink %s" % self.sb.binary_path, self.sb.kubelet_target() or "(plain file)")
        self.con.block("ls %s" % os.path.join(self.sb.state_dir, "kubelet"), "  ".join(self.sb.store_versions()))
        tx = self.transaction()
        lines = [ln for ln in self.sb.agent_log().splitlines() if tx and tx in ln]
        self.con.block("journalctl -t inplace-agent INPLACE_TRANSACTION=%s  (agent log lines of the transaction)"
                       % tx, "\n".join(lines[-60:]) or "(none)")

    # ---------------------------------------------------------------- result

    def transaction(self):
        p = annotation_json(self.sb.node(), PROGRESS)
        return p.get("transaction") if isinstance(p, dict) else None

    def phase_history(self):
        """[(phase, seconds)] of the last transaction, from every stored version of the Node."""
        seen, bytes_done, bytes_total = [], None, None
        tx = self.transaction()
        for e in self.sb.node_history(since_rv=getattr(self, "publish_rv", 0)):
            p = annotation_json(e.get("object"), PROGRESS)
            if not isinstance(p, dict) or (tx and p.get("transaction") != tx):
                continue
            if p.get("bytesTotal"):
                bytes_done = max(bytes_done or 0, p.get("bytesDone") or 0)
                bytes_total = p["bytesTotal"]
            if not seen or seen[-1][0] != p.get("phase"):
                seen.append((p.get("phase"), e["time"]))
        phases = []
        for i, (ph, t) in enumerate(seen):
            end = seen[i + 1][1] if i + 1 < len(seen) else None
            phases.append({"phase": ph, "seconds": round(end - t, 3) if end is not None else None})
        return phases, bytes_done, bytes_total

    def verify(self):
        sb = self.sb
        node = sb.node()
        secret_checksum = sb.secret_checksum()
        version = sb.kubelet_version()
        self.summary["kubelet_after"] = version
        self.summary["node"] = {
            "labels": {k: v for k, v in (node["metadata"].get("labels") or {}).items()
                       if k.startswith(("node.machine.sapcloud.io/", "worker.gardener.cloud/", "inplace-agent/"))},
            "annotations": {k: v for k, v in (node["metadata"].get("annotations") or {}).items()
                            if k.startswith(("node.machine.sapcloud.io/", "inplace-agent/", "checksum/",
                                             "node-agent.gardener.cloud/"))},
            "conditions": {t: condition(node, t) for t in (MCM_CONDITION, AGENT_CONDITION)},
            "kubeletVersion": node["status"]["nodeInfo"].get("kubeletVersion"),
        }
        self.summary["secret_checksum"] = secret_checksum
        self.summary["kubelet_unit"] = sb.um.active_state(KUBELET_UNIT)
        self.summary["kubelet_healthz"] = sb.kubelet_healthz()
        self.summary["kubelet_target"] = sb.kubelet_target()
        phases, done, total = self.phase_history()
        source = "progress"
        if not done:
            # The progress annotation is rate-limited (10 s / 10 %): a loopback download can finish between two
            # patches. The agent's "... N bytes downloaded" line of this transaction has the figure then.
            tx = self.transaction()
            found = [int(m.group(1)) for ln in sb.agent_log().splitlines() if not tx or tx in ln
                     for m in [re.search(r"(\d+) bytes downloaded", ln)] if m]
            done, source = (sum(found), "agent log") if found else (None, None)
        self.summary.update(phases=phases, transaction=self.transaction(), bytes_pulled=done, bytes_total=total,
                            bytes_source=source)
        result = label(node, UPDATE_RESULT)
        healthy = self.summary["kubelet_unit"] == "active" and self.summary["kubelet_healthz"] == 200
        if not self.failure:
            self.check("update-result=successful", result == "successful", "is %s" % result)
            self.check("checksum/cloud-config-data equals the Secret's checksum/data-script",
                       annotation(node, NODE_CHECKSUM) == secret_checksum and secret_checksum,
                       "%s vs %s" % (annotation(node, NODE_CHECKSUM), secret_checksum))
            self.check("%s=%s" % (K8S_VERSION, TO), label(node, K8S_VERSION) == TO, "is %s" % label(node, K8S_VERSION))
            self.check("kubelet --version says v%s" % TO, version == "Kubernetes v" + TO, version or "does not run")
            self.check("kubelet.service active and healthy", healthy,
                       "%s, /healthz %s" % (self.summary["kubelet_unit"], self.summary["kubelet_healthz"]))
            if os.path.basename(self.args.agent or "") == "stand-in-agent.py":
                return      # the harness's double carries out the kubelet update only
            config = read_or_none(sb.base + sandbox.KUBELET_CONFIG_PATH) or ""
            self.check("kubelet config written: memory.available %s" % EVICTION_TO,
                       "memory.available: %s" % EVICTION_TO in config, config.strip().replace("\n", " | "))
            dropin = read_or_none(os.path.join(sb.um.unit_dir, KUBELET_UNIT + ".d", DROPIN_NAME))
            self.check("drop-in %s.d/%s written" % (KUBELET_UNIT, DROPIN_NAME), bool(dropin and DROPIN in dropin),
                       dropin or "absent")
        else:
            reason = annotation(node, FAILED_REASON) or ""
            failure = annotation_json(node, FAILURE) or {}
            self.check("update-result=failed", result == "failed", "is %s" % result)
            self.check("update-failed-reason names the health check", HEALTH_REASON in reason, reason or "absent")
            self.check("inplace-agent/failure code KubeletUnhealthy", failure.get("code") == "KubeletUnhealthy",
                       json.dumps(failure) if failure else "absent")
            self.check("kubelet %s restored (kubelet --version)" % FROM, version == "Kubernetes v" + FROM,
                       version or "does not run")
            self.check("kubelet.service active and healthy", healthy,
                       "%s, /healthz %s" % (self.summary["kubelet_unit"], self.summary["kubelet_healthz"]))
            self.check("checksum/cloud-config-data is not the failed OSC's",
                       annotation(node, NODE_CHECKSUM) != secret_checksum, annotation(node, NODE_CHECKSUM) or "")
            # The reason must be in the journal too: the update-failed-reason text or the failure code.
            needles = [n for n in (reason, failure.get("code"), failure.get("message")) if n]
            journal = [ln for ln in sb.agent_log().splitlines() if any(n in ln for n in needles)]
            self.summary["journal_failure_lines"] = journal[-10:]
            self.check("the agent's journal names the failure", bool(journal), journal[0] if journal else "none")

    def diagnostics(self):
        if not self.sb or not self.sb.um:
            return
        try:
            self.con.block("agent log (tail)", "\n".join(self.sb.agent_log().splitlines()[-40:]) or "(empty)")
            self.con.block("systemctl --user status inplace-agent.service",
                           self.sb.systemctl("status", "--lines=0", sandbox.AGENT_UNIT).stdout)
        except Exception as e:                      # diagnostics must never hide the real error
            self.con.bad("diagnostics failed: %s" % e)

    def teardown(self):
        if self.sb is None:
            return
        if self.summary["error"] is None and self.sb.emu:
            try:
                self.verify()
            except Exception as e:
                self.summary["error"] = "verification failed: %s: %s" % (type(e).__name__, e)
                self.con.bad(self.summary["error"])
        if self.watchers:
            self.watchers.stop()
        self.header(7, "tear down")
        left = self.sb.stop()
        self.summary["leftover_processes"] = left
        self.check("no process left running", not left, ", ".join(map(str, left)) if left else "")

    def finish(self):
        self.summary["wall_seconds"] = round(time.monotonic() - self.t0, 3)
        self.summary["ok"] = (self.summary["error"] is None and bool(self.summary["checks"]) and
                              all(c["ok"] for c in self.summary["checks"]))
        s = self.summary
        self.con.line("", "")
        self.con.line("summary", "mode %s: %s in %.1fs wall time" % (s["mode"], "OK" if s["ok"] else "FAILED",
                                                                   s["wall_seconds"]), "1;32" if s["ok"] else "1;31")
        if "startup" in s:
            self.con.line("summary", "sandbox start %.1fs (%s)" % (s["marks"].get("sandbox_up", 0), ", ".join(
                "%s %.2fs" % kv for kv in s["startup"].items())))
        marks = s["marks"]
        if "ready_for_update" in marks and "result" in marks:
            self.con.line("summary", "MCM candidate -> staged %s; ReadyForUpdate -> update-result %.1fs" % (
                ("%.1fs" % (marks["staged"] - marks["candidate"])) if "staged" in marks else "?",
                marks["result"] - marks["ready_for_update"]))
        if s.get("phases"):
            self.con.line("summary", "agent phases (tx %s): %s" % (s.get("transaction"), " → ".join(
                "%s %s" % (p["phase"], ("%.1fs" % p["seconds"]) if p["seconds"] is not None else "")
                for p in s["phases"])))
        if "image_bytes" in s:
            self.con.line("summary", "bytes pulled %s%s (image layers %s; from the %s)" % (
                mib(s.get("bytes_pulled")), (" of " + mib(s["bytes_total"])) if s.get("bytes_total") else "",
                mib(s["image_bytes"]), s.get("bytes_source") or "agent: not reported"))
        self.con.line("summary", "kubelet before: %s; desired: %s%s; after: %s" % (
            s.get("kubelet_before"), TO, " (broken build)" if self.failure else "", s.get("kubelet_after")))
        return end_summary(self.con, s, self.args.summary_json)


def end_summary(con, summary, path):
    """The error line, the --summary-json file, and the exit status (0 only when all is right)."""
    if summary["error"]:
        con.line("summary", "error: " + summary["error"], "31")
    if path:
        with open(path, "w") as f:
            json.dump(summary, f, indent=2, default=str)
            f.write("\n")
    return 0 if summary["ok"] else 1


class DemoError(Exception):
    pass


def main():
    if "--machine" in sys.argv[1:]:
        import machine_demo     # the same story inside a booted Debian 12 machine
        return machine_demo.main()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--failure", action="store_true",
                    help="publish a broken kubelet 1.32.1: health check fails, the agent rolls back")
    ap.add_argument("--non-interactive", action="store_true", help="never pause (default when stdin is not a tty)")
    ap.add_argument("--summary-json", metavar="FILE", help="write a machine-readable summary")
    ap.add_argument("--agent", metavar="PATH", help="the inplace-agent binary (default $AGENT or build/inplace-agent)")
    ap.add_argument("--log-level", default="info", help="the agent's --log-level (default info)")
    ap.add_argument("--keep", action="store_true", help="keep the sandbox directories (for debugging)")
    ap.add_argument("--machine", action="store_true", help="the same story in a booted Debian 12 machine "
                    "(tests/demo/machine_demo.py): the .deb installed by apt, systemd as PID 1, real journalctl")
    args = ap.parse_args()
    missing = sandbox.missing_prerequisites(args.agent)
    if missing:
        print("demo: missing prerequisites: %s\n(tests/demo/run-demo installs and builds everything)"
              % ", ".join(missing), file=sys.stderr)
        return 1
    return Demo(args).run()


if __name__ == "__main__":
    sys.exit(main())
