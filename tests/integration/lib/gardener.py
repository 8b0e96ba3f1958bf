# SPDX-License-Identifier: Apache-2.0
"""gardenlet and machine-controller-manager as they act on one Node, through the API-server
emulator's control API (docs/node-protocol.md §1.1). Shared by the sandbox (lib/sandbox.py) and the machine tier
(tests/machine/), which differ in where the agent runs, not in what Gardener does to its Node.

    g = gardener.Actors(emu, "node-a", secret="gardener-node-agent-pool", pool="pool")
    g.publish_osc_text(osc_yaml)                   # gardenlet: the OSC Secret + checksum/data-script
    g.mcm_candidate(); g.mcm_select(); g.mcm_ready_for_update()      # MCM, step by step
    g.wait_node(lambda n: label(n, UPDATE_RESULT), 120, "an update result")

Stdlib only.
"""

import hashlib
import json

import kubeemu

# Wire names (docs/contract.md §4, §6; docs/node-protocol.md Appendix A).
SECRET_NAME_LABEL = "worker.gardener.cloud/gardener-node-agent-secret-name"
CANDIDATE = "node.machine.sapcloud.io/candidate-for-update"
SELECTED = "node.machine.sapcloud.io/selected-for-update"
UPDATE_RESULT = "node.machine.sapcloud.io/update-result"
FAILED_REASON = "node.machine.sapcloud.io/update-failed-reason"
UPDATING_OS = "node-agent.gardener.cloud/updating-operating-system-version"
NODE_CHECKSUM = "checksum/cloud-config-data"
SECRET_CHECKSUM = "checksum/data-script"
K8S_VERSION = "worker.gardener.cloud/kubernetes-version"
RESTART_ANNOTATION = "worker.gardener.cloud/restart-systemd-services"
PROGRESS = "inplace-agent/progress"
PLAN = "inplace-agent/plan"
FAILURE = "inplace-agent/failure"
MCM_CONDITION = "InPlaceUpdate"
AGENT_CONDITION = "InPlaceUpdateAgent"
UNITS_CONDITION = "SystemdUnitsReady"
PREFER_NO_SCHEDULE = {"key": "deployment.machine.sapcloud.io/prefer-no-schedule", "value": "True",
                      "effect": "PreferNoSchedule"}
MCM_MESSAGES = {
    "CandidateForUpdate": "Node is a candidate for in-place update",
    "SelectedForUpdate": "Node is selected for in-place update",
    "DrainSuccessful": "Node draining successful",
    "ReadyForUpdate": "Node is ready for in-place update",
    "UpdateSuccessful": "Node in-place update successful",
    "UpdateFailed": "Node in-place update failed: ",         # + the update-failed-reason annotation
}


def label(node, key, default=None):
    return ((node or {}).get("metadata", {}).get("labels") or {}).get(key, default)


def annotation(node, key, default=None):
    return ((node or {}).get("metadata", {}).get("annotations") or {}).get(key, default)


def annotation_json(node, key):
    """A JSON annotation decoded, or None when absent or not JSON."""
    v = annotation(node, key)
    if v is None:
        return None
    try:
        return json.loads(v)
    except ValueError:
        return None


def condition(node, ctype):
    for c in ((node or {}).get("status", {}).get("conditions") or []):
        if c.get("type") == ctype:
            return c
    return None


def progress_phase(node):
    p = annotation_json(node, PROGRESS)
    return p.get("phase") if isinstance(p, dict) else None


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


