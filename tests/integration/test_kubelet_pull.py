#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Kubelet staging against a real registry (Debian's docker-registry with TLS): pull, verify, extract
one file, store, switch, health-check, roll back, and every failure with its code (docs/contract.md §8.9):
corrupted blob and manifest (DigestMismatch), 404, registry down, 401 (ArtifactUnavailable), unsafe
layers and decompression bombs (UnsafeArchive), SIGKILL mid-download then resume, mirrors with
fallback and blob redirects, and the registry fault matrix (slow drip, resets, truncation, 5xx storm,
wrong Content-Length, redirect to another host; test_11_blob_faults). Drives tests/helpers/pull.c ($PULL)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from lib import itest
import registry

PULL = os.environ.get("PULL", "")
FAILURES = []
WORK = ROOT = REG = None     # setUpModule


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what, file=sys.stderr)
    return cond


class Case:
    def __init__(self, root, name, reg):
        self.dir = os.path.join(root, name)
        os.makedirs(self.dir)
        self.state = os.path.join(self.dir, "state")
        self.bin = os.path.join(self.dir, "opt/bin/kubelet")
        self.reg = reg

    def pull(self, image, file="/usr/local/bin/kubelet", extra=(), timeout=120, ca=True, wrap=()):
        args = list(wrap) + [PULL, "--state-dir", self.state, "--image", image, "--file", file, "--binary-path", self.bin,
                "--retry-base-ms", "50", "--max-attempts", "3"] + list(extra)
        if ca:
            args += ["--ca-file", self.reg.ca_file]
        started = time.monotonic()
        p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        try:
            out = json.loads(p.stdout)
        except ValueError:
            out = {"ok": False, "raw": p.stdout, "stderr": p.stderr}
        out["_rc"] = p.returncode
        out["_seconds"] = time.monotonic() - started
        # Under ASan/UBSan (tests/run-tests --sanitize) a report fails the case even if the JSON looks fine.
        check("Sanitizer" not in p.stderr and "runtime error" not in p.stderr,
              "sanitizer report from pull %s: %s" % (image, p.stderr[-3000:]))
        return out

    def stored_versions(self):
        d = os.path.join(self.state, "kubelet")
        return sorted(os.listdir(d)) if os.path.isdir(d) else []


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def expect_failure(out, code, *fragments, what=""):
    ok = check(out.get("ok") is False and out.get("_rc") == 1, "%s: should fail: %s" % (what, out))
    ok = check(out.get("code") == code, "%s: code %s != %s (%s)" % (what, out.get("code"), code, out.get("message"))) and ok
    for f in fragments:
        ok = check(f in (out.get("message") or ""), "%s: message lacks %r: %s" % (what, f, out.get("message"))) and ok
    return ok


def answers(port):
    import socket
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def top_layer_digest(reg, repo, tag):
    status, _, body = reg.request("GET", "/v2/%s/manifests/%s" % (repo, tag),
                                  headers={"Accept": registry.OCI_MANIFEST})
    return json.loads(body)["layers"][-1]["digest"]


def setUpModule():
    """One registry for the cases, each in its own directory below ROOT."""
    global WORK, ROOT, REG
    WORK = tempfile.mkdtemp(prefix="kubelet-pull-")
    unittest.addModuleCleanup(shutil.rmtree, WORK, ignore_errors=True)
    ROOT = os.path.join(WORK, "cases")
    os.makedirs(ROOT)
    REG = registry.Registry(WORK)
    unittest.addModuleCleanup(REG.stop)
    REG.start()


