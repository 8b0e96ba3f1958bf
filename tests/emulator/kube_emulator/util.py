"""JSON, time and logging helpers every other module of the emulator uses.

Owns: JSON encoded as Go's encoding/json does it (compact, HTML characters escaped, "\n" after every
object), Kubernetes time formats (metav1.Time, MicroTime with exactly 6 fractional digits) and kubectl's
short ages, semantic JSON equality, Go's string quoting in messages, query-flag parsing, atomic file writes,
the sequence-numbered logs (requests, watches, TLS handshakes) the control API reads, and QuietHandler, the
base of both servers' request handlers.
Implements the JSON facts of docs/kube-api.md §1 (and §9 items 13, 42: the encoding and MicroTime).
"""

import collections
import copy
import datetime
import http.server
import json
import os
import re
import tempfile
import threading


UTC = datetime.timezone.utc


def jdump(obj):
    """Compact JSON like Go's json.Encoder (HTML characters escaped, UTF-8 kept)."""
    s = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    # These characters can only occur inside JSON strings, so a global replace is safe.
    return (s.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def jbytes(obj):
    return (jdump(obj) + "\n").encode()


def deep(obj):
    return copy.deepcopy(obj)


def utcnow():
    return datetime.datetime.now(UTC)


def fmt_time(dt):
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_micro(dt):
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_time():
    return fmt_time(utcnow())


def now_micro():
    return fmt_micro(utcnow())


_TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def parse_time(s, micro=False):
    """Parse like Go: metav1.Time uses RFC3339 (any fraction), MicroTime needs exactly 6 digits."""
    if not isinstance(s, str):
        raise ValueError("expected a string")
    m = _TIME_RE.match(s)
    if not m:
        raise ValueError('parsing time "%s" as "%s": cannot parse' %
                         (s, "2006-01-02T15:04:05.000000Z07:00" if micro else "2006-01-02T15:04:05Z07:00"))
    frac = m.group(7) or ""
    if micro and len(frac) != 7:
        raise ValueError('parsing time "%s" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "%s" as ".000000"'
                         % (s, s[19:]))
    usec = int((frac[1:] + "000000")[:6]) if frac else 0
    tz = m.group(8)
    if tz in ("Z", "z"):
        tzinfo = UTC
    else:
        sign = 1 if tz[0] == "+" else -1
        tzinfo = datetime.timezone(sign * datetime.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6])))
    return datetime.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                             int(m.group(5)), int(m.group(6)), usec, tzinfo)


def human_age(ts):
    """kubectl-style short duration (5s, 3m, 2d3h ...)."""
    try:
        d = (utcnow() - parse_time(ts)).total_seconds()
    except (ValueError, TypeError):
        return "<unknown>"
    return human_age_secs(d)


def human_age_secs(d):
    """kubectl's duration.HumanDuration of a number of seconds (also the CSR RequestedDuration column)."""
    d = max(0, int(d))
    if d < 120:
        return "%ds" % d
    m = d // 60
    if m < 10:
        s = d % 60
        return "%dm%ds" % (m, s) if s else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = d // 3600
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    days = h // 24
    if h < 24 * 8:
        return "%dd%dh" % (days, h % 24) if h % 24 else "%dd" % days
    if days < 365 * 2:
        return "%dd" % days
    return "%dy" % (days // 365)


def json_equal(a, b):
    """Semantic JSON equality (bool is not a number, 1 == 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def go_quote(s):
    return json.dumps(s, ensure_ascii=False)


def is_true(v):
    return v is not None and v.lower() not in ("0", "false")


def write_atomic(path, text, mode=0o644):
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class Log:
    """Append-only log with sequence numbers (request log, watch log, TLS log)."""

    def __init__(self, limit=200000):
        self.lock = threading.Lock()
        self.entries = collections.deque()
        self.seq = 0
        self.limit = limit

    def new(self, **kw):
        with self.lock:
            self.seq += 1
            e = dict(seq=self.seq, **kw)
            self.entries.append(e)
            while len(self.entries) > self.limit:
                self.entries.popleft()
            return e

    def since(self, seq=0):
        with self.lock:
            return [copy.deepcopy(e) for e in self.entries if e["seq"] > seq]

    def clear(self):
        with self.lock:
            self.entries.clear()


class QuietHandler(http.server.BaseHTTPRequestHandler):
    """The base of the API and control handlers: HTTP/1.1 (keep-alive), no access log on stderr, every method
    handled by the subclass's _serve()."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET
