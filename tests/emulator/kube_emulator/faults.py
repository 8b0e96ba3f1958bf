"""Fault injection: the faults of docs/kube-api.md §10 that tests switch on through ``POST /faults``.

Owns: FaultRule (what a rule matches, how often it fires), Faults (the rule table, taken once per request),
and the FaultInjection mixin of the API handler: how each request fault answers (or delays, drips, closes)
and how each watch fault breaks a stream. Other faults are control-API actions on the servers: /listen
(refuse, blackhole), /close-connections (GOAWAY-like), /tls, /tokens, /rv, /compact, /expire-events.
Adding a fault: its name in REQUEST_FAULTS or WATCH_FAULTS, its behaviour in FaultInjection, a line below.
Implements docs/kube-api.md §10 and §9 items 43-45.

Fault rules (POST /faults). Matching: verbs are Kubernetes verbs (get, list, watch, create, update, patch,
delete; non-resource requests use get/post/...); path is a regex searched in the URL path; resource,
subresource, name, namespace, user are exact. A rule fires on matching requests after skipping `after` of
them, `count` times (-1 = forever), for `duration` seconds if set. The request log records the fault name.
Request faults (any verb):
  too-many-requests {retry_after=7 (None: no header), json=false, message}  APF-style text/plain 429
                    (json=true: Status with details.retryAfterSeconds)
  service-unavailable {message, retry_after}    503 ServiceUnavailable Status
  internal-error {message, retry_after}         500 InternalError Status
  forbidden {reason, message}                   403 in the authorizer's format
  unauthorized                                  401
  conflict                                      409 Conflict (optimistic-lock message)
  expired {message}                             410 Expired Status as a plain HTTP answer (list, watch start)
  not-found                                     404
  timeout {delay=0, message}                    504 Timeout after delay
  shutdown {retry_after=5}                      429 text/plain + Retry-After + Connection: close
  status {code, reason, message, plain, body, headers:[[k,v]], retry_after}   anything else
  close {delay=0, rst=false}                    close the connection without answering (FIN or RST)
  slow-headers {delay=5}                        answer late; >= config request_timeout -> 504 Timeout
  slow-drip {bytes=16, interval=0.2}            body written in small pieces
  every request fault also accepts params retry_after (header) and close (Connection: close)
Watch faults (only watch requests):
  watch-drop {after_events=1, rst=false}        after N object events close without the terminating chunk
  watch-truncate {after_events=0, rst=false}    after N events send half an event line, then drop
  watch-garbage {after_events=0, line="this is not json", unknown_type=false, type="UNKNOWN",
                 then=keep|close|drop}          a non-JSON line (or an event of unknown type)
  watch-expired {message}                       200, ERROR 410 Expired event, clean end
  watch-error {code=500, reason, message}       200, ERROR event with that Status, clean end
  watch-silent {duration, then=clean|drop}      headers, then nothing at all (no events, no bookmarks)
  watch-short                                   200 and an immediate clean end (zero events)
  watch-end {after_events=0}                    clean end after N events
"""

import re
import threading
import time

from .auth import ANONYMOUS
from .authz import deny
from .errors import (ApiError, details, err_conflict, err_expired, err_internal, err_not_found, err_timeout,
                     err_unauthorized)
from .util import jbytes
from .watch import WatchEnd


REQUEST_FAULTS = {"status", "too-many-requests", "service-unavailable", "internal-error", "forbidden", "unauthorized",
                  "conflict", "expired", "not-found", "timeout", "shutdown", "close", "slow-headers", "slow-drip"}
WATCH_FAULTS = {"watch-drop", "watch-truncate", "watch-garbage", "watch-expired", "watch-error", "watch-silent",
                "watch-short", "watch-end"}
RULE_KEYS = {"fault", "verbs", "path", "resource", "subresource", "name", "namespace", "user", "count", "after",
             "duration", "params"}


