# SPDX-License-Identifier: Apache-2.0
"""Drained window: time from MCM's ReadyForUpdate to update-result=successful for a 100 MB kubelet, in
the sandbox of the demo (tests/integration/lib/sandbox.py: emulator, registry over TLS, a real systemd
user manager running kubelet.service and the agent as a Type=notify unit).
  (a) pre-staged: candidate-for-update first, wait until the agent has staged the kubelet (state.json
      phase Staged), then selected + drained + ReadyForUpdate;
  (b) not pre-staged: candidate, selected, drained and ReadyForUpdate back to back, so the download
      happens inside the drain, as gardener-node-agent does through containerd.
Both instants are the emulator's commit times (its watch history), so polling adds no error. Also the
agent's peak RSS growth over idle across the staging (VmHWM after - VmRSS before)."""

import json
import os
import time

from common import proc_status, row, skipped, status_kib
import sandbox as S  # noqa: E402  (tests/integration/lib)

GROUP = "drain"
SIZE = 100 << 20


def commit_time(sb, since_rv, pred):
    """The emulator's commit time of the first Node version since since_rv that satisfies pred."""
    for e in sb.node_history(since_rv=since_rv):
        if e.get("object") and pred(e["object"]):
            return e["time"]
    raise RuntimeError("no Node version matched")


def ready(n):
    return (S.condition(n, S.MCM_CONDITION) or {}).get("reason") == "ReadyForUpdate"


def state_phase(sb):
    try:
        with open(os.path.join(sb.state_dir, "state.json")) as f:
            return json.load(f).get("phase")
    except (OSError, ValueError):
        return None


def update(sb, version, prestage):
    rv = sb.emu.current_rv()
    checksum = sb.publish_osc(kubelet_version=version)
    sb.mcm_candidate()
    if prestage:
        S.kubeemu.wait_for(lambda: state_phase(sb) == "Staged", 120, "the kubelet staged", interval=0.01)
    sb.mcm_select()
    sb.mcm_ready_for_update()

    def done(n):
        return S.label(n, S.UPDATE_RESULT) == "successful" and S.annotation(n, S.NODE_CHECKSUM) == checksum
    sb.wait_node(done, 180, "update-result=successful for %s" % version)
    sb.mcm_observe_result()
    # The result label comes with the checksum; the label alone may be stale from the previous update.
    return commit_time(sb, rv, lambda n: S.label(n, S.UPDATE_RESULT) == "successful"
                       and S.annotation(n, S.NODE_CHECKSUM) == checksum) - commit_time(sb, rv, ready)


class Sandbox(S.Sandbox):
    """The demo's sandbox with a small image for the version the node starts at: only the update
    targets need the 100 MB kubelet (saves a third of the set-up)."""

    def _push_images(self):
        size, versions = self.kubelet_size, self.versions
        self.kubelet_size = 256 << 10
        self._push_image(self.initial_version, False)
        self.kubelet_size = size
        self.versions = tuple(v for v in versions if v != self.initial_version)
        try:
            super()._push_images()      # the targets, in parallel
        finally:
            self.versions = versions


def run(ctx):
    missing = S.missing_prerequisites(ctx.agent)
    if missing:
        return [skipped(GROUP, "drained window", "missing " + ", ".join(missing))]
    with Sandbox(agent=ctx.agent, versions=("1.31.4", "1.32.1", "1.33.0"), broken_versions=(),
                   kubelet_size=SIZE) as sb:
        pid = sb.um.main_pid(S.AGENT_UNIT)
        idle = status_kib(proc_status(pid), "VmRSS")
        ctx.log("drain: (a) pre-staged update to 1.32.1")
        a = update(sb, "1.32.1", prestage=True)
        hwm = status_kib(proc_status(pid), "VmHWM")
        ctx.log("drain: (b) update to 1.33.0 with the download inside the drain")
        b = update(sb, "1.33.0", prestage=False)
        layer = sb.images[("1.33.0", False)]["layer_bytes"] / 1e6
    return [
        row(GROUP, "ReadyForUpdate -> successful, pre-staged (%.0f MB kubelet)" % (SIZE / 1e6), a, "s", b,
            "download inside the drain", note="the drain window a Gardener operator sees"),
        row(GROUP, "ReadyForUpdate -> successful, download inside the drain (%.0f MB layer)" % layer, b, "s"),
        row(GROUP, "agent peak RSS growth over idle while staging", (hwm - idle) / 1024.0, "MiB",
            target=("<=", 4), note="VmHWM %.1f MiB, idle VmRSS %.1f MiB" % (hwm / 1024.0, idle / 1024.0)),
    ]
