"""The object store: every object, one global resourceVersion counter, the watch history, TTLs.

Owns: the objects by (storage, namespace, name) and their managedFields entries; ``commit`` (the next RV,
metadata in Go's field order, a history event offered to the watchers of that storage), ``delete``; the
history window (by count and age: its floor is the oldest RV a watch may resume from; older -> 410), the
state of a storage at an earlier RV (LIST resourceVersionMatch=Exact), waiting for an RV (the too-large RV
answer), watcher (un)subscription with replay from an RV or synthetic ADDED events, the Event TTL, and the
RV discontinuities the control API makes (``jump``, ``reset``, ``compact``).
Implements docs/kube-api.md §3.3 and §9 items 11, 14-16, 19, 22, 34, 38 and 41; §10 faults 5 and 17.
"""

import collections
import threading
import time

from .errors import err_expired
from .schema import META
from .util import deep


class StoreEvent:
    __slots__ = ("rv", "type", "storage", "key", "obj", "prev", "time")

    def __init__(self, rv, etype, storage, key, obj, prev):
        self.rv, self.type, self.storage, self.key, self.obj, self.prev = rv, etype, storage, key, obj, prev
        self.time = time.time()


class Store:
    def __init__(self, cfg, initial_rv=1):
        self.cfg = cfg
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.rv = initial_rv
        self.floor = initial_rv
        self.objects = {}
        self.managed = {}
        self.history = collections.deque()
        # storage -> its watchers: a write is offered only to watchers of its storage (the others'
        # transform() would drop it anyway), so a fleet's Lease renewals do not walk every Node watch
        # under the store lock.
        self.watchers = collections.defaultdict(set)
        self.expires = {}

    @staticmethod
    def key(storage, ns, name):
        return (storage, ns or "", name)

    def get(self, storage, ns, name):
        with self.lock:
            return self.objects.get(self.key(storage, ns, name))

    def list(self, storage, ns=None):
        with self.lock:
            return [o for k, o in sorted(self.objects.items()) if k[0] == storage and (not ns or k[1] == ns)]

    def commit(self, storage, obj, managed=None, etype=None):
        """Store a new version of an object (caller holds no references to mutate later)."""
        with self.lock:
            md = obj["metadata"]
            key = self.key(storage, md.get("namespace"), md["name"])
            prev = self.objects.get(key)
            self.rv += 1
            md["resourceVersion"] = str(self.rv)
            order = list(META)
            obj["metadata"] = md = {k: md[k] for k in sorted(md, key=lambda k: order.index(k) if k in order else 99)}
            if managed is not None:
                self.managed[key] = managed
            ents = self.managed.get(key)
            if ents:
                md["managedFields"] = [e.render() for e in ents]
            else:
                md.pop("managedFields", None)
            self.objects[key] = obj
            self._record(StoreEvent(self.rv, etype or ("MODIFIED" if prev else "ADDED"), storage, key, obj, prev))
            if storage == "events":
                self.expires[key] = time.monotonic() + self.cfg["event_ttl"]
            return obj

    def delete(self, storage, ns, name):
        with self.lock:
            key = self.key(storage, ns, name)
            prev = self.objects.pop(key, None)
            if prev is None:
                return None
            self.managed.pop(key, None)
            self.expires.pop(key, None)
            self.rv += 1
            last = deep(prev)
            last["metadata"]["resourceVersion"] = str(self.rv)
            self._record(StoreEvent(self.rv, "DELETED", storage, key, last, prev))
            return last

    def _record(self, ev):
        self.history.append(ev)
        self.trim()
        for w in list(self.watchers.get(ev.storage, ())):
            w.offer(ev)
        self.changed.notify_all()

    def trim(self):
        with self.lock:
            maxn, maxage = self.cfg["history_max_events"], self.cfg["history_max_age"]
            cutoff = time.time() - maxage if maxage > 0 else None
            while self.history and (len(self.history) > maxn or (cutoff and self.history[0].time < cutoff)):
                self.floor = self.history.popleft().rv

    def compact(self, rv=None):
        with self.lock:
            rv = self.rv if rv is None else rv
            while self.history and self.history[0].rv <= rv:
                self.history.popleft()
            self.floor = max(self.floor, min(rv, self.rv))

    def wait_for_rv(self, want, timeout):
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.rv < want:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(left)
            return True

    def state_at(self, storage, rv):
        """Objects of one storage as they were at rv (reconstructed from history)."""
        with self.lock:
            if rv < self.floor:
                raise err_expired("The resourceVersion for the provided list is too old.")
            objs = {k: v for k, v in self.objects.items() if k[0] == storage}
            for ev in reversed(self.history):
                if ev.rv <= rv:
                    break
                if ev.storage != storage:
                    continue
                if ev.type == "ADDED":
                    objs.pop(ev.key, None)
                else:
                    objs[ev.key] = ev.prev
            return [o for k, o in sorted(objs.items())]

    def subscribe(self, watcher, rv, initial):
        """Register a watcher. initial=True: synthetic ADDED for current state; else replay events after rv.
        Returns None or an ApiError to be delivered in-stream."""
        with self.lock:
            if initial:
                for o in self.list(watcher.kind.storage, watcher.ns):
                    if watcher.match(o):
                        watcher.q.append(("ADDED", o))
            else:
                if rv < self.floor:
                    return err_expired("too old resource version: %d (%d)" % (rv, self.floor))
                for ev in self.history:
                    if ev.rv > rv:
                        t = watcher.transform(ev)
                        if t:
                            watcher.q.append(t)
            self.watchers[watcher.kind.storage].add(watcher)
            return None

    def unsubscribe(self, watcher):
        with self.lock:
            self.watchers[watcher.kind.storage].discard(watcher)

    def expire_due(self, force=False, names=None):
        with self.lock:
            now = time.monotonic()
            due = [k for k, t in self.expires.items()
                   if (force and (names is None or k[2] in names)) or (not force and t <= now)]
            for k in due:
                self.delete(k[0], k[1], k[2])
            return len(due)

    def jump(self, by):
        with self.lock:
            self.rv += by
            self.history.clear()
            self.floor = self.rv

    def reset(self, to):
        with self.lock:
            n = len(self.objects)
            self.rv = max(1, to - n)
            for k in sorted(self.objects):
                o = deep(self.objects[k])
                self.rv += 1
                o["metadata"]["resourceVersion"] = str(self.rv)
                self.objects[k] = o
            self.history.clear()
            self.floor = self.rv
