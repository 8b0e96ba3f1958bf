#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 23 findings 5 and 8 with the real agent (lib/sandbox.py), one sandbox, in order:
  1. a 10,000-file OSC (the most an OSC may have) is applied: the plan on the Node is a summary
     (counts per action, the first items) within its share, all of the Node's annotations stay under
     the API server's 256 KiB, and the whole plan is in the journal and
     <stateDirectory>/last-computed-osc-plan.json. Before: the plan patch was rejected (Too long)
     and retried forever at Staging/plan. Its files go to a tmpfs (mounted in the user manager's
     mount namespace, so only the agent sees it): the test is about the bookkeeping, which stays on
     the state directory's disk, not about this disk's fsync latency;
  2. a truncated last-computed-osc-changes.json and
  3. a truncated last-applied-osc.yaml are moved aside (".corrupt") with a Warning Event on the Node
     and a journal line naming the file, and the new OSC is applied from the last good state.
     Before: every new OSC was blocked (journal only);
  4. a full state directory (a small tmpfs in the manager's namespace, filled up): the work list
     cannot be saved, a Warning Event says so, and once space is free again the OSC is applied with
     no other input. Before: nothing was retried after the cause was gone.
Test 4 is issue 22 item 8, the partial resume of upstream's integration test; test 5 a resumed
transaction whose work list cannot be read (each in its docstring)."""

import json
import os
import subprocess
import sys
import time
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
OSC_FILES_MAX = 10000                   # include/core/osc.h
TEMPLATE_FILES = 2                      # the sandbox OSC's kubelet binary and config
BIG_DIR = "/etc/ipa-big"
ANNOTATIONS_MAX = 256 * 1024
AGENT_SHARE = 64 * 1024                 # include/core/annotation-budget.h


def prepare(sb):
    # Before the agent: it then writes the big OSC's files into the tmpfs from the start.
    ns("mkdir", "-p", sb.path(BIG_DIR.lstrip("/")))
    ns("mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "tmpfs", sb.path(BIG_DIR.lstrip("/")))
    sb.start_agent()
    usermgr.wait_until(lambda: sb.kubelet_target(), 30, "the adoption of the provisioned kubelet")


setUpModule, stop_sandbox = itest.sandbox_fixture(globals(), setup=prepare, versions=("1.31.4",), broken_versions=(),
                                                  kubelet_size=64 << 10, start_agent=False)


def tearDownModule():
    log = SB.agent_log() if SB else ""
    stop_sandbox()
    # Under ASan+UBSan (tests/run-tests --sanitize) a report would only restart the agent: say it.
    for needle in ("AddressSanitizer", "LeakSanitizer", "runtime error:"):
        if needle in log:
            raise AssertionError("the agent's log has a sanitizer report (%s)" % needle)


def ns(*argv):
    """A command in the user manager's mount namespace, where the agent runs."""
    r = subprocess.run(["nsenter", "-t", str(SB.um.pid), "-m"] + list(argv), capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r.stdout


def agent_view(path):
    """`path` as the agent sees it (through its mount namespace)."""
    return "/proc/%d/root%s" % (SB.um.main_pid(S.AGENT_UNIT), path)


def inline_file(path, data):
    return "  - path: %s\n    content:\n      inline:\n        data: %s\n" % (path, json.dumps(data))


def warnings(reason):
    return [e for e in SB.events() if e.get("type") == "Warning" and e.get("reason") == reason]


def state(name):
    return os.path.join(SB.state_dir, name)


class OscBookkeeping(unittest.TestCase):
    def wait_checksum(self, checksum, timeout=60):
        return SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, timeout,
                            "checksum/cloud-config-data %s" % checksum)

    def test_1_ten_thousand_files(self):
        n = OSC_FILES_MAX - TEMPLATE_FILES
        extra = "".join(inline_file("%s/f%05d" % (BIG_DIR, i), "x") for i in range(n))
        plans = []
        t0 = time.monotonic()
        checksum = SB.publish_osc(extra_files=extra)

        def applied(node):
            plan = S.annotation(node, S.PLAN)
            if plan and plan not in plans:
                plans.append(plan)
            return S.annotation(node, S.NODE_CHECKSUM) == checksum
        node = SB.wait_node(applied, 240, "the 10,000-file OSC applied")
        took = time.monotonic() - t0
        log = SB.agent_log()
        self.assertNotIn("Too long", log)
        for i in (0, n // 2, n - 1):
            with open(agent_view(SB.path("%s/f%05d" % (BIG_DIR.lstrip("/"), i)))) as f:
                self.assertEqual(f.read(), "x")

        # The plan on the Node: a summary within its share, with the counts.
        node = SB.wait_node(lambda nd: S.annotation(nd, S.PLAN), 10, "the plan")
        plans.append(S.annotation(node, S.PLAN))
        summary = [p for p in json.loads(plans[-1]) if p.get("action") == "applyOSC"][0]["changes"]
        self.assertEqual(summary["counts"]["write-file"], OSC_FILES_MAX - 1)     # the kubelet's is pulled
        self.assertEqual(summary["remaining"], summary["more"] + len(summary["items"]))
        self.assertGreater(len(summary["items"]), 10)
        self.assertLessEqual(max(len(p) for p in plans), 24 * 1024)
        ours = sum(len(k) + len(v) for k, v in node["metadata"]["annotations"].items()
                   if k.startswith("inplace-agent/") or k in (S.NODE_CHECKSUM, S.FAILED_REASON, S.UPDATING_OS))
        everything = sum(len(k) + len(v) for k, v in node["metadata"]["annotations"].items())
        self.assertLessEqual(ours, AGENT_SHARE)
        self.assertLess(everything, ANNOTATIONS_MAX)

        # The whole plan: in the state directory and in the journal.
        with open(state("last-computed-osc-plan.json")) as f:
            whole = json.load(f)
        self.assertEqual(len(whole["items"]), whole["remaining"])
        self.assertIn("%s/f%05d" % (BIG_DIR, n - 1), [i.get("target") for i in whole["items"]])
        journal = sum(line.split(": ", 2)[-1].count("; ") + 1 for line in log.splitlines()
                      if "OSC %s plan, items" % checksum in line)
        self.assertEqual(journal, whole["remaining"])
        self.assertFalse(os.path.exists(state("last-computed-osc-changes.json")))
        self.assertFalse(os.path.exists(state("last-computed-osc-changes.done")))
        print("10,000-file OSC: %d items applied in %.1fs (publish to checksum); plan annotation %d bytes, "
              "the agent's annotations %d bytes, all %d" % (whole["remaining"], took, len(plans[-1]), ours,
                                                            everything), file=sys.stderr)

    def test_2_corrupt_work_list_moved_aside(self):
        SB.stop_agent()
        checksum = SB.publish_osc(extra_files=inline_file("/etc/ipa-bk/two", "2"))
        with open(state("last-computed-osc-changes.json"), "w") as f:
            f.write('{"checksum":"%s","items":[{"kind":"write-fi' % checksum)     # cut short
        SB.start_agent()
        self.wait_checksum(checksum)
        with open(SB.path("etc/ipa-bk/two")) as f:
            self.assertEqual(f.read(), "2")
        self.assertTrue(os.path.exists(state("last-computed-osc-changes.json.corrupt")))
        ev = usermgr.wait_until(lambda: warnings("CorruptStateFile"), 10, "the Warning Event")
        self.assertIn("last-computed-osc-changes.json", ev[-1].get("message", ""))
        self.assertIn("moved it and last-computed-osc-changes.done aside", SB.agent_log())

    def ensure_last_applied(self):
        """(When run alone) an OSC applied by this agent, so that there is a last-applied one."""
        if not os.path.exists(state("last-applied-osc.yaml")):
            self.wait_checksum(SB.publish_osc(extra_files=inline_file("/etc/ipa-bk/base", "b")))

    def test_3_corrupt_last_applied_moved_aside(self):
        self.ensure_last_applied()
        SB.stop_agent()
        with open(state("last-applied-osc.yaml")) as f:
            text = f.read()
        with open(state("last-applied-osc.yaml"), "w") as f:
            f.write(text[:len(text) // 3] + "\n  - [")                         # cut short
        checksum = SB.publish_osc(extra_files=inline_file("/etc/ipa-bk/three", "3"))
        SB.start_agent()
        self.wait_checksum(checksum)
        with open(SB.path("etc/ipa-bk/three")) as f:
            self.assertEqual(f.read(), "3")
        with open(state("last-applied-osc.yaml")) as f:
            self.assertEqual(f.read(), SB.osc["yaml"])
        self.assertTrue(os.path.exists(state("last-applied-osc.yaml.corrupt")))
        ev = usermgr.wait_until(lambda: [e for e in warnings("CorruptStateFile")
                                         if "last-applied-osc.yaml" in e.get("message", "")], 10,
                                "the Warning Event")
        self.assertIn("unable to decode the old OSC", ev[-1]["message"])

    def test_4_partial_resume(self):
        """Issue 22 item 8, upstream's "should reconcile only parts of the configuration that were not
        applied yet": three units whose filePaths change, A failing to start, B restarted because its
        file changed, C slow; the agent is SIGKILLed while C's restart runs (after B's is recorded).
        Afterwards B was restarted exactly once across the kill, and the resumed work is A (the failed
        one) and C (the one in flight), nothing else: no file written again, no other unit touched."""
        self.ensure_last_applied()
        d = SB.path("pr")
        os.makedirs(d, exist_ok=True)
        marker = os.path.join(d, "a-may-start")

        def unit(name, script, conf):
            return ("  - name: ipa-pr-%s.service\n    enable: true\n    filePaths:\n    - %s\n    content: |\n"
                    "      [Service]\n      Type=oneshot\n      RemainAfterExit=yes\n      ExecStart=/bin/sh -c '%s'\n"
                    % (name, conf, script))

        def osc(version):
            confs = {n: "/etc/ipa-pr/%s.conf" % n for n in "abc"}
            units = (unit("a", "echo x >> %s/a.starts; test -e %s" % (d, marker), confs["a"]) +
                     unit("b", "echo x >> %s/b.starts" % d, confs["b"]) +
                     unit("c", "echo x >> %s/c.starts; sleep 4" % d, confs["c"]))
            files = "".join(inline_file(p, "%s %s" % (n, version)) for n, p in sorted(confs.items()))
            text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"), extra_files=files)
            return text.replace("  units:\n", "  units:\n" + units, 1)

        def starts(name):
            try:
                with open(os.path.join(d, "%s.starts" % name)) as f:
                    return len(f.read().split())
            except FileNotFoundError:
                return 0

        with open(marker, "w"):
            pass
        self.wait_checksum(SB.publish_text(osc(1)))
        self.assertEqual([starts(n) for n in "abc"], [1, 1, 1])
        log_before = len(SB.agent_log())
        os.unlink(marker)
        checksum = SB.publish_text(osc(2))
        usermgr.wait_until(lambda: starts("c") == 2, 60, "C's restart running (A failed, B restarted)")
        self.assertEqual(starts("a"), 2)
        self.assertEqual(SB.um.active_state("ipa-pr-a.service"), "failed")
        self.assertEqual(starts("b"), 2)
        pid = SB.um.main_pid(S.AGENT_UNIT)
        with open(marker, "w"):                         # A may start now: its retry will succeed
            pass
        os.kill(pid, 9)                                 # while C's restart job is in flight

        self.wait_checksum(checksum, 60)
        log = SB.agent_log()[log_before:]
        self.assertIn("OSC %s: 2 change(s) to apply (resuming the saved remaining work)" % checksum, log)
        self.assertIn("OSC %s plan, items 1-2 of 2: restart unit ipa-pr-a.service; restart unit "
                      "ipa-pr-c.service" % checksum, log)
        self.assertEqual(starts("b"), 2, "B was restarted again after the kill")
        self.assertEqual(starts("a"), 3, "A: once failed before the kill, once after")
        self.assertEqual(starts("c"), 3, "C: in flight at the kill, so once more")
        self.assertEqual([SB.um.active_state("ipa-pr-%s.service" % n) for n in "abc"], ["active"] * 3)

    def test_5_unreadable_work_list_named(self):
        """A transaction resumed after a restart whose work list cannot be read fails naming the file,
        not as "the OSC changed while it was being applied" (which it did not)."""
        self.ensure_last_applied()
        os.makedirs(SB.path("pr"), exist_ok=True)
        started = SB.path("pr", "slow.started")
        unit = ("  - name: ipa-slow.service\n    filePaths:\n    - /etc/ipa-bk/slow.conf\n    content: |\n"
                "      [Service]\n      Type=oneshot\n      RemainAfterExit=yes\n"
                "      ExecStart=/bin/sh -c 'touch %s; sleep 5'\n" % started)
        text = SB.osc_yaml("1.31.4", SB.osc["os_version"], SB.image_ref("1.31.4"),
                           extra_files=inline_file("/etc/ipa-bk/slow.conf", "s"))
        checksum = SB.publish_text(text.replace("  units:\n", "  units:\n" + unit, 1))
        usermgr.wait_until(lambda: os.path.exists(started), 60, "the slow unit's restart running")
        SB.stop_agent()
        os.unlink(state("last-computed-osc-changes.json"))
        os.mkdir(state("last-computed-osc-changes.json"))
        try:
            SB.start_agent()
            node = SB.wait_node(lambda n: "last-computed-osc-changes.json" in
                                (S.annotation_json(n, S.FAILURE) or {}).get("message", ""), 30, "the failure")
            failure = S.annotation_json(node, S.FAILURE)
            self.assertEqual(failure["code"], "FileApplyFailed")
            self.assertIn("Is a directory", failure["message"])
            self.assertNotEqual(S.annotation(node, S.NODE_CHECKSUM), checksum)
        finally:
            os.rmdir(state("last-computed-osc-changes.json"))

    def test_9_full_state_directory_retried(self):
        self.ensure_last_applied()
        SB.stop_agent()
        st = SB.state_dir
        # The state directory becomes a 2 MiB tmpfs holding what it held, then filled but for 40 KiB:
        # enough for state.json, not for the new work list.
        ns("sh", "-c", 'set -e; cp -a "$1" "$1.save"; mount -t tmpfs -o size=2m,mode=0700 tmpfs "$1"; '
                       'cp -a "$1.save/." "$1"; rm -rf "$1.save"; '
                       'dd if=/dev/zero of="$1/filler" bs=4k count=$(( $(df -k --output=avail "$1" | tail -1) / 4 - 10 )) '
                       '2>/dev/null', "sh", st)
        files = "".join(inline_file("/etc/ipa-bk/full-%03d" % i, "f") for i in range(1000))
        checksum = SB.publish_osc(extra_files=files)
        SB.start_agent()
        usermgr.wait_until(lambda: "No space left on device" in SB.agent_log(), 30, "the agent running out of space")
        self.assertNotEqual(S.annotation(SB.node(), S.NODE_CHECKSUM), checksum)

        os.unlink(agent_view(st + "/filler"))           # space again; nothing else changes
        self.wait_checksum(checksum, 30)
        with open(SB.path("etc/ipa-bk/full-999")) as f:
            self.assertEqual(f.read(), "f")
        ev = usermgr.wait_until(lambda: warnings("OSCChangesNotComputed"), 10, "the Warning Event")
        self.assertIn("No space left on device", ev[-1].get("message", ""))
        self.assertIn("retrying with back-off", SB.agent_log())


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites())
