#!/usr/bin/env python3
"""The API-server emulator behaves like kube-apiserver (shared/reference/kube-api.md §9 items, §10 faults).

Talks raw HTTPS (http.client / ssl) to the emulator and checks status codes, Status bodies, headers, watch
framing and the fault injections. Python 3 stdlib only; runs in well under 60 s.
"""

import http.client
import json
import socket
import ssl
import time
import urllib.parse

from lib import itest
from lib.itest import check, eq
from kubeemu import RawStream, wait_for

NODE_TOKEN = "node-n1-token"
GNA_TOKEN = "gna-token"
EMU = None          # the module's emulator (itest.emulator_fixture)


def api(method, path, body=None, token=True, headers=None, **kw):
    return EMU.https_json(method, path, body, token=token, headers=headers, **kw)


def patch(path, body, ctype="application/merge-patch+json", token=True, query=""):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return api("PATCH", path + query, data, token=token, headers={"Content-Type": ctype})


def rv_of(obj):
    return int(obj["metadata"]["resourceVersion"])


def node(name="n1"):
    return api("GET", "/api/v1/nodes/" + name)[2]


def watch(path, token=True, timeout=10):
    s = RawStream(EMU, path, token=token, timeout=timeout)
    return s


def drain(stream, n, timeout=5):
    out = []
    for _ in range(n):
        ev = stream.next_event(timeout)
        if ev is None:
            break
        out.append(ev)
    return out


def history_types(since_rv, name=None):
    h = EMU.history(since_rv=since_rv, resource="nodes")
    return [(e["type"], e["rv"]) for e in h["events"] if name is None or e["name"] == name]


def kubeemu_node_fixture():
    n = EMU.get_node("n1")
    n["status"]["conditions"] = [c for c in ORIGINAL_CONDITIONS]
    return n


def event_body(name, ns="default", **kw):
    uid = EMU.get_node("n1")["metadata"]["uid"]
    b = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
         "involvedObject": {"kind": "Node", "name": "n1", "uid": uid, "apiVersion": "v1"},
         "reason": "ConfigApplied", "message": "applied", "type": "Normal",
         "source": {"component": "inplace-agent", "host": "n1"}, "firstTimestamp": "2025-01-02T03:04:05Z",
         "lastTimestamp": "2025-01-02T03:04:05Z", "count": 1}
    b.update(kw)
    return b


def _connectable():
    try:
        socket.create_connection(("127.0.0.1", EMU.port), timeout=1).close()
        return True
    except OSError:
        return False


ORIGINAL_CONDITIONS = []


setUpModule, tearDownModule = itest.emulator_fixture(
    globals(), setup=lambda emu: ORIGINAL_CONDITIONS.extend(emu.get_node("n1")["status"]["conditions"]),
    nodes=["n1", "n2"], tokens=["admin-token", NODE_TOKEN + "=system:node:n1,system:nodes",
                                GNA_TOKEN + "=gardener.cloud:node-agent:machine:n1,gardener.cloud:node-agents"])


