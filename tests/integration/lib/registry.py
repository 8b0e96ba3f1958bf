# SPDX-License-Identifier: Apache-2.0
"""A real OCI registry (Debian's docker-registry, distribution 2.8) on loopback with TLS, and a pusher
that speaks the plain distribution API from the Python standard library.

    import registry
    registry.missing_prerequisites()                              # what is missing here, if anything
    with registry.Registry(workdir) as reg:                       # or htpasswd={"user": "pw"}
        ref = reg.push_kubelet_image("1.31.2", registry.fake_kubelet("v1.31.2"))
        ...  reg.ca_file, reg.host ("127.0.0.1:<port>"), reg.blob_file(digest) to tamper with storage

Certificates: a test CA and a server certificate for 127.0.0.1/localhost made with the openssl CLI.
Layers: tar built with tarfile, compressed with gzip (stdlib) or zstd (the zstd CLI). Waits poll a
condition with a deadline; the registry process is ours and is stopped by PID.
"""

import base64
import gzip
import hashlib
import http.client
import io
import json
import os
import random
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time

DOCKER_REGISTRY = "/usr/bin/docker-registry"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
LAYER_MT = {
    ("oci", "gzip"): "application/vnd.oci.image.layer.v1.tar+gzip",
    ("oci", "zstd"): "application/vnd.oci.image.layer.v1.tar+zstd",
    ("oci", "none"): "application/vnd.oci.image.layer.v1.tar",
    ("docker", "gzip"): "application/vnd.docker.image.rootfs.diff.tar.gzip",
}


def missing_prerequisites():
    missing = []
    if not os.access(DOCKER_REGISTRY, os.X_OK):
        missing.append(DOCKER_REGISTRY + " (apt-get install docker-registry)")
    for tool in ("openssl", "zstd", "htpasswd"):
        if shutil.which(tool) is None:
            missing.append(tool)
    return missing


def wait_until(predicate, timeout, what, interval=0.02):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for " + what)
        time.sleep(interval)


def free_port():
    """A loopback port for a server another process binds later. Not from bind(port 0): that hands out
    ports of the kernel's ephemeral range, from which every outgoing connection of every concurrent
    test also takes its local port, so one could own it before the server binds (a sandbox kubelet
    failing to start with EADDRINUSE). Below that range only servers bind, and only with this."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randrange(10000, max(low, 10001))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free loopback port below %d" % low)


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def make_ca(directory):
    """A CA and a server certificate for 127.0.0.1 and localhost. Returns (ca, cert, key) paths."""
    ca_key, ca, key, csr, cert = (os.path.join(directory, n) for n in ("ca.key", "ca.crt", "srv.key", "srv.csr", "srv.crt"))
    ext = os.path.join(directory, "srv.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)
    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=inplace-agent test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", key, "-out", csr, "-subj", "/CN=127.0.0.1")
    run("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial",
        "-out", cert, "-days", "2", "-extfile", ext)
    return ca, cert, key


# ---- layers ----

def tar_bytes(entries):
    """entries: list of dicts {name, data=b"", type="file"|"dir"|"symlink"|"hardlink"|"chardev", linkname, mode}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.mtime = 1700000000
            ti.mode = e.get("mode", 0o755)
            kind = e.get("type", "file")
            data = e.get("data", b"")
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
            elif kind == "symlink":
                ti.type, ti.linkname = tarfile.SYMTYPE, e["linkname"]
            elif kind == "hardlink":
                ti.type, ti.linkname = tarfile.LNKTYPE, e["linkname"]
            elif kind == "chardev":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            else:
                ti.size = len(data)
            tf.addfile(ti, io.BytesIO(data) if kind == "file" else None)
    return buf.getvalue()


def compress(data, compression):
    if compression == "gzip":
        return gzip.compress(data, compresslevel=1, mtime=0)
    if compression == "zstd":
        return subprocess.run(["zstd", "-q", "-1", "-c"], input=data, capture_output=True, check=True).stdout
    return data