class FaultRule:
    _ids = iter(range(1, 1 << 62))

    def __init__(self, spec):
        unknown = set(spec) - RULE_KEYS
        if unknown:
            raise ValueError("unknown fault rule keys: %s" % ", ".join(sorted(unknown)))
        self.fault = spec.get("fault")
        if self.fault not in REQUEST_FAULTS | WATCH_FAULTS:
            raise ValueError("unknown fault %r" % self.fault)
        self.id = next(FaultRule._ids)
        verbs = spec.get("verbs")
        if isinstance(verbs, str):
            verbs = [verbs]
        self.verbs = set(v.lower() for v in verbs) if verbs else None
        if self.fault in WATCH_FAULTS:
            self.verbs = {"watch"}
        self.path = re.compile(spec["path"]) if spec.get("path") else None
        self.resource, self.subresource = spec.get("resource"), spec.get("subresource")
        self.name, self.namespace, self.user = spec.get("name"), spec.get("namespace"), spec.get("user")
        self.count = int(spec.get("count", 1))
        self.after = int(spec.get("after", 0))
        self.expires = time.monotonic() + float(spec["duration"]) if spec.get("duration") else None
        self.params = dict(spec.get("params") or {})
        self.fired = 0
        self.spec = spec

    def matches(self, ri, ident):
        if self.expires and time.monotonic() > self.expires:
            return False
        if self.verbs is not None and ri.verb not in self.verbs:
            return False
        if self.path is not None and not self.path.search(ri.path):
            return False
        if self.resource is not None and self.resource != ri.resource:
            return False
        if self.subresource is not None and self.subresource != ri.subresource:
            return False
        if self.name is not None and self.name != ri.name:
            return False
        if self.namespace is not None and self.namespace != ri.namespace:
            return False
        if self.user is not None and (ident is None or self.user != ident.user):
            return False
        return True

    def describe(self):
        return {"id": self.id, "fault": self.fault, "remaining": self.count, "fired": self.fired,
                "pending_skips": self.after, "spec": self.spec}


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []

    def add(self, spec):
        r = FaultRule(spec)
        with self.lock:
            self.rules.append(r)
        return r

    def clear(self, rid=None):
        with self.lock:
            self.rules = [r for r in self.rules if rid is not None and r.id != rid]

    def take(self, ri, ident):
        with self.lock:
            for r in list(self.rules):
                if r.expires and time.monotonic() > r.expires:
                    self.rules.remove(r)
                    continue
                if not r.matches(ri, ident):
                    continue
                if r.after > 0:
                    r.after -= 1
                    continue
                r.fired += 1
                if r.count > 0:
                    r.count -= 1
                    if r.count == 0:
                        self.rules.remove(r)
                return r
            return None

    def dump(self):
        with self.lock:
            return [r.describe() for r in self.rules]


class ClientGone(Exception):
    pass