class KubeletPull(unittest.TestCase):
    # check() notes a failure and lets the case go on: one run names every broken check.
    def setUp(self):
        del FAILURES[:]

    def tearDown(self):
        self.assertFalse(FAILURES, "%d checks failed" % len(FAILURES))

    def test_01_happy_paths(self):
        root, reg = ROOT, REG
        k1 = registry.fake_kubelet("v1.31.2")
        for flavour, compression, index in (("oci", "gzip", None), ("docker", "gzip", None),
                                            ("oci", "zstd", [("linux", "arm64"), ("linux", "amd64")]),
                                            ("oci", "none", None)):
            name = "happy-%s-%s-%s" % (flavour, compression, "index" if index else "manifest")
            c = Case(root, name, reg)
            ref = reg.push_kubelet_image("1.31.2", k1, compression=compression, flavour=flavour, repo="k-" + name,
                                         index_platforms=index)
            out = c.pull(ref, extra=["--switch"])
            if not check(out.get("ok") is True, "%s: %s" % (name, out)):
                continue
            installed = os.path.join(c.state, "kubelet/1.31.2/kubelet")
            with open(installed, "rb") as f:
                check(sha(f.read()) == sha(k1), name + ": installed file differs from the pushed one")
            check(out["fileDigest"] == sha(k1), name + ": reported digest")
            check(os.readlink(c.bin) == installed, name + ": binaryPath symlink")
            check(os.stat(installed).st_mode & 0o777 == 0o755, name + ": mode 0755")
            check(os.listdir(os.path.join(c.state, "staging/blobs")) == [], name + ": blobs removed after install")
            again = c.pull(ref)
            check(again.get("ok") and again.get("reused") and again.get("bytesDownloaded") == 0,
                  name + ": second stage of the same image is reused without download: %s" % again)

    def test_02_upgrade_gc_and_health(self):
        root, reg = ROOT, REG
        c = Case(root, "upgrade", reg)
        refs = {}
        for v in ("1.31.2", "1.31.3", "1.31.4"):
            refs[v] = reg.push_kubelet_image(v, registry.fake_kubelet("v" + v), repo="upgrade")
        bad = reg.push_kubelet_image("1.32.0", registry.fake_kubelet("v1.32.0", healthy=False), repo="upgrade")
        for v in ("1.31.2", "1.31.3", "1.31.4"):
            out = c.pull(refs[v], extra=["--switch", "--keep", "2"])
            check(out.get("ok") is True, "upgrade %s: %s" % (v, out))
        check(c.stored_versions() == ["1.31.3", "1.31.4"], "keepVersions=2 keeps running + rollback: %s" % c.stored_versions())

        # A healthy kubelet: the stand-in serves /healthz itself.
        port = registry.free_port()
        kubelet = subprocess.Popen([c.bin, "--healthz-port", str(port)])
        try:
            url = "http://127.0.0.1:%d/healthz" % port
            out = c.pull(refs["1.31.4"], extra=["--switch", "--healthz", url, "--health-timeout-ms", "10000"])
            check(out.get("ok") is True and out.get("healthProbes", 0) >= 1, "healthy kubelet passes: %s" % out)
        finally:
            kubelet.kill()
            kubelet.wait()

        # An unhealthy one (answers 500): switched, checked, switched back, KubeletUnhealthy.
        kubelet = subprocess.Popen(["python3", "-c", registry.fake_kubelet("v1.32.0", healthy=False).decode(),
                                    "--healthz-port", str(port)])
        try:
            # Listening before the check starts, so the failure is about health, not start-up time.
            registry.wait_until(lambda: answers(port), 20, "the unhealthy stand-in kubelet")
            out = c.pull(bad, extra=["--switch", "--healthz", url, "--health-timeout-ms", "1500"])
            expect_failure(out, "KubeletUnhealthy", "kubelet is not healthy after in-place update: ", "HTTP 500",
                           what="unhealthy kubelet")
            check(out.get("message", "").startswith("kubelet is not healthy after in-place update: "),
                  "upstream reason text: %s" % out.get("message"))
            check(out.get("rolledBack") is True and out.get("retriable") is False, "rolled back: %s" % out)
            check(os.readlink(c.bin).endswith("/1.31.4/kubelet"), "binaryPath back on 1.31.4: %s" % os.readlink(c.bin))
        finally:
            kubelet.kill()
            kubelet.wait()

    def test_03_adopt(self):
        root, reg = ROOT, REG
        ref = reg.push_kubelet_image("1.31.2", registry.fake_kubelet("v1.31.2"), repo="adopt")
        for name, content, expect in (("adopt-versioned", registry.fake_kubelet("v1.30.9"), "1.30.9"),
                                      ("adopt-unknown", b"#!/bin/sh\necho not a kubelet\n", "adopted")):
            c = Case(root, name, reg)
            os.makedirs(os.path.dirname(c.bin))
            with open(c.bin, "wb") as f:
                f.write(content)
            os.chmod(c.bin, 0o755)
            out = c.pull(ref, extra=["--adopt", "--switch"])
            check(out.get("ok") is True and out.get("adopted") == expect and out.get("previous") == expect,
                  "%s: adopted as %s then switched: %s" % (name, expect, out))
            check(c.stored_versions() == sorted([expect, "1.31.2"]), name + ": store %s" % c.stored_versions())
            with open(os.path.join(c.state, "kubelet", expect, "kubelet"), "rb") as f:
                check(f.read() == content, name + ": the adopted file is the original")
            check(os.readlink(c.bin).endswith("/1.31.2/kubelet"), name + ": binaryPath is a symlink to the new version")

    def test_04_digest_mismatch(self):
        root, reg = ROOT, REG
        # Content of its own: the registry stores blobs by digest, shared between repositories.
        k = registry.fake_kubelet("v1.31.2-tampered-blob")
        ref = reg.push_kubelet_image("1.31.2", k, repo="tampered-blob")
        layer = top_layer_digest(reg, "tampered-blob", "v1.31.2")
        path = reg.blob_file(layer)
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xff
        open(path, "wb").write(bytes(data))
        c = Case(root, "tampered-blob", reg)
        out = c.pull(ref, extra=["--switch"])
        expect_failure(out, "DigestMismatch", "expected " + layer, "got sha256:", what="corrupted blob")
        check(out.get("retriable") is False, "DigestMismatch is terminal")
        check(c.stored_versions() == [] and not os.path.lexists(c.bin), "nothing installed after a digest mismatch")
        check(not any(n for n in os.listdir(os.path.join(c.state, "staging/blobs"))),
              "a bad blob is not kept: %s" % os.listdir(os.path.join(c.state, "staging/blobs")))

        # The manifest itself altered in storage: served for its digest, but no longer hashes to it.
        ref2 = reg.push_kubelet_image("1.31.2", registry.fake_kubelet("v1.31.2-tampered-manifest"),
                                      repo="tampered-manifest")
        status, headers, body = reg.request("GET", "/v2/tampered-manifest/manifests/v1.31.2",
                                            headers={"Accept": registry.OCI_MANIFEST})
        mdigest = headers["Docker-Content-Digest"]
        open(reg.blob_file(mdigest), "wb").write(body.replace(b'"schemaVersion": 2', b'"schemaVersion":2 '))
        for image in (ref2, "%s/tampered-manifest@%s" % (reg.host, mdigest)):
            out = Case(root, "tampered-manifest-%d" % len(image), reg).pull(image, extra=["--version", "1.31.2"])
            expect_failure(out, "DigestMismatch", mdigest, what="tampered manifest " + image)

    def test_05_unavailable(self):
        root, reg = ROOT, REG
        c = Case(root, "unavailable", reg)
        reg.push_kubelet_image("1.31.2", registry.fake_kubelet(), repo="exists")
        out = c.pull("%s/exists:v9.9.9" % reg.host)
        expect_failure(out, "ArtifactUnavailable", "404", "MANIFEST_UNKNOWN", what="unknown tag")
        check(out.get("retriable") is True, "ArtifactUnavailable is retriable")
        out = c.pull("%s/exists@sha256:%s" % (reg.host, "0" * 64), extra=["--version", "1.0.0"])
        expect_failure(out, "ArtifactUnavailable", "404", what="unknown digest")
        out = c.pull("%s/nope:v1.0.0" % reg.host)
        expect_failure(out, "ArtifactUnavailable", "404", what="unknown repository")
        out = c.pull("127.0.0.1:%d/down:v1.0.0" % registry.free_port())
        expect_failure(out, "ArtifactUnavailable", "refused", what="registry down")
        check(out["_seconds"] < 10, "registry down fails within the retry budget (%.1fs)" % out["_seconds"])
        out = c.pull(reg.host + "/exists:v1.31.2", ca=False)
        expect_failure(out, "ArtifactUnavailable", what="unknown CA")
        out = c.pull(reg.host + "/exists:v1.31.2", file="/not/there")
        expect_failure(out, "ArtifactUnavailable", "/not/there not found", what="file not in image")
        out = c.pull("Not A Reference")
        check(out.get("code") == "InvalidDesiredState", "invalid reference: %s" % out)
        check(c.stored_versions() == [], "nothing stored")

    def test_06_unsafe_layers(self):
        root, reg = ROOT, REG
        k = registry.fake_kubelet()
        kub = {"name": "usr/local/bin/kubelet", "data": k}
        cases = {
            "dotdot": [kub, {"name": "../escape", "data": b"evil"}],
            "absolute": [{"name": "/tmp/inplace-agent-test-escape", "data": b"evil"}, kub],
            "symlink-then-file": [{"name": "lnk", "type": "symlink", "linkname": "/tmp"},
                                  {"name": "lnk/inplace-agent-test-escape", "data": b"evil"}, kub],
            "symlink-escape": [{"name": "a/b", "type": "symlink", "linkname": "../../../etc"}, kub],
            "hardlink-escape": [kub, {"name": "h", "type": "hardlink", "linkname": "../../etc/passwd"}],
            "device": [kub, {"name": "dev/mem", "type": "chardev"}],
            "kubelet-is-symlink": [{"name": "usr/local/bin/kubelet", "type": "symlink", "linkname": "/bin/sh"}],
        }
        for name, entries in cases.items():
            layer = registry.compress(registry.tar_bytes(entries), "gzip")
            reg.push_image("unsafe-" + name, "v1.0.0", [(layer, "gzip")])
            c = Case(root, "unsafe-" + name, reg)
            out = c.pull("%s/unsafe-%s:v1.0.0" % (reg.host, name), extra=["--switch"])
            expect_failure(out, "UnsafeArchive", what="unsafe layer " + name)
            check(out.get("retriable") is False, name + ": terminal")
            check(c.stored_versions() == [] and not os.path.lexists(c.bin), name + ": nothing installed")
            check(os.listdir(os.path.join(c.state, "staging")) == ["blobs"], name + ": staging left clean: %s"
                  % os.listdir(os.path.join(c.state, "staging")))
        for p in ("/tmp/inplace-agent-test-escape", os.path.join(root, "escape"), os.path.join(root, "..", "escape")):
            check(not os.path.exists(p), "nothing written outside staging: " + p)

    def test_07_bombs(self):
        root, reg = ROOT, REG
        reg.push_image("bomb-header", "v1.0.0", [(registry.huge_header_bomb(), "gzip")], diff_ids=False)
        c = Case(root, "bomb-header", reg)
        out = c.pull("%s/bomb-header:v1.0.0" % reg.host, file="/kubelet")
        expect_failure(out, "UnsafeArchive", "decompression bomb", what="10 GiB entry")
        check(out["_seconds"] < 10, "refused before inflating (%.1fs)" % out["_seconds"])

        bomb = registry.zero_bomb()
        check(len(bomb) < 40 << 20, "zero bomb is small compressed (%d bytes)" % len(bomb))
        reg.push_image("bomb-zero", "v1.0.0", [(bomb, "gzip")], diff_ids=False)
        c = Case(root, "bomb-zero", reg)
        out = c.pull("%s/bomb-zero:v1.0.0" % reg.host, file="/kubelet", extra=["--max-unpacked", str(512 << 20)])
        expect_failure(out, "UnsafeArchive", "decompression bomb", what="10 GiB of zeros")
        check(out["_seconds"] < 30, "stopped at the limit, not after 10 GiB (%.1fs)" % out["_seconds"])
        check(c.stored_versions() == [], "bomb: nothing installed")

    def test_08_kill_and_resume(self):
        root, reg = ROOT, REG
        big = os.urandom(24 << 20)
        ref = reg.push_kubelet_image("1.31.2", big, repo="big", compression="none")
        size = len(registry.tar_bytes([{"name": "usr/local/bin/", "type": "dir"},
                                       {"name": "usr/local/bin/kubelet", "data": big}]))
        c = Case(root, "kill", reg)
        with registry.Proxy(reg, rate=8 << 20) as proxy:
            mirror = ["--mirror", "%s=%s" % (reg.host, proxy.url)]
            p = subprocess.Popen([PULL, "--state-dir", c.state, "--image", ref, "--file", "/usr/local/bin/kubelet",
                                  "--binary-path", c.bin, "--ca-file", reg.ca_file, "--switch"] + mirror,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            blobs = os.path.join(c.state, "staging/blobs")

            def partial_size():
                for n in os.listdir(blobs) if os.path.isdir(blobs) else []:
                    if n.endswith(".partial") and os.path.getsize(os.path.join(blobs, n)) > 4 << 20:
                        return os.path.getsize(os.path.join(blobs, n))
                return 0

            try:
                registry.wait_until(partial_size, 30, "a partial blob")
            finally:
                p.send_signal(signal.SIGKILL)
                p.wait()
            check(not os.path.lexists(c.bin), "after SIGKILL binaryPath does not exist (never points at a partial file)")
            check(c.stored_versions() == [], "after SIGKILL nothing is in the store")
            before = partial_size()
            out = c.pull(ref, extra=["--switch"] + mirror)
            check(out.get("ok") is True, "restart after SIGKILL completes: %s" % out)
            check(0 < out.get("bytesDownloaded", 0) < size, "resumed: downloaded %s of %d (had %d)"
                  % (out.get("bytesDownloaded"), size, before))
            check(any(r is not None and r.startswith("bytes=") for _, r in proxy.requests), "a Range request was sent")
            with open(c.bin, "rb") as f:
                check(sha(f.read()) == sha(big), "resumed file is intact")

        layer = top_layer_digest(reg, "big", "v1.31.2")
        with open(reg.blob_file(layer), "rb") as f:
            blob = f.read()

        # A partial from an earlier run, and a server that ignores Range: start over from byte 0.
        c = Case(root, "no-range", reg)
        blobs = os.path.join(c.state, "staging/blobs")
        os.makedirs(blobs)
        with open(os.path.join(blobs, layer.split(":")[1] + ".partial"), "wb") as f:
            f.write(blob[:len(blob) // 2])
        with registry.Proxy(reg, no_range=True) as proxy:
            out = c.pull(ref, extra=["--mirror", "%s=%s" % (reg.host, proxy.url)])
            check(out.get("ok") is True and out.get("bytesDownloaded") == len(blob),
                  "no Range support: downloaded again from 0: %s" % out)

        # A partial whose bytes went bad (lost writes after a crash): verification fails once, one fresh
        # download from 0 succeeds.
        c = Case(root, "bad-partial", reg)
        blobs = os.path.join(c.state, "staging/blobs")
        os.makedirs(blobs)
        with open(os.path.join(blobs, layer.split(":")[1] + ".partial"), "wb") as f:
            f.write(b"\0" * (len(blob) // 3))
        out = c.pull(ref)
        check(out.get("ok") is True and out.get("fileDigest") == sha(big), "bad partial: re-downloaded: %s" % out)

    def test_09_disk_space(self):
        root, reg = ROOT, REG
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            self.skipTest("needs root and unshare")
        ref = reg.push_kubelet_image("1.31.2", os.urandom(24 << 20), repo="big-space", compression="none")
        c = Case(root, "disk-space", reg)
        os.makedirs(c.state)
        # A 32 MiB filesystem in a private mount namespace: too small for the blob plus the reserve.
        wrap = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o size=32m tmpfs "$0" && exec "$@"', c.state]
        out = c.pull(ref, wrap=wrap)
        expect_failure(out, "DiskSpace", "not enough free space", what="small filesystem")
        check(out.get("retriable") is True, "DiskSpace is retriable")

    def test_10_mirrors_and_redirects(self):
        root, reg = ROOT, REG
        k = registry.fake_kubelet()
        ref = reg.push_kubelet_image("1.31.2", k, repo="mirrored")
        c = Case(root, "mirror-down", reg)
        out = c.pull(ref, extra=["--mirror", "%s=https://127.0.0.1:%d" % (reg.host, registry.free_port())])
        check(out.get("ok") is True, "a dead mirror falls back to the registry: %s" % out)
        with registry.Proxy(reg, redirect_blobs=True) as proxy:
            c = Case(root, "redirect", reg)
            out = c.pull(ref, extra=["--mirror", "%s=%s" % (reg.host, proxy.url)])
            check(out.get("ok") is True, "mirror with blob redirects: %s" % out)
            check(any("/manifests/" in path for path, _ in proxy.requests) and
                  any("/blobs/" in path for path, _ in proxy.requests), "the mirror was asked first: %s" % proxy.requests)

        # A mirror behind the Bearer token protocol; its credentials are in auth.json under its own host.
        with registry.Proxy(reg, bearer=("mirror-user", "mirror-pw")) as proxy:
            c = Case(root, "bearer", reg)
            auth = os.path.join(c.dir, "auth.json")
            mirror_host = proxy.url.split("://")[1]
            with open(auth, "w") as f:
                json.dump({"auths": {mirror_host: {"username": "mirror-user", "password": "mirror-pw"}}}, f)
            out = c.pull(ref, extra=["--mirror", "%s=%s" % (reg.host, proxy.url), "--auth-file", auth])
            check(out.get("ok") is True, "bearer token from the challenge's realm: %s" % out)
            check(proxy.tokens_issued == 1, "one token, cached for manifest and blobs: %d" % proxy.tokens_issued)
            check(any(p.startswith("/token") for p, _ in proxy.requests), "token endpoint used")
            check(any("/manifests/" in p for p in proxy.forwarded) and any("/blobs/" in p for p in proxy.forwarded),
                  "manifest and blob came through the bearer mirror: %s" % proxy.forwarded)

    def test_11_blob_faults(self):
        """The registry fault matrix (issue 16), one case each, through registry.Proxy as the registry
        itself (no mirror: nothing to fall back to) with a BlobFault on the kubelet layer only."""
        root, reg = ROOT, REG
        big = os.urandom(2 << 20)
        base_ref = reg.push_kubelet_image("1.31.2", big, repo="faults", compression="none")
        layer = top_layer_digest(reg, "faults", "v1.31.2")
        size = os.path.getsize(reg.blob_file(layer))
        partial = layer.split(":")[1] + ".partial"

        def pull(name, fault, extra=(), proxy_args=None):
            c = Case(root, "fault-" + name, reg)
            with registry.Proxy(reg, blob_fault=fault, **(proxy_args or {})) as proxy:
                ref = base_ref.replace(reg.host, proxy.url.split("://")[1])
                out = c.pull(ref, extra=["--switch"] + [e(c, proxy) if callable(e) else e for e in extra])
            return c, proxy, out

        def blobs(c):
            d = os.path.join(c.state, "staging/blobs")
            return sorted(os.listdir(d)) if os.path.isdir(d) else []

        def nothing_installed(c, what):
            check(c.stored_versions() == [] and not os.path.lexists(c.bin),
                  "%s: nothing installed: %s, binaryPath %s" % (what, c.stored_versions(), os.path.lexists(c.bin)))

        def installed_intact(c, out, what):
            if check(out.get("ok") is True, "%s: %s" % (what, out)):
                check(out.get("fileDigest") == sha(big), what + ": verified file digest")
                with open(c.bin, "rb") as f:
                    check(f.read() == big, what + ": installed file is the pushed one")

        def layer_ranges(proxy):
            return [r for p, r in proxy.requests if p.endswith("/blobs/" + layer)]

        # Slow drip below the floor rate: the stall detector ends each attempt within seconds.
        fault = registry.BlobFault("drip", 64, digest=layer)
        c, _, out = pull("drip", fault, ["--stall-bytes", "1024", "--stall-seconds", "2", "--max-attempts", "2"])
        expect_failure(out, "ArtifactUnavailable", layer, "stalled", what="slow drip")
        check(out.get("retriable") is True, "slow drip: retriable")
        check(fault.hits == 2 and out["_seconds"] < 20, "slow drip: 2 attempts (%d) in %.1fs" % (fault.hits, out["_seconds"]))
        nothing_installed(c, "slow drip")
        kept = os.path.join(c.state, "staging/blobs", partial)
        check(os.path.exists(kept) and 0 < os.path.getsize(kept) < size, "slow drip: the .partial is kept: %s" % blobs(c))
        if os.path.exists(kept):
            had = os.path.getsize(kept)
            out = c.pull(base_ref, extra=["--switch"])
            installed_intact(c, out, "after a stall, resumed at the registry")
            check(out.get("bytesDownloaded") == size - had, "the stalled prefix (%d) was reused: %s" % (had, out))

        # Reset mid-blob, or a truncated blob (orderly close), once: the retry resumes with Range and
        # completes; a body shorter than its Content-Length (header says 1000 bytes less: curl takes
        # that as the whole answer) once: the same.
        for name, fault in (("reset", registry.BlobFault("reset", times=1, digest=layer)),
                            ("truncated", registry.BlobFault("truncate", times=1, digest=layer)),
                            ("length-short", registry.BlobFault("length", -1000, times=1, digest=layer))):
            c, proxy, out = pull(name + "-once", fault)
            installed_intact(c, out, "one " + name)
            ranges = layer_ranges(proxy)
            check(len(ranges) == 2 and ranges[0] is None and (ranges[1] or "").startswith("bytes=")
                  and ranges[1] != "bytes=0-", "one %s: the retry asks for the rest: %s" % (name, ranges))
            check(out.get("bytesDownloaded") == size, "one %s: no byte fetched twice: %s of %d"
                  % (name, out.get("bytesDownloaded"), size))
        # ... every time: bounded by --max-attempts, retriable, nothing installed, what came is kept.
        for name, fault, fragment in (("reset", registry.BlobFault("reset", digest=layer), "transfer cut off"),
                                      ("length-short", registry.BlobFault("length", -1000, digest=layer), "short body")):
            c, _, out = pull(name + "-always", fault)
            expect_failure(out, "ArtifactUnavailable", layer, fragment, what="persistent " + name)
            check(out.get("retriable") is True, "persistent %s: retriable" % name)
            check(fault.hits == 3, "persistent %s: --max-attempts 3 requests, saw %d" % (name, fault.hits))
            nothing_installed(c, "persistent " + name)
            check(blobs(c) == [partial], "persistent %s: only the .partial is left: %s" % (name, blobs(c)))

        # 5xx storm: every blob GET answers 503, the first with Retry-After: 1.
        fault = registry.BlobFault("status", 503, digest=layer)
        c, _, out = pull("503", fault, ["--max-attempts", "4"])
        expect_failure(out, "ArtifactUnavailable", "503", layer, what="503 storm")
        check(out.get("retriable") is True, "503 storm: retriable")
        check(fault.hits == 4, "503 storm: --max-attempts 4 requests, saw %d" % fault.hits)
        check(1.0 <= out["_seconds"] < 10, "503 storm: Retry-After honoured, within budget: %.1fs" % out["_seconds"])
        nothing_installed(c, "503 storm")

        # Content-Length 4096 bytes longer than the body, every time: the transfer fails after the
        # last byte of the blob; the bytes are complete and hash to the digest, so they are taken as
        # they are, without asking again for bytes past the end (which docker-registry answers 416).
        fault = registry.BlobFault("length", 4096, digest=layer)
        c, proxy, out = pull("length-long", fault)
        installed_intact(c, out, "Content-Length too long")
        check(layer_ranges(proxy) == [None] and out.get("bytesDownloaded") == size,
              "Content-Length too long: one request, the blob once: %s, %s" % (layer_ranges(proxy), out))

        # Redirect to another host (blob storage): the bytes are verified, and our Authorization (a
        # Bearer token from the proxy's realm) is not sent there.
        for corrupt in (False, True):
            name = "redirect-other-host" + ("-corrupt" if corrupt else "")
            with registry.BlobHost(reg, corrupt=corrupt) as other:
                fault = registry.BlobFault("redirect", other.url, digest=layer)

                def auth_file(c, proxy):
                    path = os.path.join(c.dir, "auth.json")
                    with open(path, "w") as f:
                        json.dump({"auths": {proxy.url.split("://")[1]: {"username": "u", "password": "p"}}}, f)
                    return path

                c, proxy, out = pull(name, fault, ["--auth-file", auth_file], {"bearer": ("u", "p")})
                check(fault.hits >= 1 and proxy.tokens_issued >= 1,
                      "%s: the blob GET carried a Bearer token (%d hits, %d tokens)" % (name, fault.hits, proxy.tokens_issued))
                check(len(other.headers) >= 1, "%s: the other host was asked" % name)
                check(not any(k.lower() == "authorization" for h in other.headers for k in h),
                      "%s: no Authorization sent to the other host: %s" % (name, other.headers))
            if not corrupt:
                installed_intact(c, out, name)
                continue
            expect_failure(out, "DigestMismatch", "expected " + layer, what=name)
            check(out.get("retriable") is False, name + ": terminal")
            nothing_installed(c, name)
            check(blobs(c) == [], "%s: no bad blob kept: %s" % (name, blobs(c)))

    def test_12_auth(self):
        root, workdir = ROOT, WORK
        with registry.Registry(os.path.join(workdir, "authreg"), htpasswd={"agent": "s3cret"}) as reg:
            ref = reg.push_kubelet_image("1.31.2", registry.fake_kubelet(), repo="private")
            c = Case(root, "auth", reg)
            out = c.pull(ref)
            expect_failure(out, "ArtifactUnavailable", "401", "authentication required", what="401 without credentials")
            auth = os.path.join(c.dir, "auth.json")
            with open(auth, "w") as f:
                json.dump({"auths": {reg.host: {"auth": "YWdlbnQ6d3Jvbmc="}}}, f)     # agent:wrong
            out = c.pull(ref, extra=["--auth-file", auth])
            expect_failure(out, "ArtifactUnavailable", "401", what="wrong password")
            with open(auth, "w") as f:
                json.dump({"auths": {reg.host: {"auth": "YWdlbnQ6czNjcmV0"}}}, f)    # agent:s3cret
            out = c.pull(ref, extra=["--auth-file", auth])
            check(out.get("ok") is True, "with credentials from auth.json: %s" % out)


if __name__ == "__main__":
    itest.main(missing=itest.unbuilt("PULL") + registry.missing_prerequisites())