def diff_id(data, compression, cap=512 << 20):
    """sha256 of the uncompressed layer, streamed; bombs and broken layers (over `cap` or corrupt) get
    the digest of nothing: their diff_id does not matter to any test."""
    import zlib
    h, total = hashlib.sha256(), 0
    try:
        if compression == "gzip":
            # Input fed in 1 MiB slices of a memoryview: unconsumed_tail (copied on every call) stays
            # small. Feeding the whole layer made this quadratic: 45 s for a 100 MB layer.
            view, pos = memoryview(data), 0
            while pos < len(data):
                d, pending = zlib.decompressobj(31), b""
                while not d.eof:
                    if not pending:
                        if pos >= len(data):
                            return sha256(b"")  # truncated member
                        pending, pos = view[pos:pos + (1 << 20)], pos + (1 << 20)
                    chunk = d.decompress(pending, 1 << 20)
                    h.update(chunk)
                    total += len(chunk)
                    if total > cap:
                        return sha256(b"")
                    pending = d.unconsumed_tail
                pos = min(pos, len(data)) - len(d.unused_data)    # the next member starts there
        elif compression == "zstd":
            p = subprocess.Popen(["zstd", "-q", "-d", "-c"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            threading.Thread(target=lambda: (p.stdin.write(data), p.stdin.close()), daemon=True).start()
            while True:
                chunk = p.stdout.read(1 << 20)
                if not chunk:
                    break
                h.update(chunk)
                total += len(chunk)
                if total > cap:
                    p.kill()
                    p.wait()
                    return sha256(b"")
            p.wait()
        else:
            h.update(data)
    except (OSError, zlib.error):
        return sha256(b"")
    return "sha256:" + h.hexdigest()


def huge_header_bomb():
    """A layer whose single entry claims 10 GiB; a few KB compressed."""
    ti = tarfile.TarInfo("kubelet")
    ti.size = 10 << 30
    header = ti.tobuf(format=tarfile.PAX_FORMAT)
    return gzip.compress(header + b"\0" * (1 << 20), mtime=0)


def zero_bomb(entries=160, chunk=64 << 20):
    """entries x chunk bytes of zeros (10 GiB by default) as concatenated gzip members, ~10 MB."""
    zeros = gzip.compress(b"\0" * chunk, compresslevel=9, mtime=0)
    out = io.BytesIO()
    for i in range(entries):
        ti = tarfile.TarInfo("zero%d" % i)
        ti.size = chunk
        out.write(gzip.compress(ti.tobuf(format=tarfile.USTAR_FORMAT), mtime=0))
        out.write(zeros)
    return out.getvalue()


def fake_kubelet(version="v1.31.2", healthy=True, padding=0):
    """A stand-in kubelet: answers --version like the real one and serves /healthz (200 or 500) on
    --healthz-port. `padding` bytes of comment make it as large as a real binary when needed."""
    script = f'''#!/usr/bin/env python3
import http.server, sys
if "--version" in sys.argv:
    print("Kubernetes {version}")
    sys.exit(0)
port = int(sys.argv[sys.argv.index("--healthz-port") + 1]) if "--healthz-port" in sys.argv else 10248
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        code = {200 if healthy else 500}
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"ok" if code == 200 else b"unhealthy")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''.encode()
    if padding:
        script += b"# " + os.urandom(padding // 2).hex().encode()[:padding] + b"\n"
    return script


class RegistryError(RuntimeError):
    pass


class Registry:
    def __init__(self, workdir, htpasswd=None):
        self.dir = os.path.join(workdir, "registry")
        os.makedirs(self.dir, exist_ok=True)
        self.htpasswd = htpasswd or {}
        self.proc = None
        self.port = None
        self._blob_locks = {}                   # digest -> Lock: one upload of a digest at a time
        self._blob_locks_guard = threading.Lock()

    # ---- lifecycle ----

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def host(self):
        return "127.0.0.1:%d" % self.port

    def start(self):
        self.ca_file, cert, key = make_ca(self.dir)
        self.storage = os.path.join(self.dir, "storage")
        os.makedirs(self.storage, exist_ok=True)
        self.port = free_port()
        auth = ""
        if self.htpasswd:
            path = os.path.join(self.dir, "htpasswd")
            with open(path, "w") as f:
                for user, pw in self.htpasswd.items():
                    line = subprocess.run(["htpasswd", "-nbB", user, pw], capture_output=True, check=True,
                                          text=True).stdout.strip()
                    f.write(line + "\n")
            auth = "auth:\n  htpasswd:\n    realm: test-realm\n    path: %s\n" % path
        config = os.path.join(self.dir, "config.yml")
        with open(config, "w") as f:
            f.write(f"""version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: {self.storage}
  delete:
    enabled: true
  cache:
    blobdescriptor: ""
http:
  addr: 127.0.0.1:{self.port}
  tls:
    certificate: {cert}
    key: {key}
{auth}""")
        self.log = open(os.path.join(self.dir, "registry.log"), "w")
        self.proc = subprocess.Popen([DOCKER_REGISTRY, "serve", config], stdout=self.log, stderr=subprocess.STDOUT)
        wait_until(self._answers, 20, "docker-registry on %s" % self.host)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if getattr(self, "log", None):
            self.log.close()
            self.log = None

    def _answers(self):
        if self.proc.poll() is not None:
            raise RegistryError("docker-registry exited: see " + self.log.name)
        try:
            status, _, _ = self.request("GET", "/v2/")
            return status in (200, 401)
        except OSError:
            return False

    # ---- plain distribution API ----

    def _auth_header(self):
        if not self.htpasswd:
            return {}
        user, pw = next(iter(self.htpasswd.items()))
        return {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, pw)).encode()).decode()}

    def request(self, method, path, body=None, headers=None, auth=True):
        ctx = ssl.create_default_context(cafile=self.ca_file)
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx, timeout=30)
        h = dict(headers or {})
        if auth:
            h.update(self._auth_header())
        try:
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def push_blob(self, repo, data):
        # A blob the repository has is not uploaded again, and one digest is uploaded by one thread at
        # a time, as docker does: docker-registry rewrites the repository's link file of a blob on every
        # commit, and a manifest PUT that reads it meanwhile fails (DIGEST_INVALID, MANIFEST_BLOB_UNKNOWN:
        # seen in CI when the sandbox pushed its images, which share a base layer, in parallel).
        digest = sha256(data)
        with self._blob_locks_guard:
            lock = self._blob_locks.setdefault(digest, threading.Lock())
        with lock:
            status, _, _ = self.request("HEAD", "/v2/%s/blobs/%s" % (repo, digest))
            if status == 200:
                return {"digest": digest, "size": len(data)}
            return self._upload_blob(repo, data, digest)

    def _upload_blob(self, repo, data, digest):
        status, headers, body = self.request("POST", "/v2/%s/blobs/uploads/" % repo, body=b"")
        if status != 202:
            raise RegistryError("upload start: %d %s" % (status, body[:200]))
        loc = headers["Location"]
        if loc.startswith("http"):
            loc = loc.split("/", 3)[3]
            loc = "/" + loc
        loc += ("&" if "?" in loc else "?") + "digest=" + digest
        status, _, body = self.request("PUT", loc, body=data,
                                       headers={"Content-Type": "application/octet-stream",
                                                "Content-Length": str(len(data))})
        if status != 201:
            raise RegistryError("upload: %d %s" % (status, body[:200]))
        return {"digest": digest, "size": len(data)}

    def push_manifest(self, repo, reference, manifest, media_type):
        data = json.dumps(manifest, indent=1).encode() if not isinstance(manifest, bytes) else manifest
        status, _, body = self.request("PUT", "/v2/%s/manifests/%s" % (repo, reference), body=data,
                                       headers={"Content-Type": media_type})
        if status != 201:
            raise RegistryError("manifest: %d %s" % (status, body[:300]))
        return sha256(data)

    def push_image(self, repo, tag, layers, flavour="oci", index_platforms=None, diff_ids=True):
        """layers: list of (compressed_bytes, compression) base first. Returns the manifest digest
        (or the index digest when index_platforms is given: list of (os, arch) pushed as the same image)."""
        # diff_ids: digests of the uncompressed layers, as real images have (umoci checks them).
        config = json.dumps({"architecture": "amd64", "os": "linux",
                             "rootfs": {"type": "layers", "diff_ids": [diff_id(d, c) if diff_ids else sha256(b"") for d, c in layers]},
                             "config": {}}).encode()
        cfg = self.push_blob(repo, config)
        descs = []
        for data, compression in layers:
            b = self.push_blob(repo, data)
            descs.append({"mediaType": LAYER_MT[(flavour, compression)], "digest": b["digest"], "size": b["size"]})
        mt = OCI_MANIFEST if flavour == "oci" else DOCKER_MANIFEST
        manifest = {"schemaVersion": 2, "mediaType": mt,
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json" if flavour == "oci"
                               else "application/vnd.docker.container.image.v1+json",
                               "digest": cfg["digest"], "size": cfg["size"]},
                    "layers": descs}
        if not index_platforms:
            return self.push_manifest(repo, tag, manifest, mt)
        data = json.dumps(manifest).encode()
        digest = self.push_manifest(repo, sha256(data), data, mt)
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX if flavour == "oci" else DOCKER_LIST,
                 "manifests": [{"mediaType": mt, "digest": digest, "size": len(data),
                                "platform": {"os": o, "architecture": a}} for o, a in index_platforms]}
        return self.push_manifest(repo, tag, index, index["mediaType"])

    def push_kubelet_image(self, version, kubelet, path="usr/local/bin/kubelet", compression="gzip",
                           flavour="oci", repo="kubelet", extra_layers=(), index_platforms=None):
        """An image with `kubelet` at `path` in its top layer, a base layer below. Returns the reference."""
        base = compress(tar_bytes([{"name": "etc/", "type": "dir"}, {"name": "etc/os-release", "data": b"ID=test\n"}]),
                        compression)
        top = compress(tar_bytes([{"name": os.path.dirname(path) + "/", "type": "dir"},
                                  {"name": path, "data": kubelet}]), compression)
        layers = [(base, compression)] + list(extra_layers) + [(top, compression)]
        self.push_image(repo, "v" + version, layers, flavour=flavour, index_platforms=index_platforms)
        return "%s/%s:v%s" % (self.host, repo, version)

    def blob_file(self, digest):
        """The file in the registry's storage that holds a blob (or a manifest): tamper with it."""
        hexd = digest.split(":", 1)[1]
        return os.path.join(self.storage, "docker/registry/v2/blobs/sha256", hexd[:2], hexd, "data")


class Proxy:
    """An HTTPS front for the registry, usable as a registry.mirrors entry: forwards GETs (Range,
    Accept and Authorization included) at `rate` bytes/s, or answers blob GETs with a 307 to the
    registry when redirect_blobs is set (blob storage redirects), or does a BlobFault to blob GETs.
    Runs in a thread of the test."""

    def __init__(self, reg, rate=None, redirect_blobs=False, bearer=None, no_range=False, blob_fault=None):
        """bearer=(user, password): the proxy demands a Bearer token (distribution token protocol),
        issued by its own /token endpoint to Basic credentials user:password. blob_fault: a BlobFault
        done to blob GETs (after the bearer gate); everything else is proxied as without it."""
        import http.server

        self.reg, self.rate, self.redirect_blobs, self.bearer = reg, rate, redirect_blobs, bearer
        self.blob_fault = blob_fault
        self.no_range = no_range        # drop Range: a server that always sends the whole blob
        self.requests = []              # (path, Range) of every request
        self.forwarded = []             # paths passed on to the registry
        self.tokens_issued = 0
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, headers=(), body=b""):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def bearer_gate(self):
                """True when the request may pass; otherwise the 401 or the token was sent."""
                user, password = proxy.bearer
                if self.path.startswith("/token"):
                    basic = "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
                    if self.headers.get("Authorization") != basic or "scope=repository%3A" not in self.path:
                        self.reply(401, body=b'{"errors":[{"code":"UNAUTHORIZED"}]}')
                        return False
                    proxy.tokens_issued += 1
                    self.reply(200, [("Content-Type", "application/json")],
                               json.dumps({"token": "tok-%d" % proxy.tokens_issued, "expires_in": 300}).encode())
                    return False
                if not (self.headers.get("Authorization") or "").startswith("Bearer tok-"):
                    realm = "%s/token" % proxy.url
                    repo = self.path.split("/")[2] if self.path.count("/") > 2 else ""
                    self.reply(401, [("WWW-Authenticate", 'Bearer realm="%s",service="test-proxy",scope='
                                      '"repository:%s:pull"' % (realm, repo))],
                               b'{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}')
                    return False
                return True

            def do_GET(self):
                proxy.requests.append((self.path, self.headers.get("Range")))
                if proxy.bearer and not self.bearer_gate():
                    return
                if proxy.blob_fault and proxy.blob_fault.applies(self.path):
                    proxy.blob_fault.serve(self, proxy)
                    return
                if proxy.redirect_blobs and "/blobs/" in self.path:
                    self.send_response(307)
                    self.send_header("Location", "https://%s%s" % (proxy.reg.host, self.path))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                conn = None
                try:
                    conn, r = self.upstream()
                    self.send_response(r.status)
                    for k, v in r.getheaders():
                        if k.lower() in ("content-type", "content-length", "content-range", "docker-content-digest",
                                         "www-authenticate", "location", "accept-ranges"):
                            self.send_header(k, v)
                    self.end_headers()
                    while True:
                        chunk = r.read(64 * 1024)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        if proxy.rate:
                            time.sleep(len(chunk) / proxy.rate)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass
                finally:
                    if conn:
                        conn.close()

            def upstream(self):
                """The same GET at the registry: (connection, response), headers passed on."""
                proxy.forwarded.append(self.path)
                ctx = ssl.create_default_context(cafile=proxy.reg.ca_file)
                conn = http.client.HTTPSConnection("127.0.0.1", proxy.reg.port, context=ctx, timeout=30)
                fwd = {k: v for k, v in self.headers.items() if k.lower() in ("range", "accept", "authorization")}
                if proxy.bearer:
                    fwd.pop("Authorization", None)
                if proxy.no_range:
                    fwd.pop("Range", None)
                conn.request("GET", self.path, headers=fwd)
                return conn, conn.getresponse()

        self.server, self.thread = tls_server(reg, Handler)

    @property
    def url(self):
        return "https://127.0.0.1:%d" % self.server.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def tls_server(reg, handler, host="127.0.0.1"):
    """A threading HTTPS server on a free loopback port with the registry's certificate (valid for
    127.0.0.1 and localhost), and the thread to serve it in (not started)."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer((host, 0), handler)
    server.daemon_threads = True
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(os.path.join(reg.dir, "srv.crt"), os.path.join(reg.dir, "srv.key"))
    server.socket = sctx.wrap_socket(server.socket, server_side=True)
    return server, threading.Thread(target=server.serve_forever, daemon=True)


class BlobFault:
    """A registry fault that Proxy(blob_fault=...) does to blob GETs instead of forwarding them:
      "drip"     the registry's answer at `arg` bytes/s, in small writes (below the stall floor);
      "reset"    the true headers and half the body, then a TCP reset (SO_LINGER 0);
      "truncate" the true headers and half the body, then an orderly close;
      "length"   a Content-Length `arg` bytes off the body's (+: longer, -: shorter), the whole body,
                 then the connection closes;
      "status"   HTTP `arg` (e.g. 503) with an error body; the first one carries Retry-After: 1;
      "redirect" a 307 to `arg` + the path (blob storage on another host).
    times: how many blob GETs are hit (None: all); digest: only that blob's GETs. `hits` counts them,
    `seen` counts every blob GET of that digest (hit or forwarded)."""

    def __init__(self, kind, arg=None, times=None, digest=None):
        self.kind, self.arg, self.times, self.digest = kind, arg, times, digest
        self.hits = self.seen = 0

    def applies(self, path):
        if "/blobs/" not in path or (self.digest and not path.endswith("/" + self.digest)):
            return False
        self.seen += 1
        if self.times is not None and self.hits >= self.times:
            return False
        self.hits += 1
        return True

    def serve(self, h, proxy):
        h.close_connection = True
        if self.kind == "redirect":
            return h.reply(307, [("Location", self.arg + h.path)])
        if self.kind == "status":
            retry = [("Retry-After", "1")] if self.hits == 1 else []
            return h.reply(self.arg, retry, b'{"errors":[{"code":"UNAVAILABLE","message":"injected"}]}')
        conn, r = h.upstream()
        try:
            try:
                body = r.read()
            except http.client.IncompleteRead as e:     # docker-registry's 416 claims a blob-sized body
                body = e.partial
            length = len(body) + (self.arg if self.kind == "length" else 0)
            h.send_response(r.status)
            for k, v in r.getheaders():
                if k.lower() in ("content-type", "content-range", "docker-content-digest", "accept-ranges"):
                    h.send_header(k, v)
            h.send_header("Content-Length", str(max(length, 0)))
            h.end_headers()
            if self.kind == "drip":
                step = max(1, self.arg // 8)
                for i in range(0, len(body), step):
                    h.wfile.write(body[i:i + step])
                    h.wfile.flush()
                    time.sleep(step / self.arg)
            elif self.kind in ("reset", "truncate"):
                h.wfile.write(body[:len(body) // 2])
                h.wfile.flush()
                if self.kind == "reset":
                    import struct
                    h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    h.connection.close()
            else:
                h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            pass
        finally:
            conn.close()


class BlobHost:
    """Blob storage on another host: https://localhost:<port> serving the registry's blobs by the
    digest that ends the path (corrupt=True: the same size with one byte flipped), Range ignored.
    `headers` holds the request headers of every GET, to show what reached the other host."""

    def __init__(self, reg, corrupt=False):
        import http.server

        self.headers = []
        host = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                host.headers.append(dict(self.headers.items()))
                digest = self.path.rsplit("/", 1)[-1]
                try:
                    with open(reg.blob_file(digest), "rb") as f:
                        body = bytearray(f.read())
                except (OSError, IndexError):
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if corrupt:
                    body[len(body) // 2] ^= 0xff
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(bytes(body))
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    pass

        self.server, self.thread = tls_server(reg, Handler)

    @property
    def url(self):
        return "https://localhost:%d" % self.server.server_address[1]

    __enter__ = Proxy.__enter__
    __exit__ = Proxy.__exit__
