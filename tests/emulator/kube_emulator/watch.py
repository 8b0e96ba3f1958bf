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
import random
import ssl
import threading
import time

from .discovery import make_table
from .errors import err_bad_request, err_too_large_rv
from .selectors import label_match, selectors_for
from .util import deep, is_true, jbytes
from .validation import parse_rv, validate_list_options


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


class WatchStream:
    """The watch verb of ApiHandler (mixed into it): the chunked event stream of one watch request. Uses the
    handler's request state (emu, cfg, params, entry, ident, conn_state, wfault) and output (_head,
    _std_headers, _raw, _abort, _client_gone, _wants_table); keeps wlog, wkind and sent for the watch faults
    (faults.py's FaultInjection: _deliver, _immediate_watch_fault)."""

    def _bookmark(self, kind, rv, annotations=None):
        md = {"resourceVersion": str(rv), "creationTimestamp": None}
        if annotations:
            md["annotations"] = annotations
        o = {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": md}
        if kind.kind == "Node":
            o["spec"] = {}
            o["status"] = {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}}, "nodeInfo": {
                f: "" for f in ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion", "operatingSystem",
                                "architecture")}}
        return o

    def _event_bytes(self, kind, item):
        typ, obj = item[0], item[1]
        if typ in ("ADDED", "MODIFIED", "DELETED"):
            ext = kind.to_ext(deep(obj))
            if self._wants_table():
                ext = make_table(kind, [ext], obj["metadata"].get("resourceVersion", ""),
                                 self.params.get("includeObject", "Metadata"))
            obj = ext
        return jbytes({"type": typ, "object": obj})

    def _chunk(self, data):
        n = self.cfg["split_bytes"]
        pieces = [data] if n <= 0 else [data[i:i + n] for i in range(0, len(data), n)]
        for i, p in enumerate(pieces):
            if i and self.cfg["split_delay"] > 0:
                time.sleep(self.cfg["split_delay"])
            self._raw(b"%x\r\n" % len(p) + p + b"\r\n")

    def _watch(self, kind, ns):
        emu, cfg, store, params = self.emu, self.cfg, self.emu.store, self.params
        validate_list_options(params, True)
        freqs, lreqs = selectors_for(kind, params)
        rvp = params.get("resourceVersion", "")
        allow_bm = is_true(params.get("allowWatchBookmarks")) if "allowWatchBookmarks" in params else False
        sie = is_true(params["sendInitialEvents"]) if "sendInitialEvents" in params else None
        try:
            ts = int(params.get("timeoutSeconds") or 0)
        except ValueError:
            raise err_bad_request("invalid timeoutSeconds") from None
        dur = ts if ts > 0 else random.uniform(cfg["watch_timeout_min"], 2 * cfg["watch_timeout_min"])
        w = Watcher(kind, ns, freqs, lreqs)
        if rvp in ("", "0"):
            n, initial = None, sie is not False
        else:
            n, initial = parse_rv(rvp), sie is True
        err = None
        if n is not None and n > store.rv and not store.wait_for_rv(n, cfg["too_large_wait"]):
            err = err_too_large_rv(n, store.rv)
        with store.lock:
            if err is None:
                err = store.subscribe(w, n if n is not None else store.rv, initial)
            if err is None and sie is True and allow_bm:
                w.q.append(("BOOKMARK", self._bookmark(kind, store.rv, {"k8s.io/initial-events-end": "true"})))
        start = time.monotonic()
        deadline = start + dur
        self.entry["watch"] = True
        wlog = emu.watchlog.new(request_seq=self.entry["seq"], path=self.req_path, query=self.entry["query"],
                                user=self.ident.user, start=time.time(), end=None, end_reason=None,
                                timeout=dur, bookmarks=allow_bm, fault=self.wfault.fault if self.wfault else None,
                                events=[])
        self.conn_state.watcher = w
        if self.conn_state.stop_watch:          # the connection was closed while this request was read
            w.stop(self.conn_state.stop_watch)
        self.wlog, self.wkind, self.sent = wlog, kind, 0
        reason = "deadline"
        try:
            self._head(200, self._std_headers("application/json") + [("Transfer-Encoding", "chunked")])
            if err is not None:
                self._emit([("ERROR", err.status())])
                raise WatchEnd("error-%d" % err.code)
            self._immediate_watch_fault(w, deadline)
            next_bm = start + cfg["bookmark_interval"]
            pre_bm = deadline - cfg["bookmark_before_deadline"]
            pre_done = pre_bm <= start
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                due = None
                if allow_bm:
                    due = next_bm if pre_done else min(next_bm, pre_bm)
                wait = min(0.25, deadline - now, max(0.0, due - now) if due is not None else 1e9)
                with w.cv:
                    if not w.q and w.stop_mode is None and wait > 0:
                        w.cv.wait(wait)
                    have = bool(w.q)
                    stop = w.stop_mode
                items = []
                if have:
                    if cfg["coalesce_window"] > 0:
                        time.sleep(cfg["coalesce_window"])
                    # Drain under the store lock: events committed together (one batch) arrive together.
                    # Only then: a fleet's idle watches wake every 0.25 s, and taking the one store lock
                    # on each wake-up made them contend with every request.
                    with store.lock, w.cv:
                        if w.q:
                            items = list(w.q) if cfg["coalesce"] else [w.q[0]]
                        for _ in items:
                            w.q.popleft()
                        stop = w.stop_mode
                if stop:
                    if stop == "abrupt":
                        self._abort(False)
                        raise WatchEnd("closed-by-emulator", clean=False)
                    raise WatchEnd("closed-by-emulator")
                if items:
                    self._deliver(items)
                elif due is not None and time.monotonic() >= due:
                    with store.lock:
                        bm = None if w.q else self._bookmark(kind, store.rv)
                    if bm is not None:
                        self._emit([("BOOKMARK", bm)])
                        if not pre_done and pre_bm <= next_bm:
                            pre_done = True
                        else:
                            next_bm = time.monotonic() + cfg["bookmark_interval"]
                elif self._client_gone():
                    raise WatchEnd("client-closed", clean=False)
            self._raw(b"0\r\n\r\n")
        except WatchEnd as e:
            reason = e.reason
            if e.clean:
                try:
                    self._raw(b"0\r\n\r\n")
                except OSError:
                    self.close_connection = True
        except (OSError, ssl.SSLError):
            reason = "client-closed"
            self.close_connection = True
        finally:
            store.unsubscribe(w)
            self.conn_state.watcher = None
            wlog["end"], wlog["end_reason"] = time.time(), reason

    def _emit(self, items):
        data = b""
        for it in items:
            data += self._event_bytes(self.wkind, it)
            obj = it[1]
            rv = (obj.get("metadata") or {}).get("resourceVersion") if isinstance(obj, dict) else None
            self.wlog["events"].append([it[0], rv, time.time()])
        if data:
            self._chunk(data)
        self.sent += sum(1 for it in items if it[0] in ("ADDED", "MODIFIED", "DELETED"))
