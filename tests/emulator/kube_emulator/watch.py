"""Watches: which events a watcher gets, and how a watch stream is served.

Owns: Watcher (one watch's kind, namespace and selectors; turns store events into what this watch sees: an
object that starts or stops matching a field selector arrives as ADDED or DELETED; its queue), and the
WatchStream mixin of the API handler: the chunked stream, the start from an RV (replay, synthetic ADDED,
410 / 504 in the stream), BOOKMARKs about every ``bookmark_interval`` and once ``bookmark_before_deadline``
before the deadline, ``timeoutSeconds`` or a random 30-60 min, events committed together delivered in one
chunk (``coalesce``), chunk splitting (``split_bytes``), the end reasons of the watch log.
Watch faults (watch-drop, ...) hook in through faults.py's FaultInjection.

Watch log entry (GET /watches): seq, request_seq, path, query, user, start, end, end_reason (deadline,
client-closed, closed-by-emulator, error-410, fault-drop, ...), timeout, bookmarks, fault, events [[type, rv,
time], ...].
Implements docs/kube-api.md §3.4-§3.5 and §9 items 12-20.
"""

import collections
import threading

from .selectors import label_match
from .util import deep


class WatchEnd(Exception):
    def __init__(self, reason, clean=True):
        super().__init__(reason)
        self.reason, self.clean = reason, clean


class Watcher:
    _ids = iter(range(1, 1 << 62))

    def __init__(self, kind, namespace, freqs, lreqs):
        self.id = next(Watcher._ids)
        self.kind, self.ns, self.freqs, self.lreqs = kind, namespace, freqs, lreqs
        self.q = collections.deque()
        self.cv = threading.Condition()
        self.stop_mode = None        # None | "clean" | "abrupt"

    def match(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata") or {}
        if self.ns and md.get("namespace") != self.ns:
            return False
        for key, op, val in self.freqs:
            if (self.kind.fields[key](obj) == val) != (op == "="):
                return False
        return label_match(md.get("labels"), self.lreqs)

    def transform(self, ev):
        if ev.storage != self.kind.storage:
            return None
        if ev.type == "ADDED":
            return ("ADDED", ev.obj) if self.match(ev.obj) else None
        if ev.type == "DELETED":
            return ("DELETED", ev.obj) if self.match(ev.prev) else None
        old, new = self.match(ev.prev), self.match(ev.obj)
        if old and new:
            return ("MODIFIED", ev.obj)
        if new:
            return ("ADDED", ev.obj)
        if old:
            gone = deep(ev.prev)
            gone["metadata"]["resourceVersion"] = str(ev.rv)
            return ("DELETED", gone)
        return None

    def offer(self, ev):
        t = self.transform(ev)
        if t:
            with self.cv:
                self.q.append(t)
                self.cv.notify_all()

    def stop(self, mode):
        with self.cv:
            self.stop_mode = mode
            self.cv.notify_all()
