#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16, power-loss ordering: the real agent (lib/sandbox.py) runs under
`strace -f -y -e trace=openat,write,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,close` while it
applies two OSCs (files, one of them removed by the second; the kubelet drop-in; a unit with its own unit
file). For every persisted or installed file checked -- state.json, last-applied-osc.yaml,
last-computed-osc-changes.json, an OSC file, the drop-in, the unit file -- every replacement must be:
open a temporary file in the same directory, write it, fsync it after the last write, rename it over the
target, then fsync the directory; the target itself is never opened for writing. A removed OSC file's
unlink is followed by an fsync of its directory (otherwise a power loss can bring it back)."""

import os
import re
import shutil
import sys
import unittest

from lib import itest
import sandbox
import usermgr

S = sandbox
SB = None
STRACE = shutil.which("strace")
TRACE = "openat,write,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,close"
ORDER_UNIT = "ipa-order.service"
FILE_KEPT = "/etc/ipa-order/kept.conf"
FILE_GONE = "/etc/ipa-order/gone.conf"


class StraceSandbox(S.Sandbox):
    """The agent unit's ExecStart under strace (NotifyAccess=all: READY=1 comes from strace's child)."""

    @property
    def strace_log(self):
        return self.path("strace.log")

    def agent_unit_text(self):
        text = super().agent_unit_text()
        wrapped = "ExecStart=%s -A -f -qq -y -s 0 -e trace=%s -o %s %s " % (STRACE, TRACE, self.strace_log, self.agent)
        assert "ExecStart=%s " % self.agent in text
        return text.replace("ExecStart=%s " % self.agent, wrapped, 1).replace("[Service]\n",
                                                                              "[Service]\nNotifyAccess=all\n", 1)


setUpModule, tearDownModule = itest.sandbox_fixture(globals(), StraceSandbox, versions=("1.31.4", "1.31.5"),
                                                    broken_versions=(), kubelet_size=256 << 10)


LINE = re.compile(r"^(\d+) +(\w+)\((.*)\)\s+= (-?\d+)(?:<(.*)>)?")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
FD_PATH = re.compile(r"^-?\w+<([^>]*)>")


class Ev:
    def __init__(self, name, path=None, dst=None, flags=""):
        self.name, self.path, self.dst, self.flags = name, path, dst, flags

    def __repr__(self):
        return "%s(%s%s)" % (self.name, self.path, " -> %s" % self.dst if self.dst else "")


UNFINISHED = re.compile(r"^(\d+) +(.*) <unfinished \.\.\.>$")
RESUMED = re.compile(r"^(\d+) +<\.\.\. \w+ resumed>(.*)$")


def stitched(text):
    """strace -f splits a call that another thread interrupts into "<unfinished ...>" and "<... resumed>"
    lines (the extraction runs on a worker thread): joined again, at the place the call returned."""
    pending = {}
    for line in text.splitlines():
        m = UNFINISHED.match(line)
        if m:
            pending[m.group(1)] = m.group(2)
            continue
        m = RESUMED.match(line)
        if m and m.group(1) in pending:
            yield "%s %s%s" % (m.group(1), pending.pop(m.group(1)), m.group(2))
            continue
        yield line


def parse(text):
    """Successful calls, in order, with the path each one acts on (strace -y resolves descriptors)."""
    out = []
    for line in stitched(text):
        m = LINE.match(line)
        if not m or int(m.group(4)) < 0:
            continue
        name, args, ret_path = m.group(2), m.group(3), m.group(5)
        strings = QUOTED.findall(args)
        fd = FD_PATH.match(args)
        if name == "openat":
            out.append(Ev(name, ret_path, flags=args))
        elif name in ("write", "fsync", "fdatasync", "close") and fd:
            out.append(Ev(name, fd.group(1)))
        elif name.startswith("rename") and len(strings) >= 2:
            dirs = re.findall(r"(?:^|, )-?\w+<([^>]*)>, \"", args)
            src, dst = strings[0], strings[1]
            if name != "rename" and len(dirs) == 2:
                src, dst = os.path.join(dirs[0], src), os.path.join(dirs[1], dst)
            out.append(Ev("rename", src, dst))
        elif name.startswith("unlink") and strings:
            p = strings[0]
            if name == "unlinkat" and fd:
                p = os.path.join(fd.group(1), p)
            out.append(Ev("unlink", p))
    return out


def writable_open(e):
    return e.name == "openat" and re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", e.flags)


class PowerLossOrder(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        unit = ("  - name: %s\n    content: |\n      [Unit]\n      Description=ipa order %%s\n"
                "      [Service]\n      ExecStart=/bin/sleep 3600\n" % ORDER_UNIT)

        def publish(round_no, kubelet, files):
            extra = "".join("  - path: %s\n    permissions: 420\n    content:\n      inline:\n        data: "
                            "\"%s round %d\\n\"\n" % (p, p, round_no) for p in files)
            text = SB.osc_yaml(kubelet, S.DEFAULT_OS_VERSION, SB.images[(kubelet, False)]["ref"],
                               dropin="[Service]\nEnvironment=IPA_ORDER=%d" % round_no, extra_files=extra)
            text = text.replace("  units:\n", "  units:\n" + unit % round_no, 1)
            checksum = S.sha256_hex(text.encode())
            SB.emu.seed_secret(S.SECRET, namespace=S.OSC_NAMESPACE, data={"osc.yaml": text},
                               labels={"gardener.cloud/role": "operating-system-config",
                                       "worker.gardener.cloud/pool": S.POOL},
                               annotations={S.SECRET_CHECKSUM: checksum})
            SB.wait_node(lambda n: S.annotation(n, S.NODE_CHECKSUM) == checksum, 60, "OSC %d applied" % round_no)

        usermgr.wait_until(lambda: SB.kubelet_target(), 30, "the adoption of the provisioned kubelet")
        publish(1, "1.31.4", (FILE_KEPT, FILE_GONE))
        publish(2, "1.31.5", (FILE_KEPT,))      # an ungated kubelet patch update: the kubelet store
        SB.stop_agent()         # strace flushes its log when the agent exits
        with open(SB.strace_log) as f:
            cls.events = parse(f.read())

    def assert_atomic_replacements(self, target, at_least=1, same_dir=True, written=True):
        ev = self.events
        renames = [i for i, e in enumerate(ev) if e.name == "rename" and e.dst == target]
        self.assertGreaterEqual(len(renames), at_least, "%s: %d rename(s) onto it" % (target, len(renames)))
        for i in renames:
            tmp = ev[i].path
            if same_dir:
                self.assertEqual(os.path.dirname(tmp), os.path.dirname(target), "%s: temp file elsewhere" % target)
            if not written:     # a symlink: symlink(2) is not traced, the rename and the directory are
                self.assert_dir_synced(target, i, len(ev))
                continue
            opens = [j for j in range(i) if ev[j].path == tmp and writable_open(ev[j])]
            self.assertTrue(opens, "%s: rename of %s that was never opened" % (target, tmp))
            j = opens[-1]
            writes = [k for k in range(j, i) if ev[k].name == "write" and ev[k].path == tmp]
            syncs = [k for k in range(j, i) if ev[k].name in ("fsync", "fdatasync") and ev[k].path == tmp]
            self.assertTrue(syncs, "%s: %s renamed without fsync: %s" % (target, tmp, ev[j:i + 1]))
            if writes:
                self.assertGreater(syncs[-1], writes[-1], "%s: written after its fsync" % tmp)
            later = [k for k in range(i + 1, len(ev)) if ev[k].path == tmp and writable_open(ev[k])]
            self.assert_dir_synced(target, i, later[0] if later else len(ev))
        in_place = [e for e in ev if e.path == target and (writable_open(e) or e.name == "write")]
        self.assertEqual(in_place, [], "%s written in place" % target)
        return len(renames)

    def assert_dir_synced(self, target, i, end):
        ev = self.events
        dsync = [k for k in range(i + 1, end) if ev[k].name in ("fsync", "fdatasync") and
                 ev[k].path == os.path.dirname(target)]
        self.assertTrue(dsync, "%s: directory not fsynced after the rename: %s" % (target, ev[i:i + 8]))

    def test_kubelet_store(self):
        self.assertEqual(SB.kubelet_version(), "Kubernetes v1.31.5")
        self.assert_atomic_replacements(os.path.join(SB.state_dir, "kubelet", "1.31.5", "kubelet"), same_dir=False)
        self.assert_atomic_replacements(SB.binary_path, written=False)

    def test_state_files(self):
        for name in ("state.json", "last-applied-osc.yaml", "last-computed-osc-changes.json"):
            n = self.assert_atomic_replacements(os.path.join(SB.state_dir, name))
            print("%s: %d atomic replacement(s)" % (name, n), file=sys.stderr)

    def test_osc_file(self):
        self.assert_atomic_replacements(SB.path(FILE_KEPT.lstrip("/")), 2)

    def test_dropin_and_unit_file(self):
        self.assert_atomic_replacements(os.path.join(SB.um.unit_dir, S.KUBELET_UNIT + ".d", "50-sandbox.conf"), 2)
        self.assert_atomic_replacements(os.path.join(SB.um.unit_dir, ORDER_UNIT), 2)

    def test_removed_file_unlink_is_durable(self):
        gone = SB.path(FILE_GONE.lstrip("/"))
        ev = self.events
        unlinks = [i for i, e in enumerate(ev) if e.name == "unlink" and e.path == gone]
        self.assertEqual(len(unlinks), 1, "unlinks of %s: %d" % (gone, len(unlinks)))
        self.assertFalse(os.path.exists(gone))
        dsync = [k for k in range(unlinks[0] + 1, len(ev)) if ev[k].name in ("fsync", "fdatasync") and
                 ev[k].path == os.path.dirname(gone)]
        self.assertTrue(dsync, "%s: directory not fsynced after the unlink: %s" % (gone, ev[unlinks[0]:unlinks[0] + 8]))


if __name__ == "__main__":
    itest.main(missing=sandbox.missing_prerequisites() + itest.programs("strace"))
