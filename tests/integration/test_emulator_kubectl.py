#!/usr/bin/env python3
"""The API-server emulator is faithful enough for the real kubectl.

Drives /usr/bin/kubectl (or kubectl on PATH) against the emulator's generated kubeconfig: get, -o json, label,
annotate, get -w (a label set from another process arrives on the stream), describe node with a POSTed Event,
strategic-merge / merge / JSON patches, server-side apply with a field-manager conflict, and the Status errors
kubectl renders. 415/409/404/403 are also checked over raw HTTPS. Exits 77 when kubectl is missing.
"""

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

from lib import itest
from lib.itest import check, eq

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl") or ("/usr/bin/kubectl" if os.access("/usr/bin/kubectl", os.X_OK) else None)
NODE_TOKEN = "kubectl-node-token"
EMU = ENV = None    # the module's emulator (itest.emulator_fixture), kubectl's environment


def kubectl(*args, ok=True, kubeconfig=None, timeout=30):
    env = dict(ENV, KUBECONFIG=kubeconfig or EMU.kubeconfig)
    r = subprocess.run([KUBECTL] + list(args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    out, err = r.stdout.decode(), r.stderr.decode()
    if ok and r.returncode != 0:
        raise AssertionError("kubectl %s failed (%d): %s" % (" ".join(args), r.returncode, err))
    if not ok and r.returncode == 0:
        raise AssertionError("kubectl %s unexpectedly succeeded: %s" % (" ".join(args), out))
    return out, err


class LineReader:
    """Collects a subprocess' stdout lines in a thread so the test can wait with a deadline."""

    def __init__(self, proc):
        self.q = queue.Queue()
        self.proc = proc
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        for line in iter(self.proc.stdout.readline, b""):
            self.q.put(line.decode().rstrip("\n"))
        self.q.put(None)

    def next(self, timeout=10):
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no output line within %ss" % timeout) from None
        if line is None:
            raise AssertionError("kubectl exited: %s" % self.proc.stderr.read().decode())
        return line


def watch_proc(*args):
    p = subprocess.Popen([KUBECTL] + list(args), env=dict(ENV, KUBECONFIG=EMU.kubeconfig), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    return p, LineReader(p)


def stop_proc(p):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def kubeemu_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def kubectl_home(emu):
    """kubectl's own HOME and cache, away from the user's."""
    global ENV
    home = tempfile.mkdtemp(prefix="kubectl-home-")
    unittest.addModuleCleanup(shutil.rmtree, home, ignore_errors=True)
    ENV = dict(os.environ, HOME=home, KUBECACHEDIR=os.path.join(home, "cache"))
    ENV.pop("KUBECONFIG", None)


setUpModule, tearDownModule = itest.emulator_fixture(
    globals(), setup=kubectl_home,
    nodes=["n1", "n2"], tokens=["kubectl-admin-token", NODE_TOKEN + "=system:node:n1,system:nodes"])


class EmulatorKubectl(itest.EmulatorTest):
    def test_k01_get_node_table(self):
        out, _ = kubectl("get", "node", "n1")
        lines = out.splitlines()
        eq(lines[0].split(), ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "header")
        cols = lines[1].split()
        eq((cols[0], cols[1], cols[2], cols[4]), ("n1", "Ready", "<none>", "v1.31.4"), "row")
        out, _ = kubectl("get", "nodes", "-o", "wide")
        check("INTERNAL-IP" in out and "Garden Linux 1592.6" in out, "wide columns: %s", out)
        log = EMU.request_log(path=r"^/api/v1/nodes")
        check(any("as=Table" in (e["accept"] or "") for e in log), "kubectl asked for server-side tables")

    def test_k02_get_json(self):
        out, _ = kubectl("get", "node", "n1", "-o", "json")
        n = json.loads(out)
        eq((n["kind"], n["apiVersion"], n["metadata"]["name"]), ("Node", "v1", "n1"), "object")
        eq(n["metadata"]["resourceVersion"], EMU.get_node("n1")["metadata"]["resourceVersion"], "RV")

    def test_k03_label_annotate(self):
        out, _ = kubectl("label", "node", "n1", "example.com/role=edge")
        eq(out.strip(), "node/n1 labeled", "label output")
        out, _ = kubectl("annotate", "node", "n1", "example.com/checksum=abc123")
        check(out.strip().startswith("node/n1 annotate"), "annotate output: %r", out)   # 1.27 prints "annotate"
        md = EMU.get_node("n1")["metadata"]
        eq((md["labels"]["example.com/role"], md["annotations"]["example.com/checksum"]), ("edge", "abc123"), "stored")
        patches = EMU.request_log(verb="patch")
        eq([e["content_type"] for e in patches[-2:]], ["application/merge-patch+json"] * 2, "kubectl uses merge patch")
        check(any(m["manager"] == "kubectl-label" for m in md["managedFields"]), "kubectl-label owns its label")

    def test_k04_get_watch_sees_change(self):
        kubectl("label", "node", "n1", "tier=a", "--overwrite")
        p, r = watch_proc("get", "node", "n1", "-w", "-o", "custom-columns=NAME:.metadata.name,TIER:.metadata.labels.tier")
        p2, r2 = watch_proc("get", "node", "n1", "-w", "--output-watch-events")
        try:
            eq(r.next().split(), ["NAME", "TIER"], "header")
            eq(r.next().split(), ["n1", "a"], "initial row")
            eq(r2.next().split()[:3], ["EVENT", "NAME", "STATUS"], "table watch header")
            eq(r2.next().split()[:3], ["ADDED", "n1", "Ready"], "table watch ADDED")
            EMU.wait_for_watch(r"^/api/v1/nodes$", count=2)
            kubectl("label", "node", "n1", "tier=b", "--overwrite")       # another process
            eq(r.next().split(), ["n1", "b"], "change arrived on the stream")
            eq(r2.next().split()[:2], ["MODIFIED", "n1"], "table watch MODIFIED")
        finally:
            stop_proc(p)
            stop_proc(p2)
        w = [x for x in EMU.request_log(verb="watch") if x["path"] == "/api/v1/nodes"]
        check(w and "fieldSelector=metadata.name%3Dn1" in w[-1]["query"], "kubectl watched with a name selector: %s",
              w[-1]["query"] if w else None)

    def test_k05_describe_shows_event(self):
        uid = EMU.get_node("n1")["metadata"]["uid"]
        ev = {"apiVersion": "v1", "kind": "Event",
              "metadata": {"name": "n1.%x" % time.time_ns(), "namespace": "default"},
              "involvedObject": {"kind": "Node", "name": "n1", "uid": uid, "apiVersion": "v1"},
              "reason": "InPlaceUpdateSucceeded", "message": "kubelet updated to v1.31.5", "type": "Normal",
              "source": {"component": "inplace-agent", "host": "n1"}, "firstTimestamp": kubeemu_now(),
              "lastTimestamp": kubeemu_now(), "count": 1, "reportingComponent": "inplace-agent",
              "reportingInstance": "n1"}
        st, _, body = EMU.https_json("POST", "/api/v1/namespaces/default/events", ev)
        eq(st, 201, "event created")
        kubelet_style = dict(ev, metadata={"name": "n1.kubelet", "namespace": "default"},
                             involvedObject={"kind": "Node", "name": "n1", "uid": "n1"}, reason="NodeReady",
                             message="Node n1 status is now: NodeReady")
        eq(EMU.https_json("POST", "/api/v1/namespaces/default/events", kubelet_style)[0], 201, "kubelet-style event")
        since = EMU.request_log()[-1]["seq"]
        out, _ = kubectl("describe", "node", "n1")
        events = out[out.index("Events:"):]
        check("NodeReady" in events, "event with uid=node name shown:\n%s", events)
        queries = [e["params"].get("fieldSelector", "") for e in EMU.request_log(since=since, path="^/api/v1/events$")]
        if any("involvedObject.uid=" + uid in q for q in queries):
            # kubectl >= 1.2x also searches by the Node's real uid (older ones only by uid=name)
            check("InPlaceUpdateSucceeded" in events and "kubelet updated to v1.31.5" in events and
                  "inplace-agent" in events, "agent event in describe output:\n%s", events)
        else:
            print("     (this kubectl only looks up node events by uid=<node name>)")
        check("KubeletReady" in out and "kubelet is posting ready status" in out, "conditions rendered:\n%s", out)
        out, _ = kubectl("get", "events", "-n", "default")
        check("InPlaceUpdateSucceeded" in out and "node/n1" in out, "get events table:\n%s", out)

    def test_k06_patch_status_strategic(self):
        if "--subresource" not in kubectl("patch", "--help")[0]:
            print("     (kubectl too old for patch --subresource; status patches are covered by emulator-semantics)")
            return
        before = [c["type"] for c in EMU.get_node("n1")["status"]["conditions"]]
        out, _ = kubectl("patch", "node", "n1", "--subresource=status", "--type=strategic", "-p", json.dumps(
            {"status": {"conditions": [{"type": "InPlaceUpdateAgent", "status": "True", "reason": "Idle",
                                        "message": "nothing to do"}]}}))
        eq(out.strip(), "node/n1 patched", "output")
        conds = EMU.get_node("n1")["status"]["conditions"]
        eq([c["type"] for c in conds], before + ["InPlaceUpdateAgent"], "other conditions kept")
        e = EMU.request_log(verb="patch")[-1]
        eq((e["path"], e["content_type"]), ("/api/v1/nodes/n1/status", "application/strategic-merge-patch+json"), "wire")
        out, _ = kubectl("patch", "node", "n1", "--subresource=status", "--type=strategic", "-p", json.dumps(
            {"status": {"conditions": [{"type": "InPlaceUpdateAgent", "status": "True", "reason": "Idle",
                                        "message": "nothing to do"}]}}))
        eq(out.strip(), "node/n1 patched (no change)", "no-op patch recognised by kubectl (same RV)")

    def test_k07_patch_merge_null_and_json(self):
        kubectl("patch", "node", "n1", "--type=merge", "-p", '{"metadata":{"labels":{"example.com/role":null}}}')
        check("example.com/role" not in EMU.get_node("n1")["metadata"]["labels"], "null deleted the label")
        kubectl("patch", "node", "n1", "--type=json", "-p",
                '[{"op":"add","path":"/metadata/labels/example.com~1zone","value":"z1"}]')
        eq(EMU.get_node("n1")["metadata"]["labels"].get("example.com/zone"), "z1", "JSON patch with ~1")
        _, err = kubectl("patch", "node", "n1", "--type=json", "-p",
                         '[{"op":"test","path":"/metadata/labels/example.com~1zone","value":"nope"}]', ok=False)
        # newer kubectl prints the Status message, older ones "The request is invalid" for a 422 without causes
        check("the server rejected our request due to an error in our request" in err or
              "The request is invalid" in err, err)

    def test_k08_server_side_apply(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    applied: \"yes\"\n")
        try:
            out, _ = kubectl("apply", "--server-side", "--field-manager=tester", "-f", f.name)
            eq(out.strip(), "node/n1 serverside-applied", "apply")
            kubectl("label", "node", "n1", "applied=no", "--overwrite")
            _, err = kubectl("apply", "--server-side", "--field-manager=tester", "-f", f.name, ok=False)
            check('Apply failed with 1 conflict: conflict with "kubectl-label" using v1: .metadata.labels.applied' in err,
                  err)
            kubectl("apply", "--server-side", "--field-manager=tester", "--force-conflicts", "-f", f.name)
            eq(EMU.get_node("n1")["metadata"]["labels"]["applied"], "yes", "forced")
        finally:
            os.unlink(f.name)

    def test_k09_errors_rendered_by_kubectl(self):
        _, err = kubectl("get", "node", "missing", ok=False)
        eq(err.strip(), 'Error from server (NotFound): nodes "missing" not found', "404")
        _, err = kubectl("label", "node", "n1", "x=y", "--resource-version=1", ok=False)
        eq(err.strip(), 'Error from server (Conflict): Operation cannot be fulfilled on nodes "n1": the object has been '
                        'modified; please apply your changes to the latest version and try again', "409")
        node_kc = os.path.join(EMU.state_dir, "kubeconfig-node")
        with open(EMU.kubeconfig) as f:
            text = f.read().replace(EMU.token, NODE_TOKEN)
        with open(node_kc, "w") as f:
            f.write(text)
        _, err = kubectl("get", "nodes", kubeconfig=node_kc, ok=False)
        check(err.strip().startswith('Error from server (Forbidden): nodes is forbidden: User "system:node:n1" cannot '
                                     'list resource "nodes" in API group "" at the cluster scope'), err)
        out, _ = kubectl("get", "node", "n1", "-o", "name", kubeconfig=node_kc)
        eq(out.strip(), "node/n1", "own node readable")
        _, err = kubectl("label", "node", "n1", "kubernetes.io/foo=bar", kubeconfig=node_kc, ok=False)
        check("is not allowed to modify labels: kubernetes.io/foo" in err, err)
        _, err = kubectl("label", "node", "n1", "bad=bad value!", ok=False)
        check("Invalid value" in err or "invalid label value" in err, err)

    def test_k10_raw_http_statuses(self):
        st, _, body = EMU.https_json("PATCH", "/api/v1/nodes/n1", b"{}", headers={"Content-Type": "text/plain"})
        eq((st, body["reason"]), (415, "UnsupportedMediaType"), "415")
        stale = str(int(EMU.get_node("n1")["metadata"]["resourceVersion"]) - 1)
        st, _, body = EMU.https_json("PATCH", "/api/v1/nodes/n1", json.dumps(
            {"metadata": {"resourceVersion": stale, "labels": {"z": "1"}}}).encode(),
            headers={"Content-Type": "application/merge-patch+json"})
        eq((st, body["reason"]), (409, "Conflict"), "409")
        st, _, body = EMU.https_json("GET", "/api/v1/nodes/nope")
        eq((st, body["details"]), (404, {"name": "nope", "kind": "nodes"}), "404")
        st, _, body = EMU.https_json("GET", "/api/v1/nodes/n2", token=NODE_TOKEN)
        eq((st, body["reason"]), (403, "Forbidden"), "403")


if __name__ == "__main__":
    itest.main(missing=[] if KUBECTL else ["kubectl"])
