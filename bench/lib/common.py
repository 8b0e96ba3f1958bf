# SPDX-License-Identifier: Apache-2.0
"""Shared by the benchmarks under bench/: result rows, timing of child processes (wall time and
peak RSS from wait4), /proc readers and quantiles. Python 3 stdlib only."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "tests", "integration", "lib"))


class Skip(Exception):
    """A benchmark (or one baseline) cannot run here; the message says why."""


def row(group, name, value, unit, baseline=None, baseline_name=None, target=None, note=None):
    """One figure. ratio = value / baseline when both are numbers. `target` is (op, number) on the
    value, or (op, number, "x") on the ratio, op one of <= < >= ==: printed next to the figure and
    recorded as met or not, never enforced."""
    ratio = None
    if isinstance(value, (int, float)) and isinstance(baseline, (int, float)) and baseline:
        ratio = value / baseline
    met, text = None, None
    if target:
        op, num = target[0], target[1]
        on_ratio = len(target) > 2
        v = ratio if on_ratio else value
        text = "%s %s%s" % (op, fmt_num(num), "x" if on_ratio else (" " + unit if unit else ""))
        if isinstance(v, (int, float)):
            met = {"<=": v <= num, "<": v < num, ">=": v >= num, "==": v == num}[op]
    return {"group": group, "name": name, "value": value, "unit": unit, "baseline": baseline,
            "baseline_name": baseline_name, "ratio": ratio, "target": text, "met": met, "note": note}


def skipped(group, name, reason):
    return {"group": group, "name": name, "value": None, "unit": "", "baseline": None, "baseline_name": None,
            "ratio": None, "target": None, "met": None, "note": "skipped: " + reason}


def fmt_num(v):
    if v is None:
        return "-"
    if isinstance(v, int):
        return str(v)
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.3g" % v


def run_timed(argv, **kw):
    """Runs argv to completion; returns (seconds, peak RSS in MiB of the largest process of its tree,
    (returncode, stdout, stderr)). The RSS comes from GNU time's wait4: a child forked by this (large)
    Python process would inherit its high-water mark across exec, a grandchild forked by time does not."""
    fd, rss_file = tempfile.mkstemp(prefix="bench-rss-")
    os.close(fd)
    t = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-q", "-f", "%M", "-o", rss_file] + list(argv), capture_output=True, **kw)
    t = time.monotonic() - t
    with open(rss_file) as f:
        lines = f.read().split()
    os.unlink(rss_file)
    rss = int(lines[-1]) / 1024.0 if lines and lines[-1].isdigit() else None
    return t, rss, (p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))


def proc_status(pid):
    """/proc/<pid>/status as a dict; pid may also be "<pid>/task/<tid>"."""
    out = {}
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def status_kib(status, key):
    return int(status[key].split()[0])


def smaps_rollup_kib(pid):
    out = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[-1] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1])
    return out


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tck = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tck     # utime + stime


def shared_objects(pid):
    libs = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and ".so" in os.path.basename(parts[5]):
                libs.add(parts[5])
    return sorted(libs)


def quantiles(values):
    """(p50, p99) of a list of at least two numbers."""
    q = statistics.quantiles(sorted(values), n=100, method="inclusive")
    return q[49], q[98]