class Actors:
    """gardenlet (the OSC Secret) and MCM (labels, taints, the InPlaceUpdate condition) for one Node."""

    def __init__(self, emu, node, secret, pool, namespace="kube-system"):
        self.emu, self.node_name, self.secret_name, self.pool, self.namespace = emu, node, secret, pool, namespace

    # ---------------------------------------------------------------- gardenlet

    def publish_osc_text(self, text):
        """The OSC Secret as gardenlet writes it (docs/node-protocol.md §1.1 row 3): osc.yaml plus checksum/data-script =
        sha256 hex of it. Returns the checksum."""
        checksum = sha256_hex(text.encode())
        self.emu.seed_secret(self.secret_name, namespace=self.namespace, data={"osc.yaml": text},
                             labels={"gardener.cloud/role": "operating-system-config",
                                     "worker.gardener.cloud/pool": self.pool},
                             annotations={SECRET_CHECKSUM: checksum})
        return checksum

    def secret(self):
        return self.emu.get("secrets", self.secret_name, namespace=self.namespace)

    # ---------------------------------------------------------------- MCM (docs/node-protocol.md §1.1 rows 5-12)

    def mcm_condition(self, reason, message=None):
        return self.emu.set_condition(self.node_name, MCM_CONDITION, "True", reason,
                                      message if message is not None else MCM_MESSAGES[reason])

    def mcm_candidate(self):
        """Row 5+6: candidate label, prefer-no-schedule taint, scale-down annotations; CandidateForUpdate."""
        node = self.node()
        taints = [t for t in (node.get("spec", {}).get("taints") or []) if t.get("key") != PREFER_NO_SCHEDULE["key"]]
        self.emu.label_node(self.node_name, labels={CANDIDATE: "true"},
                            annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true",
                                         "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm": "true"},
                            taints=taints + [PREFER_NO_SCHEDULE])
        return self.mcm_condition("CandidateForUpdate")

    def mcm_select(self):
        """Row 8+9 (first half): selected-for-update; SelectedForUpdate."""
        self.emu.label_node(self.node_name, labels={SELECTED: "true"})
        return self.mcm_condition("SelectedForUpdate")

    def mcm_drain(self):
        """Row 9: cordon, (no Pods to evict here), DrainSuccessful."""
        self.emu.label_node(self.node_name, unschedulable=True)
        return self.mcm_condition("DrainSuccessful")

    def mcm_ready_for_update(self, drain=True):
        """Row 9 (end): drain when not done yet, then ReadyForUpdate, the agent's gate."""
        c = condition(self.node(), MCM_CONDITION)
        if drain and (c or {}).get("reason") not in ("DrainSuccessful", "ReadyForUpdate"):
            self.mcm_drain()
        return self.mcm_condition("ReadyForUpdate")

    def mcm_observe_result(self):
        """Row 12: the condition follows the update-result label. Returns the reason set (None: no label)."""
        node = self.node()
        result = label(node, UPDATE_RESULT)
        if result == "successful":
            self.mcm_condition("UpdateSuccessful")
            return "UpdateSuccessful"
        if result == "failed":
            self.mcm_condition("UpdateFailed", MCM_MESSAGES["UpdateFailed"] + (annotation(node, FAILED_REASON) or ""))
            return "UpdateFailed"
        return None

    def mcm_finish(self):
        """Rows 12-13 after a success: labels and taint off, uncordon (the node is back in service)."""
        node = self.node()
        taints = [t for t in (node.get("spec", {}).get("taints") or []) if t.get("key") != PREFER_NO_SCHEDULE["key"]]
        self.emu.label_node(self.node_name, labels={CANDIDATE: None, SELECTED: None, UPDATE_RESULT: None},
                            annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": None,
                                         "cluster-autoscaler.kubernetes.io/scale-down-disabled-by-mcm": None},
                            unschedulable=False, taints=taints)

    # ---------------------------------------------------------------- queries

    def node(self):
        return self.emu.get_node(self.node_name)

    def wait_node(self, predicate, timeout, what=None):
        """Poll the Node until predicate(node) is truthy; returns the Node. TimeoutError names `what`."""
        box = {}

        def check():
            box["node"] = self.node()
            return bool(predicate(box["node"]))
        kubeemu.wait_for(check, timeout, what or getattr(predicate, "__name__", "the Node"), interval=0.05)
        return box["node"]

    def wait_phase(self, phase, timeout=60):
        """Until the agent's progress annotation shows `phase`; returns the Node."""
        return self.wait_node(lambda n: progress_phase(n) == phase, timeout, "the agent's phase %s" % phase)

    def node_history(self, since_rv=0):
        """Every stored version of the Node since since_rv: [{"rv", "type", "time", "object"}]."""
        h = self.emu.history(since_rv=since_rv, resource="nodes", objects=True)
        return [e for e in h["events"] if e.get("name") == self.node_name]

    def events(self):
        """core/v1 Events about the Node (any namespace)."""
        out = []
        for e in self.emu.list("events") or []:
            io_ = e.get("involvedObject") or e.get("regarding") or {}
            if io_.get("kind") == "Node" and io_.get("name") == self.node_name:
                out.append(e)
        return out