class EmulatorSemantics(itest.EmulatorTest):
    # ----------------------------------------------------------------------------------------------------------
    # Transport / authentication
    # ----------------------------------------------------------------------------------------------------------

    def test_01_t01_https_only_and_sans(self):
        for host in ("localhost", "127.0.0.1"):
            ctx = ssl.create_default_context(cafile=EMU.ca)
            with socket.create_connection(("127.0.0.1", EMU.port), timeout=5) as raw:
                with ctx.wrap_socket(raw, server_hostname=host) as s:
                    eq(s.selected_alpn_protocol(), None, "ALPN without offer")
        ctx = ssl.create_default_context(cafile=EMU.ca)
        ctx.set_alpn_protocols(["h2", "http/1.1"])
        with socket.create_connection(("127.0.0.1", EMU.port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                eq(s.selected_alpn_protocol(), "http/1.1", "ALPN choice (stdlib cannot serve h2)")
        # plain HTTP on the TLS port is not served
        c = http.client.HTTPConnection("127.0.0.1", EMU.port, timeout=5)
        try:
            c.request("GET", "/version")
            r = c.getresponse()
            raise AssertionError("plain HTTP answered with %d" % r.status)
        except (http.client.HTTPException, ConnectionError, OSError):
            pass
        finally:
            c.close()

    def test_02_t02_bad_token_401_and_anonymous_403(self):
        st, h, body = api("GET", "/api/v1/nodes/n1", token="nope")
        eq(st, 401, "status")
        eq(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                  "reason": "Unauthorized", "code": 401}, "401 body")
        st, h, body = api("GET", "/api/v1/nodes/n1", token=None)
        eq(st, 403, "anonymous status")
        eq(body["message"], 'nodes "n1" is forbidden: User "system:anonymous" cannot get resource "nodes" in API '
                            'group "" at the cluster scope', "anonymous message")
        eq(body["details"], {"name": "n1", "kind": "nodes"}, "details")
        st, _, _ = api("GET", "/version", token=None)
        eq(st, 200, "anonymous /version")
        EMU.config(anonymous_401=True)
        try:
            eq(api("GET", "/api/v1/nodes/n1", token=None)[0], 401, "anonymous with anonymous_401")
        finally:
            EMU.config(anonymous_401=False)

    def test_03_t03_mtls_identities(self):
        good = EMU.make_client_cert("node-n1", "system:node:n1", ["system:nodes"])
        st, _, _ = api("GET", "/api/v1/nodes/n1", token=None, cert=good["cert"], key=good["key"])
        eq(st, 200, "own node via client cert")
        st, _, body = api("GET", "/api/v1/nodes/n2", token=None, cert=good["cert"], key=good["key"])
        eq(st, 403, "other node via client cert")
        check("node 'n1' cannot read 'n2'" in body["message"], body["message"])
        last = EMU.request_log()[-1]
        eq((last["user"], last["groups"]), ("system:node:n1", ["system:nodes", "system:authenticated"]), "cert user")
        wrong = EMU.make_client_cert("wrong", "system:node:n1", ["system:nodes"], ca="wrong")
        eq(api("GET", "/api/v1/nodes/n1", token=None, cert=wrong["cert"], key=wrong["key"])[0], 401, "wrong-CA cert")
        old = EMU.make_client_cert("expired", "system:node:n1", ["system:nodes"], expired=True)
        eq(api("GET", "/api/v1/nodes/n1", token=None, cert=old["cert"], key=old["key"])[0], 401, "expired cert")

    def test_04_t04_token_rotation_and_expiry(self):
        EMU.add_token("rotating-1", "agent")
        eq(api("GET", "/api/v1/nodes/n1", token="rotating-1")[0], 200, "new token")
        EMU.revoke_token("rotating-1")
        eq(api("GET", "/api/v1/nodes/n1", token="rotating-1")[0], 401, "revoked token")
        EMU.add_token("short", "agent", expires_in=0.3)
        eq(api("GET", "/api/v1/nodes/n1", token="short")[0], 200, "token before expiry")
        wait_for(lambda: api("GET", "/api/v1/nodes/n1", token="short")[0] == 401, 5, "token expiry")

    def test_05_t05_std_headers(self):
        st, h, _ = api("GET", "/api/v1/nodes/n1")
        check(len(h["Audit-Id"]) == 36, "Audit-Id %r", h["Audit-Id"])
        eq(h["Cache-Control"], "no-cache, private", "Cache-Control")
        eq(h["Content-Type"], "application/json", "Content-Type")
        check(h["X-Kubernetes-Pf-Flowschema-Uid"] and h["X-Kubernetes-Pf-Prioritylevel-Uid"], "APF headers")
        st, h, _ = api("GET", "/api/v1/nodes/nope")
        check(h["Audit-Id"] and h["Cache-Control"] == "no-cache, private", "headers on errors")


    # ----------------------------------------------------------------------------------------------------------
    # Reads, RV semantics, watch
    # ----------------------------------------------------------------------------------------------------------

    def test_06_t08_get_node_and_404(self):
        st, h, n = api("GET", "/api/v1/nodes/n1")
        eq(st, 200, "status")
        eq((n["kind"], n["apiVersion"]), ("Node", "v1"), "kind/apiVersion")
        check(isinstance(n["metadata"]["resourceVersion"], str) and n["metadata"]["uid"], "rv string + uid")
        raw = EMU.https("GET", "/api/v1/nodes/n1")[2]
        check(raw.endswith(b"}\n") and b": " not in raw[:200], "compact JSON + newline")
        st, h, body = api("GET", "/api/v1/nodes/missing")
        eq(st, 404, "status")
        eq(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": 'nodes "missing" not found', "reason": "NotFound",
                  "details": {"name": "missing", "kind": "nodes"}, "code": 404}, "404 body")

    def test_07_t09_list_field_selector(self):
        st, _, lst = api("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1&resourceVersion=0&limit=500")
        eq(st, 200, "status")
        eq((lst["kind"], lst["apiVersion"]), ("NodeList", "v1"), "list kind")
        eq([i["metadata"]["name"] for i in lst["items"]], ["n1"], "items")
        check("kind" not in lst["items"][0], "items omit kind")
        check("continue" not in lst["metadata"], "no continue")
        eq(int(lst["metadata"]["resourceVersion"]), EMU.current_rv(), "list RV = store RV")
        st, _, lst = api("GET", "/api/v1/nodes?fieldSelector=metadata.name=absent")
        eq((st, lst["items"]), (200, []), "absent node -> empty list")
        st, _, lst = api("GET", "/api/v1/nodes?fieldSelector=spec.unschedulable%3Dfalse,metadata.name!%3Dn2")
        check("n1" in [i["metadata"]["name"] for i in lst["items"]], "spec.unschedulable + != selector")

    def test_08_t10_unsupported_field_label(self):
        st, _, body = api("GET", "/api/v1/nodes?fieldSelector=spec.foo%3Dx")
        eq(st, 400, "status")
        eq((body["reason"], body["message"]), ("BadRequest", "field label not supported: spec.foo"), "body")

    def test_09_t11_global_rv_and_noop(self):
        rv0 = EMU.current_rv()
        EMU.seed_secret("rv-probe", "default", {"a": "1"})
        rv1 = EMU.current_rv()
        eq(rv1, rv0 + 1, "secret write bumps the global RV")
        n = node()
        st, _, same = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"kubernetes.io/os": "linux"}}})
        eq(st, 200, "no-op patch status")
        eq(same["metadata"]["resourceVersion"], n["metadata"]["resourceVersion"], "no-op patch keeps RV")
        eq(EMU.current_rv(), rv1, "no-op patch does not bump the RV")
        eq(history_types(rv1), [], "no-op patch emits no event")

    def test_10_t12_13_watch_framing_coalescing_splitting(self):
        rv = EMU.current_rv()
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % rv)
        eq(s.status, 200, "status")
        check("content-length" not in s.headers and s.headers.get("transfer-encoding") == "chunked", "chunked")
        eq(s.headers.get("content-type"), "application/json", "content type")
        EMU.wait_for_watch(r"^/api/v1/nodes$")
        EMU.batch([{"op": "patch", "name": "n1", "patch": {"metadata": {"annotations": {"c%d" % i: "x"}}}}
                   for i in range(3)])
        first = s.read_chunk()
        lines = first.split(b"\n")
        eq(len([x for x in lines if x]), 3, "three events coalesced in one chunk")
        ev = json.loads(lines[0])
        eq(sorted(ev), ["object", "type"], "event keys")
        eq((ev["type"], ev["object"]["kind"], ev["object"]["apiVersion"]), ("MODIFIED", "Node", "v1"), "event")
        check(b": " not in lines[0] and first.endswith(b"\n"), "compact + newline")
        EMU.config(split_bytes=100, split_delay=0.01)
        try:
            EMU.patch("nodes", "n1", {"metadata": {"annotations": {"split": "yes"}}})
            line = s.next_line(5)
            check(len(s.chunks) >= 3 and max(s.chunks[1:]) <= 100, "event split over chunks: %r", s.chunks)
            eq(json.loads(line)["object"]["metadata"]["annotations"]["split"], "yes", "reassembled event")
        finally:
            EMU.config(split_bytes=0)
            s.close()

    def test_11_t14_watch_rv_semantics(self):
        s = watch("/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1")
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["metadata"]["name"]), ("ADDED", "n1"), "synthetic ADDED for RV unset")
        s.close()
        s = watch("/api/v1/nodes?watch=true&fieldSelector=metadata.name%3Dn1&resourceVersion=0")
        eq(s.next_event(5)["type"], "ADDED", "synthetic ADDED for RV=0")
        s.close()
        rv = EMU.current_rv()
        EMU.patch("nodes", "n1", {"metadata": {"annotations": {"after": "1"}}})
        EMU.patch("nodes", "n1", {"metadata": {"annotations": {"after": "2"}}})
        s = watch("/api/v1/nodes?watch=true&fieldSelector=metadata.name%%3Dn1&resourceVersion=%d" % rv)
        evs = drain(s, 2)
        eq([e["type"] for e in evs], ["MODIFIED", "MODIFIED"], "only changes after N")
        check(all(rv_of(e["object"]) > rv for e in evs), "RVs > N")
        eq(evs[1]["object"]["metadata"]["annotations"]["after"], "2", "order")
        s.close()

    def test_12_t15_watch_too_old_410(self):
        EMU.patch("nodes", "n1", {"metadata": {"annotations": {"compact": "me"}}})
        old = EMU.current_rv() - 1
        EMU.compact()
        floor = EMU.history()["floor"]
        s = watch("/api/v1/nodes?watch=true&resourceVersion=%d" % old)
        eq(s.status, 200, "200 before the in-stream error")
        ev = s.next_event(5)
        eq(ev, {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                            "message": "too old resource version: %d (%d)" % (old, floor),
                                            "reason": "Expired", "code": 410}}, "410 event")
        eq(s.next_line(5), None, "clean close after ERROR")
        check(s.ended_cleanly, "terminating chunk")

    def test_13_t16_too_large_rv_504(self):
        EMU.config(too_large_wait=0.4)
        try:
            want = EMU.current_rv() + 1000
            t0 = time.monotonic()
            s = watch("/api/v1/nodes?watch=true&resourceVersion=%d" % want)
            ev = s.next_event(5)
            check(time.monotonic() - t0 >= 0.35, "waited before giving up")
            eq(ev["type"], "ERROR", "type")
            o = ev["object"]
            eq((o["code"], o["reason"]), (504, "Timeout"), "504 Timeout")
            eq(o["details"], {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                              "retryAfterSeconds": 1}, "details")
            check(o["message"].startswith("Timeout: Too large resource version: %d, current: " % want), o["message"])
            s.close()
            st, h, body = api("GET", "/api/v1/nodes?resourceVersion=%d" % want)
            eq((st, body["reason"], h["Retry-After"]), (504, "Timeout", "1"), "LIST too large")
            # a write that catches up within the wait makes the read succeed
            target = EMU.current_rv() + 1
            import threading
            threading.Timer(0.1, lambda: EMU.patch("nodes", "n1", {"metadata": {"annotations": {"late": "x"}}})).start()
            eq(api("GET", "/api/v1/nodes/n1?resourceVersion=%d" % target)[0], 200, "not-older-than after catch-up")
        finally:
            EMU.config(too_large_wait=3.0)

    def test_14_t17_bookmarks(self):
        EMU.config(bookmark_interval=0.3)
        try:
            rv = EMU.current_rv()
            s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%%3Dn1&resourceVersion=%d"
                      "&allowWatchBookmarks=true&timeoutSeconds=20" % rv)
            ev = s.next_event(5)
            eq(ev["type"], "BOOKMARK", "bookmark")
            o = ev["object"]
            eq((o["kind"], o["apiVersion"], o["metadata"]["resourceVersion"]), ("Node", "v1", str(rv)), "bookmark obj")
            check("name" not in o["metadata"], "bookmark carries only the RV")
            eq(s.next_event(5)["type"], "BOOKMARK", "periodic bookmarks")
            s.close()
            s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%%3Dn1&resourceVersion=%d&timeoutSeconds=1" % rv)
            eq(s.next_line(5), None, "no bookmarks without allowWatchBookmarks")
            s.close()
        finally:
            EMU.config(bookmark_interval=60.0)
        t0 = time.monotonic()
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d&allowWatchBookmarks=true&timeoutSeconds=3"
                  % EMU.current_rv())
        ev = s.next_event(5)
        dt = time.monotonic() - t0
        eq(ev["type"], "BOOKMARK", "pre-deadline bookmark")
        check(0.6 < dt < 1.8, "bookmark ~2 s before the deadline (after %.2fs)", dt)
        eq(s.next_line(5), None, "then the clean end")
        s.close()

    def test_15_t18_timeout_clean_end(self):
        t0 = time.monotonic()
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d&timeoutSeconds=1" % EMU.current_rv())
        eq(s.next_line(5), None, "clean end")
        check(s.ended_cleanly and 0.9 < time.monotonic() - t0 < 2.5, "ended at the deadline")
        s.close()

    def test_16_t19_20_delete_recreate_and_field_filter(self):
        EMU.seed_node("tmp")
        s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%%3Dtmp&resourceVersion=%d" % EMU.current_rv())
        EMU.wait_for_watch(r"^/api/v1/nodes$")
        EMU.patch("nodes", "n1", {"metadata": {"annotations": {"invisible": "1"}}})
        old_uid = EMU.get_node("tmp")["metadata"]["uid"]
        st, _, body = api("DELETE", "/api/v1/nodes/tmp")
        eq((st, body["status"], body["details"]["uid"]), (200, "Success", old_uid), "delete status")
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["metadata"]["uid"]), ("DELETED", old_uid), "DELETED with last state")
        EMU.seed_node("tmp")
        ev = s.next_event(5)
        eq(ev["type"], "ADDED", "recreate")
        check(ev["object"]["metadata"]["uid"] != old_uid, "new uid")
        s.close()
        # selector transitions: stop matching -> DELETED, start matching -> ADDED
        s = watch("/api/v1/nodes?watch=1&labelSelector=role%%3Dedge&resourceVersion=%d" % EMU.current_rv())
        EMU.wait_for_watch(r"^/api/v1/nodes$")
        EMU.label_node("tmp", {"role": "edge"})
        eq(s.next_event(5)["type"], "ADDED", "starts matching")
        EMU.label_node("tmp", {"role": None})
        eq(s.next_event(5)["type"], "DELETED", "stops matching")
        s.close()
        EMU.delete("nodes", "tmp")

    def test_17_t21_rv_match_validation(self):
        cases = [("/api/v1/nodes?resourceVersionMatch=NotOlderThan",
                  "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"),
                 ("/api/v1/nodes?resourceVersionMatch=Exact&resourceVersion=0",
                  'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
                 ("/api/v1/nodes?watch=1&resourceVersionMatch=NotOlderThan&resourceVersion=1",
                  "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                  "is provided")]
        for path, msg in cases:
            st, _, body = api("GET", path)
            eq(st, 422, path)
            eq(body["message"], 'ListOptions.meta.k8s.io "" is invalid: ' + msg, "message")
            eq((body["details"]["kind"], body["details"]["group"]), ("ListOptions", "meta.k8s.io"), "details")

    def test_18_t22_list_exact(self):
        EMU.patch("nodes", "n1", {"metadata": {"labels": {"exact": "before"}}})
        rv = EMU.current_rv()
        EMU.patch("nodes", "n1", {"metadata": {"labels": {"exact": "after"}}})
        st, _, lst = api("GET", "/api/v1/nodes?resourceVersion=%d&resourceVersionMatch=Exact" % rv)
        eq(st, 200, "exact list")
        eq(lst["metadata"]["resourceVersion"], str(rv), "list RV")
        n1 = [i for i in lst["items"] if i["metadata"]["name"] == "n1"][0]
        eq(n1["metadata"]["labels"]["exact"], "before", "state at that RV")
        EMU.compact()
        st, _, body = api("GET", "/api/v1/nodes?resourceVersion=%d&resourceVersionMatch=Exact" % rv)
        eq((st, body["reason"]), (410, "Expired"), "compacted exact list")
        st, _, body = api("GET", "/api/v1/nodes?resourceVersion=%d&limit=500" % rv)
        eq(st, 410, "legacy RV+limit list is exact too")
        eq(api("GET", "/api/v1/nodes?resourceVersion=%d&resourceVersionMatch=NotOlderThan" % rv)[0], 200, "NotOlder")

    def test_19_t23_24_node_identity_and_secrets(self):
        T = NODE_TOKEN
        eq(api("GET", "/api/v1/nodes/n1", token=T)[0], 200, "own node")
        st, _, body = api("GET", "/api/v1/nodes?fieldSelector=metadata.name%3Dn1", token=T)
        eq(st, 200, "own list")
        st, _, body = api("GET", "/api/v1/nodes", token=T)
        eq(st, 403, "list all")
        check("node 'n1' cannot read all nodes, only its own Node object" in body["message"], body["message"])
        eq(api("GET", "/api/v1/nodes/n2", token=T)[0], 403, "other node")
        EMU.seed_secret("osc", "kube-system", {"osc.yaml": "a: b\n"})
        st, _, sec = api("GET", "/api/v1/namespaces/kube-system/secrets/osc")
        eq((st, sec["data"]["osc.yaml"], sec["type"]), (200, "YTogYgo=", "Opaque"), "secret base64")
        st, _, body = api("GET", "/api/v1/namespaces/kube-system/secrets/osc", token=T)
        eq(st, 403, "node may not read an unrelated secret")
        check("no relationship found between node 'n1' and this object" in body["message"], body["message"])
        EMU.put({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "kube-system"},
                 "spec": {"nodeName": "n1", "volumes": [{"name": "v", "secret": {"secretName": "osc"}}]}})
        eq(api("GET", "/api/v1/namespaces/kube-system/secrets/osc", token=T)[0], 200, "secret reachable via pod")
        s = watch("/api/v1/namespaces/kube-system/secrets?watch=1&fieldSelector=metadata.name%3Dosc")
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["kind"], ev["object"]["metadata"]["name"]), ("ADDED", "Secret", "osc"), "watch")
        s.close()
        # gardener-node-agent identity
        st, _, _ = api("GET", "/api/v1/nodes", token=GNA_TOKEN)
        eq(st, 200, "gna may list all nodes")
        eq(api("GET", "/api/v1/namespaces/kube-system/secrets/osc", token=GNA_TOKEN)[0], 403, "gna unrelated secret")
        EMU.label_node("n1", {"worker.gardener.cloud/gardener-node-agent-secret-name": "osc"})
        eq(api("GET", "/api/v1/namespaces/kube-system/secrets/osc", token=GNA_TOKEN)[0], 200, "gna osc secret")


    # ----------------------------------------------------------------------------------------------------------
    # Writes
    # ----------------------------------------------------------------------------------------------------------

    def test_20_t25_patch_content_types(self):
        for ct in ("application/merge-patch+json; charset=utf-8", "application/strategic-merge-patch+json"):
            eq(patch("/api/v1/nodes/n1", {"metadata": {"annotations": {"ct": ct[:20]}}}, ct)[0], 200, ct)
        st, _, body = patch("/api/v1/nodes/n1", {}, "text/plain")
        eq(st, 415, "415")
        eq(body["message"], "the body of the request was in an unknown format - accepted media types include: "
                            "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                            "application/strategic-merge-patch+json", "415 message")
        eq(body["reason"], "UnsupportedMediaType", "reason")

    def test_21_t26_merge_patch(self):
        patch("/api/v1/nodes/n1", {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"podCIDRs": ["10.0.0.0/24"]}})
        st, _, n = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"a": None, "c": "3"}}})
        labels = n["metadata"]["labels"]
        check("a" not in labels and labels["b"] == "2" and labels["c"] == "3", "null deletes, recursive merge")
        eq(n["spec"]["podCIDRs"], ["10.0.0.0/24"], "arrays replaced")
        st, _, n = patch("/api/v1/nodes/n1/status", {"status": {"conditions": [{"type": "X", "status": "True"}]}})
        eq([c["type"] for c in n["status"]["conditions"]], ["X"], "merge patch replaces the whole conditions list")
        EMU.put(kubeemu_node_fixture(), manager="kubelet", status_manager="kubelet")

    def test_22_t27_strategic_merge(self):
        before = [c["type"] for c in node()["status"]["conditions"]]
        st, _, n = patch("/api/v1/nodes/n1/status", {"status": {"conditions": [
            {"type": "AgentReady", "status": "True", "reason": "AllGood", "message": "m",
             "lastHeartbeatTime": "2025-01-02T03:04:05.123Z", "lastTransitionTime": "2025-01-02T03:00:00+00:00"}]}},
            "application/strategic-merge-patch+json")
        eq(st, 200, "status")
        types = [c["type"] for c in n["status"]["conditions"]]
        eq(types, before + ["AgentReady"], "merged by type, others kept")
        c = n["status"]["conditions"][-1]
        eq((c["lastHeartbeatTime"], c["lastTransitionTime"]), ("2025-01-02T03:04:05Z", "2025-01-02T03:00:00Z"),
           "metav1.Time normalised")
        st, _, n = patch("/api/v1/nodes/n1/status", {"$setElementOrder/conditions": [{"type": t} for t in types],
                                                     "status": {"conditions": [{"type": "Ready", "message": "still"}]}},
                         "application/strategic-merge-patch+json")
        eq(st, 200, "setElementOrder tolerated")
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"][0]
        eq((ready["status"], ready["message"]), ("True", "still"), "element merged")
        st, _, n = patch("/api/v1/nodes/n1/status", {"status": {"conditions": [{"type": "AgentReady",
                                                                                "$patch": "delete"}]}},
                         "application/strategic-merge-patch+json")
        eq([c["type"] for c in n["status"]["conditions"]], before, "$patch: delete")

    def test_23_t28_json_patch(self):
        J = "application/json-patch+json"
        st, _, n = patch("/api/v1/nodes/n1", [{"op": "add", "path": "/metadata/labels/example.com~1role", "value": "edge"}],
                         J)
        eq((st, n["metadata"]["labels"]["example.com/role"]), (200, "edge"), "~1 escape")
        EMU.put({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "tilde", "namespace": "default"},
                 "spec": {"nodeName": "n2", "nodeSelector": {}}})
        st, _, p = patch("/api/v1/namespaces/default/pods/tilde", [{"op": "add", "path": "/spec/nodeSelector/a~0b~1c",
                                                                    "value": "1"}], J)
        eq((st, p["spec"]["nodeSelector"]), (200, {"a~b/c": "1"}), "~0 escape")
        generic = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "the server rejected our request due to an error in our request", "reason": "Invalid",
                   "details": {}, "code": 422}
        st, _, body = patch("/api/v1/nodes/n1", [{"op": "test", "path": "/metadata/resourceVersion", "value": "1"}], J)
        eq((st, body), (422, generic), "failing test op")
        EMU.seed_node("nolabels")
        EMU.patch("nodes", "nolabels", {"metadata": {"labels": None}})
        st, _, body = patch("/api/v1/nodes/nolabels", [{"op": "add", "path": "/metadata/labels/a", "value": "b"}], J)
        eq((st, body["reason"]), (422, "Invalid"), "add into a missing map")
        st, _, body = patch("/api/v1/nodes/n1", [{"op": "remove", "path": "/metadata/labels/absent"}], J)
        eq(st, 422, "remove missing path")
        st, _, body = patch("/api/v1/nodes/n1", b"[{not json", J)
        eq((st, body["reason"]), (400, "BadRequest"), "undecodable")
        EMU.delete("nodes", "nolabels")

    def test_24_t29_stale_rv_409(self):
        n = node()
        stale = str(rv_of(n) - 1)
        st, _, body = patch("/api/v1/nodes/n1", {"metadata": {"resourceVersion": stale, "labels": {"x": "y"}}})
        eq(st, 409, "status")
        eq(body, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": 'Operation cannot be fulfilled on nodes "n1": the object has been modified; please apply '
                             'your changes to the latest version and try again', "reason": "Conflict",
                  "details": {"name": "n1", "kind": "nodes"}, "code": 409}, "409 body")
        st, _, _ = patch("/api/v1/nodes/n1", {"metadata": {"resourceVersion": n["metadata"]["resourceVersion"],
                                                           "labels": {"x": "y"}}},
                         "application/strategic-merge-patch+json")
        eq(st, 200, "current RV precondition passes")

    def test_25_t30_subresource_rules(self):
        n0 = node()
        st, _, n = patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}, "status": {"phase": "Dropped"}})
        eq((st, n["spec"].get("unschedulable"), n["status"].get("phase")), (200, True, None), "main drops status")
        check(rv_of(n) > rv_of(n0) and "conditions" in n["status"], "full object with new RV")
        st, _, n = patch("/api/v1/nodes/n1/status", {"spec": {"unschedulable": False}, "status": {"phase": "Kept"}})
        eq((n["spec"].get("unschedulable"), n["status"].get("phase")), (True, "Kept"), "status drops spec")
        patch("/api/v1/nodes/n1", {"spec": {"unschedulable": None}})
        patch("/api/v1/nodes/n1/status", {"status": {"phase": None}})

    def test_26_t31_server_side_apply(self):
        A = "application/apply-patch+yaml"
        body = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                "status": {"conditions": [{"type": "AgentReady", "status": "True", "reason": "AllGood"}]}}
        st, _, e = patch("/api/v1/nodes/n1/status", body, A)
        eq((st, e["reason"]), (422, "Invalid"), "fieldManager required")
        check("fieldManager: Required value" in e["message"], e["message"])
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {}}, query="?force=true")
        eq(st, 422, "force on non-apply")
        check("force: Forbidden: may not be specified for non-apply patch" in e["message"], e["message"])
        st, _, e = patch("/api/v1/nodes/n1/status", {"metadata": {"name": "n1"}}, A, query="?fieldManager=agent")
        eq(st, 400, "apply without kind/apiVersion")
        st, _, n = patch("/api/v1/nodes/n1/status", body, A, query="?fieldManager=agent")
        eq(st, 200, "apply own condition type")
        check(any(m["manager"] == "agent" and m["operation"] == "Apply" for m in n["metadata"]["managedFields"]),
              "managedFields maintained")
        check([c for c in n["status"]["conditions"] if c["type"] == "Ready"], "kubelet condition kept")
        steal = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                 "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        st, _, e = patch("/api/v1/nodes/n1/status", steal, A, query="?fieldManager=agent")
        eq((st, e["reason"]), (409, "Conflict"), "conflict with kubelet")
        eq(e["message"], 'Apply failed with 1 conflict: conflict with "kubelet" using v1: '
                         '.status.conditions[type="Ready"].status', "conflict message")
        eq(e["details"]["causes"][0]["reason"], "FieldManagerConflict", "cause")
        st, _, n = patch("/api/v1/nodes/n1/status", steal, A, query="?fieldManager=agent&force=true")
        eq(st, 200, "force")
        eq([c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"], ["False"], "forced value")
        # re-applying without AgentReady removes the field the agent owned alone
        st, _, n = patch("/api/v1/nodes/n1/status", steal, A, query="?fieldManager=agent")
        check(not [c for c in n["status"]["conditions"] if c["type"] == "AgentReady"], "apply removes dropped fields")
        EMU.set_condition("n1", "Ready", "True", "KubeletReady", "kubelet is posting ready status", manager="kubelet")

    def test_27_t32_label_validation_422(self):
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"ok": "bad value!"}}})
        eq((st, e["reason"], e["details"]["kind"], e["details"]["name"]), (422, "Invalid", "Node", "n1"), "422")
        eq(e["details"]["causes"][0]["field"], "metadata.labels", "field")
        check(e["message"].startswith('Node "n1" is invalid: metadata.labels: Invalid value: "bad value!": a valid '
                                      'label must be an empty string'), e["message"])
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {"annotations": {"bad key!": "x"}}})
        eq((st, e["details"]["causes"][0]["field"]), (422, "metadata.annotations"), "annotation key")
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"num": 5}}})
        eq(st, 422, "wrong JSON type is 422 even without Strict")

    def test_28_t33_node_restriction(self):
        T = NODE_TOKEN
        st, _, e = patch("/api/v1/nodes/n2", {"metadata": {"labels": {"x": "y"}}}, token=T)
        eq(st, 403, "other node")
        eq(e["message"], 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"', "message")
        st, _, e = patch("/api/v1/nodes/n1", {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}, token=T)
        eq((st, e["message"]), (403, 'nodes "n1" is forbidden: node "n1" is not allowed to modify taints'), "taints")
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"node-restriction.kubernetes.io/a": "1",
                                                                      "kubernetes.io/foo": "2", "example.com/ok": "3"}}},
                         token=T)
        eq((st, e["message"]), (403, 'nodes "n1" is forbidden: is not allowed to modify labels: kubernetes.io/foo, '
                                     'node-restriction.kubernetes.io/a'), "labels")
        st, _, n = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"node.kubernetes.io/agent": "1",
                                                                      "example.com/ok": "1"},
                                                           "annotations": {"inplace-agent/progress": "{}"}}}, token=T)
        eq(st, 200, "allowed labels + annotations")
        st, _, n = patch("/api/v1/nodes/n1/status", {"status": {"conditions": [{"type": "InPlaceUpdateAgent",
                                                                                "status": "True"}]}},
                         "application/strategic-merge-patch+json", token=T)
        eq(st, 200, "conditions allowed")

    def test_29_t34_one_event_per_write(self):
        rv = EMU.current_rv()
        s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%%3Dn1&resourceVersion=%d" % rv)
        EMU.wait_for_watch(r"^/api/v1/nodes$")
        st, _, n = patch("/api/v1/nodes/n1", {"metadata": {"annotations": {"one": "event"}}})
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["metadata"]["resourceVersion"]), ("MODIFIED", n["metadata"]["resourceVersion"]),
           "event RV == response RV")
        eq(history_types(rv, "n1"), [("MODIFIED", rv_of(n))], "exactly one event")
        s.close()

    def test_30_t35_unknown_fields(self):
        st, h, n = patch("/api/v1/nodes/n1", {"spec": {"bogus": 1}, "metadata": {"annotations": {"w": "1"}}})
        eq(st, 200, "warn mode")
        eq(h.get_all("Warning"), ['299 - "unknown field \\"spec.bogus\\""'], "Warning header")
        check("bogus" not in n["spec"], "dropped")
        st, _, e = patch("/api/v1/nodes/n1", {"spec": {"bogus": 1}}, query="?fieldValidation=Strict")
        eq((st, e["reason"], e["details"]["causes"][0]["field"]), (422, "Invalid", "patch"), "strict merge patch")
        st, _, e = patch("/api/v1/nodes/n1", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                              "spec": {"bogus": 1}}, "application/apply-patch+yaml",
                         query="?fieldManager=x&fieldValidation=Strict")
        eq(st, 400, "strict apply patch")


    # ----------------------------------------------------------------------------------------------------------
    # Events, leases
    # ----------------------------------------------------------------------------------------------------------

    def test_31_t36_37_event_create_and_validation(self):
        st, _, ev = api("POST", "/api/v1/namespaces/default/events", event_body("n1.1"))
        eq(st, 201, "created")
        check(ev["metadata"]["uid"] and ev["metadata"]["resourceVersion"] and ev["metadata"]["creationTimestamp"],
              "server-set fields")
        eq((ev["reportingComponent"], ev["reportingInstance"], ev["eventTime"]), ("", "", None), "always present")
        st, _, e = api("POST", "/api/v1/namespaces/default/events", event_body("n1.1"))
        eq((st, e["reason"], e["message"]), (409, "AlreadyExists", 'events "n1.1" already exists'), "duplicate")
        st, _, e = api("POST", "/api/v1/namespaces/nope/events", event_body("n1.2", "nope"))
        eq((st, e["message"]), (404, 'namespaces "nope" not found'), "unknown namespace")
        st, _, e = api("POST", "/api/v1/namespaces/kube-system/events", event_body("n1.3"))
        eq((st, e["reason"]), (400, "BadRequest"), "namespace mismatch")
        st, _, e = api("POST", "/api/v1/namespaces/kube-system/events", event_body("n1.4", "kube-system"))
        eq(st, 422, "node event outside default without eventTime")
        check("involvedObject.namespace: Invalid value" in e["message"], e["message"])
        st, _, e = api("POST", "/api/v1/namespaces/kube-system/events",
                       event_body("n1.5", "kube-system", eventTime="2025-01-02T03:04:05.000001Z"))
        eq(st, 422, "eventTime requires reporting fields")
        check("reportingComponent: Required value" in e["message"] and "action: Required value" in e["message"],
              e["message"])
        st, _, ev = api("POST", "/api/v1/namespaces/kube-system/events",
                        event_body("n1.6", "kube-system", eventTime="2025-01-02T03:04:05.000001Z", action="Apply",
                                   reportingComponent="inplace-agent", reportingInstance="n1"))
        eq(st, 201, "new-style core event in kube-system")

    def test_32_t38_39_41_event_patch_list_ttl(self):
        api("POST", "/api/v1/namespaces/default/events", event_body("n1.p"))
        st, _, ev = patch("/api/v1/namespaces/default/events/n1.p", {"count": 2, "lastTimestamp": "2025-01-02T04:00:00Z",
                                                                     "message": "again"},
                          "application/strategic-merge-patch+json")
        eq((st, ev["count"], ev["lastTimestamp"], ev["message"]), (200, 2, "2025-01-02T04:00:00Z", "again"), "count patch")
        uid = EMU.get_node("n1")["metadata"]["uid"]
        sel = "involvedObject.kind=Node,involvedObject.name=n1,involvedObject.namespace=,involvedObject.uid=" + uid
        st, _, lst = api("GET", "/api/v1/events?fieldSelector=" + urllib.parse.quote(sel) + "&limit=500")
        eq(st, 200, "cross-namespace list")
        check("n1.p" in [i["metadata"]["name"] for i in lst["items"]], "found by involvedObject fields")
        EMU.expire_events(["n1.p"])
        st, _, e = patch("/api/v1/namespaces/default/events/n1.p", {"count": 3},
                         "application/strategic-merge-patch+json")
        eq(st, 404, "patch after expiry")
        EMU.config(event_ttl=0.3)
        try:
            api("POST", "/api/v1/namespaces/default/events", event_body("n1.ttl"))
            wait_for(lambda: api("GET", "/api/v1/namespaces/default/events/n1.ttl")[0] == 404, 5, "TTL expiry")
            check(any(e["name"] == "n1.ttl" and e["type"] == "DELETED"
                      for e in EMU.history(resource="events")["events"]), "DELETED event on expiry")
        finally:
            EMU.config(event_ttl=3600.0)

    def test_33_t40_events_k8s_io(self):
        base = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "n1.v1", "namespace": "default"},
                "eventTime": "2025-01-02T03:04:05.123456Z", "reportingController": "example.com/inplace-agent",
                "reportingInstance": "n1", "action": "Apply", "reason": "Applied", "type": "Normal",
                "regarding": {"kind": "Node", "name": "n1"}, "note": "hello"}
        path = "/apis/events.k8s.io/v1/namespaces/default/events"
        st, _, e = api("POST", path, dict(base, deprecatedCount=3))
        eq(st, 422, "deprecated field set")
        check("count: Invalid value" in e["message"], e["message"])
        eq(api("POST", path, dict(base, note="x" * 1025))[0], 422, "note too long")
        eq(api("POST", path, dict(base, type="Info"))[0], 422, "bad type")
        st, _, e = api("POST", path, dict(base, eventTime="2025-01-02T03:04:05Z"))
        eq(st, 400, "MicroTime needs six fractional digits")
        st, _, ev = api("POST", path, base)
        eq((st, ev["apiVersion"], ev["note"]), (201, "events.k8s.io/v1", "hello"), "created")
        st, _, core = api("GET", "/api/v1/namespaces/default/events/n1.v1")
        eq((core["reportingComponent"], core["message"], core["eventTime"]),
           ("example.com/inplace-agent", "hello", "2025-01-02T03:04:05.123456Z"), "same storage, core view")

    def test_34_t42_leases(self):
        path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": "inplace-agent-n1", "namespace": "kube-system"},
                "spec": {"holderIdentity": "inplace-agent-n1", "leaseDurationSeconds": 40,
                         "renewTime": "2025-01-02T03:04:05.123456Z"}}
        st, _, l1 = api("POST", path, body)
        eq(st, 201, "create")
        eq(api("POST", path, body)[0], 409, "already exists")
        st, _, got = api("GET", path + "/inplace-agent-n1")
        eq((st, got["spec"]["renewTime"]), (200, "2025-01-02T03:04:05.123456Z"), "MicroTime")
        l1["spec"]["renewTime"] = "2025-01-02T03:04:15.000000Z"
        st, _, l2 = api("PUT", path + "/inplace-agent-n1", l1)
        eq(st, 200, "renew")
        check(rv_of(l2) > rv_of(l1), "new RV")
        st, _, e = api("PUT", path + "/inplace-agent-n1", l1)
        eq((st, e["message"]), (409, 'Operation cannot be fulfilled on leases.coordination.k8s.io "inplace-agent-n1": '
                                     'the object has been modified; please apply your changes to the latest version '
                                     'and try again'), "stale RV")
        eq(e["details"], {"name": "inplace-agent-n1", "group": "coordination.k8s.io", "kind": "leases"}, "details")
        l2["spec"]["renewTime"] = "2025-01-02T03:04:15Z"
        eq(api("PUT", path + "/inplace-agent-n1", l2)[0], 400, "renewTime without micros")
        eq(api("GET", path + "/missing")[0], 404, "missing lease")


    # ----------------------------------------------------------------------------------------------------------
    # Throttling and faults (§10)
    # ----------------------------------------------------------------------------------------------------------

    def test_35_f07_429_plain_retry_after(self):
        EMU.inject("too-many-requests", verbs=["get", "patch", "create", "watch"], count=4, params={"retry_after": 7})
        st, h, body = EMU.https("GET", "/api/v1/nodes/n1")
        eq((st, h["Retry-After"], h["Content-Type"], body), (429, "7", "text/plain; charset=utf-8",
                                                              b"Too many requests, please try again later.\n"), "GET")
        eq(patch("/api/v1/nodes/n1", {})[0], 429, "PATCH")
        eq(api("POST", "/api/v1/namespaces/default/events", event_body("n1.429"))[0], 429, "POST")
        s = watch("/api/v1/nodes?watch=1")
        eq((s.status, s.headers["retry-after"]), (429, "7"), "watch-open")
        s.close()
        eq(api("GET", "/api/v1/nodes/n1")[0], 200, "count exhausted")
        EMU.inject("too-many-requests", params={"json": True, "retry_after": 3})
        st, h, body = api("GET", "/api/v1/nodes/n1")
        eq((st, h["Retry-After"], body["reason"], body["details"]["retryAfterSeconds"]), (429, "3", "TooManyRequests", 3),
           "JSON 429")
        log = [e for e in EMU.request_log() if e["status"] == 429]
        check(len(log) >= 5 and all(e["fault"] == "too-many-requests" for e in log), "request log records the fault")

    def test_36_f08_503_500_bursts(self):
        EMU.inject("service-unavailable", count=1)
        st, h, body = api("GET", "/api/v1/nodes/n1")
        eq((st, body["reason"], h.get("Retry-After")), (503, "ServiceUnavailable", None), "503 without Retry-After")
        EMU.inject("too-many-requests", params={"retry_after": None})
        st, h, _ = api("GET", "/api/v1/nodes/n1")
        eq((st, h.get("Retry-After")), (429, None), "429 without Retry-After")
        EMU.inject("internal-error", count=3, verbs=["get"])
        codes = [api("GET", "/api/v1/nodes/n1")[0] for _ in range(4)]
        eq(codes, [500, 500, 500, 200], "500 burst")
        EMU.inject("internal-error", count=-1, verbs=["list"], duration=0.3)
        eq(api("GET", "/api/v1/nodes")[0], 500, "time-bounded burst")
        wait_for(lambda: api("GET", "/api/v1/nodes")[0] == 200, 3, "burst over")
        EMU.clear_faults()

    def test_37_f09_slow_server(self):
        EMU.inject("slow-headers", params={"delay": 0.4})
        t0 = time.monotonic()
        eq(api("GET", "/api/v1/nodes/n1")[0], 200, "slow but fine")
        check(time.monotonic() - t0 >= 0.4, "delayed")
        EMU.config(request_timeout=0.3)
        try:
            EMU.inject("slow-headers", params={"delay": 5})
            st, _, body = api("GET", "/api/v1/nodes/n1")
            eq((st, body["reason"], body["message"]), (504, "Timeout", "Timeout: request did not complete within "
                                                       "requested timeout - context deadline exceeded"), "server cut")
        finally:
            EMU.config(request_timeout=60.0)
        EMU.inject("slow-drip", params={"bytes": 1024, "interval": 0.05})
        s = RawStream(EMU, "/api/v1/nodes/n1")
        t0 = time.monotonic()
        body = s.body()
        check(time.monotonic() - t0 > 0.2 and json.loads(body)["kind"] == "Node", "dripped body")
        s.close()
        EMU.inject("watch-silent", params={"duration": 0.6})
        s = watch("/api/v1/nodes?watch=1")
        t0 = time.monotonic()
        eq(s.next_line(5), None, "silent watch sends nothing (not even ADDED) and ends")
        check(time.monotonic() - t0 >= 0.55, "silent for the duration")
        s.close()

    def test_38_f01_watch_drop_after_n(self):
        EMU.inject("watch-drop", params={"after_events": 2})
        s = watch("/api/v1/nodes?watch=1")
        got = 0
        try:
            while True:
                if s.next_event(5) is None:
                    raise AssertionError("clean end instead of a drop")
                got += 1
        except EOFError:
            pass
        eq(got, 2, "events before the drop")
        check(not s.ended_cleanly, "no terminating chunk")
        w = wait_for(lambda: EMU.watches()[-1]["end_reason"], 5, "watch log end")
        eq(w, "fault-drop", "watch log")
        s.close()

    def test_39_f02_f03_truncated_and_garbage(self):
        EMU.inject("watch-truncate", params={"after_events": 1})
        s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1")
        eq(s.next_event(5)["type"], "ADDED", "first event")
        try:
            line = s.next_line(5)
            raise AssertionError("complete line after truncation: %r" % line)
        except EOFError:
            check(s.pending and not s.pending.endswith(b"\n"), "half an event received")
        s.close()
        EMU.inject("watch-garbage", params={"after_events": 1})
        s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1")
        s.next_event(5)
        eq(s.next_line(5), b"this is not json", "garbage line")
        s.close()
        EMU.inject("watch-garbage", params={"unknown_type": True, "then": "close"})
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % EMU.current_rv())
        eq(s.next_event(5)["type"], "UNKNOWN", "unknown type")
        eq(s.next_line(5), None, "then closed")
        s.close()

    def test_40_f04_f05_f06_expired_and_short(self):
        EMU.inject("watch-expired")
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % EMU.current_rv())
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["code"], ev["object"]["reason"]), ("ERROR", 410, "Expired"), "in-stream 410")
        eq(s.next_line(5), None, "closed")
        s.close()
        EMU.inject("expired", verbs=["watch"])
        st, _, body = api("GET", "/api/v1/nodes?watch=1&resourceVersion=5")
        eq((st, body["reason"]), (410, "Expired"), "plain HTTP 410 at watch start")
        EMU.inject("expired", verbs=["list"])
        eq(api("GET", "/api/v1/nodes?resourceVersion=5")[0], 410, "410 on relist")
        EMU.inject("watch-short", count=3)
        for _ in range(3):
            t0 = time.monotonic()
            s = watch("/api/v1/nodes?watch=1")
            eq(s.next_line(5), None, "short watch")
            check(time.monotonic() - t0 < 1 and s.ended_cleanly, "clean and quick")
            s.close()

    def test_41_f10_unreachable(self):
        EMU.listen("refuse", seconds=0.5)
        try:
            socket.create_connection(("127.0.0.1", EMU.port), timeout=2).close()
            raise AssertionError("connected while refusing")
        except ConnectionRefusedError:
            pass
        wait_for(lambda: api("GET", "/version")[0] == 200 if _connectable() else False, 5, "listener back")
        EMU.listen("blackhole")
        try:
            raw = socket.create_connection(("127.0.0.1", EMU.port), timeout=2)
            ctx = ssl.create_default_context(cafile=EMU.ca)
            raw.settimeout(0.5)
            try:
                ctx.wrap_socket(raw, server_hostname="localhost")
                raise AssertionError("handshake completed in blackhole mode")
            except (socket.timeout, TimeoutError):
                pass
            finally:
                raw.close()
        finally:
            EMU.listen("normal")
        eq(api("GET", "/version")[0], 200, "normal again")

    def test_42_f11_tls_faults(self):
        for mode, what in (("wrong-ca", "certificate verify failed"), ("wrong-san", "match"),
                           ("expired", "expired")):
            EMU.tls(cert=mode)
            try:
                api("GET", "/version")
                raise AssertionError("TLS accepted with %s" % mode)
            except ssl.SSLCertVerificationError as e:
                check(what in str(e), "%s: %s", mode, e)
        EMU.tls(cert="good", client_auth="required")
        try:
            try:
                st = api("GET", "/version")[0]
                raise AssertionError("request without client cert answered %d" % st)
            except (ssl.SSLError, ConnectionError, http.client.HTTPException, OSError):
                pass
            c = EMU.make_client_cert("admin", "admin", ["system:masters"])
            eq(api("GET", "/api/v1/nodes/n1", token=None, cert=c["cert"], key=c["key"])[0], 200, "with client cert")
        finally:
            EMU.tls(cert="good", client_auth="optional")
        check(any(not t["ok"] for t in EMU.connections()["tls"]), "TLS failures are logged")

    def test_43_f13_f14_conflict_forbidden(self):
        EMU.inject("conflict", verbs=["patch"])
        st, _, e = patch("/api/v1/nodes/n1", {"metadata": {"labels": {"c": "1"}}})
        eq((st, e["reason"], e["details"]), (409, "Conflict", {"name": "n1", "kind": "nodes"}), "injected 409")
        EMU.inject("forbidden", path=r"/secrets/", count=-1)
        st, _, e = api("GET", "/api/v1/namespaces/kube-system/secrets/osc")
        eq((st, e["reason"]), (403, "Forbidden"), "injected 403")
        check(e["message"].startswith('secrets "osc" is forbidden: User "emulator-admin" cannot get resource "secrets" '
                                      'in API group "" in the namespace "kube-system"'), e["message"])
        EMU.clear_faults()

    def test_44_f17_rv_discontinuity(self):
        rv = EMU.current_rv()
        EMU.rv_jump(1000)
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % rv)
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["code"]), ("ERROR", 410), "jump -> 410")
        s.close()
        EMU.config(too_large_wait=0.2)
        try:
            high = EMU.current_rv()
            EMU.rv_reset(50)
            s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % high)
            ev = s.next_event(5)
            eq((ev["type"], ev["object"]["code"]), ("ERROR", 504), "reset -> too large")
            s.close()
            check(rv_of(node()) <= 50, "objects restamped")
        finally:
            EMU.config(too_large_wait=3.0)

    def test_45_f18_goaway_and_shutdown(self):
        ctx = EMU.ssl_context()
        c = http.client.HTTPSConnection("127.0.0.1", EMU.port, context=ctx, timeout=5)
        hdr = {"Authorization": "Bearer " + EMU.token}
        c.request("GET", "/api/v1/nodes/n1", headers=hdr)
        eq(c.getresponse().read() and 200, 200, "first request")
        s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % EMU.current_rv())
        EMU.wait_for_watch(r"^/api/v1/nodes$")
        EMU.close_connections(watches="clean", idle=True)
        eq(s.next_line(5), None, "watch ended cleanly")
        s.close()
        try:
            c.request("GET", "/api/v1/nodes/n1", headers=hdr)
            c.getresponse().read()
            raise AssertionError("idle keep-alive connection survived")
        except (http.client.HTTPException, ConnectionError, OSError):
            pass
        c.close()
        EMU.inject("shutdown")
        st, h, body = EMU.https("GET", "/api/v1/nodes/n1")
        eq((st, h["Retry-After"], h["Connection"], body), (429, "5", "close",
                                                            b"The apiserver is shutting down, please try again later.\n"),
           "shutdown")
        EMU.inject("close", verbs=["patch"])
        try:
            patch("/api/v1/nodes/n1", {"metadata": {"labels": {"lost": "1"}}})
            raise AssertionError("PATCH got a response")
        except (http.client.HTTPException, ConnectionError, OSError):
            pass
        check("lost" not in node()["metadata"].get("labels", {}), "closed before the write")

    def test_46_f19_gzip_large(self):
        big = {"big%04d" % i: "v" * 60 for i in range(3000)}
        EMU.label_node("n1", annotations=big)
        st, h, body = EMU.https("GET", "/api/v1/nodes/n1", headers={"Accept-Encoding": "gzip"})
        eq((st, h.get("Content-Encoding")), (200, "gzip"), "gzip")
        import gzip
        check(len(json.loads(gzip.decompress(body))["metadata"]["annotations"]) >= 3000, "decompresses")
        EMU.label_node("n1", annotations={k: None for k in big})

    def test_47_z_request_log_shape(self):
        EMU.clear_request_log()
        patch("/api/v1/nodes/n1", {"metadata": {"annotations": {"log": "1"}}}, "application/merge-patch+json")
        e = EMU.request_log(verb="patch")[-1]
        for k in ("time", "method", "path", "query", "status", "user", "content_type", "body", "audit_id"):
            check(k in e, "request log has %s", k)
        eq((e["method"], e["path"], e["status"], e["user"], e["content_type"]),
           ("PATCH", "/api/v1/nodes/n1", 200, "emulator-admin", "application/merge-patch+json"), "entry")

    def test_48_c01_control_helpers(self):
        rv = EMU.current_rv()
        n = EMU.set_condition("n1", "InPlaceUpdate", "True", "CandidateForUpdate", "Node is a candidate for in-place update")
        c = [x for x in n["status"]["conditions"] if x["type"] == "InPlaceUpdate"][0]
        eq((c["status"], c["reason"]), ("True", "CandidateForUpdate"), "condition set")
        eq([t for t, _ in history_types(rv, "n1")], ["MODIFIED"], "one MODIFIED event")
        check(any(m["manager"] == "machine-controller-manager" and m.get("subresource") == "status"
                  for m in n["metadata"]["managedFields"]), "MCM owns it via the status subresource")
        same = EMU.set_condition("n1", "InPlaceUpdate", "True", "CandidateForUpdate",
                                 "Node is a candidate for in-place update")
        eq(same["metadata"]["resourceVersion"], n["metadata"]["resourceVersion"], "unchanged condition is a no-op")
        n2 = EMU.set_condition("n1", "InPlaceUpdate", "True", "ReadyForUpdate", "Node is ready for in-place update")
        c2 = [x for x in n2["status"]["conditions"] if x["type"] == "InPlaceUpdate"][0]
        eq(c2["reason"], "ReadyForUpdate", "reason moved")
        n3 = EMU.set_condition("n1", "InPlaceUpdate", remove=True)
        check(not [x for x in n3["status"]["conditions"] if x["type"] == "InPlaceUpdate"], "removed")
        check([x for x in n3["status"]["conditions"] if x["type"] == "Ready"], "others kept")
        EMU.write_token_file("rotated-token")
        with open(EMU.token_file) as f:
            eq(f.read().strip(), "rotated-token", "token file rewritten")

    def test_49_c02_more_faults(self):
        EMU.inject("status", params={"code": 418, "reason": "Teapot", "message": "short and stout", "retry_after": 2})
        st, h, body = api("GET", "/api/v1/nodes/n1")
        eq((st, body["reason"], body["message"], h["Retry-After"]), (418, "Teapot", "short and stout", "2"), "status")
        EMU.inject("status", params={"code": 502, "plain": True, "body": "bad gateway\n"})
        st, h, body = EMU.https("GET", "/api/v1/nodes/n1")
        eq((st, body, h["Content-Type"]), (502, b"bad gateway\n", "text/plain; charset=utf-8"), "plain status")
        EMU.inject("unauthorized")
        eq(api("GET", "/api/v1/nodes/n1")[0], 401, "unauthorized")
        EMU.inject("not-found", name="n1")
        eq(api("GET", "/api/v1/nodes/n1")[0], 404, "not-found")
        EMU.inject("timeout", params={"delay": 0.1})
        eq(api("GET", "/api/v1/nodes/n1")[2]["reason"], "Timeout", "timeout")
        EMU.inject("internal-error", verbs=["get"], after=1)
        eq([api("GET", "/api/v1/nodes/n1")[0] for _ in range(3)], [200, 500, 200], "after skips matches")
        EMU.inject("forbidden", user="system:node:n1", count=-1)
        eq(api("GET", "/api/v1/nodes/n1")[0], 200, "user filter: admin unaffected")
        eq(api("GET", "/api/v1/nodes/n1", token=NODE_TOKEN)[0], 403, "user filter: node hit")
        EMU.clear_faults()
        eq(EMU.faults(), [], "cleared")
        EMU.inject("watch-error", params={"code": 500, "reason": "InternalError"})
        s = watch("/api/v1/nodes?watch=1")
        ev = s.next_event(5)
        eq((ev["type"], ev["object"]["code"]), ("ERROR", 500), "watch-error")
        eq(s.next_line(5), None, "then end")
        s.close()
        EMU.inject("watch-end", params={"after_events": 1})
        s = watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%3Dn1")
        eq(s.next_event(5)["type"], "ADDED", "one event")
        eq(s.next_line(5), None, "clean end after it")
        s.close()

    def test_50_c03_history_window(self):
        EMU.config(history_max_events=3)
        try:
            rv = EMU.current_rv()
            for i in range(5):
                EMU.patch("nodes", "n2", {"metadata": {"annotations": {"h": str(i)}}})
            h = EMU.history()
            eq(len(h["events"]), 3, "window")
            check(h["floor"] > rv, "floor moved")
            s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % rv)
            eq(s.next_event(5)["object"]["code"], 410, "outside the window -> 410")
            s.close()
            s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % h["floor"])
            eq(len(drain(s, 3)), 3, "inside the window -> replay")
            s.close()
        finally:
            EMU.config(history_max_events=10000)
        EMU.config(coalesce=False)
        try:
            s = watch("/api/v1/nodes?watch=1&resourceVersion=%d" % EMU.current_rv())
            EMU.wait_for_watch(r"^/api/v1/nodes$")
            EMU.batch([{"op": "patch", "name": "n2", "patch": {"metadata": {"annotations": {"nc": str(i)}}}}
                       for i in range(2)])
            eq(s.read_chunk().count(b"\n"), 1, "coalesce=false: one event per chunk")
            s.close()
        finally:
            EMU.config(coalesce=True)


if __name__ == "__main__":
    itest.main(missing=itest.programs("openssl"))