class FaultInjection:
    """The faults of ApiHandler (mixed into it): a request fault answers instead of the API or changes how it
    answers (delay, drip, Connection: close); a watch fault breaks the stream of watch.py's WatchStream, which
    calls _immediate_watch_fault when the stream starts and _deliver for every batch of events. Uses the
    handler's request state and output as WatchStream does."""

    def _request_fault(self, rule, ri):
        """Apply a request fault: either raise the injected answer or change how the request is served."""
        p = rule.params
        extra = []
        if p.get("retry_after") is not None and rule.fault not in ("too-many-requests", "shutdown"):
            extra.append(("Retry-After", str(p["retry_after"])))
        if p.get("close"):
            extra.append(("Connection", "close"))
            self.conn_state.close_after = True
        try:
            self._request_fault_inner(rule, ri)
        except ApiError as e:
            have = {k.lower() for k, _ in e.headers}
            e.headers += [(k, v) for k, v in extra if k.lower() not in have]
            raise
        if p.get("close"):
            self.extra_headers = [("Connection", "close")]

    def _request_fault_inner(self, rule, ri):
        p, f = rule.params, rule.fault
        extra = []
        det_retry = p.get("retry_after") if isinstance(p.get("retry_after"), int) else None
        if f == "slow-headers":
            delay = float(p.get("delay", 5))
            if ri.verb != "watch" and delay >= self.cfg["request_timeout"]:
                time.sleep(self.cfg["request_timeout"])
                raise err_timeout("request did not complete within requested timeout - context deadline exceeded")
            time.sleep(delay)
            return
        if f == "slow-drip":
            self.drip = (max(1, int(p.get("bytes", 16))), float(p.get("interval", 0.2)))
            return
        if f == "close":
            time.sleep(float(p.get("delay", 0)))
            self._abort(bool(p.get("rst")))
            raise ClientGone()
        if f == "too-many-requests":
            ra = p.get("retry_after", 7)
            hdrs = ([("Retry-After", str(ra))] if ra is not None else []) + extra
            if p.get("json"):
                raise ApiError(429, "TooManyRequests", p.get("message", "Too many requests, please try again later."),
                               details(retry=ra) if ra else details(), headers=hdrs)
            raise ApiError(429, "TooManyRequests", "", headers=hdrs,
                           plain=p.get("message", "Too many requests, please try again later.") + "\n")
        if f == "shutdown":
            self.conn_state.close_after = True
            raise ApiError(429, "TooManyRequests", "", headers=[("Retry-After", str(p.get("retry_after", 5))),
                                                                 ("Connection", "close")],
                           plain="The apiserver is shutting down, please try again later.\n")
        if f == "service-unavailable":
            raise ApiError(503, "ServiceUnavailable", p.get("message", "service unavailable"),
                           details(retry=det_retry), headers=extra)
        if f == "internal-error":
            e = err_internal(p.get("message", "injected fault"))
            e.headers = extra
            raise e
        if f == "forbidden":
            ident = self.ident or ANONYMOUS
            e = deny(ident, ri, p.get("reason", "injected by the emulator"))
            if p.get("message"):
                e.message = p["message"]
            e.headers = extra
            raise e
        if f == "unauthorized":
            raise err_unauthorized()
        if f == "conflict":
            e = err_conflict(ri.resource, ri.group, ri.name or p.get("name", ""))
            e.headers = extra
            raise e
        if f == "expired":
            rv = self.params.get("resourceVersion") or "0"
            raise err_expired(p.get("message", "too old resource version: %s (%d)" % (rv, self.emu.store.rv)))
        if f == "not-found":
            raise err_not_found(ri.resource, ri.group, ri.name)
        if f == "timeout":
            time.sleep(float(p.get("delay", 0)))
            raise err_timeout(p.get("message", "request did not complete within requested timeout - context "
                                               "deadline exceeded"))
        if f == "status":
            code = int(p.get("code", 500))
            plain = p.get("body") if p.get("plain") else None
            hdrs = extra + [tuple(h) for h in p.get("headers", [])]
            raise ApiError(code, p.get("reason", ""), p.get("message", "injected status %d" % code),
                           details(retry=det_retry), headers=hdrs, plain=plain)

    def _deliver(self, items):
        f = self.wfault
        if f is None or f.fault not in ("watch-drop", "watch-truncate", "watch-garbage", "watch-end"):
            return self._emit(items)
        n = int(f.params.get("after_events", 1 if f.fault == "watch-drop" else 0))
        room = n - self.sent
        if room > 0:
            self._emit(items[:room])
            items = items[room:]
        if self.sent >= n:
            self._fire_stream_fault(items)
        elif items:
            self._emit(items)

    def _immediate_watch_fault(self, w, deadline):
        f = self.wfault
        if f is None:
            return
        p = f.params
        if f.fault == "watch-expired":
            rv = self.params.get("resourceVersion") or "0"
            self._emit([("ERROR", err_expired(p.get("message", "too old resource version: %s (%d)" % (
                rv, self.emu.store.rv))).status())])
            raise WatchEnd("fault-expired")
        if f.fault == "watch-error":
            code = int(p.get("code", 500))
            e = ApiError(code, p.get("reason", "InternalError"), p.get("message", "Internal error occurred: injected "
                                                                                  "watch error"))
            self._emit([("ERROR", e.status())])
            raise WatchEnd("fault-error")
        if f.fault == "watch-short":
            raise WatchEnd("fault-short")
        if f.fault == "watch-silent":
            until = min(deadline, time.monotonic() + float(p.get("duration", 1e9)))
            while time.monotonic() < until:
                if self._client_gone():
                    raise WatchEnd("client-closed", clean=False)
                with w.cv:
                    w.q.clear()
                    if w.stop_mode:
                        break
                time.sleep(0.1)
            if p.get("then", "clean") == "drop":
                self._abort(bool(p.get("rst")))
                raise WatchEnd("fault-silent-drop", clean=False)
            raise WatchEnd("fault-silent")
        if f.fault in ("watch-truncate", "watch-garbage", "watch-end", "watch-drop"):
            n = int(p.get("after_events", 1 if f.fault == "watch-drop" else 0))
            if n <= 0:
                with w.cv:
                    pending = list(w.q)
                    w.q.clear()
                self._fire_stream_fault(pending)

    def _fire_stream_fault(self, rest):
        f = self.wfault
        p = f.params
        self.wfault = None
        if f.fault == "watch-drop":
            self._abort(bool(p.get("rst")))
            raise WatchEnd("fault-drop", clean=False)
        if f.fault == "watch-end":
            raise WatchEnd("fault-end")
        if f.fault == "watch-truncate":
            if rest:
                line = self._event_bytes(self.wkind, rest[0])
            else:
                objs = self.emu.store.list(self.wkind.storage)
                line = self._event_bytes(self.wkind, ("MODIFIED", objs[0]) if objs else
                                         ("BOOKMARK", self._bookmark(self.wkind, self.emu.store.rv)))
            self._chunk(line[:max(1, len(line) // 2)])
            self.wlog["events"].append(["TRUNCATED", None, time.time()])
            self._abort(bool(p.get("rst")))
            raise WatchEnd("fault-truncate", clean=False)
        if f.fault == "watch-garbage":
            if p.get("unknown_type"):
                line = jbytes({"type": p.get("type", "UNKNOWN"), "object": self._bookmark(self.wkind,
                                                                                          self.emu.store.rv)})
            else:
                line = (p.get("line", "this is not json") + "\n").encode()
            self._chunk(line)
            self.wlog["events"].append(["GARBAGE", None, time.time()])
            then = p.get("then", "keep")
            if then == "close":
                raise WatchEnd("fault-garbage")
            if then == "drop":
                self._abort(bool(p.get("rst")))
                raise WatchEnd("fault-garbage-drop", clean=False)
            if rest:
                self._emit(rest)
