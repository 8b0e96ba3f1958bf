#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 26, item 4 (gardener#15707): failures are visible before the agent has an identity. While the
real agent (lib/agentrun.py) cannot reach or authenticate to the API server (lib/kubeemu.py refuses
connections, answers 401, or there is no credential to bootstrap with), the reason is in the journal, on
the kernel console (console.path: a file here; each distinct reason once, "<3>inplace-agent: "), in
STATUS= and in `inplace-agent status`; on the first successful contact one Warning Event says what blocked
it and for how long, and the status file is gone.

c01 refused, then 401, then contact: two console lines (the retries in between add none), the status
    command shows the current reason, one NoAPIServerAccess Event naming both reasons and the time;
c02 no kubeconfig and no bootstrap credential: BootstrapFailed on standard output with the console's
    "<3>" (the route the shipped unit sends to the kernel log) and in the status command; once a
    bootstrap kubeconfig appears the agent bootstraps, reaches the API server and says what blocked it.
"""

import json
import os
import re
import subprocess
import time

from lib import itest
from lib.itest import check
import agentrun
from kubeemu import wait_for

AGENT = agentrun.AGENT
TOKEN_ID, TOKEN_SECRET = "cont01", "c0nt4ctt0k3n0v3r"
EVENT = "NoAPIServerAccess"
TUNING = {"contact-event-min": "1s", "backoff-cap": "1s", "csr-poll": "200ms", "identity-retry-base": "500ms",
          "identity-retry-cap": "1s"}


def status(agent, json_out=False):
    argv = [AGENT, "status", "--state-dir", agent.state_dir] + (["--json"] if json_out else [])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    check(r.returncode == 0, "status exited %d: %s", r.returncode, r.stderr)
    return json.loads(r.stdout) if json_out else r.stdout


def console_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def events(emu, node):
    return [e for e in emu.list("events") or [] if e.get("reason") == EVENT
            and (e.get("involvedObject") or {}).get("name") == node]


def retries(agent):
    return agent.log().count("LIST /api/v1/nodes/%s failed" % agent.node)


def bootstrap_kubeconfig_text(emu):
    return ("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\n"
            "    certificate-authority: %s\nusers:\n- name: u\n  user:\n    token: %s.%s\n"
            "contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
            % (emu.server, emu.ca, TOKEN_ID, TOKEN_SECRET))


setUpModule, tearDownModule = itest.emulator_fixture(globals(),
                                                     config=dict(agentrun.FAST_EMULATOR, csr_auto_approve=True))


class BeforeContact(itest.EmulatorTest):
    def test_c01_refused_then_unauthorized_then_contact(self):
        emu = self.emu
        emu.listen("refuse")
        agent = agentrun.Agent(emu, "n1", tuning=TUNING, start=False)
        kmsg = os.path.join(agent.dir, "kmsg")
        open(kmsg, "w").close()                 # the agent appends, never creates (/dev/kmsg exists)
        with open(agent.config_path, "a") as f:
            f.write("console:\n  path: %s\n" % kmsg)
        with agent.start():
            refused = "cannot list node n1 at %s: connection refused" % emu.server
            wait_for(lambda: console_lines(kmsg), 15, "a console line")
            check(console_lines(kmsg) == ["<3>inplace-agent: " + refused], "console: %r", console_lines(kmsg))
            text = status(agent)
            check(text.startswith("noAPIServerAccess %s (since 20" % refused), "status:\n%s", text)
            blocker = status(agent, json_out=True)["noAPIServerAccess"]
            check(blocker["reason"] == refused and blocker["firstReason"] == refused, "status --json: %r", blocker)
            wait_for(lambda: any(refused in s for s in agent.notify.statuses()), 5, "STATUS= with the reason")
            check("[warning]: %s; retrying." % refused in agent.log(), "the journal line")
            # The agent keeps retrying; the console hears the same reason once.
            n = retries(agent)
            wait_for(lambda: retries(agent) >= n + 3, 15, "three more attempts")
            check(len(console_lines(kmsg)) == 1, "console repeated itself: %r", console_lines(kmsg))

            # Reachable, but the credentials are refused: a new reason, at once.
            rule = emu.inject("unauthorized", path=r"^/api/v1/nodes$", verbs=["list"], count=-1)
            emu.listen("normal")
            unauthorized = ("cannot list node n1 at %s: unauthorized (HTTP 401): the API server does not accept the "
                            "agent's credentials: Unauthorized" % emu.server)
            wait_for(lambda: len(console_lines(kmsg)) >= 2, 15, "a second console line")
            check(console_lines(kmsg)[1] == "<3>inplace-agent: " + unauthorized, "console: %r", console_lines(kmsg))
            wait_for(lambda: status(agent, json_out=True)["noAPIServerAccess"]["reason"] == unauthorized, 5,
                     "the status file")
            check(events(emu, "n1") == [], "an Event before the contact")

            t_blocked = time.monotonic() - agent.started
            emu.clear_faults(rule)
            ev = wait_for(lambda: events(emu, "n1"), 15, "the %s Event" % EVENT)
            agent.wait_watching(10)
            check(len(events(emu, "n1")) == 1, "more than one Event: %r", events(emu, "n1"))
            msg = ev[0]["message"]
            check(ev[0]["type"] == "Warning", "type %r", ev[0]["type"])
            prefix = "no access to the API server for "
            check(msg.startswith(prefix), "message %r", msg)
            check(msg.endswith(" before the first successful contact: %s (at first: %s)" % (unauthorized, refused)),
                  "message %r", msg)
            took = re.fullmatch(r"(?:(\d+)m)?(\d+)s", msg[len(prefix):].split(" ", 1)[0])
            seconds = int(took.group(1) or 0) * 60 + int(took.group(2)) if took else -1
            check(int(t_blocked) - 1 <= seconds <= t_blocked + 15, "%r after %.1fs blocked", msg, t_blocked)
            check("noAPIServerAccess" not in status(agent), "status still blocked:\n%s", status(agent))
            check(not os.path.exists(os.path.join(agent.state_dir, "contact-blocker.json")), "status file left")
            check(console_lines(kmsg)[-1] == "<3>inplace-agent: reached the API server; the reason above no longer holds",
                  "console: %r", console_lines(kmsg))

    def test_c02_bootstrap_failure_on_the_console_then_bootstrap(self):
        emu = self.emu
        emu.seed_bootstrap_token(TOKEN_ID, TOKEN_SECRET)
        agent = agentrun.Agent(emu, "c2", kubeconfig="/nonexistent-placeholder", tuning=TUNING, start=False)
        kc = os.path.join(agent.state_dir, "kubeconfig")
        with open(agent.config_path) as f:
            text = f.read().replace("/nonexistent-placeholder", kc)
        with open(agent.config_path, "w") as f:
            f.write(text)
        with agent.start():
            # Standard output (here the agent's log file) carries the console line with its priority.
            line = wait_for(lambda: [ln for ln in agent.log().splitlines() if ln.startswith("<3>BootstrapFailed: ")], 15,
                            "the console line on standard output")[0]
            check("no bootstrap credential" in line, "console line %r", line)
            check(len([ln for ln in agent.log().splitlines() if ln.startswith("<3>")]) == 1, "console repeated itself")
            check("noAPIServerAccess BootstrapFailed: " in status(agent), "status:\n%s", status(agent))
            check(any("BootstrapFailed" in s for s in agent.notify.statuses()), "STATUS=")

            with open(os.path.join(agent.state_dir, "bootstrap-kubeconfig"), "w") as f:
                f.write(bootstrap_kubeconfig_text(emu))
            wait_for(lambda: os.path.exists(kc), 20, "the agent's kubeconfig")
            ev = wait_for(lambda: events(emu, "c2"), 20, "the %s Event" % EVENT)
            check("before the first successful contact: BootstrapFailed: " in ev[0]["message"], "message %r",
                  ev[0]["message"])
            check(TOKEN_SECRET not in json.dumps(ev) + agent.log(), "the token secret was printed")
            check("noAPIServerAccess" not in status(agent), "status still blocked:\n%s", status(agent))
            wait_for(lambda: "<3>reached the API server; the reason above no longer holds" in agent.log(), 5,
                     "the all-clear on the console")


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("AGENT"))
