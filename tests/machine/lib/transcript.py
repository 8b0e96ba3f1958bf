# SPDX-License-Identifier: Apache-2.0
"""The machine tier's transcript, printed like the demo's: every line timestamped and prefixed, the
commands run inside the booted machine shown with their real output.

    t = transcript.Transcript()
    t.step("fresh node")
    t.say("booting")
    t.command(m, "systemctl", "status", "inplace-agent")     # runs it in the machine and prints it
    t.ok("checksum on the Node")
"""

import sys
import time


class Transcript:
    def __init__(self, out=None, t0=None):
        self.out = out or sys.stdout
        self.t0 = t0 or time.monotonic()
        self.marks = {}

    def line(self, prefix, text):
        stamp = "[%6.1fs]" % (time.monotonic() - self.t0)
        for ln in (text.rstrip("\n").splitlines() or [""]):
            self.out.write("%s %s│ %s\n" % (stamp, prefix.ljust(8), ln))
        self.out.flush()

    def step(self, title):
        self.out.write("\n")
        self.line("machine", "══ " + title)

    def say(self, text):
        self.line("machine", text)

    def ok(self, text):
        self.line("machine", "✔ " + text)

    def bad(self, text):
        self.line("machine", "✘ " + text)

    def block(self, title, text):
        self.line("machine", "$ " + title)
        self.line("", text)

    def command(self, m, *argv, check=False, title=None, timeout=60):
        """Runs argv inside machine m and prints `$ argv` with its output; returns the output."""
        r = m.run(*argv, check=check, timeout=timeout)
        self.block(title or " ".join(argv), (r.stdout + r.stderr).rstrip("\n") or "(no output)")
        return r.stdout

    def mark(self, name):
        self.marks[name] = round(time.monotonic() - self.t0, 1)
        return self.marks[name]
